"""Deliveries not finished, counted as their statuses change: the waiting gauges of /metrics.

``waiting_counts`` holds how many deliveries are ``pending``, ``sending``
and ``paused``. Triggers on ``deliveries`` (migration 0008) add to it in the
same transaction as every insert, change of status and delete, whichever
module's statement makes it, so the counts are exact at every commit and a
scrape reads a few rows instead of counting a backlog (8.6 ms for 60,000
pending deliveries, growing with them; docs/scaling.md).

On PostgreSQL each backend adds into its own row (``backend`` = its pid):
two transactions never wait for one row, and no lock order between them
can deadlock. Rows of backends that have gone are folded into row 0 by the
sweep (:func:`fold`), so the table holds about one row per live connection.
On SQLite every change goes to row 0 (one writer at a time anyway).

Writes that skip triggers (``session_replication_role = replica``, as the
benchmark's bulk seeding does) leave the counts behind: :func:`recount`
sets them from the table again.
"""

from __future__ import annotations

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.engine import Connection

from webhooks.states import DeliveryStatus
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Account, Delivery, WaitingCount

__all__ = ["WAITING", "read", "recount", "fold"]

#: The statuses counted, in the table's column order.
WAITING = (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value,
           DeliveryStatus.PAUSED.value)

counts = WaitingCount.__table__


def read(connection: Connection) -> dict[str, int]:
    """{status: deliveries} for pending, sending and paused: a sum over a few rows."""
    sums = (func.coalesce(func.sum(counts.c[status]), 0) for status in WAITING)
    row = connection.execute(select(*sums)).one()
    return {status: int(value) for status, value in zip(WAITING, row)}


def _counted_from_deliveries():
    """One row: the deliveries in each waiting status, counted on index ranges only (pending
    and sending on their partial indexes, paused on the list index once per account)."""
    def count(status: str, *where):
        return (select(func.count()).select_from(Delivery)
                .where(Delivery.status == status, *where).scalar_subquery())

    paused = select(func.coalesce(func.sum(
        count(DeliveryStatus.PAUSED.value, Delivery.account_id == Account.id)), 0)
    ).select_from(Account).scalar_subquery()
    return select(literal(0), count(DeliveryStatus.PENDING.value),
                  count(DeliveryStatus.SENDING.value), paused)


def recount(connection: Connection) -> dict[str, int]:
    """Set the counts from the deliveries table (after writes that skipped the triggers).

    Writers must be stopped meanwhile (or their changes between the count and
    the commit are counted twice or not at all). Reads index ranges of the
    unfinished deliveries only. Returns the new counts.
    """
    connection.execute(delete(counts))
    connection.execute(insert(counts).from_select(["backend", *WAITING],
                                                  _counted_from_deliveries()))
    return read(connection)




def fold(connection: Connection) -> int:
    """Fold the rows of PostgreSQL backends that have gone into row 0; the rows folded.

    Called by each sweep, in the sweep's transaction: it bounds the table to
    about one row per live connection. Nothing to do on SQLite.
    """
    return backend_of(connection).fold_waiting_counts(connection)
