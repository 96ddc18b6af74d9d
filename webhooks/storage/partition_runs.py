"""The scheduler's run that keeps the attempts' day partitions created ahead (PostgreSQL).

Every :data:`INTERVAL_S` seconds beat sends ``webhooks.partitions`` (celeryconfig.py). The
run claims its slot (scheduled_runs.py) and, in the same transaction, creates
today's partition and those of the WEBHOOKS_PARTITION_DAYS_AHEAD (3) days after
it that are missing (storage/partitions.py). Idempotent, from any number of
schedulers: a second run of the slot is refused, and creators take turns on an
advisory lock and create only what is missing (backend ``create_partitions``).

A run that fails (the table's lock not granted within 2 s behind a long
transaction) rolls back with its claim, and its retry or the next run tries
again: a day is first asked for ``days ahead`` days before it starts. A day
that starts without its partition loses nothing: its rows go to the default
partition, stay there, and retention deletes them row by row. On SQLite the
run does nothing.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.engine import Engine

from webhooks.storage import clock, partitions, scheduled_runs
from webhooks.storage.backends import backend_of

__all__ = ["INTERVAL_S", "create_ahead"]

log = logging.getLogger("webhooks.partitions")

#: Seconds between the scheduler's runs (each day is asked for 24 times a day).
INTERVAL_S = 3600.0


def create_ahead(engine: Engine, *, days_ahead: int, now: dt.datetime | None = None,
                 slot: scheduled_runs.Slot | None = None) -> list[str]:
    """Create today's partition and the ``days_ahead`` after it where missing; the names
    created (none if ``slot`` was claimed by another run). ``now``: the database's clock."""
    wanted = partitions.ahead(now or clock.now(), days_ahead)
    with engine.begin() as connection:
        if slot is not None and not scheduled_runs.claim(connection, slot):
            return []
        created = backend_of(connection).create_partitions(connection, wanted)
    if created:
        log.info("attempts: created the partitions %s", ", ".join(created))
    return created
