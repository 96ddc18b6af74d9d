"""Recover: replay the failed and dead deliveries of a window, bounded per call.

The batch and the per-call limit are WEBHOOKS_RECOVER_BATCH and
WEBHOOKS_RECOVER_MAX; the caller's session is committed after each batch.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.lifecycle.recover import Recovered, recover as recover_window
from webhooks.services import audit
from webhooks.services.audit import Action, Actor, Target, TargetKind, created
from webhooks.storage.models import Subscription, utcnow

__all__ = ["Recovered", "recover"]


def recover(session: Session, subscription: Subscription, since: dt.datetime,
            until: dt.datetime | None, *, actor: Actor) -> Recovered:
    """Replay the window ``[since, until)``; InvalidWindow if it starts in the future or after
    it ends.

    Each batch is its own transaction, so each batch that replayed something has its own
    ``subscription.recovered`` entry by ``actor``, committed with it: ``replayed`` and
    ``held`` (how many of them wait while the subscription is paused) from null to their
    counts, and ``window`` from ``since`` to ``until`` (null: up to now).
    """
    settings = get_settings()
    account_id, target = subscription.account_id, Target(TargetKind.SUBSCRIPTION, subscription.id)

    def write_entry(batch_session: Session, replayed: int, held: int) -> None:
        changes = created({"replayed": replayed, "held": held})
        changes["window"] = {"from": since.isoformat(),
                             "to": None if until is None else until.isoformat()}
        audit.write(batch_session, account_id, actor, Action.SUBSCRIPTION_RECOVERED, target,
                    changes)

    return recover_window(session, subscription.id, since, until, now=utcnow(),
                          batch=settings.recover_batch, limit=settings.recover_max,
                          after_batch=write_entry)
