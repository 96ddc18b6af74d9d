"""What a resume released, sent in bounded batches: the subscription's own deliveries only.

A resume (services/pausing.py) moves every delivery the pause held to pending,
parked and due now, in its own transaction (transitions.release_held): from
then on nothing of them can be lost, whatever process dies, since the sweep
sends every parked delivery that is due. They are then sent oldest first, in
batches of ``WEBHOOKS_RELEASE_BATCH``, without the sweep: the first batch in
the resume's own transaction (published once it commits), the rest by the
subscription's *release task*, one batch per run, each committed before its
messages are published, the task sending itself again while batches come full.

At most one release task runs per subscription: ``subscriptions.releasing_since``
holds it (:func:`hold_release`), and a run refreshes it with the subscription's
row locked, so a resume that comes meanwhile either sees its deliveries taken by
the task or finds the task gone and sends a new one. A task lost with a broker
leaves the mark to grow old: after ``stale`` seconds (``WEBHOOKS_RECOVER_AFTER``)
the next resume takes it over, and the sweep meanwhile sends what is due.

Before this (issue 36) every resume, of an active subscription too, queued a
full sweep: 400 resumes cost the worker 6.35 s of CPU, and another tenant's
deliveries waited behind the sweeps.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from webhooks import states
from webhooks.lifecycle import transitions
from webhooks.states import SubscriptionStatus
from webhooks.storage.models import Delivery, Subscription

__all__ = ["take_batch", "hold_release", "continue_release", "end_release"]

_deliveries = Delivery.__table__


def _parked_and_due(subscription_id: str, now: dt.datetime) -> tuple:
    return (Delivery.subscription_id == subscription_id, states.parked(_deliveries),
            Delivery.next_attempt_at <= now)


def take_batch(session: Session, subscription_id: str, now: dt.datetime,
               limit: int) -> list[tuple[str, int]]:
    """Up to ``limit`` of the subscription's parked deliveries that are due, oldest first,
    made due for a message now (the caller publishes them once this transaction
    commits); their (id, attempt_count). Fewer than ``limit``: none is left."""
    due = _parked_and_due(subscription_id, now)
    ids = session.execute(
        select(Delivery.id).where(*due).order_by(Delivery.created_at, Delivery.id).limit(limit)
    ).scalars().all()
    if not ids:
        return []
    return transitions.take_swept(session, list(ids), dict(states.made_due(now), updated_at=now),
                                  *due)


def hold_release(session: Session, subscription_id: str, now: dt.datetime, stale: float) -> bool:
    """Mark the subscription as having its release task; True if it had none (or one whose
    mark is older than ``stale`` seconds: taken for lost), and the caller sends it once
    this transaction commits; False if one runs, which will take these deliveries too."""
    held = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id,
               or_(Subscription.releasing_since.is_(None),
                   Subscription.releasing_since < now - dt.timedelta(seconds=stale)))
        .values(releasing_since=now)
    )
    return held.rowcount == 1


def continue_release(session: Session, subscription_id: str, now: dt.datetime) -> bool:
    """A run of the release task begins: the subscription's row is locked until this
    transaction ends, and its mark refreshed; False if it is no longer active (paused
    again, or deleted): then the mark is dropped and the task ends (a later resume
    sends a new one)."""
    active = session.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id,
               Subscription.status == SubscriptionStatus.ACTIVE.value,
               Subscription.deleted_at.is_(None))
        .values(releasing_since=now)
    ).rowcount == 1
    if not active:
        end_release(session, subscription_id)
    return active


def end_release(session: Session, subscription_id: str) -> None:
    """The release task found the last batch: its mark is dropped."""
    session.execute(update(Subscription).where(Subscription.id == subscription_id)
                    .values(releasing_since=None))
