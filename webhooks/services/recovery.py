"""Recover: replay the failed and dead deliveries of a window, bounded per call.

The batch and the per-call limit are WEBHOOKS_RECOVER_BATCH and
WEBHOOKS_RECOVER_MAX; the caller's session is committed after each batch.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.lifecycle.recover import Recovered, recover as recover_window
from webhooks.storage.models import Subscription, utcnow

__all__ = ["Recovered", "recover"]


def recover(session: Session, subscription: Subscription, since: dt.datetime,
            until: dt.datetime | None) -> Recovered:
    """Replay the window ``[since, until)``; InvalidWindow if it starts in the future or after
    it ends."""
    settings = get_settings()
    return recover_window(session, subscription.id, since, until, now=utcnow(),
                          batch=settings.recover_batch, limit=settings.recover_max)
