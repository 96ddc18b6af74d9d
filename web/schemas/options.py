"""The API's fields of the per-subscription options, made from their declarations
(webhooks/tenants/options.py, through webhooks.services.subscriptions): each option's
request field (its bounds or choices, its default on create) and answer field, and so
its entries in the OpenAPI document.
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.events.fields import StrictInteger, StrictNumber
from webhooks.services.subscriptions import OPTIONS, Kind, Option

from .common import Text

__all__ = ["with_request_options", "with_answer_options"]

_ONE_OF = "Must be one of: {choices}."


def _request_field(option: Option, *, create: bool) -> fields.Field:
    """What a create (``create``) or PATCH body takes for ``option``: validated, never
    coerced (``1.0`` is not an integer, ``"1"`` not a number)."""
    given = {"load_default": option.default} if create else {}
    if option.kind is Kind.CHOICE:
        return Text(validate=validate.OneOf(option.choices, error=_ONE_OF),
                    allow_none=option.nullable, **given,
                    metadata={"enum": list(option.choices), "description": option.description})
    strict = StrictInteger if option.kind is Kind.INTEGER else StrictNumber
    return strict(required=False, allow_none=option.nullable,
                  validate=validate.Range(min=option.minimum, max=option.maximum),
                  metadata={"description": option.description}, **given)


def _answer_field(option: Option) -> fields.Field:
    """How answers show ``option``: always present, null where it may be."""
    described = {"description": option.shown_description}
    if option.kind is Kind.CHOICE:
        return fields.String(required=True, allow_none=option.nullable,
                             validate=validate.OneOf(option.choices),
                             metadata={"enum": list(option.choices), **described})
    kind = fields.Integer if option.kind is Kind.INTEGER else fields.Float
    return kind(required=True, allow_none=option.nullable, metadata=described)


def _with(schema: type[Schema], option_fields: dict) -> type[Schema]:
    """``schema`` with ``option_fields`` after its own fields (same name and docstring)."""
    extended = schema.from_dict(option_fields, name=schema.__name__)
    extended.__doc__, extended.__module__ = schema.__doc__, schema.__module__
    return extended


def with_request_options(*, create: bool):
    """Class decorator: a create (``create``) or PATCH body schema, with a field for each
    option its owner may set."""
    return lambda schema: _with(schema, {option.name: _request_field(option, create=create)
                                         for option in OPTIONS if option.editable})


def with_answer_options(schema: type[Schema]) -> type[Schema]:
    """Class decorator: a subscription answer schema, with a field for every option."""
    return _with(schema, {option.name: _answer_field(option) for option in OPTIONS})
