"""The attempts table's day partitions on PostgreSQL: create them ahead, list them, drop one.

Every statement runs in the caller's transaction, with a short
``lock_timeout``: creating or dropping a partition takes an ACCESS EXCLUSIVE
lock on ``attempts`` (and its default partition) for an instant, and waiting
behind a long transaction would queue every record of an attempt behind it.
A statement that times out raises; the next scheduled run tries again.
"""

from __future__ import annotations

import logging

from sqlalchemy import column, func, insert, select, table, text

from webhooks.storage import partitions
from webhooks.storage.models import Attempt
from webhooks.storage.partitions import Partition

__all__ = ["create", "day_partitions", "drop"]

log = logging.getLogger("webhooks.partitions")

#: How long a partition's DDL waits for the table's lock before it gives up (ms).
LOCK_TIMEOUT_MS = 2000

_attempts = Attempt.__table__
_COLUMNS = [c.name for c in _attempts.columns]


def _lock_timeout(connection) -> None:
    connection.execute(text(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"))


def day_partitions(connection) -> list[Partition]:
    """The day partitions ``attempts`` has now, oldest first."""
    names = connection.execute(text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(:parent)"), {"parent": partitions.TABLE}).scalars()
    return sorted(p for p in map(partitions.parse, names) if p is not None)


def _default_holds(connection, partition: Partition) -> bool:
    """True if the default partition holds rows of ``partition``'s range (then that range
    cannot become a partition: PostgreSQL refuses, and the rows stay where they are)."""
    return connection.execute(text(
        f"SELECT EXISTS (SELECT 1 FROM {partitions.DEFAULT} "
        "WHERE started_at >= :start AND started_at < :end)"),
        {"start": partition.start, "end": partition.end}).scalar()


def create(connection, wanted: list[Partition]) -> list[str]:
    """Create those of ``wanted`` that do not exist; the names created.

    An advisory lock held to the transaction's end makes concurrent creators
    (several schedulers, a migration) take turns, so each day is created once
    and nobody fails on a name another has just taken.
    """
    connection.execute(select(func.pg_advisory_xact_lock(partitions.LOCK_KEY)))
    existing = {p.name for p in day_partitions(connection)}
    missing = [p for p in wanted if p.name not in existing]
    if not missing:
        return []
    _lock_timeout(connection)
    created = []
    for partition in missing:
        if _default_holds(connection, partition):
            log.warning("attempts: the default partition holds rows of %s; that day stays "
                        "in it", partition.start.date().isoformat())
            continue
        connection.execute(text(
            f"CREATE TABLE {partition.name} PARTITION OF {partitions.TABLE} "
            f"FOR VALUES FROM ('{partition.start.isoformat()}') TO ('{partition.end.isoformat()}')"))
        created.append(partition.name)
    return created


def drop(connection, partition: Partition, keep) -> tuple[int, int]:
    """Drop ``partition`` whole, after moving into the default partition the rows whose
    ``delivery_id`` is in ``keep`` (a SELECT of delivery ids); (rows dropped, rows kept).

    Detached first, its range is no partition's: the kept rows, inserted again,
    land in the default partition. Costs a count of the partition and an index
    look-up per kept delivery, not a DELETE per row.
    """
    _lock_timeout(connection)
    connection.execute(text(
        f"ALTER TABLE {partitions.TABLE} DETACH PARTITION {partition.name}"))
    rows = connection.execute(text(f"SELECT count(*) FROM {partition.name}")).scalar()
    detached = table(partition.name, *[column(name) for name in _COLUMNS])
    kept = connection.execute(insert(_attempts).from_select(
        _COLUMNS, select(*detached.c).where(detached.c.delivery_id.in_(keep)))).rowcount
    connection.execute(text(f"DROP TABLE {partition.name}"))
    return rows - kept, kept
