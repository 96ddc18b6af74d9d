"""The states of a delivery and a subscription, and the named sub-states of "pending".

Every status and every predicate over them is written here once; the SQL of
the hot transitions (claim.py, record.py), the sweep and the web views use
these, and raw SQL text is rendered from the same expressions (:func:`render`).

A delivery is ``pending`` until an attempt is claimed (``sending``, shown as
``pending``), then ``done``, ``failed`` (a 4xx other than 429) or ``dead``
(the last attempt failed), or ``paused`` while its subscription is paused.
A pending delivery is in exactly one of four sub-states, encoded in
``parked`` and ``next_attempt_at``:

=================  ========  ===================  =====================================
sub-state          parked    next_attempt_at      who sends it
=================  ========  ===================  =====================================
due                false     <= now               its broker message (the sweep if lost)
riding countdown   false     > now                a Celery countdown message
parked             true      a time               the sweep, when that time comes
waiting            true      null                 a finished attempt frees a slot
=================  ========  ===================  =====================================
"""

from __future__ import annotations

import enum

from sqlalchemy import and_, false, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import ColumnElement

__all__ = [
    "DeliveryStatus", "SubscriptionStatus", "PUBLIC_STATUSES", "STORED_STATUSES", "REPLAYABLE",
    "FINISHED", "UNPAUSABLE_TYPE", "held_by_pause", "public_status",
    "due", "riding_countdown", "parked", "waiting", "render",
]


class SubscriptionStatus(str, enum.Enum):
    ACTIVE = "active"
    PAUSED = "paused"


class DeliveryStatus(str, enum.Enum):
    """States of a delivery. SENDING is internal: an attempt is in flight, shown as pending."""

    PENDING = "pending"
    SENDING = "sending"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    DEAD = "dead"

    @property
    def public(self) -> str:
        return "pending" if self is DeliveryStatus.SENDING else self.value


# The statuses the API and the dashboard show, and the stored ones behind each.
PUBLIC_STATUSES = ("pending", "paused", "done", "failed", "dead")
STORED_STATUSES = {
    public: tuple(s.value for s in DeliveryStatus if s.public == public) for public in PUBLIC_STATUSES
}
REPLAYABLE = ("failed", "dead")  # the public statuses a replay (or recover) may start from
FINISHED = (DeliveryStatus.DONE.value, DeliveryStatus.FAILED.value, DeliveryStatus.DEAD.value)

# Deliveries of this type are never held by a pause: "Send test" must reach a paused endpoint.
UNPAUSABLE_TYPE = "test.ping"


def held_by_pause(event_type: str) -> bool:
    """True when a paused subscription holds deliveries of this type (all but test.ping)."""
    return event_type != UNPAUSABLE_TYPE


def held_by_pause_in_sql(event_type) -> ColumnElement:
    """:func:`held_by_pause` over a column (or SQL expression) of event types: the same
    rule, as ``!=`` on a column builds the SQL comparison."""
    return held_by_pause(event_type)


def public_status(stored: str) -> str:
    """The status shown for a stored one (``sending`` is shown as ``pending``)."""
    return DeliveryStatus(stored).public


PENDING = DeliveryStatus.PENDING.value

# The sub-states of pending, over a deliveries table (or an alias of it). Booleans
# are compared "= true"/"= false", never "IS true": only the first matches the
# predicate of the partial index ix_deliveries_waiting.


def due(t, now) -> ColumnElement:
    return and_(t.c.status == PENDING, t.c.parked == false(), t.c.next_attempt_at <= now)


def riding_countdown(t, now) -> ColumnElement:
    return and_(t.c.status == PENDING, t.c.parked == false(), t.c.next_attempt_at > now)


def parked(t) -> ColumnElement:
    """Parked in the database for the sweep (due or not yet due)."""
    return and_(t.c.status == PENDING, t.c.parked == true(), t.c.next_attempt_at.is_not(None))


def waiting(t) -> ColumnElement:
    """Waiting for a free slot (WEBHOOKS_MAX_IN_FLIGHT): no message, no time."""
    return and_(t.c.status == PENDING, t.c.parked == true(), t.c.next_attempt_at.is_(None))


def render(expression: ColumnElement) -> str:
    """PostgreSQL text of a predicate with its literals inlined (for raw statements and
    partial indexes), e.g. ``render(waiting(alias))``."""
    return str(expression.compile(dialect=postgresql.dialect(),
                                  compile_kwargs={"literal_binds": True}))
