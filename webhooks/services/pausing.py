"""Resume a paused subscription, and have what it released sent at once.

(A subscription pauses itself, in the record of an attempt: lifecycle/record.py.)
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.broker.outbox import request_sweep_after_commit
from webhooks.lifecycle import changes
from webhooks.storage.models import Subscription, utcnow

__all__ = ["resume"]


def resume(session: Session, subscription: Subscription) -> int:
    """Active again, failure counter at 0; returns how many held deliveries were released.

    The released deliveries are parked and due: one sweep, asked for once the
    caller's transaction commits, sends them all.
    """
    released = changes.resume_subscription(session, subscription.id, utcnow())
    session.refresh(subscription)
    request_sweep_after_commit(session)
    return released
