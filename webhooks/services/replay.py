"""Replay one delivery: a new delivery of the same event to the same subscription.

The one replay check is the lifecycle's (lifecycle/recover.py, replay_once,
and lifecycle/changes.py): only a ``failed`` or ``dead`` delivery of a live
subscription (else Conflict ``not_replayable``, whose message names the
public status), and only once (else Conflict ``already_replayed``, naming
the earlier replay), under the lock recover takes.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.lifecycle.recover import replay_once
from webhooks.states import REPLAYABLE, DeliveryStatus
from webhooks.storage.models import Delivery, utcnow

__all__ = ["REPLAYABLE", "replay", "is_replayable", "was_published"]


def is_replayable(delivery: Delivery) -> bool:
    """Whether the delivery's public status allows a replay (its subscription aside)."""
    return DeliveryStatus(delivery.status).public in REPLAYABLE


def replay(session: Session, original: Delivery) -> Delivery:
    """The new delivery (published after the caller commits, or held while paused)."""
    return replay_once(session, original, utcnow())


def was_published(replayed: Delivery) -> bool:
    """True if the replay goes out now, False if a pause holds it."""
    return replayed.status == DeliveryStatus.PENDING.value
