"""What goes to the broker, and when: the one route from a state change to a message.

A change that makes deliveries sendable returns :class:`Dispatch` items; the
caller hands them here, never to Celery:

- :func:`publish_now`: the worker, after its record committed: publish in
  this thread; what the broker refuses is parked for the sweep.
- :func:`publish_after_commit`: ``emit_event(session=…)`` and the web app:
  published by the process's publisher (publisher.py) once the session's
  transaction commits, the commit returning after the broker took them or
  they were parked; forgotten if it rolls back (a worker must never look
  for a row it cannot see yet).
- :func:`request_sweep_after_commit`: ask a worker to sweep now (a resume).

:func:`on_commit` is the one after-commit mechanism, on SQLAlchemy's session
events, for the core and the web app alike.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

from sqlalchemy import event as sa_event
from sqlalchemy import update
from sqlalchemy.orm import Session, scoped_session

from . import publisher, queue
from .db import session_scope
from .models import Delivery, utcnow
from .states import DeliveryStatus

__all__ = ["Dispatch", "publish_now", "publish_after_commit", "request_sweep_after_commit",
           "on_commit", "park"]

log = logging.getLogger(__name__)

_ACTIONS = "webhooks_after_commit"
_HOOKED = "webhooks_after_commit_hooked"


@dataclass(frozen=True)
class Dispatch:
    """A delivery to put on the queue: its id, the attempt_count the message expects, and
    the seconds the message waits before it is delivered (a retry's countdown)."""

    delivery_id: str
    attempt_count: int
    countdown: float | None = None


def park(session: Session, delivery_ids: list[str]) -> None:
    """Hand pending deliveries whose message could not be published to the sweep."""
    if not delivery_ids:
        return
    session.execute(
        update(Delivery)
        .where(Delivery.id.in_(delivery_ids), Delivery.status == DeliveryStatus.PENDING.value)
        .values(parked=True, updated_at=utcnow())
    )


def publish_now(dispatches: Sequence[Dispatch]) -> int:
    """Publish each Dispatch in this thread; returns how many were parked (refused)."""
    if not dispatches:
        return 0
    failed = queue.publish(dispatches)
    if failed:
        with session_scope() as session:
            park(session, [item.delivery_id for item in failed])
    return len(failed)


def on_commit(session: Session, action: Callable[[], object]) -> None:
    """Run ``action`` after ``session``'s transaction commits; never if it rolls back.

    An action that raises is logged, not raised: the change is committed, and
    the sweep recovers a delivery whose message was not sent. ``session`` may be
    a ``scoped_session`` (Flask-SQLAlchemy's ``db.session``): the hook goes on
    the Session it stands for now.
    """
    if isinstance(session, scoped_session):
        # Events listened for on a scoped_session go to its Session class, i.e. to every
        # session it will ever make: one more listener per request, for the life of the app.
        session = session()
    if not session.info.get(_HOOKED):
        # Once per session, kept for its life: listeners cannot be removed while
        # the event that would remove them is being dispatched.
        sa_event.listen(session, "after_commit", _run_actions)
        sa_event.listen(session, "after_rollback", _forget_actions)
        session.info[_HOOKED] = True
    session.info.setdefault(_ACTIONS, []).append(action)


def _run_actions(session: Session) -> None:
    for action in session.info.pop(_ACTIONS, []):
        try:
            action()
        except Exception:  # noqa: BLE001 - committed already; the sweep covers a lost message
            log.exception("an after-commit action failed; the sweep will recover")


def _forget_actions(session: Session) -> None:
    session.info.pop(_ACTIONS, None)


def publish_after_commit(session: Session, dispatches: Sequence[Dispatch]) -> None:
    """Publish through the process's publisher once ``session`` commits (the commit waits)."""
    if dispatches:
        items = list(dispatches)
        on_commit(session, lambda: publisher.publish(items))


def request_sweep_after_commit(session: Session) -> None:
    """Ask a worker to sweep as soon as ``session`` commits (False from the broker: the
    scheduler's next sweep does it)."""
    on_commit(session, lambda: queue.request_sweep())
