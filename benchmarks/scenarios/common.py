"""Helpers shared by the paced scenarios."""

from __future__ import annotations

from .. import seed
from ..receiver import ReceiverClient

__all__ = ["warm_up", "fmt"]


def warm_up(receiver: ReceiverClient, target: seed.Target, path: str, timeout: float = 30.0) -> None:
    """Emit one event to ``target`` and wait for it at ``path``.

    The first call in a process imports and builds schemas, and a fresh
    worker opens its database and HTTP connections on its first task; neither
    belongs in a latency figure.
    """
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    before = receiver.count(path)
    emit_event(target.account_id, seed.EVENT_TYPE, sample_data(seed.EVENT_TYPE))
    receiver.wait_for(before + 1, path, timeout=timeout)


def fmt(value, spec: str = ".1f") -> str:
    """``format(value, spec)``, or ``-`` for None."""
    return "-" if value is None else format(value, spec)
