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
from webhooks.services import audit
from webhooks.services.audit import Action, Actor, Target, TargetKind, created
from webhooks.storage.models import Delivery, utcnow

__all__ = ["REPLAYABLE", "replay", "is_replayable", "was_published"]


def is_replayable(delivery: Delivery) -> bool:
    """Whether the delivery's public status allows a replay (its subscription aside)."""
    return DeliveryStatus(delivery.status).public in REPLAYABLE


def replay(session: Session, original: Delivery, *, actor: Actor) -> Delivery:
    """The new delivery (published after the caller commits, or held while paused), with the
    ``delivery.replayed`` entry by ``actor``: its target the original, its change the
    replay's id."""
    now = utcnow()
    replayed = replay_once(session, original, now)
    audit.write(session, original.account_id, actor, Action.DELIVERY_REPLAYED,
                Target(TargetKind.DELIVERY, original.id), created({"replay_id": replayed.id}),
                at=now)
    return replayed


def was_published(replayed: Delivery) -> bool:
    """True if the replay goes out now, False if a pause holds it."""
    return replayed.status == DeliveryStatus.PENDING.value
