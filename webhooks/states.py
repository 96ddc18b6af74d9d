"""The states of a delivery and a subscription, and the named sub-states of "pending".

Every status and every sub-state is written here once: its predicate (over
a deliveries table, for the SQL) beside its writer (the column values that
put a row in it, which the transitions of transitions.py write).

A delivery is ``pending`` until an attempt is claimed (``sending``, shown as
``pending``), then ``done``, ``failed`` (a 4xx other than 429) or ``dead``
(the last attempt failed), or ``paused`` while its subscription is paused.
A pending delivery is in exactly one of five sub-states, encoded in
``parked``, ``next_attempt_at`` and ``behind_key``; a fifth flag, ``paced``, says that it
already holds its rate-limit slot (pacing.py), so its claim takes no other:

=================  ========  ===================  =====================================
sub-state          parked    next_attempt_at      who sends it (writer)
=================  ========  ===================  =====================================
due                false     <= now               its broker message, the sweep if lost
                                                  (:func:`made_due`)
riding countdown   false     > now                a Celery countdown message
                                                  (the record, with the policy's wait)
parked             true      a time               the sweep, when that time comes
                                                  (:func:`parked_until`)
waiting            true      null                 a finished attempt frees a slot
                                                  (:func:`waiting_for_slot`)
behind its key     true      null                 its key's predecessor, finished
                                                  (:func:`waiting_for_predecessor`;
                                                  ``behind_key`` true, ordering.py)
paced (flag)       either    its slot             as above; ``paced`` true
                                                  (:func:`paced_until`; parked, the sweep
                                                  sends it a countdown to its slot once it
                                                  is near: :func:`rides_to_its_slot`)
=================  ========  ===================  =====================================

A claimed delivery (``sending``, :func:`claimed`) and a held one (``paused``,
:func:`held`) are in none of them: both clear ``parked`` and ``paced``
(and a held one ``behind_key``: resume makes it due, the claim checks its key again).
A pause holds every type but test.ping (:func:`held_by_pause`, and
:func:`held_while` for a subscription's status).
"""

from __future__ import annotations

import enum

from sqlalchemy import and_, false, null, true
from sqlalchemy.sql import ColumnElement

__all__ = [
    "DeliveryStatus", "SubscriptionStatus", "PauseReason", "PUBLIC_STATUSES", "STORED_STATUSES", "REPLAYABLE",
    "FINISHED", "UNPAUSABLE_TYPE", "held_by_pause", "held_while", "public_status",
    "due", "riding_countdown", "parked", "waiting", "made_due", "parked_until",
    "waiting_for_slot", "paced_until", "rides_to_its_slot", "claimed", "held", "behind_its_key",
    "waiting_for_predecessor",
]


class SubscriptionStatus(str, enum.Enum):
    ACTIVE = "active"
    PAUSED = "paused"


class PauseReason(str, enum.Enum):
    """Why a subscription is paused (``subscriptions.paused_reason``; null while active)."""

    FAILURES = "failures"  # the pause rule: WEBHOOKS_PAUSE_AFTER consecutive failures
    MANUAL = "manual"  # its owner paused it (the pause route or the dashboard)
    GONE = "gone"  # the endpoint answered 410 Gone


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


def held_by_pause(event_type):
    """True when a paused subscription holds deliveries of this type (all but test.ping).

    Given a column (or SQL expression) of event types it is the same rule in
    SQL, as ``!=`` on a column builds the comparison."""
    return event_type != UNPAUSABLE_TYPE


def held_while(subscription_status: str, event_type: str) -> bool:
    """True when a subscription in ``subscription_status`` holds a delivery of ``event_type``:
    it is paused, and the type is one a pause holds."""
    return subscription_status == SubscriptionStatus.PAUSED.value and held_by_pause(event_type)


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
    return and_(t.c.status == PENDING, t.c.parked == true(), t.c.next_attempt_at.is_(None),
                t.c.behind_key == false())


def behind_its_key(t) -> ColumnElement:
    """Waiting for the delivery before it with its ordering key to be done, failed or dead:
    no message, no time; the record of that one (or the sweep) makes it due (ordering.py)."""
    return and_(t.c.status == PENDING, t.c.parked == true(), t.c.next_attempt_at.is_(None),
                t.c.behind_key == true())


# The writers: the column values that put a row in a sub-state (``now`` and times may be
# values or SQL expressions, such as a bindparam of a prepared statement).


def made_due(now) -> dict:
    """Due now: its message is to be published (or the sweep sends it)."""
    return {"parked": false(), "next_attempt_at": now, "behind_key": false()}


def parked_until(at) -> dict:
    """Parked for the sweep, which sends it once ``at`` comes."""
    return {"parked": True, "next_attempt_at": at}


def waiting_for_slot() -> dict:
    """Waiting for a free slot of the caps: no message, no time."""
    return {"parked": True, "next_attempt_at": null()}


def waiting_for_predecessor() -> dict:
    """Waiting for its key's predecessor: no message, no time (the claim turns it away)."""
    return {"parked": True, "next_attempt_at": null(), "behind_key": True}


def paced_until(slot, *, parked: bool) -> dict:
    """Holding its rate-limit slot at ``slot``: parked for the sweep, or riding a countdown."""
    return {"next_attempt_at": slot, "parked": parked, "paced": True}


def rides_to_its_slot() -> dict:
    """A parked, paced delivery whose slot is near now rides a countdown message to it
    (the sweep's top-up): its time stays its slot."""
    return {"parked": false()}


def claimed(now) -> dict:
    """Claimed for an attempt at ``now`` (the status, ``sending``, is the claim's)."""
    return {"claimed_at": now, "parked": false()}


def held() -> dict:
    """Held ``paused`` by its subscription's pause, in no pending sub-state."""
    return {"status": DeliveryStatus.PAUSED.value, "parked": False, "paced": False,
            "behind_key": False}
