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

__all__ = ["create", "day_partitions", "drop", "drop_emptied"]

log = logging.getLogger("webhooks.partitions")

#: How long a partition's DDL waits for the table's lock before it gives up (ms).
LOCK_TIMEOUT_MS = 2000

_COLUMNS = [c.name for c in Attempt.__table__.columns]


def _lock_timeout(connection) -> None:
    connection.execute(text(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}"))


def _children(connection) -> list[str]:
    """The names of the partitions of ``attempts``."""
    return list(connection.execute(text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(:parent)"), {"parent": partitions.TABLE}).scalars())


def day_partitions(connection) -> list[Partition]:
    """The day partitions ``attempts`` has now, oldest first."""
    return sorted(p for p in map(partitions.parse, _children(connection)) if p is not None)


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
    """Drop ``partition`` whole, keeping the rows whose ``delivery_id`` is in ``keep`` (a
    SELECT of delivery ids); (rows dropped, rows kept).

    Detached, its rows kept are copied into a new table, ``attempts_kYYYYMMDD``,
    which is attached for the same day's range (if any were kept), and the day
    dropped. The copy goes into a table without keys or triggers; attaching it
    builds its keys and checks its foreign key in one query each: moving a
    hundred thousand kept rows into the default partition instead, a check of
    the foreign key per row, took 7 of the 8 s of a day of 2 M events.
    """
    _lock_timeout(connection)
    connection.execute(text(
        f"ALTER TABLE {partitions.TABLE} DETACH PARTITION {partition.name}"))
    rows = connection.execute(text(f"SELECT count(*) FROM {partition.name}")).scalar()
    kept_name = partitions.kept_name(partition)
    connection.execute(text(
        f"CREATE TABLE {kept_name} (LIKE {partitions.TABLE} INCLUDING DEFAULTS)"))
    detached, into = (table(name, *[column(c) for c in _COLUMNS])
                      for name in (partition.name, kept_name))
    kept = connection.execute(insert(into).from_select(
        _COLUMNS, select(*detached.c).where(detached.c.delivery_id.in_(keep)))).rowcount
    connection.execute(text(f"DROP TABLE {partition.name}"))
    if kept:
        connection.execute(text(
            f"ALTER TABLE {partitions.TABLE} ATTACH PARTITION {kept_name} FOR VALUES "
            f"FROM ('{partition.start.isoformat()}') TO ('{partition.end.isoformat()}')"))
    else:
        connection.execute(text(f"DROP TABLE {kept_name}"))
    return rows - kept, kept


def drop_emptied(connection) -> list[str]:
    """Drop the tables of kept rows that the batches have emptied since (their deliveries
    finished and went); the names dropped."""
    emptied = [name for name in _children(connection) if partitions.is_kept(name)
               and not connection.execute(text(f"SELECT EXISTS (SELECT 1 FROM {name})")).scalar()]
    if emptied:
        _lock_timeout(connection)
    for name in emptied:
        connection.execute(text(f"DROP TABLE {name}"))
    return emptied
