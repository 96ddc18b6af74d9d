"""Who hears of the lifecycle's changes: functions the layers above register at start-up.

The lifecycle sits below the broker and operational webhooks
(docs/architecture.md, "Layers"), so it cannot import them. Where one of its
changes must reach them, it calls the listener registered here instead:

- ``publish_after_commit(session, dispatches)``: a replay's message, published
  once the caller's transaction commits (broker/outbox.py);
- ``request_sweep_after_commit(session)``: a recover asks a worker to sweep
  after its commit (broker/outbox.py);
- ``delivery_ended(connection, status, ...)`` and ``subscription_paused(connection,
  subscription_id, reason=, now=)``: the operational notices a record raises,
  stored in its transaction, returned as the Dispatch items to publish after it
  (operational/notices.py).

The composition root, webhooks/composition.py, registers them; every entrance
calls it first (the web app's factory, the worker, the CLI, the test suite's
conftest). A process that did not raises :class:`NotComposed` naming the
listener, at the first change that needs it, rather than losing a message or a
notice without a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from webhooks.lifecycle.dispatch import Dispatch

__all__ = ["Listeners", "NotComposed", "register", "registered", "reset"]


class NotComposed(RuntimeError):
    """A change of the lifecycle needs a listener that no one registered: the process did
    not call ``webhooks.composition.compose()`` before it."""


@dataclass(frozen=True)
class Listeners:
    """The functions the lifecycle calls on the layers above it (see the module's text)."""

    publish_after_commit: Callable[[object, Sequence[Dispatch]], None]
    request_sweep_after_commit: Callable[[object], None]
    delivery_ended: Callable[..., Sequence[Dispatch]]
    subscription_paused: Callable[..., Sequence[Dispatch]]


_registered: Listeners | None = None


def register(listeners: Listeners) -> None:
    """Make ``listeners`` the ones the lifecycle calls, for the rest of the process (again:
    the newer ones)."""
    global _registered
    _registered = listeners


def registered() -> Listeners:
    """The listeners registered at start-up; NotComposed if there are none."""
    if _registered is None:
        raise NotComposed(
            "the lifecycle's listeners (publishing, operational notices) are not registered: "
            "call webhooks.composition.compose() when the process starts "
            "(docs/architecture.md, \"The composition root\")")
    return _registered


def reset() -> None:
    """Forget the registered listeners (tests of :class:`NotComposed`)."""
    global _registered
    _registered = None
