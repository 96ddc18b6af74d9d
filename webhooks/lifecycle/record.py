"""The second hot transition of every attempt: record how it ended, and move on.

Five steps, each written once in SQLAlchemy Core: move the delivery to the
status policy.next_step chose, insert the attempt, move the subscription's
counter (+1 for a failure, 0 for a success), release the oldest delivery of
the subscription waiting for the slot this attempt frees, and count the
attempt in the rollups (rollup.py). Each applies only if the delivery was
still ours (sending, this attempt number), so a record after the sweep took
the claim back changes nothing.

How the engine runs them is its backend's (storage/backends): on PostgreSQL
one prepared statement of data-modifying CTEs (one round trip), on SQLite the
same statements one by one. If the counter reaches the pause
threshold (policy.pauses), or the attempt pauses it at once (a 410 Gone:
``Step.pause_reason``), the subscription is paused with its reason and its
pending deliveries held, in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Integer, String, Text, bindparam, select, update
from sqlalchemy.engine import Connection

from webhooks.broker.outbox import Dispatch
from webhooks.lifecycle import policy
from webhooks.lifecycle import transitions
from webhooks.lifecycle.changes import pause_subscription
from webhooks.lifecycle.claim import Claim
from webhooks.lifecycle.states import DeliveryStatus, PauseReason, waiting
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Attempt, Delivery, Subscription, UTCDateTime

__all__ = ["Recorded", "record"]

deliveries, subscriptions, attempts = Delivery.__table__, Subscription.__table__, Attempt.__table__
SENDING = DeliveryStatus.SENDING.value


@dataclass(frozen=True)
class Recorded:
    """What recording an attempt led to: the delivery's status and what to publish."""

    status: str
    dispatch: Dispatch | None  # the retry's countdown message
    paused_subscription: bool
    released: tuple[Dispatch, ...] = ()  # deliveries that waited for the slot this attempt frees


# ---------------------------------------------------------------- the four steps

_MOVE = transitions.move_after_attempt()
# Parameters are named apart from every column: on SQLite, a parameter named
# like a column of an UPDATE would be taken as a value to SET.
_ATTEMPT = {
    "number": bindparam("n", type_=Integer),
    "started_at": bindparam("t_started", type_=UTCDateTime),
    "duration_ms": bindparam("t_duration", type_=Integer),
    "status_code": bindparam("code", type_=Integer),
    "error": bindparam("err", type_=Text),
    "error_kind": bindparam("kind_of_error", type_=String(32)),
    "outcome": bindparam("result", type_=Text),
    "response_excerpt": bindparam("excerpt", type_=Text),
    "location": bindparam("redirect_to", type_=Text),
}
_SUBSCRIPTION_ID = bindparam("sub_id", type_=String(36))
_THIS_SUBSCRIPTION = subscriptions.c.id == _SUBSCRIPTION_ID
_COUNT_FAILURE = (update(subscriptions).where(_THIS_SUBSCRIPTION)
                  .values(consecutive_failures=subscriptions.c.consecutive_failures + 1))
# A success writes the subscription's row only if there is a failure to forget.
_COUNT_SUCCESS = (update(subscriptions)
                  .where(_THIS_SUBSCRIPTION, subscriptions.c.consecutive_failures != 0)
                  .values(consecutive_failures=0))


def _release(locking: bool):
    """Make the oldest delivery waiting for a slot of the subscription due now (``locking``:
    skip rows another transaction holds, on PostgreSQL)."""
    w = deliveries.alias("w")
    oldest = (select(w.c.id)
              .where(w.c.subscription_id == _SUBSCRIPTION_ID, waiting(w))
              .order_by(w.c.created_at, w.c.id).limit(1))
    if locking:
        oldest = oldest.with_for_update(skip_locked=True)
    # No second test of "waiting" here: the subquery locks the rows it picks
    # (FOR UPDATE re-checks them), and a second test let the planner run it
    # once per waiting row, releasing more than ``limit``.
    return transitions.release_oldest_waiting(oldest)


# ---------------------------------------------------------------- the transition


def _pause_if_due(connection: Connection, claim: Claim, step: policy.Step, rules: policy.Rules,
                  failures: int | None, now: dt.datetime) -> bool:
    """Pause the subscription if this attempt does: at once with the step's reason (410),
    or for its failures when the counter (``failures``, after it moved) met the pause rule.
    True if this attempt paused it (False if it was paused already)."""
    if step.pause_reason is not None:
        reason = step.pause_reason
    elif failures is not None and policy.pauses(failures, rules, claim.event_type):
        reason = PauseReason.FAILURES
    else:
        return False
    return pause_subscription(connection, claim.subscription_id, now, reason)


def record(connection: Connection, claim: Claim, *, step: policy.Step, rules: policy.Rules,
           started_at: dt.datetime, now: dt.datetime, duration_ms: int, status_code: int | None,
           error: str | None, excerpt: str | None,
           location: str | None = None, error_kind: str | None = None) -> Recorded | None:
    """Record a finished attempt and carry out ``step``; None if the claim was taken back.

    A retry that rides a countdown comes back as a Dispatch with that
    countdown, for the caller to publish after commit.
    """
    params = dict(
        d_id=claim.delivery_id, n=claim.attempt_number, new_status=step.status,
        next_at=None if step.retry_after is None else now + dt.timedelta(seconds=step.retry_after),
        park=step.wait is policy.Wait.PARKED, now=now, t_started=started_at,
        t_duration=duration_ms, code=status_code, err=error, result=step.outcome.value,
        excerpt=excerpt, redirect_to=location, sub_id=claim.subscription_id,
        kind_of_error=None if error_kind is None else str(getattr(error_kind, "value", error_kind)),
    )
    # PostgreSQL: the five steps in one prepared statement; SQLite: one by one.
    moved = backend_of(connection).record(connection, params, step.is_failure)
    if moved is None:
        return None
    failures, released = moved
    status = step.status
    dispatch = (Dispatch(claim.delivery_id, claim.attempt_number, step.retry_after)
                if step.wait is policy.Wait.COUNTDOWN else None)
    paused_now = _pause_if_due(connection, claim, step, rules, failures, now)
    if paused_now:
        # The released delivery is held with the others; resume sends it.
        transitions.hold_pending(connection, claim.subscription_id, now)
        released = []
        if step.status_if_paused != status:
            status, dispatch = step.status_if_paused, None
    return Recorded(status, dispatch, paused_now, tuple(released))
