"""The Celery app of every process, its task and queue names, and beat's private schedule.

Nothing here publishes: every message goes through webhooks/broker/outbox.py.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

from celery import Celery
from celery.beat import PersistentScheduler

from webhooks.broker.slots import SlotSchedule
from webhooks.config import get_settings
from webhooks.config.datadir import private_dir, private_file, private_umask

__all__ = ["celery_app", "get_app", "DELIVER_TASK", "SWEEP_TASK", "PURGE_TASK", "RELEASE_TASK",
           "PARTITIONS_TASK",
           "DELIVERY_QUEUE", "MAINTENANCE_QUEUE", "COUNTDOWN_QUEUE", "PrivateScheduler"]

DELIVER_TASK = "webhooks.deliver"
SWEEP_TASK = "webhooks.sweep"
PURGE_TASK = "webhooks.purge"
PARTITIONS_TASK = "webhooks.partitions"  # attempts' day partitions ahead (storage/partition_runs.py)
RELEASE_TASK = "webhooks.release"  # what a resume released, batch by batch (lifecycle/release.py)
# Deliveries and the sweep go through the first queue; the purge through the second, so a
# backlog of deliveries never holds the purge back; deliver messages with a countdown (a
# retry, or a wait for a rate's slot) through the third, so that a backlog in the first
# does not make them late. Every worker takes all three (worker/__init__.py).
DELIVERY_QUEUE = "webhooks"
MAINTENANCE_QUEUE = "webhooks.maintenance"
COUNTDOWN_QUEUE = "webhooks.countdown"


_app_lock = threading.Lock()


def get_app() -> Celery:
    """This process's Celery app, configured from celeryconfig (the settings) on first use.

    ``celery_app.celery_app`` (this module's attribute) is the same object; nothing is built, and no folder
    made, until something publishes or a worker starts.
    """
    app = globals().get("celery_app")  # set once built, or replaced by a test
    if app is None:
        with _app_lock:
            app = globals().get("celery_app")
            if app is None:
                app = globals()["celery_app"] = _make_app()
    return app


def __getattr__(name: str):
    if name == "celery_app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_app() -> Celery:
    settings = get_settings()
    if settings.is_embedded_broker:
        for folder in (settings.data_dir, settings.broker_folder, settings.broker_folder / "control"):
            private_dir(folder)
    app = Celery("webhooks")
    app.config_from_object("celeryconfig")
    return app


class PrivateScheduler(PersistentScheduler):
    """beat's shelve schedule, created mode 0600 in a folder of mode 0700 (webhooks/config/datadir.py);
    each run of a slot schedule names its slot.

    shelve offers no mode argument, so the file is opened under umask 077
    (beat opens it once, at start, before it sends anything).
    """

    _entries = None

    # The entries are held here between syncs. shelve's writeback re-reads them from the
    # file after each sync, and the file holds Celery's own classes only (a slot schedule
    # is stored as Celery's interval, so that a rollback's beat can open it): re-read,
    # they would no longer be slot schedules.
    def get_schedule(self):
        if self._entries is None:
            self._entries = self._store["entries"]
        return self._entries

    def set_schedule(self, schedule):
        self._entries = self._store["entries"] = schedule

    schedule = property(get_schedule, set_schedule)

    def sync(self):
        if self._store is not None and self._entries is not None:
            self._store["entries"] = self._entries
        super().sync()

    def close(self):
        try:
            super().close()
        finally:
            self._entries = None  # beat closes twice when stopped: the file is closed now

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        """Send ``entry``'s task; one on a :class:`~webhooks.broker.slots.SlotSchedule` gets
        the start of the slot it runs for as its ``slot`` argument (an ISO 8601 time).

        The slot is that of the time beat recorded as this run's (``last_run_at`` of the
        entry it stored when it decided to send, ``tick`` before this call), which decides
        the next send: read from the clock again here, just before a slot starts, it
        could name the next slot, which would then be sent twice. The argument goes on a
        copy: the stored entry (and so the schedule file) keeps celeryconfig's arguments.
        """
        entry = self.reserve(entry) if advance else entry
        if isinstance(entry.schedule, SlotSchedule):
            recorded = self.schedule[entry.name].last_run_at
            entry = copy.copy(entry)
            entry.kwargs = {**entry.kwargs,
                            "slot": entry.schedule.slot_of(recorded).isoformat()}
        return super().apply_async(entry, producer, advance=False, **kwargs)

    def _open_schedule(self):
        path = Path(self.schedule_filename)
        private_dir(path.parent)
        for suffix in self.known_suffixes:  # a schedule made by an older version
            private_file(path.with_name(path.name + suffix))
        with private_umask():
            return super()._open_schedule()
