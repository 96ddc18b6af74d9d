"""Deliveries not finished, counted when they are read: the waiting gauges of /metrics.

How many deliveries are ``pending``, ``sending`` and ``paused``, counted on
index ranges of the unfinished deliveries only (pending and sending on their
partial indexes, paused on the list index once per account), so a scrape
costs what the backlog holds, never the history: about 9 ms for 60,000
pending deliveries (docs/scaling.md).

Until issue 43 triggers on ``deliveries`` kept these counts in a table
(migration 0008) as every statement changed a status. They ran in every
emit, claim and record: measured in docs/performance.md ("Counters off the
hot path"), about 0.4 ms of PostgreSQL CPU and 0.4 KB of WAL per delivery,
against one count per scrape (every 15 s or so). Migration 0028 drops them.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from webhooks.states import DeliveryStatus
from webhooks.storage.models import Account, Delivery

__all__ = ["WAITING", "read"]

#: The statuses counted, in the order read() returns them.
WAITING = (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value,
           DeliveryStatus.PAUSED.value)


def _count(status: str, *where):
    return (select(func.count()).select_from(Delivery)
            .where(Delivery.status == status, *where).scalar_subquery())


# One row: pending and sending on their partial indexes; paused on the list index
# (account_id, status, ...) once per account, as no partial index holds paused rows.
_COUNTED = select(
    _count(DeliveryStatus.PENDING.value),
    _count(DeliveryStatus.SENDING.value),
    select(func.coalesce(func.sum(
        _count(DeliveryStatus.PAUSED.value, Delivery.account_id == Account.id)), 0))
    .select_from(Account).scalar_subquery(),
)


def read(connection: Connection) -> dict[str, int]:
    """{status: deliveries} for pending, sending and paused, as of this statement."""
    row = connection.execute(_COUNTED).one()
    return {status: int(value) for status, value in zip(WAITING, row)}
