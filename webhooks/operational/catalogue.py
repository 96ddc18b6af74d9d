"""The four operational event types and the marshmallow schemas of their ``data``.

Apart from the customer catalogue (webhooks/events/catalogue.py): ``emit_event``
never accepts these, and a customer subscription never receives them. The
service builds their data itself; the schemas check it before it is stored,
so a bug of ours is an error, never a malformed notice.
"""

from __future__ import annotations

from marshmallow import RAISE, Schema, validate

from webhooks.events.fields import CanonicalUUID, StrictInteger, Timestamp, one_of, text

__all__ = ["SUBSCRIPTION_PAUSED", "SUBSCRIPTION_RESUMED", "DELIVERY_DEAD", "DELIVERY_FAILED",
           "OPERATIONAL_TYPES", "PAUSE_REASONS", "unknown_types", "data_errors"]

SUBSCRIPTION_PAUSED = "subscription.paused"
SUBSCRIPTION_RESUMED = "subscription.resumed"
DELIVERY_DEAD = "delivery.dead"
DELIVERY_FAILED = "delivery.failed"
# Why a subscription paused (CONTRACT 9.3, paused_reason): the pause rule, the pause
# route or dashboard, a 410 answer.
PAUSE_REASONS = ("failures", "manual", "gone")


class _Data(Schema):
    class Meta:
        unknown = RAISE


class SubscriptionPausedSchema(_Data):
    account_id = CanonicalUUID()
    subscription_id = CanonicalUUID()
    reason = one_of(*PAUSE_REASONS)
    consecutive_failures = StrictInteger()
    paused_at = Timestamp()
    # Notices of this subscription dropped since the last that went out (budget.py).
    suppressed = StrictInteger(validate=validate.Range(min=0))


class SubscriptionResumedSchema(_Data):
    account_id = CanonicalUUID()
    subscription_id = CanonicalUUID()
    resumed_at = Timestamp()
    suppressed = StrictInteger(validate=validate.Range(min=0))


class DeliveryEndedSchema(_Data):
    """delivery.dead (the ladder ran out) and delivery.failed (a permanent answer, 4xx)."""

    account_id = CanonicalUUID()
    subscription_id = CanonicalUUID()
    delivery_id = CanonicalUUID()
    event_id = CanonicalUUID()
    event_type = text(64)  # the customer event's type (events.type is 64 characters)
    attempt_count = StrictInteger()
    status_code = StrictInteger(allow_none=True)  # none: the last attempt got no answer


_SCHEMAS: dict[str, Schema] = {
    SUBSCRIPTION_PAUSED: SubscriptionPausedSchema(),
    SUBSCRIPTION_RESUMED: SubscriptionResumedSchema(),
    DELIVERY_DEAD: DeliveryEndedSchema(),
    DELIVERY_FAILED: DeliveryEndedSchema(),
}
#: The operational event types, in the documented order (docs/events.md).
OPERATIONAL_TYPES: tuple[str, ...] = tuple(_SCHEMAS)


def unknown_types(names) -> list[str]:
    """The names in ``names`` that are not operational event types (in their order)."""
    return [name for name in names if name not in _SCHEMAS]


def data_errors(event_type: str, data: dict) -> dict:
    """marshmallow's errors for ``data`` of ``event_type`` (empty: valid)."""
    return _SCHEMAS[event_type].validate(data)
