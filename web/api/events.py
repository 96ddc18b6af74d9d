"""``/api/webhooks/events/samples`` and ``/api/webhooks/event-types``: the catalogue, public.

Neither route needs an API key: they describe the service, not an account.
Samples are generated afresh on every call (new ids, the current time), as
envelopes exactly like a delivery's body (docs/events.md).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from webhooks.config import get_settings
from webhooks.events.catalogue import CATALOGUE, EVENT_TYPE_NAMES
from webhooks.events.envelope import build_envelope
from webhooks.events.json_schemas import data_schema
from webhooks.events.samples import sample_data
from webhooks.storage.models import new_id, utcnow

from ..apidoc import documented
from ..errors import ApiError
from ..responses import json_response
from ..schemas import EventTypeListSchema, SampleQuerySchema
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("events", __name__, url_prefix=API_PREFIX)

_EVENT_TYPES = EventTypeListSchema()


def _sample(event_type: str) -> dict:
    """A fresh sample envelope of ``event_type``."""
    return build_envelope(
        event_id=new_id(),
        event_type=event_type,
        data=sample_data(event_type),
        created_at=utcnow(),
        version=get_settings().version,
    )


@bp.get("/events/samples")
@documented(
    "Sample payloads",
    description="Without `type`: `{\"samples\": [...]}`, one envelope of each of the 15 types "
    "in catalogue order. With `type`: that type's envelope itself.",
    query=SampleQuerySchema,
    public=True,
    responses={200: ("The samples, or the one sample asked for", "SamplesOrSample")},
    errors={400: "`unknown_event_type`: `type` is not in the catalogue"},
    query_errors=False,
)
def samples() -> Response:
    if "type" not in request.args:
        return jsonify(samples=[_sample(name) for name in EVENT_TYPE_NAMES])
    event_type = request.args["type"]
    if event_type not in EVENT_TYPE_NAMES:
        raise ApiError(
            400,
            "unknown_event_type",
            f"Unknown event type {event_type!r}; "
            "GET /api/webhooks/event-types lists the valid ones.",
        )
    return jsonify(_sample(event_type))


@bp.get("/event-types")
@documented(
    "Event types",
    description="The catalogue: every event type with when it fires and the JSON Schema "
    "(draft 2020-12) of its `data`, in catalogue order.",
    public=True,
    responses={200: ("The event types", EventTypeListSchema)},
)
def event_types() -> Response:
    return json_response(
        _EVENT_TYPES,
        {"event_types": [{"type": t.name, "description": t.description,
                          "schema": data_schema(t.name)} for t in CATALOGUE]},
    )
