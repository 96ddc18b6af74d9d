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



def count_in_statement(moved, *, subscription_id, started_at, outcome, duration_ms):
    """The two counts as data-modifying CTEs of record.py's one statement (PostgreSQL).

    They read ``moved`` (the delivery row the record moved, with its
    account_id), so nothing is counted when the record was not ours; each
    connection counts in its own shard. They return no rows: the caller
    attaches them to its statement (``add_cte``), and PostgreSQL runs them
    to completion whether or not anything reads them.
    """
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    shard = func.mod(func.pg_backend_pid(), SHARDS)
    hour_rows = select(subscription_id, func.date_trunc("hour", started_at), outcome, shard,
                       moved.c.account_id, literal(1)).select_from(moved)
    by_hour = pg_insert(hours).from_select(
        ["subscription_id", "hour_start", "outcome", "shard", "account_id", "attempts"], hour_rows)
    by_hour = by_hour.on_conflict_do_update(
        index_elements=["subscription_id", "hour_start", "outcome", "shard"],
        set_={"attempts": hours.c.attempts + 1},
    ).cte("hour_counted")
    total_rows = select(outcome, _bucket_expression(duration_ms), shard, literal(1),
                        duration_ms).select_from(moved)
    by_total = pg_insert(totals).from_select(
        ["outcome", "duration_bucket", "shard", "attempts", "duration_ms"], total_rows)
    by_total = by_total.on_conflict_do_update(
        index_elements=["outcome", "duration_bucket", "shard"],
        set_={"attempts": totals.c.attempts + 1,
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
