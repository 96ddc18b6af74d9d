"""Hand deliveries to the broker after commit; park for the sweep any it refuses."""

from __future__ import annotations

from typing import Sequence

from . import queue, store
from .db import session_scope
from .models import utcnow

__all__ = ["dispatch"]


def dispatch(dispatches: Sequence[store.Dispatch]) -> int:
    """Publish each Dispatch; returns how many were parked because the broker refused them."""
    if not dispatches:
        return 0
    failed = queue.publish(dispatches)
    if failed:
        with session_scope() as session:
            store.mark_parked(session, [item.delivery_id for item in failed], utcnow())
    return len(failed)
