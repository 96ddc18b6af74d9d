"""The second hot transition of every attempt: record how it ended, and move on.

Five steps, each written once in SQLAlchemy Core: move the delivery to the
status policy.next_step chose, insert the attempt, move the subscription's
counter (+1 for a failure, 0 for a success), release the oldest delivery of
the subscription waiting for the slot this attempt frees, and count the
attempt in the rollups (rollup.py). Each applies only if the delivery was
still ours (sending, this attempt number), so a record after the sweep took
the claim back changes nothing.

On PostgreSQL the five run as one prepared statement of data-modifying CTEs
(one round trip, prepared once per connection); SQLite cannot chain them, so
it runs the same statements one by one. If the counter reaches the pause
threshold (policy.pauses), the subscription is paused and its pending
deliveries held, in the same transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Integer, String, Text, bindparam, exists, false, func, insert, null, select, update
from sqlalchemy.engine import Connection

from . import policy, rollup
from .claim import Claim
from .models import Attempt, Delivery, Subscription, UTCDateTime
from .outbox import Dispatch
from .prepared import PreparedStatement, execute_together
from .states import DeliveryStatus, waiting
from .store import hold_pending, pause_subscription

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

_MOVE = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("d_id"), deliveries.c.status == SENDING,
           deliveries.c.attempt_count == bindparam("n"))
    .values(status=bindparam("new_status"), next_attempt_at=bindparam("next_at", type_=UTCDateTime),
            parked=bindparam("park"), claimed_at=null(), paced=false(),
            updated_at=bindparam("now"))
)
# Parameters are named apart from every column: on SQLite, a parameter named
# like a column of an UPDATE would be taken as a value to SET.
_ATTEMPT = {
    "number": bindparam("n", type_=Integer),
    "started_at": bindparam("t_started", type_=UTCDateTime),
    "duration_ms": bindparam("t_duration", type_=Integer),
    "status_code": bindparam("code", type_=Integer),
    "error": bindparam("err", type_=Text),
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
    return (update(deliveries)
            .where(deliveries.c.id.in_(oldest))
            .values(parked=false(), next_attempt_at=bindparam("now"), updated_at=bindparam("now"))
            .returning(deliveries.c.id, deliveries.c.attempt_count))


# ---------------------------------------------------------------- PostgreSQL: one statement


def _one_statement(count):
    """The five steps as data-modifying CTEs; each later one only if the move happened.

    PostgreSQL runs every data-modifying CTE to completion whether or not the
    final SELECT reads it, so that SELECT reads only what the caller uses
    (each CTE it read cost executor work on every attempt).
    """
    moved = _MOVE.returning(deliveries.c.id, deliveries.c.account_id).cte("moved")
    ours = exists(select(moved.c.id))
    recorded = (insert(attempts)
                .from_select(["delivery_id", *_ATTEMPT], select(moved.c.id, *_ATTEMPT.values()))
                .cte("recorded"))
    counted = count.where(ours).returning(subscriptions.c.consecutive_failures).cte("counted")
    released = _release(locking=True).where(ours).cte("released")
    hour_counted, total_counted = rollup.count_in_statement(
        moved, subscription_id=_SUBSCRIPTION_ID, started_at=_ATTEMPT["started_at"],
        outcome=_ATTEMPT["outcome"], duration_ms=_ATTEMPT["duration_ms"])
    return select(
        select(func.count()).select_from(moved).scalar_subquery().label("moved"),
        select(counted.c.consecutive_failures).scalar_subquery().label("failures"),
        select(released.c.id).scalar_subquery().label("released_id"),
        select(released.c.attempt_count).scalar_subquery().label("released_count"),
    ).add_cte(recorded, hour_counted, total_counted)


_RECORD_FAILURE_PG = PreparedStatement.from_core("record_failure", _one_statement(_COUNT_FAILURE))
_RECORD_SUCCESS_PG = PreparedStatement.from_core("record_success", _one_statement(_COUNT_SUCCESS))


def _record_postgresql(connection: Connection, params: dict, is_failure: bool):
    statement = _RECORD_FAILURE_PG if is_failure else _RECORD_SUCCESS_PG
    # A success is this one statement, committed on its own on the attempt engine; a
    # failure opens a transaction, as it may pause the subscription after it (record()).
    ((moved, failures, released_id, released_count),) = execute_together(
        connection, [(statement, params)], begin=is_failure)
    if not moved:
        return None
    return failures, [Dispatch(released_id, released_count)] if released_id else []


# ---------------------------------------------------------------- SQLite: step by step

_RELEASE_PORTABLE = _release(locking=False)  # SQLite has no row locks: BEGIN IMMEDIATE serialises


def _record_portable(connection: Connection, params: dict, is_failure: bool):
    if connection.execute(_MOVE, params).rowcount != 1:
        return None
    connection.execute(insert(attempts).values(delivery_id=bindparam("d_id"), **_ATTEMPT), params)
    rollup.count_attempt(connection, delivery_id=params["d_id"], subscription_id=params["sub_id"],
                         started_at=params["t_started"], outcome=params["result"],
                         duration_ms=params["t_duration"])
    if is_failure:
        failures = connection.execute(
            _COUNT_FAILURE.returning(subscriptions.c.consecutive_failures), params).scalar_one()
    else:
        connection.execute(_COUNT_SUCCESS, params)
        failures = None
    released = connection.execute(_RELEASE_PORTABLE, params).all()
    return failures, [Dispatch(delivery_id, count) for delivery_id, count in released]


# ---------------------------------------------------------------- the transition


def record(connection: Connection, claim: Claim, *, step: policy.Step, rules: policy.Rules,
           started_at: dt.datetime, now: dt.datetime, duration_ms: int, status_code: int | None,
           error: str | None, excerpt: str | None,
           location: str | None = None) -> Recorded | None:
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
    )
    run = _record_postgresql if connection.dialect.name == "postgresql" else _record_portable
    moved = run(connection, params, step.is_failure)
    if moved is None:
        return None
    failures, released = moved
    status = step.status
    dispatch = (Dispatch(claim.delivery_id, claim.attempt_number, step.retry_after)
                if step.wait is policy.Wait.COUNTDOWN else None)
    paused_now = (failures is not None and policy.pauses(failures, rules, claim.event_type)
                  and pause_subscription(connection, claim.subscription_id, now))
    if paused_now:
        # The released delivery is held with the others; resume sends it.
        hold_pending(connection, claim.subscription_id, now)
        released = []
        if step.status_if_paused != status:
            status, dispatch = step.status_if_paused, None
    return Recorded(status, dispatch, paused_now, tuple(released))
