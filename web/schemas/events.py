"""Event resources: the catalogue's event types and the sample envelopes.

``ENVELOPE_SCHEMAS`` has one envelope schema per event type: the core's
``EnvelopeSchema`` with its ``type`` fixed and its ``data`` the type's strict
schema from the catalogue, so the OpenAPI document says exactly what each
sample (and each delivery body) looks like.
"""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema, fields, validate

from webhooks.events.catalogue import CATALOGUE, EVENT_TYPE_NAMES, EventType
from webhooks.events.fields import one_of
from webhooks.events.schemas import EnvelopeSchema

__all__ = [
    "EventTypeSchema",
    "EventTypeListSchema",
    "SampleQuerySchema",
    "ENVELOPE_SCHEMAS",
]


class EventTypeSchema(Schema):
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPE_NAMES))
    description = fields.String(required=True)
    schema = fields.Dict(required=True, metadata={
        "description": "the JSON Schema (draft 2020-12) of this type's `data`, generated from "
                       "the schema emit_event validates with: emit_event refuses what it "
                       "refuses. The document's `x-event-schemas` holds the same, by type"})


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
    """The core's EnvelopeSchema narrowed to one type: ``type`` is that type, ``data`` its schema.

    A subclass, not a copy: every other field (and any field added to the
    envelope later) is the core's own, so the document cannot drift from
    what is signed and sent.
    """
    return type(
        f"{_camel(event_type.name)}Envelope",
        (EnvelopeSchema,),
        {
            "type": one_of(event_type.name),
            "data": fields.Nested(event_type.schema, required=True),
        },
    )


#: One envelope schema per event type, in catalogue order.
ENVELOPE_SCHEMAS: dict[str, type[Schema]] = {
    event_type.name: _envelope_schema(event_type) for event_type in CATALOGUE
}
