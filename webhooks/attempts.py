"""The hot path of every delivery: claim an attempt, then record how it ended.

Both run once per attempt, so each is one SQL statement plus its commit on
PostgreSQL (UPDATE … FROM … RETURNING to claim and load; one statement of
data-modifying CTEs to record), prepared once per connection (prepared.py)
so that PostgreSQL does not plan them again for every delivery. SQLite
cannot return columns of joined tables or chain modifying CTEs, so it takes
the portable path: the same transitions as two or three Core statements.
Tests run both paths.

The claim also enforces WEBHOOKS_MAX_IN_FLIGHT: a delivery past its
subscription's cap waits for a free slot (see "slots" below).

Callers pass a SQLAlchemy ``Connection`` inside a transaction they own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, case, func, insert, select, update
from sqlalchemy.engine import Connection

from .models import (
    Attempt,
    Delivery,
    DeliveryStatus,
    Event,
    Subscription,
    SubscriptionStatus,
)
from .policy import Decision, Outcome, rides_countdown
from .prepared import PreparedStatement
from .rollup import RECORD_CTES_PG, count_attempt
from .store import UNPAUSABLE_TYPE, WAITING, Dispatch, hold_pending

__all__ = ["Claim", "AttemptRecord", "claim", "record_attempt", "wait_for_slot", "release_waiting"]

PENDING = DeliveryStatus.PENDING.value
SENDING = DeliveryStatus.SENDING.value
PAUSED = DeliveryStatus.PAUSED.value
ACTIVE = SubscriptionStatus.ACTIVE.value
# A countdown message may arrive a little before next_attempt_at (clock rounding).
EARLY_SLACK = dt.timedelta(seconds=1)

deliveries = Delivery.__table__
subscriptions = Subscription.__table__
events = Event.__table__
attempts = Attempt.__table__


@dataclass(frozen=True)
class Claim:
    """Everything one attempt needs, loaded when the attempt is claimed."""

    delivery_id: str
    attempt_number: int
    event_id: str
    event_type: str
    subscription_id: str
    url: str
    secret: str
    body: bytes
    version: str


@dataclass(frozen=True)
class AttemptRecord:
    """What recording an attempt led to: the delivery's status and what to publish."""

    status: str
    dispatch: Dispatch | None
    paused_subscription: bool
    released: tuple[Dispatch, ...] = ()  # deliveries that waited for the slot this attempt frees


def _is_postgresql(connection: Connection) -> bool:
    return connection.dialect.name == "postgresql"


# ---------------------------------------------------------------- claim

_CLAIM_PG = PreparedStatement(
    "webhooks_claim_v2",
    """
    UPDATE deliveries AS d
       SET status = 'sending', attempt_count = d.attempt_count + 1,
           claimed_at = :now, parked = false, updated_at = :now
      FROM events AS e, subscriptions AS s
     WHERE d.id = :id AND d.status = 'pending' AND d.attempt_count = :count
       AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= :due)
       AND e.id = d.event_id AND s.id = d.subscription_id
       AND (:cap = 0 OR d.event_type = 'test.ping'  -- store.UNPAUSABLE_TYPE never waits
            OR (SELECT count(*) FROM deliveries AS f
                 WHERE f.subscription_id = d.subscription_id AND f.status = 'sending') < :cap)
    RETURNING d.subscription_id, d.event_id, d.event_type, e.body, e.version,
              s.url, s.secret, s.status, s.deleted_at
    """,
    [("id", "varchar"), ("count", "integer"), ("now", "timestamp"), ("due", "timestamp"),
     ("cap", "integer")],
)

# Claims of one subscription take turns while a cap applies: under READ
# COMMITTED two concurrent claims would each count the attempts in flight
# without the other's and both claim, so N threads could overshoot the cap by
# N - 1. The lock is per subscription, held until the claim commits, and taken
# in its own statement so that the claim's snapshot, taken after it, sees every
# claim committed before. (SQLite's BEGIN IMMEDIATE already serialises writers.)
_CLAIM_TURN_PG = PreparedStatement(
    "webhooks_claim_turn_v1",
    "SELECT pg_advisory_xact_lock(hashtextextended(subscription_id, 7403)) "
    "FROM deliveries WHERE id = :id",
    [("id", "varchar")],
)

_in_flight = Delivery.__table__.alias("in_flight")
_CLAIMABLE = (
    deliveries.c.status == PENDING,
    deliveries.c.attempt_count == bindparam("count"),
    deliveries.c.next_attempt_at.is_(None) | (deliveries.c.next_attempt_at <= bindparam("due")),
)
_UNDER_CAP = (
    (bindparam("cap") == 0)
    | (deliveries.c.event_type == UNPAUSABLE_TYPE)
    | (
        select(func.count())
        .select_from(_in_flight)
        .where(_in_flight.c.subscription_id == deliveries.c.subscription_id,
               _in_flight.c.status == SENDING)
        .scalar_subquery()
        < bindparam("cap")
    )
)
_CLAIM_PORTABLE = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("d_id"), *_CLAIMABLE, _UNDER_CAP)
    .values(
        status=SENDING,
        attempt_count=deliveries.c.attempt_count + 1,
        claimed_at=bindparam("now"),
        parked=False,
        updated_at=bindparam("now"),
    )
    .returning(deliveries.c.subscription_id, deliveries.c.event_id, deliveries.c.event_type)
)

_LOAD_PORTABLE = (
    select(
        events.c.body,
        events.c.version,
        subscriptions.c.url,
        subscriptions.c.secret,
        subscriptions.c.status,
        subscriptions.c.deleted_at,
    )
    .select_from(events.join(subscriptions, subscriptions.c.id == bindparam("sub_id")))
    .where(events.c.id == bindparam("ev_id"))
)


def claim(
    connection: Connection, delivery_id: str, attempt_count: int, now: dt.datetime,
    max_in_flight: int = 0,
) -> Claim | None:
    """Claim the next attempt of a pending, due delivery; None if it is not ours to send.

    ``attempt_count`` is the count the broker message expects: a stale or
    duplicate message finds another count (or status) and claims nothing. A
    claim for a paused (or deleted) subscription is given back at once and the
    delivery held as ``paused`` (or ended ``failed``). When the subscription
    already has ``max_in_flight`` attempts in flight (0: no limit), the
    delivery waits for a free slot instead (see ``wait_for_slot``).
    """
    params = {"count": attempt_count, "now": now, "due": now + EARLY_SLACK, "cap": max_in_flight}
    if _is_postgresql(connection):
        if max_in_flight:
            _CLAIM_TURN_PG.execute(connection, {"id": delivery_id})
        rows = _CLAIM_PG.execute(connection, {**params, "id": delivery_id})
        row = rows[0] if rows else None
    else:
        claimed = connection.execute(_CLAIM_PORTABLE, {**params, "d_id": delivery_id}).first()
        row = None
        if claimed is not None:
            loaded = connection.execute(
                _LOAD_PORTABLE, {"sub_id": claimed.subscription_id, "ev_id": claimed.event_id}
            ).one()
            row = (*claimed, *loaded)
    if row is None:
        if max_in_flight:
            wait_for_slot(connection, delivery_id, attempt_count, now)
        return None
    subscription_id, event_id, event_type, body, version, url, secret, status, deleted_at = row
    if deleted_at is not None:
        _unclaim(connection, delivery_id, DeliveryStatus.FAILED.value, now)
        return None
    if status == SubscriptionStatus.PAUSED.value and event_type != UNPAUSABLE_TYPE:
        _unclaim(connection, delivery_id, PAUSED, now)
        return None
    return Claim(
        delivery_id=delivery_id,
        attempt_number=attempt_count + 1,
        event_id=event_id,
        event_type=event_type,
        subscription_id=subscription_id,
        url=url,
        secret=secret,
        body=bytes(body),
        version=version,
    )


def _unclaim(connection: Connection, delivery_id: str, status: str, now: dt.datetime) -> None:
    """Give back a claim without an attempt: the attempt count is restored, nothing recorded."""
    connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id, deliveries.c.status == SENDING)
        .values(
            status=status,
            attempt_count=deliveries.c.attempt_count - 1,
            claimed_at=None,
            updated_at=now,
        )
    )


# ---------------------------------------------------------------- slots
#
# A delivery waiting for a free slot of its subscription is pending, parked,
# with no next_attempt_at: no broker message carries it and the sweep's due
# steps do not see it. Each recorded attempt of the subscription releases the
# oldest waiting one (in the record's own statement on PostgreSQL); the sweep
# releases them for a subscription with nothing in flight, should a release
# have been missed.


def wait_for_slot(connection: Connection, delivery_id: str, attempt_count: int, now: dt.datetime) -> bool:
    """Park a delivery the cap turned away until a slot frees; False if it was not claimable.

    Only a delivery the claim would otherwise have taken (pending, this
    count, due) is parked, so a stale or duplicate message changes nothing.
    """
    moved = connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id, *_CLAIMABLE)
        .values(parked=True, next_attempt_at=None, updated_at=now),
        {"count": attempt_count, "due": now + EARLY_SLACK},
    )
    return moved.rowcount == 1


def release_waiting(connection: Connection, subscription_id: str, now: dt.datetime,
                    limit: int = 1) -> list[Dispatch]:
    """Make the oldest ``limit`` deliveries waiting for a slot of the subscription due now."""
    oldest = (
        select(deliveries.c.id)
        .where(deliveries.c.subscription_id == subscription_id, *WAITING)
        .order_by(deliveries.c.created_at, deliveries.c.id)
        .limit(limit)
    )
    if _is_postgresql(connection):
        oldest = oldest.with_for_update(skip_locked=True)
    released = connection.execute(
        update(deliveries)
        .where(deliveries.c.id.in_(oldest), *WAITING)
        .values(parked=False, next_attempt_at=now, updated_at=now)
        .returning(deliveries.c.id, deliveries.c.attempt_count)
    ).all()
    return [Dispatch(delivery_id, count) for delivery_id, count in released]


# ---------------------------------------------------------------- record

_STATUS_AFTER = {
    Outcome.SUCCESS: DeliveryStatus.DONE.value,
    Outcome.PERMANENT_FAILURE: DeliveryStatus.FAILED.value,
    Outcome.DEAD: DeliveryStatus.DEAD.value,
    Outcome.RETRY: PENDING,
}

# One statement: move the delivery, insert the attempt, count toward the pause,
# release the subscription's oldest delivery waiting for a slot, count the
# attempt in the rollups (rollup.py). Each step only happens if the delivery
# was still ours ("moved" is not empty).
_RECORD_PG_TEMPLATE = """
    WITH moved AS (
        UPDATE deliveries
           SET status = :status, next_attempt_at = :next_at, parked = :parked,
               claimed_at = NULL, updated_at = :now
         WHERE id = :id AND status = 'sending' AND attempt_count = :number
        RETURNING id, account_id
    ), recorded AS (
        INSERT INTO attempts (delivery_id, number, started_at, duration_ms, status_code,
                              error, outcome, response_excerpt)
        SELECT id, :number, :started_at, :duration_ms, :status_code, :error, :outcome, :excerpt
          FROM moved
        RETURNING delivery_id
    ), counted AS (
        {counter}
    ), released AS (
        UPDATE deliveries SET parked = false, next_attempt_at = :now, updated_at = :now
         WHERE id IN (SELECT w.id FROM deliveries AS w
                       WHERE w.subscription_id = :subscription_id AND w.status = 'pending'
                         AND w.parked AND w.next_attempt_at IS NULL
                       ORDER BY w.created_at, w.id LIMIT 1 FOR UPDATE SKIP LOCKED)
           AND EXISTS (SELECT 1 FROM moved)
        RETURNING id, attempt_count
    ), {rollup}
    SELECT (SELECT count(*) FROM moved) AS moved,
           (SELECT consecutive_failures FROM counted) AS failures,
           (SELECT paused_at FROM counted) AS paused_at,
           (SELECT id FROM released) AS released_id,
           (SELECT attempt_count FROM released) AS released_count
"""
_FAILURE_COUNTER_PG = """
        UPDATE subscriptions
           SET consecutive_failures = consecutive_failures + 1,
               status = CASE WHEN consecutive_failures + 1 >= :pause_after
                             THEN 'paused' ELSE status END,
               paused_at = CASE WHEN consecutive_failures + 1 >= :pause_after AND status = 'active'
                                THEN :now ELSE paused_at END
         WHERE id = :subscription_id AND EXISTS (SELECT 1 FROM moved)
        RETURNING consecutive_failures, paused_at
"""
_SUCCESS_COUNTER_PG = """
        UPDATE subscriptions SET consecutive_failures = 0
         WHERE id = :subscription_id AND consecutive_failures <> 0 AND EXISTS (SELECT 1 FROM moved)
        RETURNING consecutive_failures, paused_at
"""
_RECORD_PARAMETERS = [
    ("id", "varchar"), ("number", "integer"), ("status", "varchar"), ("next_at", "timestamp"),
    ("parked", "boolean"), ("now", "timestamp"), ("started_at", "timestamp"),
    ("duration_ms", "integer"), ("status_code", "integer"), ("error", "text"),
    ("outcome", "varchar"), ("excerpt", "text"), ("subscription_id", "varchar"),
]
_RECORD_FAILURE_PG = PreparedStatement(
    "webhooks_record_failure_v3",
    _RECORD_PG_TEMPLATE.format(counter=_FAILURE_COUNTER_PG, rollup=RECORD_CTES_PG),
    [*_RECORD_PARAMETERS, ("pause_after", "integer")],
    timestamp_columns=["paused_at"],
)
_RECORD_SUCCESS_PG = PreparedStatement(
    "webhooks_record_success_v3",
    _RECORD_PG_TEMPLATE.format(counter=_SUCCESS_COUNTER_PG, rollup=RECORD_CTES_PG),
    _RECORD_PARAMETERS,
    timestamp_columns=["paused_at"],
)


def record_attempt(
    connection: Connection,
    claim_: Claim,
    *,
    started_at: dt.datetime,
    duration_ms: int,
    status_code: int | None,
    error: str | None,
    excerpt: str | None,
    decision: Decision,
    now: dt.datetime,
    countdown_limit: int,
    pause_after: int,
    countdown_allowed: bool = True,
) -> AttemptRecord | None:
    """Record a finished attempt and move the delivery on; None if the claim was taken back.

    A retry whose wait is within ``countdown_limit`` seconds comes back as a
    Dispatch with that countdown, unless ``countdown_allowed`` is False (the
    countdown cap is full); any other retry is parked for the sweep. The
    subscription's counter moves in the same transaction, atomically.
    """
    status = _STATUS_AFTER[decision.outcome]
    next_at, parked, dispatch = None, False, None
    if decision.outcome is Outcome.RETRY:
        next_at = now + dt.timedelta(seconds=decision.retry_after)
        rides = countdown_allowed and rides_countdown(decision.retry_after, countdown_limit)
        parked = not rides
        if not parked:
            dispatch = Dispatch(claim_.delivery_id, claim_.attempt_number, decision.retry_after)
    params = dict(
        id=claim_.delivery_id, number=claim_.attempt_number, status=status, next_at=next_at,
        parked=parked, now=now, started_at=started_at, duration_ms=duration_ms,
        status_code=status_code, error=error, outcome=decision.outcome.value, excerpt=excerpt,
        subscription_id=claim_.subscription_id, pause_after=pause_after,
    )
    if _is_postgresql(connection):
        statement = _RECORD_FAILURE_PG if decision.is_failure else _RECORD_SUCCESS_PG
        ((moved, failures, paused_at, released_id, released_count),) = statement.execute(
            connection, params)
        if not moved:
            return None
        released = [Dispatch(released_id, released_count)] if released_id else []
    else:
        counted = _record_portable(connection, params, decision.is_failure)
        if counted is None:
            return None
        failures, paused_at = counted
        released = release_waiting(connection, claim_.subscription_id, now)
    paused_now = paused_at == now and failures is not None and failures >= pause_after
    if paused_now:
        # The released delivery is held with the others; resume sends it.
        hold_pending(connection, claim_.subscription_id, now)
        released = []
        if status == PENDING and claim_.event_type != UNPAUSABLE_TYPE:
            status, dispatch = PAUSED, None
    return AttemptRecord(status=status, dispatch=dispatch, paused_subscription=paused_now,
                         released=tuple(released))


def _record_portable(connection: Connection, params: dict, is_failure: bool):
    """The record as separate statements; None if the claim was taken back."""
    moved = connection.execute(
        update(deliveries)
        .where(
            deliveries.c.id == params["id"],
            deliveries.c.status == SENDING,
            deliveries.c.attempt_count == params["number"],
        )
        .values(
            status=params["status"], next_attempt_at=params["next_at"], parked=params["parked"],
            claimed_at=None, updated_at=params["now"],
        )
    )
    if moved.rowcount != 1:
        return None
    connection.execute(
        insert(attempts).values(
            delivery_id=params["id"], number=params["number"], started_at=params["started_at"],
            duration_ms=params["duration_ms"], status_code=params["status_code"],
            error=params["error"], outcome=params["outcome"], response_excerpt=params["excerpt"],
        )
    )
    count_attempt(connection, delivery_id=params["id"], subscription_id=params["subscription_id"],
                  started_at=params["started_at"], outcome=params["outcome"],
                  duration_ms=params["duration_ms"])
    return _count_toward_pause(connection, params, is_failure)


def _count_toward_pause(connection: Connection, params: dict, is_failure: bool):
    """Move the consecutive-failure counter in one atomic statement; (failures, paused_at).

    No read-modify-write: concurrent workers each add exactly one. SET
    expressions see the row as it was before the statement, on both databases.
    """
    subscription_id, now = params["subscription_id"], params["now"]
    if not is_failure:
        connection.execute(
            update(subscriptions)
            .where(subscriptions.c.id == subscription_id, subscriptions.c.consecutive_failures != 0)
            .values(consecutive_failures=0)
        )
        return None, None
    reaches = subscriptions.c.consecutive_failures + 1 >= params["pause_after"]
    return connection.execute(
        update(subscriptions)
        .where(subscriptions.c.id == subscription_id)
        .values(
            consecutive_failures=subscriptions.c.consecutive_failures + 1,
            status=case((reaches, SubscriptionStatus.PAUSED.value), else_=subscriptions.c.status),
            paused_at=case(
                (and_(reaches, subscriptions.c.status == ACTIVE), now),
                else_=subscriptions.c.paused_at,
            ),
        )
        .returning(subscriptions.c.consecutive_failures, subscriptions.c.paused_at)
    ).one()
