"""The delivery state transitions as SQL, one function each (the per-attempt
claim and record live in attempts.py).

Every function takes the caller's session (or connection) and never commits:
the caller owns the transaction. Transitions are conditional UPDATEs (``WHERE status =
... AND attempt_count = ...``), so they are atomic on PostgreSQL and SQLite
alike and a duplicate broker message or a second sweep is a no-op. Functions
that make deliveries sendable return :class:`Dispatch` items for the caller
to publish after commit.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import exists, func, select, update
from sqlalchemy.orm import Session, aliased

from .accounts import new_signing_secret
from .errors import Conflict, NotFound
from .models import Delivery, DeliveryStatus, Subscription, SubscriptionStatus, new_id
from .quotas import reserve_subscription_slot

__all__ = [
    "Dispatch",
    "UNPAUSABLE_TYPE",
    "create_subscription",
    "mark_parked",
    "hold_pending",
    "resume_subscription",
    "replay_delivery",
    "delete_subscription",
    "sweep",
    "WAITING",
]

PENDING = DeliveryStatus.PENDING.value
SENDING = DeliveryStatus.SENDING.value
PAUSED = DeliveryStatus.PAUSED.value
# Deliveries of this type are never held by a pause: "Send test" must reach a paused endpoint.
UNPAUSABLE_TYPE = "test.ping"
# A delivery waiting for a free slot of its subscription (WEBHOOKS_MAX_IN_FLIGHT):
# pending and parked with no next_attempt_at, so no due step of the sweep sees it.
# attempts.py parks and releases them; the sweep's last step is the safety net.
# "parked = true", not "parked IS true": only the first matches the predicate of
# the partial index ix_deliveries_waiting on PostgreSQL (and "parked = 1" on SQLite).
WAITING = (Delivery.status == PENDING, Delivery.parked == True,  # noqa: E712
           Delivery.next_attempt_at.is_(None))


@dataclass(frozen=True)
class Dispatch:
    """A delivery to put on the queue: its id and the attempt_count the message expects."""

    delivery_id: str
    attempt_count: int
    countdown: float | None = None


def create_subscription(
    session: Session,
    account_id: str,
    url: str,
    *,
    event_types: list[str] | None,
    description: str | None,
    now: dt.datetime,
    max_subscriptions: int | None = None,
) -> Subscription:
    """A new active subscription with a fresh signing secret (inputs already validated).

    Conflict ``subscription_limit`` when the account already has
    ``max_subscriptions`` (default WEBHOOKS_MAX_SUBSCRIPTIONS) live ones.
    """
    reserve_subscription_slot(session, account_id, max_subscriptions)
    subscription = Subscription(
        id=new_id(),
        account_id=account_id,
        url=url,
        secret=new_signing_secret(),
        event_types=event_types,
        description=description,
        status=SubscriptionStatus.ACTIVE.value,
        consecutive_failures=0,
        paused_at=None,
        created_at=now,
    )
    session.add(subscription)
    session.flush()
    return subscription


def hold_pending(session: Session, subscription_id: str, now: dt.datetime) -> int:
    """Hold a paused subscription's pending deliveries as ``paused``; returns how many."""
    result = session.execute(
        update(Delivery)
        .where(
            Delivery.subscription_id == subscription_id,
            Delivery.status == PENDING,
            Delivery.event_type != UNPAUSABLE_TYPE,
        )
        .values(status=PAUSED, parked=False, updated_at=now)
    )
    return result.rowcount


def mark_parked(session: Session, delivery_ids: list[str], now: dt.datetime) -> None:
    """Hand pending deliveries whose message could not be published to the sweep."""
    if not delivery_ids:
        return
    session.execute(
        update(Delivery)
        .where(Delivery.id.in_(delivery_ids), Delivery.status == PENDING)
        .values(parked=True, updated_at=now)
    )


def resume_subscription(session: Session, subscription_id: str, now: dt.datetime) -> int:
    """paused -> active, counter to 0, held deliveries due now; returns how many were held.

    The held deliveries are parked and due, so the next sweep (which the
    caller should request at once) sends them all; a resumed subscription
    with thousands held never makes its caller publish thousands of messages.
    """
    found = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.deleted_at.is_(None))
        .values(
            status=SubscriptionStatus.ACTIVE.value, consecutive_failures=0, paused_at=None
        )
    )
    if found.rowcount != 1:
        raise NotFound("subscription not found")
    released = session.execute(
        update(Delivery)
        .where(Delivery.subscription_id == subscription_id, Delivery.status == PAUSED)
        .values(status=PENDING, next_attempt_at=now, parked=True, updated_at=now)
    )
    return released.rowcount


def replay_delivery(session: Session, delivery: Delivery, now: dt.datetime) -> Delivery:
    """A new delivery of the same event to the same subscription, attempts from 1.

    Only a ``failed`` or ``dead`` delivery may be replayed (Conflict otherwise);
    the original is left as it was. A paused subscription holds the replay.
    """
    if delivery.status not in (DeliveryStatus.FAILED.value, DeliveryStatus.DEAD.value):
        raise Conflict(
            "not_replayable",
            "only failed or dead deliveries can be replayed; "
            f"this one is {DeliveryStatus(delivery.status).public}",
        )
    subscription = session.get(Subscription, delivery.subscription_id)
    if subscription is None or subscription.deleted_at is not None:
        raise Conflict("not_replayable", "the subscription of this delivery has been deleted")
    held = (
        subscription.status == SubscriptionStatus.PAUSED.value
        and delivery.event_type != UNPAUSABLE_TYPE
    )
    replay = Delivery(
        id=new_id(),
        account_id=delivery.account_id,
        event_id=delivery.event_id,
        subscription_id=delivery.subscription_id,
        event_type=delivery.event_type,
        status=PAUSED if held else PENDING,
        attempt_count=0,
        next_attempt_at=now,
        parked=False,
        replay_of=delivery.id,
        created_at=now,
        updated_at=now,
    )
    session.add(replay)
    session.flush()
    return replay


def delete_subscription(session: Session, subscription_id: str, now: dt.datetime) -> None:
    """Soft-delete a subscription; its waiting deliveries end ``failed`` with no further attempt."""
    found = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.deleted_at.is_(None))
        .values(deleted_at=now)
    )
    if found.rowcount != 1:
        raise NotFound("subscription not found")
    session.execute(
        update(Delivery)
        .where(Delivery.subscription_id == subscription_id, Delivery.status.in_([PENDING, PAUSED]))
        .values(status=DeliveryStatus.FAILED.value, parked=False, updated_at=now)
    )


def _take(session: Session, candidates, values: dict, *conditions) -> list[Dispatch]:
    """UPDATE the rows ``candidates`` selects (re-checking ``conditions``), return them as Dispatch."""
    ids = [row[0] for row in session.execute(candidates)]
    if not ids:
        return []
    rows = session.execute(
        update(Delivery)
        .where(Delivery.id.in_(ids), *conditions)
        .values(**values)
        .returning(Delivery.id, Delivery.attempt_count)
    )
    return [Dispatch(delivery_id, count) for delivery_id, count in rows]


def sweep(
    session: Session, now: dt.datetime, *, timeout: float, recover_after: float, batch: int,
    max_in_flight: int = 0,
) -> list[Dispatch]:
    """Find what needs a broker message now; return it for publishing after commit.

    1. Claims whose worker died: sending for longer than the attempt time-out
       plus ``recover_after`` seconds go back to pending, count restored.
    2. Parked deliveries that are due.
    3. Pending deliveries overdue by ``recover_after`` seconds: their message
       was lost (a flushed broker, a failed publish); next_attempt_at moves to
       now so each is re-published at most once per ``recover_after``.
    4. Deliveries held ``paused`` although their subscription is active (a
       resume that raced a claim).
    5. Deliveries waiting for a slot of a subscription with nothing in
       flight: a release was missed (a worker died before publishing it, or
       the last attempt in flight ended just before the delivery began to
       wait). Up to ``max_in_flight`` each (all, if 0).
    Each step touches at most ``batch`` rows; the rest wait for the next sweep.
    """
    stale_before = now - dt.timedelta(seconds=timeout + recover_after)
    lost_before = now - dt.timedelta(seconds=recover_after)
    due = dict(next_attempt_at=now, parked=False, updated_at=now)
    dispatches = []

    stale = (Delivery.status == SENDING, Delivery.claimed_at < stale_before)
    dispatches += _take(
        session,
        select(Delivery.id).where(*stale).limit(batch),
        dict(due, status=PENDING, attempt_count=Delivery.attempt_count - 1, claimed_at=None),
        *stale,
    )
    parked_due = (Delivery.status == PENDING, Delivery.parked.is_(True), Delivery.next_attempt_at <= now)
    dispatches += _take(
        session, select(Delivery.id).where(*parked_due).limit(batch), due, *parked_due
    )
    lost = (
        Delivery.status == PENDING,
        Delivery.parked.is_(False),
        Delivery.next_attempt_at < lost_before,
    )
    dispatches += _take(session, select(Delivery.id).where(*lost).limit(batch), due, *lost)
    orphaned = (
        select(Delivery.id)
        .join(Subscription, Subscription.id == Delivery.subscription_id)
        .where(
            Delivery.status == PAUSED,
            Subscription.status == SubscriptionStatus.ACTIVE.value,
            Subscription.deleted_at.is_(None),
        )
        .limit(batch)
    )
    dispatches += _take(session, orphaned, dict(due, status=PENDING), Delivery.status == PAUSED)
    dispatches += _take(session, _forgotten_waiting(max_in_flight, batch), due, *WAITING)
    return dispatches


def _forgotten_waiting(per_subscription: int, batch: int):
    """The oldest waiting deliveries (up to ``per_subscription`` each, all if 0) of every
    subscription that has nothing in flight."""
    in_flight = aliased(Delivery)
    ranked = (
        select(
            Delivery.id,
            func.row_number()
            .over(partition_by=Delivery.subscription_id, order_by=(Delivery.created_at, Delivery.id))
            .label("place"),
        )
        .where(
            *WAITING,
            ~exists().where(in_flight.subscription_id == Delivery.subscription_id,
                            in_flight.status == SENDING),
        )
        .subquery()
    )
    candidates = select(ranked.c.id)
    if per_subscription:
        candidates = candidates.where(ranked.c.place <= per_subscription)
    return candidates.limit(batch)
