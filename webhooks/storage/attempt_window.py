"""How early an attempt of a delivery can have started: the lower bound on
``attempts.started_at`` that every read of a delivery's attempts names.

An attempt starts after its delivery was created, but the two moments come
from two hosts' clocks (the one that stored the delivery, the worker that
stamped the attempt), so the bound is the creation less :data:`CLOCK_MARGIN`.
On PostgreSQL the attempts are partitioned by day of ``started_at``
(storage/partitions.py): a read by delivery that names the bound scans the days
from it on and the default partition, where one without it probed every day's
index (35 to 65 of them; docs/architecture.md, "Attempts by day"). On SQLite
there are no partitions and the condition only states what holds anyway.

Two forms: :func:`earliest_start` for a value the caller has (bound as a
parameter), :func:`started_since_creation` for a column (a subquery
correlated with its delivery).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ColumnElement

from webhooks.storage.backends.moments import earlier_by
from webhooks.storage.models import Attempt

__all__ = ["CLOCK_MARGIN", "earliest_start", "started_since_creation"]

#: How long before its delivery's creation an attempt may start, at most: two hosts'
#: clocks apart, with room to spare (a day costs a read one more partition, no more).
CLOCK_MARGIN = dt.timedelta(days=1)


def earliest_start(created_at: dt.datetime) -> dt.datetime:
    """The earliest ``started_at`` an attempt of a delivery created at ``created_at`` has."""
    return created_at - CLOCK_MARGIN


def started_since_creation(created_at) -> ColumnElement[bool]:
    """The condition that an attempt started no earlier than :func:`earliest_start` of
    ``created_at``, a timestamp column (e.g. the outer delivery's ``created_at``)."""
    return Attempt.started_at >= earlier_by(created_at, CLOCK_MARGIN)
