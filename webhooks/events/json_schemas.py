"""The JSON Schema (draft 2020-12) of each event type's ``data`` (CONTRACT 10.4), generated
from the marshmallow schemas that validate ``emit_event``'s input (schemas.py): one source,
never written twice. Served by ``GET /api/webhooks/event-types`` and the OpenAPI document,
rendered by ``make docs``.

apispec's marshmallow converter (OpenAPI 3.1, whose schema objects are draft 2020-12) does
the fields; what it cannot see is added here from the fields themselves:

- the strict fields' own rules (canonical UUIDs, UTC timestamps with calendar dates) from
  the field class's ``json_schema`` (fields.py, built from the same regular expressions);
- ``validate.Regexp`` patterns anchored at the start as ``re.match`` is, and ``\\Z`` as
  ``fields.PATTERN_END`` (the end of the string for ECMA 262 and for Python's ``re.search``
  alike); a field's ``format`` (email, uri, uuid, date-time) from its ``json_schema``, a
  note beside the pattern, which is the rule; ``unique`` lists as ``uniqueItems``;
- the rules across fields (``@validates_schema``) from the schema class's
  ``json_schema_rules``, written beside each rule (``if``/``then``).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema

from webhooks.events.fields import PATTERN_END, unique
from webhooks.events.schemas import DATA_SCHEMAS

__all__ = ["DIALECT", "data_schema", "data_schemas"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _strict_field_rules(self, field, ret=None, **kwargs) -> dict:
    """apispec attribute function: what a field's class and validators say beyond apispec's
    own reading of them."""
    extra = dict(getattr(field, "json_schema", {}))
    for validator in field.validators:
        if validator is unique:
            extra["uniqueItems"] = True
    return extra


def _converter():
    plugin = MarshmallowPlugin(schema_name_resolver=lambda schema: None)  # nested: inline
    APISpec("webhooks events", "1", "3.1.0", plugins=[plugin])
    plugin.converter.add_attribute_function(_strict_field_rules)
    return plugin.converter


def _ecma_patterns(node: Any) -> Any:
    """Every ``pattern`` read by ECMA 262 and by Python's ``re.search`` as marshmallow's
    ``re.match`` reads it."""
    if isinstance(node, dict):
        fixed = {}
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                value = value.replace(r"\Z", PATTERN_END)
                value = value if value.startswith("^") else f"^(?:{value})"
            fixed[key] = _ecma_patterns(value) if key != "pattern" else value
        return fixed
    if isinstance(node, list):
        return [_ecma_patterns(item) for item in node]
    return node


def _of_schema(converter, schema_class: type[Schema]) -> dict:
    generated = converter.schema2jsonschema(schema_class())
    rules = getattr(schema_class, "json_schema_rules", None)
    if rules:
        generated["allOf"] = copy.deepcopy(rules)
    for name, field in schema_class().fields.items():  # nested schemas' own rules
        nested = getattr(getattr(field, "inner", field), "schema", None)
        nested_rules = getattr(type(nested), "json_schema_rules", None) if nested else None
        if nested_rules:
            target = generated["properties"][name]
            target = target.get("items", target)
            target["allOf"] = copy.deepcopy(nested_rules)
    return _ecma_patterns(generated)


@functools.lru_cache(maxsize=None)
def _all() -> dict[str, dict]:
    converter = _converter()
    return {name: {"$schema": DIALECT, "title": f"{name} data", **_of_schema(converter, schema)}
            for name, schema in DATA_SCHEMAS.items()}


def data_schema(event_type: str) -> dict:
    """The JSON Schema of ``event_type``'s ``data`` (a fresh copy); KeyError if unknown."""
    return copy.deepcopy(_all()[event_type])


def data_schemas() -> dict[str, dict]:
    """Every type's :func:`data_schema`, in catalogue order."""
    return {name: data_schema(name) for name in DATA_SCHEMAS}
