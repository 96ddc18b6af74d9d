"""Beat's schedule of the periodic tasks: once per slot of the database's clock, naming the slot.

A periodic task's interval cuts the database's time into slots, ``[k * interval,
(k + 1) * interval)`` seconds since the Unix epoch. Beat sends the task once as
each slot starts (a few milliseconds after), and the message names the slot's
start (``slot=``, added by ``PrivateScheduler`` in webhooks/broker/celery_app.py).
The run claims that slot in the database before it works
(webhooks/storage/scheduled_runs.py; a run that starts after its slot ended
claims the slot of now instead) and does nothing if another run has it. So
a restarted beat, which sends the current slot's run again at once (its
schedule file, synced every 3 minutes, is older than its last run), or a
second beat started by mistake, costs a refused claim, not a second run.

Why slots of the database's clock: every beat host then names the same slot
for the same moment, whatever its own clock says (webhooks/storage/clock.py).
Why at the start of each slot: Celery's own interval schedule counts from the
last run, which drifts by the lateness of each tick, so now and then one slot
would get two sends and its neighbour none.
"""

from __future__ import annotations

import datetime as dt

from celery.schedules import schedstate, schedule

from webhooks.storage import clock
from webhooks.storage.scheduled_runs import slot_start  # the runs claim the same slots

__all__ = ["SlotSchedule", "slot_start", "SLOT_MARGIN_S"]

# Beat wakes this long after a slot starts (s). Celery wakes 10 ms before the time it
# was given; were it to wake before the slot, the run would name the slot before it.
SLOT_MARGIN_S = 0.02


class SlotSchedule(schedule):
    """Due once in each slot of ``run_every`` of the database's clock, at its start.

    ``nowfun`` (tests) replaces the database's clock.
    """

    def __init__(self, run_every, relative: bool = False, nowfun=None, app=None):
        super().__init__(run_every, relative=False, nowfun=nowfun or clock.now, app=app)

    def slot_of(self, moment: dt.datetime) -> dt.datetime:
        """The start of the slot that holds ``moment``."""
        return slot_start(self.maybe_make_aware(moment), self.seconds)

    def is_due(self, last_run_at: dt.datetime) -> schedstate:
        """Due when the last run was sent in another slot than now's (also one ahead: a
        run sent by a beat whose clock was ahead); checked again just after the next
        slot starts."""
        now = self.now()
        current = slot_start(now, self.seconds)
        last = self.slot_of(last_run_at)
        until_next = (current + self.run_every - now).total_seconds()
        return schedstate(is_due=last != current, next=until_next + SLOT_MARGIN_S)

    def remaining_estimate(self, last_run_at: dt.datetime) -> dt.timedelta:
        due, next_check = self.is_due(last_run_at)
        return dt.timedelta(0) if due else dt.timedelta(seconds=next_check)

    def __reduce__(self):
        # Beat's schedule file keeps Celery's own interval class, not this one: a release
        # without this module (a rollback) can still open the file. Beat replaces a stored
        # schedule with celeryconfig's at start, so nothing is lost.
        return schedule, (self.run_every,)

    def __repr__(self) -> str:
        return f"<slot: {self.human_seconds}>"
