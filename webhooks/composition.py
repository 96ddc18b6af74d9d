"""The composition root: the one place that wires the upper layers into the lower ones.

The lifecycle tells the broker and operational webhooks of its changes through
listeners (lifecycle/listeners.py), since it may not import them
(docs/architecture.md, "Layers"). :func:`compose` registers them: every
entrance calls it before it serves (the web app's factory, web/app.py; the
worker, worker/__init__.py; the CLI, webhooks/cli/commands.py; the tests'
conftest). Calling it again changes nothing.

``emit_event`` (webhooks/emit.py) needs none of them: it stores and publishes
itself, above the lifecycle, so an application that only emits needs no call.
"""

from __future__ import annotations

from webhooks.broker import outbox
from webhooks.lifecycle import listeners
from webhooks.operational import notices

__all__ = ["compose", "LISTENERS"]

LISTENERS = listeners.Listeners(
    publish_after_commit=outbox.publish_after_commit,
    request_sweep_after_commit=outbox.request_sweep_after_commit,
    delivery_ended=notices.notify_delivery_ended,
    subscription_paused=notices.notify_paused,
)


def compose() -> None:
    """Register the lifecycle's listeners for this process (idempotent)."""
    listeners.register(LISTENERS)
