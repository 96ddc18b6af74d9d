"""Attempt statistics kept up to date as attempts are recorded, so reads never scan history.

Two small tables, both incremented in the same transaction as the attempt
row (record.py: one statement on PostgreSQL, ``count_attempt`` on SQLite):

- ``attempt_hours``: attempts per (subscription, hour, outcome), for the
  dashboard's charts and counts. A chart of 24 hours reads at most
  24 x 4 outcomes x ``SHARDS`` rows per subscription, whatever the traffic;
  retention deletes its old hours (retention.py).
- ``attempt_totals``: attempts and the sum of their durations per (outcome,
  duration bucket) since the database was created: the counters of
  ``/metrics``, at most 4 x 12 x ``SHARDS`` rows ever. Never purged.

Both spread each key over ``SHARDS`` rows (by the backend's pid): many
workers recording attempts of one subscription in the same hour would
otherwise queue for the lock on one row, each holding it until its commit
is on disk. Reads sum the shards. Measured in docs/scaling.md: without a
cap on attempts in flight, 32 threads kept 7 record statements waiting on
one row; 16 shards bring that to 0.24.
"""

from __future__ import annotations

import bisect
import datetime as dt

from sqlalchemy import case, func, insert, literal, select
from sqlalchemy.engine import Connection

from webhooks.storage.backends import backend_of
from webhooks.storage.models import Attempt, AttemptHour, AttemptTotal, Delivery

__all__ = [
    "DURATION_BUCKETS_MS",
    "SHARDS",
    "count_in_statement",
    "duration_bucket",
    "floor_hour",
    "count_attempt",
    "rebuild",
]

# Upper bounds (inclusive) of the duration histogram, in milliseconds; bucket
# index i counts durations in (bound[i-1], bound[i]], and index len() the rest.
DURATION_BUCKETS_MS = (25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000, 30000)
# Rows each key is spread over; see the module docstring and docs/scaling.md.
SHARDS = 16

hours = AttemptHour.__table__
totals = AttemptTotal.__table__



def count_in_statement(counted):
    """The two counts as data-modifying CTEs of a record's statement (PostgreSQL).

    ``counted`` is a selectable with the columns ``subscription_id``,
    ``started_at``, ``outcome``, ``duration_ms`` and ``account_id``, one row per
    attempt to count: a record's one row, read from the delivery row it moved
    (so nothing is counted when the record was not ours), or a batch's rows of
    the records that moved theirs (storage/backends/postgresql.py). Each
    connection counts in its own shard. They return no rows the caller reads: it
    attaches them to its statement (``add_cte``), and PostgreSQL runs them to
    completion whether or not anything reads them.

    The rows are locked in one order by every record, so that two never wait for
    each other (two batches, or a batch and a single record, whose backends' pids
    share a shard deadlocked, docs/reliability.md): each table's rows are
    grouped by their key (one upsert may not touch a row twice) and upserted in
    the order of that key, which PostgreSQL follows (an INSERT … SELECT … ORDER
    BY checks and locks its conflicting rows in the order they come); and every
    row of ``attempt_hours`` before any of ``attempt_totals``: the totals' rows
    are selected only once the hours' upsert has returned all of its own.
    """
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    c = counted.c
    shard = func.mod(func.pg_backend_pid(), SHARDS)
    hour = func.date_trunc("hour", c.started_at)
    hour_rows = (select(c.subscription_id, hour, c.outcome, shard, c.account_id, func.count())
                 .group_by(c.subscription_id, hour, c.outcome, c.account_id)
                 .order_by(c.subscription_id, hour, c.outcome))
    by_hour = pg_insert(hours).from_select(
        ["subscription_id", "hour_start", "outcome", "shard", "account_id", "attempts"], hour_rows)
    by_hour = by_hour.on_conflict_do_update(
        index_elements=["subscription_id", "hour_start", "outcome", "shard"],
        set_={"attempts": hours.c.attempts + by_hour.excluded.attempts},
    ).returning(hours.c.shard).cte("hour_counted")
    hours_done = select(func.count()).select_from(by_hour).scalar_subquery() > 0
    bucket = _bucket_expression(c.duration_ms)
    total_rows = (select(c.outcome, bucket, shard, func.count(), func.sum(c.duration_ms))
                  .where(hours_done)
                  .group_by(c.outcome, bucket).order_by(c.outcome, bucket))
    by_total = pg_insert(totals).from_select(
        ["outcome", "duration_bucket", "shard", "attempts", "duration_ms"], total_rows)
    by_total = by_total.on_conflict_do_update(
        index_elements=["outcome", "duration_bucket", "shard"],
        set_={"attempts": totals.c.attempts + by_total.excluded.attempts,
              "duration_ms": totals.c.duration_ms + by_total.excluded.duration_ms},
    ).cte("total_counted")
    return by_hour, by_total


def duration_bucket(duration_ms: int) -> int:
    """The histogram bucket of a duration in ms: the index of the first bound at or above it."""
    return bisect.bisect_left(DURATION_BUCKETS_MS, duration_ms)


def floor_hour(moment: dt.datetime) -> dt.datetime:
    """``moment`` (aware) cut down to the start of its hour, in UTC."""
    if moment.tzinfo is None:
        raise ValueError("an aware datetime is needed")
    return moment.astimezone(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)


def _upsert(connection: Connection, table, values: dict, key: tuple[str, ...], increments: dict):
    """INSERT ``values``, or add ``increments`` to the row with the same ``key``."""
    connection.execute(backend_of(connection).upsert_adding(table, values, key, tuple(increments)))


def count_attempt(connection: Connection, *, delivery_id: str, subscription_id: str,
                  started_at: dt.datetime, outcome: str, duration_ms: int) -> None:
    """Count one recorded attempt in both tables (the portable path, and tests' own rows).

    PostgreSQL's record statement does the same (count_in_statement); this is
    for SQLite and for rows written outside record.py.
    """
    account_id = connection.scalar(select(Delivery.account_id).where(Delivery.id == delivery_id))
    _upsert(
        connection, hours,
        dict(subscription_id=subscription_id, hour_start=floor_hour(started_at), outcome=outcome,
             shard=0, account_id=account_id, attempts=1),
        ("subscription_id", "hour_start", "outcome", "shard"), ("attempts",),
    )
    _upsert(
        connection, totals,
        dict(outcome=outcome, duration_bucket=duration_bucket(duration_ms), shard=0, attempts=1,
             duration_ms=duration_ms),
        ("outcome", "duration_bucket", "shard"), ("attempts", "duration_ms"),
    )


def _bucket_expression(duration):
    """duration_bucket() as SQL on either database: a CASE over the bounds."""
    return case(
        *[(duration <= bound, index) for index, bound in enumerate(DURATION_BUCKETS_MS)],
        else_=len(DURATION_BUCKETS_MS),
    )




def rebuild(connection: Connection) -> tuple[int, int]:
    """Recount both tables from the attempts table (after a bulk load); returns their row counts.

    One ``INSERT ... SELECT ... GROUP BY`` each: seconds for millions of
    attempts. Writers must be stopped, or their counts in between are lost.
    """
    connection.execute(hours.delete())
    connection.execute(totals.delete())
    hour = backend_of(connection).hour_of(Attempt.started_at)
    by_hour = (
        select(Delivery.subscription_id, hour, Attempt.outcome, literal(0), Delivery.account_id,
               func.count())
        .join(Delivery, Delivery.id == Attempt.delivery_id)
        .group_by(Delivery.subscription_id, hour, Attempt.outcome, Delivery.account_id)
    )
    connection.execute(insert(hours).from_select(
        ["subscription_id", "hour_start", "outcome", "shard", "account_id", "attempts"], by_hour))
    bucket = _bucket_expression(Attempt.duration_ms)
    by_bucket = (
        select(Attempt.outcome, bucket, literal(0), func.count(), func.sum(Attempt.duration_ms))
        .group_by(Attempt.outcome, bucket)
    )
    connection.execute(insert(totals).from_select(
        ["outcome", "duration_bucket", "shard", "attempts", "duration_ms"], by_bucket))
    return (connection.scalar(select(func.count()).select_from(hours)),
            connection.scalar(select(func.count()).select_from(totals)))
