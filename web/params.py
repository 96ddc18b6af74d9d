"""Reading what a client sent: the JSON body, the query string, ids, event type names.

Each reader validates with a marshmallow schema and turns every problem into
a 400 with the offending fields named, so a view only ever sees clean values.
"""

from __future__ import annotations

import json
import uuid

from flask import request
from marshmallow import Schema, ValidationError

from webhooks.config import get_settings
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.services.subscriptions import custom_headers

from .errors import ApiError
from .schemas import describe_errors

__all__ = ["json_object", "load_body", "load_optional_body", "load_query", "canonical_id",
           "require_known_event_types", "require_settable_headers"]


def json_object() -> dict:
    """The request body as a JSON object, not yet validated: 400 ``invalid_json`` when it is
    empty or not JSON, 400 ``validation_error`` when it is not an object. A body over the
    route's limit raises 413 while it is read."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise ApiError(400, "invalid_json", "The request body must be a JSON object; it is empty.")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: "[[[[..." nested deeper than the parser's stack.
        raise ApiError(400, "invalid_json", "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "validation_error", "The request body must be a JSON object.")
    return body


def load_body(schema: Schema) -> dict:
    """The request body, parsed as JSON and loaded with ``schema``.

    400 ``invalid_json`` when it is empty or not JSON, 400 ``validation_error``
    when it is not an object or a field is wrong (unknown fields included).
    A body over MAX_CONTENT_LENGTH raises 413 while it is read.
    """
    body = json_object()
    try:
        return schema.load(body)
    except ValidationError as error:
        raise ApiError(
            400, "validation_error", f"Invalid request body: {describe_errors(error.messages)}"
        ) from None


def load_optional_body(schema: Schema) -> dict:
    """Like :func:`load_body`, for a route whose body may be left out: no body (or only
    whitespace) loads as ``{}``."""
    if not request.get_data(cache=True).strip():
        return schema.load({})
    return load_body(schema)


def load_query(schema: Schema) -> dict:
    """The query string loaded with ``schema`` (first value of a repeated parameter)."""
    try:
        return schema.load(request.args.to_dict(flat=True))
    except ValidationError as error:
        raise ApiError(
            400, "invalid_parameter", f"Invalid query parameter: {describe_errors(error.messages)}"
        ) from None


def canonical_id(value: str) -> str | None:
    """``value`` as a canonical (lowercase, hyphenated) UUID string, or None if it is not one.

    Ids in the path that are not UUIDs name nothing, so they answer 404 like
    any other id the caller does not own, without a database query.
    """
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        return None


def require_known_event_types(names: list[str] | None) -> None:
    """400 ``unknown_event_type`` if any of ``names`` is not in the catalogue."""
    if names is None:
        return
    unknown = [name for name in names if name not in EVENT_TYPE_NAMES]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise ApiError(
            400,
            "unknown_event_type",
            f"Unknown event type {listed}; GET /api/webhooks/event-types lists the valid ones.",
        )


def require_settable_headers(headers: dict | None) -> None:
    """400 ``reserved_header`` naming every header of ``headers`` that only the service
    may set (custom_headers.py)."""
    if not headers:
        return
    refused = custom_headers.reserved(headers, get_settings().service_name)
    if refused:
        listed = ", ".join(refused)
        raise ApiError(
            400,
            "reserved_header",
            f"headers: {listed} {'is' if len(refused) == 1 else 'are'} set by the service "
            "and cannot be set per subscription.",
        )
