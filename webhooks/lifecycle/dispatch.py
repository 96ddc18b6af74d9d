"""A delivery to put on the queue: what a change that makes deliveries sendable returns.

The lifecycle's transitions return :class:`Dispatch` items; whoever runs
them hands these to the broker (webhooks/broker/outbox.py), above the
lifecycle, which publishes them. A message carries only the delivery's id and
the attempt count it expects; the database holds the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Dispatch"]


@dataclass(frozen=True)
class Dispatch:
    """A delivery to put on the queue: its id, the attempt_count the message expects, and
    the seconds the message waits before it is delivered (a retry's countdown)."""

    delivery_id: str
    attempt_count: int
    countdown: float | None = None
