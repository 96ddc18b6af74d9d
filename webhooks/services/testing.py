"""Send a test event: a ``test.ping`` to one subscription, even while it is paused."""

from __future__ import annotations

from sqlalchemy.orm import Session

from webhooks.emit import EmittedEvent, send_test
from webhooks.storage.models import Subscription

__all__ = ["EmittedEvent", "send_test_event"]


def send_test_event(session: Session, subscription: Subscription) -> EmittedEvent:
    """The test event and its one delivery, published after the caller's transaction commits."""
    return send_test(session, subscription)
