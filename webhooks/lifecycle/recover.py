"""Recover: replay, in bulk, a subscription's failed and dead deliveries of a time window.

After an outage of their endpoint a customer replays what failed meanwhile:
every ``failed`` or ``dead`` delivery of the subscription created in
``[since, until)`` that was never replayed (no delivery has ``replay_of``
pointing at it) gets a replay, as store.replay_row makes one. So a second
call over the same window replays nothing twice.

It is bounded: the work is done in transactions of ``batch`` deliveries
(WEBHOOKS_RECOVER_BATCH), each committed before the next begins, up to
``limit`` deliveries per call (WEBHOOKS_RECOVER_MAX); ``more`` says that the
window holds more, and calling again continues where this call stopped. The
replays are parked and due, so the sweep (requested after each commit) sends
them, however many there are. While the subscription is paused the replays
wait in ``paused`` (as any delivery of a paused subscription does, test.ping
excepted) and go out when it is resumed: ``held`` counts those, so that a
caller can say so. Concurrent calls for one subscription take
turns batch by batch (an advisory lock on PostgreSQL; SQLite's BEGIN
IMMEDIATE already serialises writers), which keeps "never twice" exact.

:func:`replay_once` replays one delivery under the same rule and the same
lock (``POST /deliveries/<id>/replay``, the dashboard's Replay): a delivery
replayed before, by either, raises Conflict ``already_replayed``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from webhooks.errors import Conflict, InvalidWindow, NotFound
from webhooks.lifecycle import listeners, transitions
from webhooks.lifecycle.changes import replay_delivery, replay_row
from webhooks.states import REPLAYABLE, STORED_STATUSES, held_while
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Delivery, Subscription

__all__ = ["Recovered", "check_window", "recover", "replay_once"]

_deliveries = Delivery.__table__
_REPLAYABLE_STORED = tuple(stored for public in REPLAYABLE for stored in STORED_STATUSES[public])
_LOCK_SEED = 9127  # apart from the claim's turn lock (claim.py)


@dataclass(frozen=True)
class Recovered:
    """What one call did: how many replays it made (``replayed``), how many of them wait in
    ``paused`` until the subscription is resumed (``held``, a part of ``replayed``), and
    whether the window holds more (``more``)."""

    replayed: int
    more: bool
    held: int = 0


def check_window(since: dt.datetime, until: dt.datetime | None, now: dt.datetime) -> None:
    """InvalidWindow unless ``since`` is not in the future and not after ``until``."""
    if since > now:
        raise InvalidWindow("since is in the future")
    if until is not None and since > until:
        raise InvalidWindow("since is after until")


def recover(session: Session, subscription_id: str, since: dt.datetime,
            until: dt.datetime | None, *, now: dt.datetime, batch: int,
            limit: int,
            after_batch: Callable[[Session, int, int], None] | None = None) -> Recovered:
    """Replay the subscription's failed and dead deliveries created in ``[since, until)``
    (``until`` None: up to ``now``) that were never replayed, oldest first.

    ``after_batch(session, replayed, held)`` runs in the transaction of each batch that
    replayed something, before it commits (the use case's audit entry).

    Commits ``session`` after each batch: call it with nothing else uncommitted in it.
    InvalidWindow for a window :func:`check_window` refuses; NotFound if the
    subscription does not exist or was deleted.
    """
    check_window(since, until, now)
    # Deliveries created after the call began (its own replays, among others) are not in it.
    end = now if until is None else min(until, now)
    replayed = held = 0
    while True:
        size = min(batch, limit - replayed)
        if size <= 0:  # this call's share is done; the window may hold more
            return Recovered(replayed, more=_any_left(session, subscription_id, since, end),
                             held=held)
        made, made_held = _replay_batch(session, subscription_id, since, end, now, size)
        if made and after_batch is not None:
            after_batch(session, made, made_held)
        session.commit()
        replayed += made
        held += made_held
        if made < size:
            return Recovered(replayed, more=False, held=held)


def _replays_of(original_id):
    """The replays of the delivery ``original_id`` (a value, or a column of an outer query),
    oldest first. The rule of "never replayed twice": a delivery with one is not replayed."""
    replay = _deliveries.alias("replay")
    return (select(replay.c.id).where(replay.c.replay_of == original_id)
            .order_by(replay.c.created_at, replay.c.id))


def _candidates(subscription_id: str, since: dt.datetime, end: dt.datetime):
    """The failed and dead deliveries of the window never replayed, oldest first."""
    d = _deliveries
    return (
        select(d.c.id, d.c.account_id, d.c.event_id, d.c.subscription_id, d.c.event_type)
        .where(d.c.subscription_id == subscription_id, d.c.status.in_(_REPLAYABLE_STORED),
               d.c.created_at >= since, d.c.created_at < end,
               ~exists(_replays_of(d.c.id)))
        .order_by(d.c.created_at, d.c.id)
    )


def _take_turn(session: Session, subscription_id: str) -> None:
    """Wait until no other transaction replays this subscription's deliveries, and hold the
    turn until this one ends (PostgreSQL; SQLite's writers already take turns)."""
    backend_of(session).lock_replays_of(session, subscription_id, _LOCK_SEED)


def replay_once(session: Session, delivery: Delivery, now: dt.datetime) -> Delivery:
    """changes.replay_delivery, unless ``delivery`` was replayed before (by this, by recover or
    by an older version): then Conflict ``already_replayed`` naming the earlier replay's id.

    Holds the subscription's turn (the lock recover takes) until the caller's transaction
    ends, so two replays of one delivery at once make one: the second sees the first's
    replay once the first commits.
    """
    _take_turn(session, delivery.subscription_id)
    earlier = session.execute(_replays_of(delivery.id).limit(1)).scalar()
    if earlier is not None:
        raise Conflict("already_replayed", f"this delivery was replayed before, as {earlier}")
    return replay_delivery(session, delivery, now)


def _replay_batch(session: Session, subscription_id: str, since: dt.datetime,
                  end: dt.datetime, now: dt.datetime, size: int) -> tuple[int, int]:
    """One transaction's worth: replay up to ``size`` deliveries; returns how many, and how
    many of them are held ``paused`` (the subscription is paused)."""
    _take_turn(session, subscription_id)
    subscription = session.execute(
        select(Subscription.status).where(Subscription.id == subscription_id,
                                          Subscription.deleted_at.is_(None))
    ).first()
    if subscription is None:
        raise NotFound("subscription not found")
    originals = session.execute(_candidates(subscription_id, since, end).limit(size)).all()
    if not originals:
        return 0, 0
    held = [held_while(subscription.status, original.event_type) for original in originals]
    rows = [replay_row(original, held=is_held, parked=True, now=now)
            for original, is_held in zip(originals, held)]
    transitions.add_replays(session, rows)
    listeners.registered().request_sweep_after_commit(session)  # broker/outbox.py
    return len(rows), sum(held)


def _any_left(session: Session, subscription_id: str, since: dt.datetime,
              end: dt.datetime) -> bool:
    left = session.execute(_candidates(subscription_id, since, end).limit(1)).first()
    session.commit()
    return left is not None
