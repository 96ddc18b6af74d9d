"""Pause a subscription by hand, resume a paused one and have what it released sent at once.

(A subscription also pauses itself, in the record of an attempt: lifecycle/record.py,
for its failures or a 410 Gone.)
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.broker.outbox import publish_after_commit, request_sweep_after_commit
from webhooks.lifecycle import changes
from webhooks.lifecycle.states import PauseReason, SubscriptionStatus
from webhooks.operational import notices as operational
from webhooks.storage.models import Subscription, utcnow

__all__ = ["PauseReason", "pause", "resume"]


def pause(session: Session, subscription: Subscription) -> bool:
    """Its owner pauses it (reason ``manual``): its deliveries are held exactly as a pause by
    the rule holds them, until it is resumed. False if it was paused already (nothing
    changes, its reason stays). Pausing raises the subscription.paused notice (reason
    ``manual``) in the same transaction."""
    now = utcnow()
    paused = changes.pause_by_hand(session, subscription.id, now)
    session.refresh(subscription)
    if paused:  # subscription.paused, in this transaction (webhooks/operational)
        publish_after_commit(session, operational.notify_paused(
            session, subscription.id, reason=PauseReason.MANUAL.value, now=now))
    return paused


def resume(session: Session, subscription: Subscription) -> int:
    """Active again, failure counter at 0; returns how many held deliveries were released.

    The released deliveries are parked and due: one sweep, asked for once the
    caller's transaction commits, sends them all. Resuming a paused subscription
    raises the subscription.resumed notice in the same transaction.
    """
    now = utcnow()
    was_paused = subscription.status == SubscriptionStatus.PAUSED.value
    released = changes.resume_subscription(session, subscription.id, now)
    session.refresh(subscription)
    if was_paused:  # subscription.resumed, in this transaction (webhooks/operational)
        publish_after_commit(session, operational.notify_resumed(session, subscription.id, now=now))
    request_sweep_after_commit(session)
    return released
