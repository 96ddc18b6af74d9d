"""Pause a subscription by hand, resume a paused one and have what it released sent at once.

(A subscription also pauses itself, in the record of an attempt: lifecycle/record.py,
for its failures or a 410 Gone.)
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.broker.outbox import request_sweep_after_commit
from webhooks.lifecycle import changes
from webhooks.lifecycle.states import PauseReason
from webhooks.storage.models import Subscription, utcnow

__all__ = ["PauseReason", "pause", "resume"]


def pause(session: Session, subscription: Subscription) -> bool:
    """Its owner pauses it (reason ``manual``): its deliveries are held exactly as a pause by
    the rule holds them, until it is resumed. False if it was paused already (nothing
    changes, its reason stays)."""
    paused = changes.pause_by_hand(session, subscription.id, utcnow())
    session.refresh(subscription)
    return paused


def resume(session: Session, subscription: Subscription) -> int:
    """Active again, failure counter at 0; returns how many held deliveries were released.

    The released deliveries are parked and due: one sweep, asked for once the
    caller's transaction commits, sends them all.
    """
    released = changes.resume_subscription(session, subscription.id, utcnow())
    session.refresh(subscription)
    request_sweep_after_commit(session)
    return released
