"""The attempts table's daily range partitions (PostgreSQL): their names and their bounds.

On PostgreSQL ``attempts`` is partitioned by range of ``started_at`` (migration
0029): one partition per UTC day, ``attempts_pYYYYMMDD`` holding
``[day 00:00, next day 00:00)``, and ``attempts_default`` for any row no day
partition takes (days before the upgrade's window, a day nobody created ahead).
When retention drops a day, the rows its rule keeps (attempts of unfinished or
replayed deliveries) stay in ``attempts_kYYYYMMDD``, the same day's range,
which retention drops once the batches have emptied it. The scheduler creates
the days ahead (:func:`ahead`, WEBHOOKS_PARTITION_DAYS_AHEAD); retention drops
a day whole once it is wholly older than its cut-off (lifecycle/retention.py).
The backends run the DDL (``Backend.create_partitions``, ``day_partitions``,
``drop_partition``); SQLite keeps the plain table and has none.

Times are naive UTC, as the column stores them.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

__all__ = ["Partition", "TABLE", "DEFAULT", "WIDTH", "PREFIX", "day_of", "ahead", "parse",
           "holding", "naive_utc", "kept_name", "is_kept", "KEPT_PREFIX", "LOCK_KEY", "comparison_options"]

TABLE = "attempts"
DEFAULT = "attempts_default"
PREFIX = "attempts_p"
#: Each partition's width: one UTC day.
WIDTH = dt.timedelta(days=1)
#: pg_advisory_xact_lock key taken by whoever creates partitions ("whparts" as a number):
#: any number of schedulers then create each day once.
LOCK_KEY = 0x77687061727473
KEPT_PREFIX = "attempts_k"
_NAME = re.compile(r"^attempts_p(\d{8})$")
_KEPT = re.compile(r"^attempts_k\d{8}$")


@dataclass(frozen=True, order=True)
class Partition:
    """One day of attempts: its table's name, its first moment and its end (exclusive)."""

    start: dt.datetime
    end: dt.datetime
    name: str


def naive_utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` as the column stores it: UTC without a time zone."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return moment


def day_of(day: dt.date) -> Partition:
    """The partition of UTC ``day``."""
    start = dt.datetime(day.year, day.month, day.day)
    return Partition(start, start + WIDTH, f"{PREFIX}{day:%Y%m%d}")


def ahead(now: dt.datetime, days: int) -> list[Partition]:
    """Today's partition and the ``days`` after it (what the scheduler keeps created)."""
    today = naive_utc(now).date()
    return [day_of(today + dt.timedelta(days=offset)) for offset in range(days + 1)]


def parse(name: str) -> Partition | None:
    """The day partition a table's name stands for; None for any other name (the default)."""
    match = _NAME.match(name)
    if not match:
        return None
    return day_of(dt.datetime.strptime(match.group(1), "%Y%m%d").date())


def kept_name(partition: Partition) -> str:
    """The table that keeps the rows retention keeps of ``partition``'s day."""
    return KEPT_PREFIX + partition.name[len(PREFIX):]


def is_kept(name: str) -> bool:
    """True for a table of kept rows (:func:`kept_name`)."""
    return _KEPT.match(name) is not None


def holding(partitions: list[Partition], moment: dt.datetime) -> Partition | None:
    """The partition among ``partitions`` whose range holds ``moment`` (None: the default's)."""
    moment = naive_utc(moment)
    for partition in partitions:
        if partition.start <= moment < partition.end:
            return partition
    return None


def comparison_options(dialect: str) -> dict:
    """Alembic's options to compare a database with the models (autogenerate, the schema
    test): a partition of ``attempts`` is not a table of the models, and a constraint the
    models declare for the other engine only (``ddl_if``) is not expected on this one."""

    def include_name(name, type_, _parent_names) -> bool:
        return not (type_ == "table" and name is not None
                    and (name == DEFAULT or parse(name) is not None or is_kept(name)))

    def include_object(obj, _name, _type, reflected, _compare_to) -> bool:
        only = getattr(obj, "_ddl_if", None)
        return reflected or only is None or only.dialect in (None, dialect)

    return {"include_name": include_name, "include_object": include_object}
