"""Deliveries not finished, counted by the sweep: the waiting gauges of /metrics.

How many deliveries are ``pending``, ``sending`` and ``paused``. Each sweep
(every ``WEBHOOKS_SWEEP_INTERVAL``, 5 s by default) counts them on index
ranges of the unfinished deliveries only (pending and sending on their
partial indexes, paused on the list index once per account) and writes the
three numbers into row 0 of ``waiting_counts`` (:func:`refresh`); a scrape
reads that row (:func:`read`), so it costs the same whatever the history and
the backlog, and shows the counts as of the last sweep. A count costs what
the backlog holds: about 9 ms at 60,000 pending deliveries (docs/scaling.md).

Until issue 43 triggers on ``deliveries`` (migration 0008) kept these counts
exact at every commit. They ran in every emit, claim and record: measured in
docs/performance.md ("Issue 43"), 0.35 to 0.39 ms of PostgreSQL CPU per
attempt and 0.38 KB of WAL per delivery. Migration 0028 drops them.
"""

from __future__ import annotations

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from webhooks.states import DeliveryStatus
from webhooks.storage.models import Account, Delivery, WaitingCount

__all__ = ["WAITING", "read", "refresh"]

#: The statuses counted, in the table's column order.
WAITING = (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value,
           DeliveryStatus.PAUSED.value)

counts = WaitingCount.__table__


def _count(status: str, *where):
    return (select(func.count()).select_from(Delivery)
            .where(Delivery.status == status, *where).scalar_subquery())


# Pending and sending on their partial indexes; paused on the list index
# (account_id, status, ...) once per account, as no partial index holds paused rows.
_COUNTED = {
    DeliveryStatus.PENDING.value: _count(DeliveryStatus.PENDING.value),
    DeliveryStatus.SENDING.value: _count(DeliveryStatus.SENDING.value),
    DeliveryStatus.PAUSED.value: select(func.coalesce(func.sum(
        _count(DeliveryStatus.PAUSED.value, Delivery.account_id == Account.id)), 0))
    .select_from(Account).scalar_subquery(),
}


def read(connection: Connection) -> dict[str, int]:
    """{status: deliveries} for pending, sending and paused, as the last sweep counted them
    (0 before the first): a sum over a row or two."""
    sums = (func.coalesce(func.sum(counts.c[status]), 0) for status in WAITING)
    row = connection.execute(select(*sums)).one()
    return {status: int(value) for status, value in zip(WAITING, row)}


def refresh(connection: Connection) -> dict[str, int]:
    """Count the waiting deliveries now and keep the counts in row 0 (the sweep, in its
    transaction); returns them.

    Rows other than 0 were written by the triggers of migrations 0008 to 0027
    and are dropped. Two first-ever refreshes at once may both find no row 0:
    the later one's INSERT then fails its sweep's transaction, and the next
    sweep updates the row.
    """
    connection.execute(delete(counts).where(counts.c.backend != 0))
    updated = connection.execute(update(counts).where(counts.c.backend == 0).values(_COUNTED))
    if updated.rowcount == 0:
        connection.execute(insert(counts).values(backend=0, **_COUNTED))
    return read(connection)
