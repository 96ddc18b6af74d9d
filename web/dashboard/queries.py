"""What the dashboard reads, every query scoped to one account.

The views pass the signed-in account's id to every function here, so a page
can only ever show (or an action only ever reach) that account's own rows;
another account's id, a deleted subscription and an id that never existed
all come back as ``None``, which the views answer with 404.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from webhooks.models import Attempt, Delivery, DeliveryStatus, Event, Subscription

from ..pagination import keyset_page
from ..params import canonical_id

__all__ = [
    "PUBLIC_STATUSES",
    "stored_statuses",
    "public_status",
    "own_subscription",
    "own_delivery",
    "subscriptions_of",
    "subscription_page",
    "paused_count",
    "subscription_labels",
    "DeliveryFilters",
    "delivery_page",
    "attempts_of",
    "replays_of",
    "event_body",
    "hourly_outcomes",
    "status_counts",
]

PUBLIC_STATUSES = ("pending", "paused", "done", "failed", "dead")

# The stored statuses behind each public one: an attempt in flight is still pending.
_STORED = {
    "pending": (DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value),
    "paused": (DeliveryStatus.PAUSED.value,),
    "done": (DeliveryStatus.DONE.value,),
    "failed": (DeliveryStatus.FAILED.value,),
    "dead": (DeliveryStatus.DEAD.value,),
}


def stored_statuses(public: str) -> tuple[str, ...]:
    return _STORED[public]


def public_status(stored: str) -> str:
    return DeliveryStatus(stored).public


def own_subscription(session: Session, account_id: str, subscription_id: str) -> Subscription | None:
    """The account's live (not deleted) subscription with this id, or None."""
    canonical = canonical_id(subscription_id)
    if canonical is None:
        return None
    return session.scalars(
        select(Subscription).where(
            Subscription.id == canonical,
            Subscription.account_id == account_id,
            Subscription.deleted_at.is_(None),
        )
    ).first()


def own_delivery(session: Session, account_id: str, delivery_id: str) -> Delivery | None:
    """The account's delivery with this id (its subscription may be deleted), or None."""
    canonical = canonical_id(delivery_id)
    if canonical is None:
        return None
    return session.scalars(
        select(Delivery).where(Delivery.id == canonical, Delivery.account_id == account_id)
    ).first()


def subscriptions_of(session: Session, account_id: str) -> list[Subscription]:
    """The account's live subscriptions: paused first (they need attention), then newest first."""
    paused_first = (Subscription.status == "paused").desc()
    return list(
        session.scalars(
            select(Subscription)
            .where(Subscription.account_id == account_id, Subscription.deleted_at.is_(None))
            .order_by(paused_first, Subscription.created_at.desc(), Subscription.id.desc())
        )
    )


def subscription_page(
    session: Session, account_id: str, status: str | None, cursor: str | None, limit: int = 50
) -> tuple[list[Subscription], str | None]:
    """One page of the account's live subscriptions (of ``status``, None: any), newest
    first as in the API, and the cursor of the next page. An invalid cursor raises
    :class:`web.errors.ApiError` (400)."""
    statement = select(Subscription).where(
        Subscription.account_id == account_id, Subscription.deleted_at.is_(None)
    )
    if status:
        statement = statement.where(Subscription.status == status)
    return keyset_page(session, statement, Subscription, cursor, limit)


def paused_count(session: Session, account_id: str) -> int:
    """How many of the account's live subscriptions are paused."""
    return session.scalar(
        select(func.count()).select_from(Subscription).where(
            Subscription.account_id == account_id,
            Subscription.deleted_at.is_(None),
            Subscription.status == "paused",
        )
    )


def subscription_labels(session: Session, account_id: str, ids) -> dict[str, tuple[str, bool]]:
    """``{id: (url, deleted)}`` for these subscription ids of the account (deleted ones too)."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    rows = session.execute(
        select(Subscription.id, Subscription.url, Subscription.deleted_at).where(
            Subscription.id.in_(ids), Subscription.account_id == account_id
        )
    )
    return {row.id: (row.url, row.deleted_at is not None) for row in rows}


@dataclass(frozen=True)
class DeliveryFilters:
    """The deliveries list's filters; each None means "any"."""

    status: str | None = None
    event_type: str | None = None
    subscription_id: str | None = None
    cursor: str | None = None


def delivery_page(
    session: Session, account_id: str, filters: DeliveryFilters, limit: int = 50
) -> tuple[list[Delivery], str | None]:
    """One page of the account's deliveries, newest first, and the cursor of the next page.

    The same keyset order as the API (index ``ix_deliveries_account_created``).
    An invalid cursor raises :class:`web.errors.ApiError` (400).
    """
    statement = select(Delivery).where(Delivery.account_id == account_id)
    if filters.status:
        statement = statement.where(Delivery.status.in_(stored_statuses(filters.status)))
    if filters.event_type:
        statement = statement.where(Delivery.event_type == filters.event_type)
    if filters.subscription_id:
        statement = statement.where(Delivery.subscription_id == filters.subscription_id)
    return keyset_page(session, statement, Delivery, filters.cursor, limit)


def attempts_of(session: Session, delivery_id: str) -> list[Attempt]:
    return list(
        session.scalars(
            select(Attempt).where(Attempt.delivery_id == delivery_id).order_by(Attempt.number)
        )
    )


def replays_of(session: Session, account_id: str, delivery_id: str) -> list[Delivery]:
    """The deliveries that replay this one, oldest first."""
    return list(
        session.scalars(
            select(Delivery)
            .where(Delivery.replay_of == delivery_id, Delivery.account_id == account_id)
            .order_by(Delivery.created_at)
        )
    )


def event_body(session: Session, account_id: str, event_id: str) -> bytes | None:
    """The exact envelope bytes every attempt of this event sent."""
    return session.scalar(
        select(Event.body).where(Event.id == event_id, Event.account_id == account_id)
    )


def _hour_of(column, dialect: str):
    if dialect == "postgresql":
        return func.date_trunc("hour", column)
    # SQLite keeps DateTime as 'YYYY-MM-DD HH:MM:SS.ffffff' text.
    return func.strftime("%Y-%m-%d %H:00:00", column)


def _as_utc(value) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


def hourly_outcomes(
    session: Session,
    account_id: str,
    since: dt.datetime,
    subscription_id: str | None = None,
) -> list[tuple[dt.datetime, str, int]]:
    """``(hour, attempt outcome, count)`` for the account's attempts started since ``since``.

    Grouped in the database, so the page reads at most 24 x 4 rows whatever the traffic.
    """
    hour = _hour_of(Attempt.started_at, session.get_bind().dialect.name).label("hour")
    statement = (
        select(hour, Attempt.outcome, func.count())
        .join(Delivery, Delivery.id == Attempt.delivery_id)
        .where(Delivery.account_id == account_id, Attempt.started_at >= since)
        .group_by(hour, Attempt.outcome)
    )
    if subscription_id is not None:
        statement = statement.where(Delivery.subscription_id == subscription_id)
    return [(_as_utc(h), outcome, count) for h, outcome, count in session.execute(statement)]


def status_counts(
    session: Session, account_id: str, since: dt.datetime, subscription_id: str | None = None
) -> dict[str, int]:
    """The account's deliveries created since ``since``, counted by public status."""
    statement = (
        select(Delivery.status, func.count())
        .where(Delivery.account_id == account_id, Delivery.created_at >= since)
        .group_by(Delivery.status)
    )
    if subscription_id is not None:
        statement = statement.where(Delivery.subscription_id == subscription_id)
    counts: dict[str, int] = defaultdict(int)
    for status, count in session.execute(statement):
        counts[public_status(status)] += count
    return {status: counts.get(status, 0) for status in PUBLIC_STATUSES}
