"""The delivery list, newest first: one page whose cost does not grow with history.

The API (``GET /api/webhooks/deliveries``) and the dashboard's list show the
same pages. Rows are ordered by ``(created_at, id)`` descending, and a page
continues after the cursor of the previous one (pagination.py).

Every filter is served by an index whose leading columns are the filter,
then ``status``, then the keyset order (models.Delivery):

=========================================  ===============================
filter                                     index
=========================================  ===============================
none, or ``status``                        ``ix_deliveries_by_account``
``subscription_id`` (and ``status``)       ``ix_deliveries_by_subscription``
``event_type`` (and ``status``)            ``ix_deliveries_by_type``
``event_id`` (with anything)               ``ix_deliveries_event_id``: the
                                           event's deliveries, one per
                                           subscription it fanned out to
=========================================  ===============================

A page is read as one index range per stored status (all six without a
status filter; ``pending`` is two: ``pending`` and ``sending``), each cut
at ``limit + 1`` rows, merged in keyset order: at most six short scans,
however many rows the account has. ``subscription_id`` together with
``event_type`` is the one combination without an index of its own: it reads
the subscription's range and skips other types.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import exists, select, union_all
from sqlalchemy.orm import Session, aliased

from webhooks.services.reads import PUBLIC_STATUSES, STORED_STATUSES  # noqa: F401 - re-exported
from webhooks.storage.models import Attempt, Delivery, DeliveryStatus, Subscription

from .pagination import decode_cursor, encode_cursor, older_than

__all__ = ["PUBLIC_STATUSES", "STORED_STATUSES", "DeliveryFilters", "delivery_page",
           "owns_subscription"]

_EVERY_STATUS = tuple(status.value for status in DeliveryStatus)


@dataclass(frozen=True)
class DeliveryFilters:
    """The list's filters; each None means "any". ``status`` is a public status."""

    status: str | None = None
    event_type: str | None = None
    subscription_id: str | None = None
    cursor: str | None = None
    event_id: str | None = None
    error_kind: str | None = None  # an attempt of the delivery failed for this reason


def delivery_page(
    session: Session, account_id: str, filters: DeliveryFilters, limit: int
) -> tuple[list[Delivery], str | None]:
    """One page of the account's deliveries, newest first, and the cursor of the next page.

    A subscription of another account gives an empty page (without reading
    its rows). An invalid cursor raises :class:`web.errors.ApiError` (400).
    """
    conditions = [Delivery.account_id == account_id]
    if filters.cursor:
        created_at, row_id = decode_cursor(filters.cursor)
        conditions.append(older_than(Delivery.created_at, Delivery.id, created_at, row_id))
    if filters.subscription_id and not owns_subscription(
        session, account_id, filters.subscription_id
    ):
        return [], None
    if filters.subscription_id:
        conditions.append(Delivery.subscription_id == filters.subscription_id)
    if filters.event_type:
        conditions.append(Delivery.event_type == filters.event_type)
    if filters.event_id:
        conditions.append(Delivery.event_id == filters.event_id)
    if filters.error_kind:
        conditions.append(exists().where(Attempt.delivery_id == Delivery.id,
                                         Attempt.error_kind == filters.error_kind))
    statuses = STORED_STATUSES[filters.status] if filters.status else _EVERY_STATUS
    if filters.event_id:
        # One event's deliveries are few (its fan-out): one scan of them, all statuses at once.
        conditions.append(Delivery.status.in_(statuses))
        rows = _newest(session, select(Delivery).where(*conditions), Delivery, limit + 1)
    else:
        rows = _merged(session, conditions, statuses, limit + 1)
    page = rows[:limit]
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return page, next_cursor


def owns_subscription(session: Session, account_id: str, subscription_id: str) -> bool:
    """True if the subscription (deleted or not: its history stays listed) is the account's."""
    return session.scalar(
        select(Subscription.id).where(
            Subscription.id == subscription_id, Subscription.account_id == account_id
        )
    ) is not None


def _newest(session: Session, statement, entity, count: int) -> list[Delivery]:
    ordered = statement.order_by(entity.created_at.desc(), entity.id.desc()).limit(count)
    return list(session.scalars(ordered))


def _merged(session: Session, conditions: list, statuses: tuple[str, ...], count: int):
    """The newest ``count`` rows over ``statuses``: one index range each, merged."""
    if len(statuses) == 1:
        return _newest(session, select(Delivery).where(*conditions, Delivery.status == statuses[0]),
                       Delivery, count)
    branches = [
        select(Delivery)
        .where(*conditions, Delivery.status == status)
        .order_by(Delivery.created_at.desc(), Delivery.id.desc())
        .limit(count)
        .subquery()
        for status in statuses
    ]
    # Each branch is wrapped in its own SELECT: SQLite allows no ORDER BY or LIMIT
    # on a member of a UNION itself.
    merged = union_all(*[select(branch) for branch in branches]).subquery()
    row = aliased(Delivery, merged)
    return _newest(session, select(row), row, count)
