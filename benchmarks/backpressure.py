"""Emit at full speed, but never more than a bounded backlog ahead of the deliveries.

The emitting processes of the shared and django_webhook2 scenarios run this
loop. Unbounded, a full-speed emitter would take as much of the machine as
the scheduler gives it and grow the queue without end, and the figure would
say more about the scheduler than about either side. With the backlog held
to ``backlog`` messages (1,000 by default), the emitters go exactly as fast
as the worker delivers and the worker always has work: the deliveries/s
measured is what the machine sustains end to end with both on it.

What was delivered is read from the receiver's count (over HTTP, every
``check_every`` calls), not from the broker, so that the Redis commands
counted per delivery are only the service's own. ``share`` emitters split
the backlog: each lets its own calls run at most ``backlog / share`` ahead
of its share of the deliveries.

Standard library only: django-webhook2's emitter runs it in another
virtualenv.
"""

from __future__ import annotations

import time

__all__ = ["may_emit", "run_gated"]

POLL_S = 0.02  # a held emitter reads the count again after this (s): 50 requests/s at most


def may_emit(emitted: int, delivered: int, *, backlog: int, share: int) -> bool:
    """Whether one of ``share`` emitters, having made ``emitted`` calls, may make another.

    ``delivered`` counts the deliveries of every emitter; this one's part of
    them is taken as ``delivered / share``.
    """
    return emitted * share - delivered < backlog


def run_gated(emit_one, delivered, *, backlog: int, share: int, seconds: float,
              check_every: int = 20, max_calls: int = 10_000_000) -> int:
    """Call ``emit_one(i)`` as fast as the backlog allows, for ``seconds`` at most; the calls made.

    ``delivered()`` returns the deliveries so far. The loop is bounded in time
    and in calls, so an emitter stops by itself if the harness is gone.
    """
    deadline = time.monotonic() + seconds
    emitted = 0
    while emitted < max_calls and time.monotonic() < deadline:
        if emitted % check_every == 0:
            while not may_emit(emitted, delivered(), backlog=backlog, share=share):
                if time.monotonic() >= deadline:
                    return emitted
                time.sleep(POLL_S)
        emit_one(emitted)
        emitted += 1
    return emitted
