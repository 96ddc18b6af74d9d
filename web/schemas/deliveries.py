"""Delivery resources: the list query, a delivery with its attempts, a page of them.

The database has one state the API does not show: ``sending`` (an attempt
in flight) reads as ``pending`` (DeliveryStatus.public), and the ``status``
filter accepts only the public values.
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.services.reads import ERROR_KINDS, PUBLIC_STATUSES, Outcome
from webhooks.storage.models import Attempt, Delivery, DeliveryStatus

from .common import PageQuerySchema, UTCTimestamp, next_cursor_field

__all__ = [
    "PUBLIC_STATUSES",
    "DeliveryQuerySchema",
    "AttemptSchema",
    "DeliverySchema",
    "DeliveryListSchema",
    "delivery_resource",
    "shown_next_attempt_at",
]

#: The statuses the API shows and filters on, in lifecycle order.


class DeliveryQuerySchema(PageQuerySchema):
    """Query string of ``GET /deliveries``; other parameters are ignored."""

    subscription_id = fields.UUID(metadata={"description": "only deliveries to this subscription"})
    status = fields.String(
        validate=validate.OneOf(PUBLIC_STATUSES),
        metadata={"description": "public status; pending includes an attempt in flight"},
    )
    event_type = fields.String(validate=validate.OneOf(EVENT_TYPE_NAMES))
    event_id = fields.UUID(metadata={"description": "only deliveries of this event"})
    error_kind = fields.String(
        validate=validate.OneOf(ERROR_KINDS),
        metadata={"description": "only deliveries with an attempt that got no response for "
                                 "this reason (an attempt's `error_kind`)"},
    )


class AttemptSchema(Schema):
    """One attempt; ``status_code`` is null on a network error or time-out."""

    number = fields.Integer(required=True)
    started_at = UTCTimestamp(required=True)
    duration_ms = fields.Integer(required=True)
    status_code = fields.Integer(required=True, allow_none=True)
    error = fields.String(required=True, allow_none=True)
    error_kind = fields.String(
        required=True,
        allow_none=True,
        validate=validate.OneOf(ERROR_KINDS),
        metadata={"description": "why no response came (`timeout`, `dns`, `connection_refused`, "
                                 "...); null when one came, and for attempts recorded before "
                                 "the kind was stored"},
    )
    outcome = fields.String(required=True, validate=validate.OneOf([o.value for o in Outcome]))
    response_excerpt = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "the first KiB of the response body, decoded leniently"},
    )
    location = fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "the Location header of a 3xx answer (at most 1,000 "
                                 "characters; never followed), else null"},
    )


class DeliverySchema(Schema):
    """A delivery as the API shows it (docs/api.md), attempts in order of number."""

    id = fields.UUID(required=True)
    event_id = fields.UUID(required=True)
    event_type = fields.String(required=True)
    subscription_id = fields.UUID(required=True)
    status = fields.String(required=True, validate=validate.OneOf(PUBLIC_STATUSES))
    attempt_count = fields.Integer(required=True)
    next_attempt_at = UTCTimestamp(required=True, allow_none=True)
    replay_of = fields.UUID(required=True, allow_none=True)
    ordering_key = fields.String(
        required=True, allow_none=True,
        metadata={"description": "the event's ordering key: deliveries of one subscription "
                                 "with the same key are attempted one at a time, in emit "
                                 "order; null without one (and for a replay)"})
    created_at = UTCTimestamp(required=True)
    attempts = fields.List(fields.Nested(AttemptSchema), required=True)


class DeliveryListSchema(Schema):
    data = fields.List(fields.Nested(DeliverySchema), required=True)
    next_cursor = next_cursor_field()


def shown_next_attempt_at(delivery: Delivery):
    """When the next attempt is due, or None while none will be made.

    A ``paused`` delivery is held by its subscription's pause (only the types
    states.held_by_pause names are ever held) and is not sent until a resume,
    which makes it due at that moment: the time stored from before the pause is
    not shown, as the dashboard shows none (docs/api.md, "Deliveries").
    """
    if delivery.status == DeliveryStatus.PAUSED.value:
        return None
    return delivery.next_attempt_at


def delivery_resource(delivery: Delivery, attempts: list[Attempt]) -> dict:
    """What DeliverySchema dumps: the row with its public status and its attempts."""
    return {
        "id": delivery.id,
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "subscription_id": delivery.subscription_id,
        "status": DeliveryStatus(delivery.status).public,
        "attempt_count": delivery.attempt_count,
        "next_attempt_at": shown_next_attempt_at(delivery),
        "replay_of": delivery.replay_of,
        "ordering_key": delivery.ordering_key,
        "created_at": delivery.created_at,
        "attempts": sorted(attempts, key=lambda attempt: attempt.number),
    }
