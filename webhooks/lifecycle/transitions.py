"""Every write to the ``deliveries`` table: the delivery row's transitions, one function each.

Nothing else in the project builds an INSERT, UPDATE or DELETE of
``deliveries`` (scripts/architecture_counts.py counts the sites outside this
module: none). The callers decide *which* rows move (the claim's caps, the
sweep's candidates, a subscription's deliveries) and pass their conditions;
what a transition writes into the row, the status and the pending sub-state
(the writers of states.py), is decided here. Each function either builds a
statement once, at import, for the hot paths that prepare it (claim, record,
emit), or runs it on the caller's session or connection, never committing:
the caller owns the transaction.

==========================  =====================================  =======================
transition                  from -> to                             caller
==========================  =====================================  =======================
insert_deliveries           (new) -> pending / paused / waiting    emit (portable)
new_deliveries_from         (new) -> the same, in one statement    emit (PostgreSQL)
add_replay, add_replays     (new) -> pending / paused / parked     replay, recover
take_for_attempt            pending (due) -> sending               claim
turn_away                   pending -> failed / paused / waiting   claim
                            / behind its key
move_after_attempt          sending -> what the policy chose       record
release_oldest_waiting      waiting -> due                         record
release_successor           behind its key -> due / waiting        record (ordering.py)
release_behind_key          behind its key -> due                  sweep (ordering.py)
wait_for_slot               sending -> pending (paced)             the rate limit
take_swept                  (lost, parked, held, ...) -> due       sweep
ride_to_slots               parked (paced) -> riding countdown     sweep
park                        pending -> parked                      a refused publish
defer                       pending -> parked until a time         a notice over its budget
drop_unsent                 never sent -> (gone)                   a notice replaced unsent
hold_pending                pending -> paused                      a pause
release_held                paused -> pending (parked, due)        resume
fail_waiting                pending / paused -> failed             delete a subscription
delete_deliveries           finished -> (gone)                     retention
==========================  =====================================  =======================
"""

from __future__ import annotations

import datetime as dt
from typing import Iterable

from sqlalchemy import (Update, and_, bindparam, case, delete, false, insert, literal_column, null,
                        or_, select, true, update)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from webhooks import states
from webhooks.states import DeliveryStatus
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Delivery, UTCDateTime

__all__ = [
    "deliveries", "insert_deliveries", "new_deliveries_from", "add_replay", "add_replays",
    "one_row", "take_for_attempt", "turn_away", "move_after_attempt", "release_oldest_waiting",
    "wait_for_slot", "take_swept", "ride_to_slots", "release_successor", "release_behind_key", "park", "hold_pending", "release_held", "fail_waiting",
    "delete_deliveries", "defer", "drop_unsent",
]

deliveries = Delivery.__table__
PENDING = DeliveryStatus.PENDING.value
SENDING = DeliveryStatus.SENDING.value
PAUSED = DeliveryStatus.PAUSED.value
FAILED = DeliveryStatus.FAILED.value


def one_row(delivery_id, status: str) -> tuple:
    """The conditions that pick one delivery by its id, if it is in ``status``: the claim,
    the turn-away, the record and the rate limit's give-back move one row each this way."""
    return deliveries.c.id == delivery_id, _status_of_rows_by_id(status)


def _status_of_rows_by_id(status: str):
    """``deliveries.status = status`` for a statement that finds its rows by their ids
    (one_row, park).

    The status is compared as ``status || ''``, which the predicate of no partial index
    (``WHERE status = 'pending'``, ``'sending'``) matches, so that PostgreSQL can only find
    the rows by their primary key. Compared plainly, the planner may instead scan the
    partial index of every pending (or sending) delivery and filter it by id: costed as a
    tie, it is chosen when the table's statistics are missing or stale (a new or truncated
    table, before autovacuum's ANALYZE). Measured in the shared benchmark: a claim then
    read about 380 buffers, filtering out the whole backlog of about 1,000 pending rows,
    where by the primary key it reads about 25 (docs/performance.md, "Plans that scanned
    the backlog, and one worker process").
    """
    return deliveries.c.status.concat(literal_column("''")) == status


# ------------------------------------------------------------------ new rows

insert_deliveries = insert(deliveries)  # rows from states.new_delivery_row (emit, portable)


def new_deliveries_from(select_statement, columns: list[str]):
    """``INSERT INTO deliveries (columns) SELECT …`` for emit's one statement on PostgreSQL
    (lifecycle/emit_statement.py), returning what emit publishes."""
    return (insert(deliveries).from_select(columns, select_statement)
            .returning(deliveries.c.id, deliveries.c.status, deliveries.c.parked))


def add_replay(session: Session, row: dict) -> Delivery:
    """Insert one replay (states.replay_row) as an ORM object, flushed so that its id is
    usable at once; returns it."""
    replay = Delivery(**row)
    session.add(replay)
    session.flush()
    return replay


def add_replays(session: Session, rows: list[dict]) -> None:
    """Insert many replays (states.replay_row) in one statement (recover)."""
    session.execute(insert(deliveries), rows)


# ------------------------------------------------------------------ the claim

def take_for_attempt(*conditions) -> Update:
    """pending -> sending for the attempt's claim: the count moves on, the claim time is set,
    and the row leaves every pending sub-state (states.claimed). ``conditions`` are the
    claim's (id, attempt count, due, sendable, under the caps)."""
    return (update(deliveries).where(*conditions)
            .values(status=SENDING, attempt_count=deliveries.c.attempt_count + 1,
                    **states.claimed(bindparam("now")), updated_at=bindparam("now")))


def turn_away(*conditions, gone, held, sendable, behind) -> Update:
    """A claimable delivery the claim did not take: ``failed`` if ``gone`` (its subscription
    was deleted), held ``paused`` if ``held``, else (``sendable``) waiting for its key's
    predecessor if ``behind`` (states.behind_its_key), or, over a cap, for a free slot
    (states.waiting). One statement, so it needs no transaction."""
    return (update(deliveries).where(*conditions)
            .values(status=case((gone, FAILED), (held, PAUSED), else_=deliveries.c.status),
                    parked=case((sendable, true()), else_=false()),  # held or failed: as hold_pending
                    next_attempt_at=case((sendable, null()), else_=deliveries.c.next_attempt_at),
                    behind_key=case((and_(sendable, behind), true()), else_=false()),
                    paced=false(), updated_at=bindparam("now")))


# ------------------------------------------------------------------ the record

def move_after_attempt() -> Update:
    """sending -> the status the policy chose, if the claim is still this attempt's:
    bindparams ``d_id``, ``n``, ``new_status``, ``next_at``, ``park``, ``now``."""
    return (update(deliveries)
            .where(*one_row(bindparam("d_id"), SENDING),
                   deliveries.c.attempt_count == bindparam("n"))
            .values(status=bindparam("new_status"),
                    next_attempt_at=bindparam("next_at", type_=UTCDateTime),
                    parked=bindparam("park"), claimed_at=null(), paced=false(),
                    updated_at=bindparam("now")))


def release_oldest_waiting(oldest) -> Update:
    """waiting -> due now, for the ids ``oldest`` selects (the subscription's oldest waiting
    delivery, locked by the caller's subquery); returns (id, attempt_count)."""
    return (update(deliveries)
            .where(deliveries.c.id.in_(oldest))
            .values(**states.made_due(bindparam("now")), updated_at=bindparam("now"))
            .returning(deliveries.c.id, deliveries.c.attempt_count))


def release_successor(successor, queue) -> Update:
    """behind its key -> due now, for the id ``successor`` selects (the next unfinished
    delivery of a finished one's subscription and key, ordering.py), or, if ``queue``
    (deliveries of the subscription already wait for a free slot), -> waiting in that
    queue in its place (states.waiting_for_slot: a claim now would only be turned away
    by the cap); returns (id, attempt_count, parked). One that is not behind its key
    (its first message is still on its way) is left alone: its claim finds the way clear."""
    now = bindparam("now", type_=UTCDateTime)  # typed: the record's statement prepares it
    due, waits = states.made_due(now), states.waiting_for_slot()
    return (update(deliveries)
            .where(deliveries.c.id.in_(successor), states.behind_its_key(deliveries))
            .values(parked=case((queue, waits["parked"]), else_=due["parked"]),
                    next_attempt_at=case((queue, waits["next_attempt_at"]),
                                         else_=due["next_attempt_at"]),
                    behind_key=false(), updated_at=now)
            .returning(deliveries.c.id, deliveries.c.attempt_count, deliveries.c.parked))


def release_behind_key(session: Session, ids: list[str], now: dt.datetime) -> list[tuple[str, int]]:
    """behind its key -> due now for ``ids`` (the sweep's: their predecessor is finished but
    its record's release was missed); returns their (id, attempt_count)."""
    return take_swept(session, ids, dict(states.made_due(now), updated_at=now),
                      states.behind_its_key(deliveries))


# ------------------------------------------------------------------ the rate limit

def wait_for_slot(connection: Connection, delivery_id: str, slot: dt.datetime, *, parked: bool,
                  now: dt.datetime) -> None:
    """Give a claim back to wait for its rate-limit slot: pending until ``slot``, its attempt
    count restored, holding the slot (states.paced_until)."""
    connection.execute(
        update(deliveries)
        .where(*one_row(delivery_id, SENDING))
        .values(status=PENDING, attempt_count=deliveries.c.attempt_count - 1, claimed_at=None,
                **states.paced_until(slot, parked=parked), updated_at=now)
    )


# ------------------------------------------------------------------ the sweep

def _move_swept(session: Session, ids: list[str], values: dict, conditions, *returned):
    """UPDATE the rows ``ids`` (re-checking ``conditions``) to ``values``, but for those
    another transaction holds; their ``returned`` (the first the id), in the order of
    ``ids``: RETURNING gives the order the rows lie in the table, and the callers chose
    theirs (a release's batch oldest first).

    A row another transaction holds is skipped (FOR UPDATE SKIP LOCKED, on PostgreSQL),
    never waited for: that one is moving it (a sweep that overlaps this one, taking back
    the same claims; a record; a claim), and what it leaves to do the next sweep finds.
    Waiting, two overlapping sweeps deadlocked: each locked the rows in the order its
    own plan found them (by the primary key, or as they lie in the table), and each
    waited for one the other held (docs/reliability.md)."""
    free = backend_of(session).skip_locked(
        select(deliveries.c.id).where(deliveries.c.id.in_(ids), *conditions))
    rows = session.execute(update(deliveries).where(deliveries.c.id.in_(free), *conditions)
                           .values(**values).returning(*returned)).all()
    place = {delivery_id: index for index, delivery_id in enumerate(ids)}
    return sorted(rows, key=lambda row: place[row[0]])


def take_swept(session: Session, ids: list[str], values: dict, *conditions) -> list[tuple[str, int]]:
    """Move the rows ``ids`` (re-checking ``conditions``) to ``values`` (a sweep's: made due,
    with a status or a count restored); returns their (id, attempt_count)."""
    rows = _move_swept(session, ids, values, conditions,
                       deliveries.c.id, deliveries.c.attempt_count)
    return [(delivery_id, count) for delivery_id, count in rows]


def ride_to_slots(session: Session, ids: list[str], *conditions) -> list[tuple[str, int, dt.datetime]]:
    """Unpark the paced rows ``ids`` (re-checking ``conditions``) to ride a countdown to their
    slot (states.rides_to_its_slot); returns their (id, attempt_count, slot)."""
    rows = _move_swept(session, ids, states.rides_to_its_slot(), conditions, deliveries.c.id,
                       deliveries.c.attempt_count, deliveries.c.next_attempt_at)
    return [(delivery_id, count, slot) for delivery_id, count, slot in rows]


# ------------------------------------------------------------------ the broker

def park(session: Session, delivery_ids: list[str], now: dt.datetime) -> None:
    """pending -> parked (due as it was) for the sweep: their message could not be published."""
    if not delivery_ids:
        return
    session.execute(
        update(deliveries)
        .where(deliveries.c.id.in_(delivery_ids), _status_of_rows_by_id(PENDING))
        .values(parked=True, updated_at=now)
    )


def defer(connection, delivery_ids: list[str], until: dt.datetime, now: dt.datetime) -> None:
    """pending -> parked until ``until``, for new deliveries that are to wait (an operational
    notice over its budget: operational/budget.py); the sweep sends them then. Held ones
    (a paused endpoint's) stay held."""
    if not delivery_ids:
        return
    connection.execute(
        update(deliveries)
        .where(deliveries.c.id.in_(delivery_ids), deliveries.c.status == PENDING)
        .values(**states.parked_until(until), updated_at=now)
    )


def drop_unsent(connection, event_id: str) -> bool:
    """Every delivery of ``event_id`` -> gone, if none was ever sent: each is parked (no
    message on its way) or held, and none was attempted (an operational notice replaced
    before it went out: operational/budget.py). False, and nothing deleted, otherwise."""
    never_sent = and_(deliveries.c.attempt_count == 0,
                      or_(deliveries.c.status == PAUSED,
                          and_(deliveries.c.status == PENDING, deliveries.c.parked == true())))
    sent = connection.execute(select(deliveries.c.id).where(
        deliveries.c.event_id == event_id, ~never_sent).limit(1)).first()
    if sent is not None:
        return False
    connection.execute(delete(deliveries).where(deliveries.c.event_id == event_id))
    return True


# ------------------------------------------------------------------ a subscription's deliveries

def hold_pending(session, subscription_id: str, now: dt.datetime) -> int:
    """pending -> paused for the deliveries a pause holds (states.held_by_pause); how many."""
    result = session.execute(
        update(deliveries)
        .where(deliveries.c.subscription_id == subscription_id, deliveries.c.status == PENDING,
               states.held_by_pause(deliveries.c.event_type))
        .values(**states.held(), updated_at=now)
    )
    return result.rowcount


def release_held(session, subscription_id: str, now: dt.datetime) -> int:
    """paused -> pending, parked and due now (the sweep sends them all); how many."""
    released = session.execute(
        update(deliveries)
        .where(deliveries.c.subscription_id == subscription_id, deliveries.c.status == PAUSED)
        .values(status=PENDING, **states.parked_until(now), updated_at=now)
    )
    return released.rowcount


def fail_waiting(session, subscription_id: str, now: dt.datetime) -> None:
    """pending / paused -> failed, no further attempt (the subscription was deleted)."""
    session.execute(
        update(deliveries)
        .where(deliveries.c.subscription_id == subscription_id,
               deliveries.c.status.in_([PENDING, PAUSED]))
        .values(status=FAILED, parked=False, updated_at=now)
    )


# ------------------------------------------------------------------ retention

def delete_deliveries(connection: Connection, ids: Iterable[str]):
    """Delete these (finished) deliveries; returns their (event_id, replay_of) rows."""
    return connection.execute(
        delete(deliveries).where(deliveries.c.id.in_(list(ids)))
        .returning(deliveries.c.event_id, deliveries.c.replay_of)
    ).all()
