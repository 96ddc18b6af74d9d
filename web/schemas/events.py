"""Event resources: the catalogue's event types and the sample envelopes.

``ENVELOPE_SCHEMAS`` has one envelope schema per event type, its ``type``
fixed and its ``data`` the type's strict schema from the catalogue, so the
OpenAPI document says exactly what each sample (and each delivery body)
looks like.
"""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema, fields, validate

from webhooks.catalogue import CATALOGUE, EVENT_TYPE_NAMES, EventType
from webhooks.envelope import MODE

__all__ = [
    "EventTypeSchema",
    "EventTypeListSchema",
    "SampleQuerySchema",
    "ENVELOPE_SCHEMAS",
]


class EventTypeSchema(Schema):
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPE_NAMES))
    description = fields.String(required=True)


class EventTypeListSchema(Schema):
    event_types = fields.List(fields.Nested(EventTypeSchema), required=True)


class SampleQuerySchema(Schema):
    """Query string of ``GET /events/samples``: an optional event type."""

    class Meta:
        unknown = EXCLUDE

    type = fields.String(
        validate=validate.OneOf(EVENT_TYPE_NAMES),
        metadata={"description": "one event type; left out: all 15, in catalogue order"},
    )


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("_", ".").split("."))


def _envelope_schema(event_type: EventType) -> type[Schema]:
    """The envelope (docs/events.md) for one type: version, id, type, mode, created_at (UTC, ``Z``), data."""
    return Schema.from_dict(
        {
            "version": fields.String(
                required=True,
                validate=validate.Regexp(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
                metadata={"description": "YYYY-MM-DD; equals the version header"},
            ),
            "id": fields.UUID(required=True),
            "type": fields.String(required=True, validate=validate.OneOf([event_type.name])),
            "mode": fields.String(required=True, validate=validate.OneOf([MODE])),
            "created_at": fields.DateTime(
                required=True, metadata={"description": "UTC, ISO 8601, milliseconds, Z suffix"}
            ),
            "data": fields.Nested(event_type.schema, required=True),
        },
        name=f"{_camel(event_type.name)}Envelope",
    )


#: One envelope schema per event type, in catalogue order.
ENVELOPE_SCHEMAS: dict[str, type[Schema]] = {
    event_type.name: _envelope_schema(event_type) for event_type in CATALOGUE
}
