"""The OpenAPI 3 document of the API, generated from the routes and their schemas.

Every Flask route under ``/api/webhooks/`` becomes an operation, from the
:class:`web.apidoc.ApiDoc` its view carries; a route without one is an
error, so the document cannot silently miss a route. Bodies, query
parameters and responses come from the marshmallow schemas in web.schemas
(and, for sample envelopes, the event data schemas of the catalogue) through
apispec. Built once per app, on first request.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask

from webhooks.config import get_settings
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.json_schemas import data_schemas
from webhooks.events.schemas import CanonicalUUID, Timestamp

from .api.prefix import API_PREFIX
from .apidoc import PUBLISHER_SECURITY, ApiDoc, doc_of, error_responses
from .schemas import ENVELOPE_SCHEMAS, ErrorSchema

__all__ = ["build_openapi", "openapi_document"]

OPENAPI_VERSION = "3.0.3"
_EXTENSION_KEY = "webhooks_openapi"
_IMPLICIT_METHODS = {"HEAD", "OPTIONS"}  # answered by Flask itself for every route
_RULE_ARGUMENT = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")

_DESCRIPTION = """\
Outbound webhooks: subscriptions, the delivery log, replay, and the event catalogue.

**Authentication**: `Authorization: Bearer <api_key>` on every route except the samples,
event types and this document. An account sees and changes only its own objects; another
account's id answers 404 exactly like a missing one.

**Errors**: always `{"error": {"code": "<snake_case>", "message": "<sentence>"}}`. Every
operation lists the statuses it answers; 405 `method_not_allowed` (with `Allow`) is what its
path answers to a method it does not support, and an unknown path answers 404 `not_found`.
A 401 carries `WWW-Authenticate: Bearer realm="webhooks"`.

**Version**: `info.version` is the service version (WEBHOOKS_VERSION, `info.x-service-version`,
the date that deliveries carry) written as a release number, `2026-07-30` as `2026.7.30`.

**Pagination** (`GET /deliveries`, `GET /subscriptions`): newest first; pass `next_cursor`
back as `cursor`.

**Rate limits**: every route answers 429 `rate_limited` with `Retry-After` (whole seconds)
when its caller is over its limit: the account of the API key, or the address on a route
without a key. Send test has a further limit per subscription.
"""


_RESPONSE_HEADERS = {
    "401": {"WWW-Authenticate": {
        "description": "the scheme to authenticate with: `Bearer realm=\"webhooks\"`",
        "required": True, "schema": {"type": "string"}}},
    "405": {"Allow": {
        "description": "the methods the path supports, comma-separated",
        "required": True, "schema": {"type": "string"}}},
    "429": {"Retry-After": {
        "description": "whole seconds to wait before the limit lets the next request in, "
                       "at least 1",
        "required": True, "schema": {"type": "integer", "minimum": 1}}},
}


def document_version(service_version: str) -> str:
    """``info.version``: WEBHOOKS_VERSION (a YYYY-MM-DD date) as a PEP 440 release number,
    ``2026-07-30`` -> ``2026.7.30``, because client generators make it their package's version
    and Python packaging refuses a date with dashes."""
    return ".".join(str(int(part)) for part in service_version.split("-"))


def openapi_document(app: Flask) -> dict:
    """The document for ``app``, built on first use and kept."""
    document = app.extensions.get(_EXTENSION_KEY)
    if document is None:
        document = app.extensions[_EXTENSION_KEY] = build_openapi(app)
    return document


def build_openapi(app: Flask) -> dict:
    """Build the OpenAPI document of every route of ``app`` under the API prefix."""
    plugin = MarshmallowPlugin()
    service_version = get_settings().version
    spec = APISpec(
        title="Webhooks API",
        version=document_version(service_version),
        openapi_version=OPENAPI_VERSION,
        plugins=[plugin],
        # The date itself, as deliveries carry it (body `version`, X-Service-Version).
        info={"description": _DESCRIPTION, "x-service-version": service_version},
        security=[{"bearerAuth": []}],
    )
    # The core's strict fields are strings with a known format.
    plugin.map_to_openapi_type(CanonicalUUID, "string", "uuid")
    plugin.map_to_openapi_type(Timestamp, "string", "date-time")
    spec.components.security_scheme(
        "bearerAuth", {"type": "http", "scheme": "bearer", "description": "the account's API key"}
    )
    spec.components.security_scheme(
        PUBLISHER_SECURITY, {"type": "http", "scheme": "bearer", "description":
                             "a publisher key (`whpub_…`, `webhooks publishers create`): the "
                             "operator's credential for the publisher API, never an account's"})
    spec.components.schema("Error", schema=ErrorSchema)
    _add_envelope_components(spec)

    paths: dict[str, dict[str, Any]] = {}
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.rule.startswith(API_PREFIX + "/"):
            continue
        view = app.view_functions[rule.endpoint]
        doc = doc_of(view)
        if doc is None:
            raise RuntimeError(f"route {rule.rule} has no @documented description")
        path = _RULE_ARGUMENT.sub(r"{\1}", rule.rule)
        for method in sorted((rule.methods or set()) - _IMPLICIT_METHODS):
            operation = _operation(doc, rule.endpoint, list(rule.arguments))
            paths.setdefault(path, {})[method.lower()] = operation
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    document = spec.to_dict()
    _fix_patterns(document)
    # The event types' data as JSON Schema draft 2020-12 (GET /event-types answers the same),
    # beside the 3.0 components, whose dialect differs (type lists, nullable).
    document["x-event-schemas"] = data_schemas()
    return document


def _add_envelope_components(spec: APISpec) -> None:
    """``Envelope`` (one of the 15 typed envelopes), ``SampleList`` and ``SamplesOrSample``."""
    refs = {}
    for event_type, schema in ENVELOPE_SCHEMAS.items():
        name = schema.__name__
        spec.components.schema(name, schema=schema)
        refs[event_type] = f"#/components/schemas/{name}"
    spec.components.schema(
        "Envelope",
        {
            "description": "The body of every delivery (docs/events.md); `data` depends on `type`.",
            "oneOf": [{"$ref": ref} for ref in refs.values()],
            "discriminator": {"propertyName": "type", "mapping": refs},
        },
    )
    spec.components.schema(
        "SampleList",
        {
            "type": "object",
            "required": ["samples"],
            "additionalProperties": False,
            "properties": {
                "samples": {
                    "type": "array",
                    "minItems": len(EVENT_TYPE_NAMES),
                    "maxItems": len(EVENT_TYPE_NAMES),
                    "items": {"$ref": "#/components/schemas/Envelope"},
                }
            },
        },
    )
    spec.components.schema(
        "SamplesOrSample",
        {
            "oneOf": [
                {"$ref": "#/components/schemas/SampleList"},
                {"$ref": "#/components/schemas/Envelope"},
            ]
        },
    )
    spec.components.schema(
        "OpenAPIDocument",
        {"type": "object", "required": ["openapi", "info", "paths"]},
    )


def _schema_ref(schema) -> Any:
    """A response schema as apispec takes it: a Schema class, or a ref to a named component."""
    if isinstance(schema, str):
        return {"$ref": f"#/components/schemas/{schema}"}
    return schema


def _json(schema) -> dict:
    return {"application/json": {"schema": _schema_ref(schema)}}


def _operation(doc: ApiDoc, endpoint: str, arguments: list[str]) -> dict:
    responses: dict[str, Any] = {}
    for status, (description, schema) in doc.responses.items():
        response: dict[str, Any] = {"description": description}
        if schema is not None:
            response["content"] = _json(schema)
        if status in doc.headers:
            response["headers"] = {
                name: {"description": text, "required": True, "schema": {"type": "string"}}
                for name, text in doc.headers[status].items()}
        responses[str(status)] = response
    # A public route's id names nothing the caller owns: it never answers 404 (public_keys.py).
    owned_ids = bool(arguments) and not doc.public
    for status, description in error_responses(doc, owned_ids).items():
        responses[str(status)] = {"description": description, "content": _json(ErrorSchema)}
        if str(status) in _RESPONSE_HEADERS:
            responses[str(status)]["headers"] = copy.deepcopy(_RESPONSE_HEADERS[str(status)])
    parameters: list[dict] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            # A public route takes any string: one that is no id answers as an unknown id.
            "schema": {"type": "string", "format": "uuid"} if owned_ids else {"type": "string"},
            "description": "an id the caller owns (any other id answers 404)" if owned_ids
            else "an id; anything else answers as an id that names nothing",
        }
        for name in sorted(arguments)
    ]
    if doc.query is not None:
        parameters.append({"in": "query", "schema": doc.query})
    operation: dict[str, Any] = {
        "operationId": endpoint.replace(".", "_"),
        "tags": [endpoint.split(".", 1)[0]],
        "summary": doc.summary,
        "responses": responses,
    }
    if doc.description:
        operation["description"] = doc.description
    if parameters:
        operation["parameters"] = parameters
    if doc.body is not None:
        operation["requestBody"] = {"required": doc.body_required, "content": _json(doc.body)}
    if doc.public:
        operation["security"] = []
    elif doc.security is not None:
        operation["security"] = [{doc.security: []}]
    return operation


def _fix_patterns(node: Any) -> None:
    """Make every ``pattern`` mean in ECMA 262 what the marshmallow Regexp means in Python.

    ``validate.Regexp`` matches at the start only (``re.match``) and the core's
    patterns end in ``\\Z``; JSON Schema patterns search anywhere and know no ``\\Z``.
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                value = value.replace(r"\Z", "$")
                node[key] = value if value.startswith("^") else f"^(?:{value})"
            else:
                _fix_patterns(value)
    elif isinstance(node, list):
        for item in node:
            _fix_patterns(item)
