"""One run of each periodic task per slot of its interval, whatever beat sends.

Beat names the slot a periodic run is for (webhooks/broker/slots.py). Before
it works, the run claims ``(task, slot start)`` in ``scheduled_runs``, in the
caller's transaction, with one statement on both engines (the backend's
``claim_row``): the first claim inserts the row; a later one for the same slot
(beat restarted and sent the slot again, or a second beat runs) finds it, adds
one to its ``refused`` and does nothing. A retry of the run that has the slot
(the same Celery task id, ``run_id``) keeps its claim. On PostgreSQL a claim
made while another transaction's claim of the slot is uncommitted waits for it:
refused if it commits, claimed if it rolls back (the sweep claims in its own
transaction, so a sweep that failed leaves its slot to the next send).

A run that starts after its slot has ended, by the database's clock (it
waited in the queue behind a backlog, or on a slow machine), claims the slot
that holds now instead of its own: it runs unless a run has been made in
that slot already. So a slow machine delays the sweep's recovery and never
cancels it, and a queue of late runs makes one run per slot of their arrival,
never a pile of them (each slot's own run, arriving after a late one took its
slot, is refused). Lateness is judged by the database's clock: Celery's
``expires``, judged by each worker's own, dropped every run on a worker whose
clock was ahead.

Only beat's runs claim: a sweep asked for by a recover names no slot and
always runs. Each claim also deletes its task's rows older than :data:`KEEP`.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from webhooks.storage import clock
from webhooks.storage.backends import backend_of
from webhooks.storage.models import ScheduledRun

__all__ = ["Slot", "claim", "slot_start", "KEEP"]

log = logging.getLogger("webhooks.scheduled")

#: How long a run's row is kept (what an operator can look back on).
KEEP = dt.timedelta(days=1)
_runs = ScheduledRun.__table__
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICROSECOND = dt.timedelta(microseconds=1)


def slot_start(moment: dt.datetime, seconds: float) -> dt.datetime:
    """The start of the slot of ``seconds`` that holds ``moment`` (an aware datetime):
    slots are ``[k * seconds, (k + 1) * seconds)`` since the Unix epoch.

    In whole microseconds, so every process computes the very same start.
    """
    length = max(1, round(seconds * 1_000_000))
    elapsed = (moment - _EPOCH) // _MICROSECOND
    return _EPOCH + (elapsed - elapsed % length) * _MICROSECOND


@dataclass(frozen=True)
class Slot:
    """A beat-sent run: its task's name, the start of its slot, its Celery task id, and
    the slot's length (s: the task's interval)."""

    task: str
    start: dt.datetime
    run_id: str
    seconds: float

    @property
    def end(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=self.seconds)

    @classmethod
    def sent(cls, task: str, slot: str | None, run_id: str, seconds: float) -> "Slot | None":
        """The slot a message names (``slot``: ISO 8601, from beat), or None when it names
        none (a sweep asked for by a recover, or a message of an older beat)."""
        if not slot:
            return None
        start = dt.datetime.fromisoformat(slot)
        if start.tzinfo is None:
            start = start.replace(tzinfo=dt.timezone.utc)
        return cls(task, start, run_id, seconds)

    def holding(self, moment: dt.datetime) -> "Slot":
        """The slot of this task that holds ``moment``, for this run."""
        return Slot(self.task, slot_start(moment, self.seconds), self.run_id, self.seconds)


def claim(connection: Connection, slot: Slot) -> bool:
    """Claim ``slot`` (or, once it has ended, the slot that holds now) in the caller's
    transaction; True if this run has it and may work."""
    now = clock.now()
    if now >= slot.end:
        late, slot = slot, slot.holding(now)
        # INFO: what an operator looks for when the workers fall behind (the cluster's
        # checker counts these lines).
        log.info("%s: the run of slot %s (%s) starts %.1f s after its slot ended; it claims "
                 "the slot of now, %s, instead", slot.task, late.start.isoformat(), slot.run_id,
                 (now - late.end).total_seconds(), slot.start.isoformat())
    values = {"task": slot.task, "slot_start": slot.start, "run_id": slot.run_id,
              "claimed_at": now, "refused": 0}
    statement = backend_of(connection).claim_row(_runs, values, key=("task", "slot_start"),
                                                 owner="run_id", refused="refused")
    owner = connection.execute(statement).scalar_one()
    if owner != slot.run_id:
        # INFO: rare (a beat restarted or doubled, or late runs queued up), and what an
        # operator looks for then.
        log.info("%s: the run of slot %s was made already (by %s); this one (%s) does nothing",
                 slot.task, slot.start.isoformat(), owner, slot.run_id)
        return False
    connection.execute(delete(_runs).where(_runs.c.task == slot.task,
                                           _runs.c.slot_start < slot.start - KEEP))
    log.debug("%s: run %s has slot %s", slot.task, slot.run_id, slot.start.isoformat())
    return True
