"""The attempts table's day partitions on PostgreSQL: create them ahead, list them, drop one.

Every statement runs in the caller's transaction, with a short
``lock_timeout``: creating or dropping a partition takes an ACCESS EXCLUSIVE
lock on ``attempts`` (and its default partition) for an instant, and waiting
behind a long transaction would queue every record of an attempt behind it.
A statement that times out raises; the next scheduled run tries again.
"""

from __future__ import annotations

import logging

from sqlalchemy import String, any_, cast, column, func, insert, select, table, text
from sqlalchemy.dialects.postgresql import ARRAY

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


#: The keys and index of ``attempts`` (migration 0029), built on a table of kept rows after
#: its copy: one sorted build each costs less than an index entry per row copied. ATTACH
#: takes an index that matches the parent's as that partition's; were one missing (a later
#: migration's index), ATTACH would build it: slower, still right.
_KEPT_KEYS = ("ADD PRIMARY KEY (id, started_at)", "ADD UNIQUE (delivery_id, number, started_at)")
_KEPT_INDEXES = ("started_at",)


def drop(connection, partition: Partition, keep) -> tuple[int, int]:
    """Drop ``partition`` whole, keeping the rows whose ``delivery_id`` is in ``keep`` (a
    SELECT of delivery ids); (rows dropped, rows kept).

    The rows kept are copied into a new table, ``attempts_kYYYYMMDD`` (if any are
    kept), its keys built and a CHECK of the day's bounds added, all before any lock
    that stops the service: the copy reads the day (nothing writes a day a month
    old). Then the day is dropped and the kept table attached for the day's range:
    the CHECK spares ATTACH its scan of the rows, its keys are taken as they are,
    and its foreign key is checked in one query. All of it is the caller's one
    transaction: a process that dies anywhere in between leaves the day as it was
    (PostgreSQL's DDL is transactional), and the next run starts again.

    Dropped (not detached first): DETACH locks ``deliveries`` ACCESS EXCLUSIVE (the
    day's foreign key becomes a table's own, with triggers on ``deliveries``), which
    would stop every read of a delivery until the commit; DROP and ATTACH take
    SHARE ROW EXCLUSIVE there (writes wait, for the check of the foreign key).
    """
    _lock_timeout(connection)  # a second purge dropping the same day waits 2 s, then fails
    kept_name = partitions.kept_name(partition)
    kept = _copy_kept(connection, partition, kept_name, keep)
    rows = connection.execute(text(f"SELECT count(*) FROM {partition.name}")).scalar()
    connection.execute(text(f"DROP TABLE {partition.name}"))
    if kept:
        _attach(connection, partition, kept_name)
    else:
        connection.execute(text(f"DROP TABLE {kept_name}"))
    return rows - kept, kept


def in_one_array(column, ids):
    """``column = ANY(array)`` with ``ids`` (a one-column SELECT of strings) read once into
    that array: the plan probes ``column``'s index per value, whatever PostgreSQL guesses of
    how many rows ``ids`` gives. As a join or ``IN (SELECT ...)`` the plan hung on that
    guess: a day scanned whole to find 120 k kept rows, and every delivery scanned when a
    table of a few accounts that autovacuum never analysed was guessed at 110."""
    listed = ids.subquery()
    return column == any_(cast(select(func.array_agg(listed.c[0])).scalar_subquery(),
                               ARRAY(String)))


def _copy_kept(connection, partition: Partition, kept_name: str, keep) -> int:
    """Copy the rows of ``partition`` kept (delivery ids in ``keep``) into a new table
    ``kept_name`` with the keys and index of ``attempts`` and a CHECK of the day's
    bounds; the rows copied. The day's rows are found through its unique key by
    ``delivery_id`` (:func:`in_one_array`: an index probe per kept delivery, so the cost
    grows with the rows kept, not with the day)."""
    connection.execute(text(
        f"CREATE TABLE {kept_name} (LIKE {partitions.TABLE} INCLUDING DEFAULTS)"))
    day, into = (table(name, *[column(c) for c in _COLUMNS])
                 for name in (partition.name, kept_name))
    kept = connection.execute(insert(into).from_select(
        _COLUMNS, select(*day.c).where(in_one_array(day.c.delivery_id, keep)))).rowcount
    if kept:
        for key in _KEPT_KEYS:
            connection.execute(text(f"ALTER TABLE {kept_name} {key}"))
        for columns in _KEPT_INDEXES:
            connection.execute(text(f"CREATE INDEX ON {kept_name} ({columns})"))
        connection.execute(text(
            f"ALTER TABLE {kept_name} ADD CONSTRAINT {kept_name}_bounds CHECK "
            f"(started_at >= '{partition.start.isoformat()}' "
            f"AND started_at < '{partition.end.isoformat()}')"))
    return kept


def _attach(connection, partition: Partition, kept_name: str) -> None:
    """Attach the table of kept rows for ``partition``'s range, then drop its CHECK (the
    partition's bound says the same from then on)."""
    connection.execute(text(
        f"ALTER TABLE {partitions.TABLE} ATTACH PARTITION {kept_name} FOR VALUES "
        f"FROM ('{partition.start.isoformat()}') TO ('{partition.end.isoformat()}')"))
    connection.execute(text(f"ALTER TABLE {kept_name} DROP CONSTRAINT {kept_name}_bounds"))


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
