"""Fields and schemas shared by every API resource: timestamps, safe text, errors.

Response schemas here are used to serialise (``dump``) and to document the
API (OpenAPI, via apispec); their fields are ``required`` so the document
promises that every key is present, ``allow_none`` where it may be null.
"""

from __future__ import annotations

import datetime as dt

from marshmallow import EXCLUDE, Schema, fields, validate

__all__ = [
    "UTCTimestamp", "UTCMoment", "Text", "ErrorDetailSchema", "ErrorSchema", "describe_errors",
    "DEFAULT_LIMIT", "MAX_LIMIT", "PageQuerySchema", "next_cursor_field",
]

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class UTCTimestamp(fields.DateTime):
    """Serialises an aware datetime as ISO 8601 UTC with a ``Z`` suffix and microseconds.

    ``2026-07-30T12:00:00.123456Z``: the same suffix as the envelope's
    ``created_at``, with the full precision the database keeps.
    """

    def _serialize(self, value, attr, obj, **kwargs):
        if value is None:
            return None
        utc = value.astimezone(dt.timezone.utc)
        return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class UTCMoment(fields.AwareDateTime):
    """An ISO 8601 moment in a request (without an offset: UTC), loaded as an aware UTC datetime.

    A date near the ends of the calendar can be valid with its offset and
    outside it in UTC (``0001-01-01T00:00:00+14:00`` is a moment of year 0):
    that is a 400 naming the field, where comparing it later would raise
    OverflowError (a 500).
    """

    default_error_messages = {
        "out_of_range": "Must be a moment between years 1 and 9999 in UTC.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("default_timezone", dt.timezone.utc)
        super().__init__(**kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        moment = super()._deserialize(value, attr, data, **kwargs)
        try:
            return moment.astimezone(dt.timezone.utc)
        except OverflowError:
            raise self.make_error("out_of_range") from None


class Text(fields.String):
    """A string the database can store: no NUL character, no unpaired surrogate.

    JSON can carry both (``"\\u0000"``, ``"\\ud800"``) but PostgreSQL text and
    UTF-8 cannot; refusing them here keeps bad input a 400, never a 500.
    """

    default_error_messages = {
        "unstorable": "Must not contain NUL characters or unpaired surrogates."
    }

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise self.make_error("invalid")  # String would also decode bytes
        if "\x00" in value:
            raise self.make_error("unstorable")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise self.make_error("unstorable") from None
        return value


class ErrorDetailSchema(Schema):
    code = fields.String(required=True, metadata={"description": "snake_case, stable"})
    message = fields.String(required=True, metadata={"description": "one sentence for people"})


class ErrorSchema(Schema):
    """Every error answer: ``{"error": {"code": "...", "message": "..."}}``."""

    error = fields.Nested(ErrorDetailSchema, required=True)


class PageQuerySchema(Schema):
    """``limit`` and ``cursor`` of every list (keyset pages, web/pagination.py); other
    parameters are ignored."""

    class Meta:
        unknown = EXCLUDE

    limit = fields.Integer(
        load_default=DEFAULT_LIMIT,
        validate=validate.Range(min=1, max=MAX_LIMIT),
        metadata={"description": f"page size, 1 to {MAX_LIMIT}"},
    )
    cursor = Text(
        validate=validate.Length(min=1, max=200),
        metadata={"description": "next_cursor of the previous page; opaque"},
    )


def next_cursor_field() -> fields.String:
    """The ``next_cursor`` of a page answer."""
    return fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "pass as cursor for the next page; null on the last page"},
    )


def describe_errors(errors: dict | list | str, path: str = "") -> str:
    """Marshmallow's error tree as one line: ``url: Not a valid URL.; event_types.0: ...``."""
    if isinstance(errors, dict):
        parts = []
        for key, value in errors.items():
            child = path if key == "_schema" else f"{path}.{key}" if path else str(key)
            parts.append(describe_errors(value, child))
        return "; ".join(parts)
    messages = errors if isinstance(errors, list) else [errors]
    text = " ".join(str(message) for message in messages)
    return f"{path}: {text}" if path else text
