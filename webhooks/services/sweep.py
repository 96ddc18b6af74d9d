"""Run the sweep: what it finds (lifecycle/sweep.py) sent to the broker after its commit.

A service: the scheduler's periodic run (worker/tasks.py) and a recover's
request call it. The rule of what to send is the lifecycle's; publishing is
the broker's (broker/outbox.py), above the lifecycle, so it happens here.
"""

from __future__ import annotations

from webhooks.broker.outbox import publish_now
from webhooks.config import Settings, get_settings
from webhooks.lifecycle.sweep import sweep
from webhooks.storage import clock, scheduled_runs, waiting_counts
from webhooks.storage.db import session_scope

__all__ = ["run_sweep"]


def run_sweep(settings: Settings | None = None, slot: scheduled_runs.Slot | None = None) -> int:
    """Publish what :func:`sweep` finds; returns how many messages it sent.

    It also counts the waiting deliveries for /metrics (webhooks/storage/waiting_counts.py).

    A run beat sent for ``slot`` first claims it, in the sweep's own transaction,
    and does nothing (returns 0) if another run has it (webhooks/storage/scheduled_runs.py);
    a run without one (a recover's) always sweeps.
    """
    settings = settings or get_settings()
    with session_scope() as session:
        if slot is not None and not scheduled_runs.claim(session.connection(), slot):
            return 0
        found = sweep(
            session,
            clock.now(),  # the database's: one clock for every host's rules
            timeout=settings.timeout,
            recover_after=settings.recover_after,
            batch=settings.sweep_batch,
            max_in_flight=settings.max_in_flight,
            # Two intervals: a paced delivery still rides to its slot when one sweep is late.
            lookahead=2 * settings.sweep_interval,
            sent=slot.start if slot is not None else None,
        )
        # In the same transaction: the gauges as of this sweep, written by nothing else
        # (the hot path keeps no counter: issue 43).
        waiting_counts.refresh(session.connection())
    refused = publish_now(found)
    return len(found) - refused
