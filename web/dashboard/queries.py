"""What the dashboard reads, every query scoped to one account.

The views pass the signed-in account's id to every function here, so a page
can only ever show (or an action only ever reach) that account's own rows;
another account's id, a deleted subscription and an id that never existed
all come back as ``None``, which the views answer with 404.
"""

from __future__ import annotations

import datetime as dt
import functools

from sqlalchemy import Integer, bindparam, func, select
from sqlalchemy.orm import Session

from webhooks.services import reads
from webhooks.services.reads import PUBLIC_STATUSES, STORED_STATUSES, public_status
from webhooks.storage.models import Attempt, AttemptHour, Delivery, Event, Subscription
from webhooks.storage.rollup import floor_hour

# delivery_page is the API's (web/delivery_list.py), re-exported: one definition.
from ..delivery_list import DeliveryFilters, delivery_page, owns_subscription
from ..pagination import keyset_page

__all__ = [
    "PUBLIC_STATUSES",
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
    "replayed_among",
    "event_body",
    "hourly_outcomes",
    "status_counts",
    "COUNT_CAP",
]

# Waiting deliveries are counted up to this many; the page shows more as "1000+" (the
# count reads that many index entries at most; /metrics has the exact backlog).
COUNT_CAP = 1_000
# A finished delivery's last attempt has this outcome (webhooks.lifecycle.policy.Outcome).
_FINAL_OUTCOMES = {"success": "done", "permanent_failure": "failed", "dead": "dead"}


def own_subscription(session: Session, account_id: str, subscription_id: str) -> Subscription | None:
    """The account's live (not deleted) subscription with this id, or None."""
    return reads.owned_subscription(session, account_id, subscription_id)


def own_delivery(session: Session, account_id: str, delivery_id: str) -> Delivery | None:
    """The account's delivery with this id (its subscription may be deleted), or None."""
    return reads.owned_delivery(session, account_id, delivery_id)


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


def attempts_of(session: Session, delivery: Delivery) -> list[Attempt]:
    """The delivery's attempts in order (the API's read: bounded by its creation)."""
    return reads.attempts_by_delivery(session, [delivery])[delivery.id]


def replays_of(session: Session, account_id: str, delivery_id: str) -> list[Delivery]:
    """The deliveries that replay this one, oldest first."""
    return list(
        session.scalars(
            select(Delivery)
            .where(Delivery.replay_of == delivery_id, Delivery.account_id == account_id)
            .order_by(Delivery.created_at)
        )
    )


# Built once (these run on every dashboard page): the request's values are bound per call.
_REPLAYED = (select(Delivery.replay_of)
             .where(Delivery.replay_of.in_(bindparam("ids", expanding=True)),
                    Delivery.account_id == bindparam("account_id"))
             .distinct())


def replayed_among(session: Session, account_id: str, delivery_ids: list[str]) -> set[str]:
    """Which of these deliveries were replayed (some delivery replays them): one index range
    (ix_deliveries_replay_of) per id of the page."""
    if not delivery_ids:
        return set()
    return set(session.scalars(_REPLAYED, {"ids": list(delivery_ids), "account_id": account_id}))


def event_body(session: Session, account_id: str, event_id: str) -> bytes | None:
    """The exact envelope bytes every attempt of this event sent."""
    return session.scalar(
        select(Event.body).where(Event.id == event_id, Event.account_id == account_id)
    )


def hourly_outcomes(
    session: Session,
    account_id: str,
    since: dt.datetime,
    subscription_id: str | None = None,
) -> list[tuple[dt.datetime, str, int]]:
    """``(hour, attempt outcome, count)`` for the account's attempts from the hour of ``since`` on.

    Read from the hourly rollup (webhooks/storage/rollup.py), so a day's chart reads
    at most 24 hours x 4 outcomes x its shards per subscription, whatever
    the traffic.
    """
    values = {"account_id": account_id, "hour": floor_hour(since),
              "subscription_id": subscription_id}
    rows = session.execute(_hourly(subscription_id is not None), values)
    return [(hour, outcome, int(count)) for hour, outcome, count in rows]


@functools.lru_cache(maxsize=None)
def _hourly(by_subscription: bool):
    """hourly_outcomes' statement (``account_id``, ``hour``, and ``subscription_id`` when
    ``by_subscription``)."""
    statement = (
        select(AttemptHour.hour_start, AttemptHour.outcome, func.sum(AttemptHour.attempts))
        .where(AttemptHour.account_id == bindparam("account_id"),
               AttemptHour.hour_start >= bindparam("hour"))
        .group_by(AttemptHour.hour_start, AttemptHour.outcome)
    )
    if by_subscription:
        statement = statement.where(AttemptHour.subscription_id == bindparam("subscription_id"))
    return statement


def _waiting(session: Session, account_id: str, stored: tuple[str, ...],
             subscription_id: str | None) -> int:
    """Deliveries in these stored statuses now, counted up to COUNT_CAP + 1.

    Each count reads one index only (ix_deliveries_by_account, or
    ix_deliveries_by_subscription: the caller has checked that the subscription
    is the account's, as an account_id test there would read every row's heap page).
    """
    values = {"account_id": account_id, "subscription_id": subscription_id,
              "cap": COUNT_CAP + 1}
    return session.scalar(_waiting_count(stored, subscription_id is not None), values)


@functools.lru_cache(maxsize=None)
def _waiting_count(stored: tuple[str, ...], by_subscription: bool):
    """_waiting's statement: by ``subscription_id``, or else by ``account_id``; ``cap`` rows
    at most."""
    if by_subscription:
        waiting = select(Delivery.id).where(Delivery.subscription_id == bindparam("subscription_id"))
    else:
        waiting = select(Delivery.id).where(Delivery.account_id == bindparam("account_id"))
    waiting = waiting.where(Delivery.status.in_(stored)).limit(bindparam("cap", type_=Integer))
    return select(func.count()).select_from(waiting.subquery())


def status_counts(
    session: Session, account_id: str, since: dt.datetime, subscription_id: str | None = None,
    *, outcomes: list[tuple[dt.datetime, str, int]] | None = None,
) -> dict[str, int]:
    """Deliveries by public status: finished from the hour of ``since`` on, and waiting now.

    ``done``, ``failed`` and ``dead`` count the deliveries whose last attempt
    was in those hours (the chart's own rollup rows; ``outcomes``: those rows
    when the page has read them already for its chart, from the same
    ``since``). ``pending`` and ``paused`` count those waiting now, whenever
    they were created, up to COUNT_CAP + 1 (a value above COUNT_CAP means
    "more than COUNT_CAP"). Another account's subscription counts nothing.
    """
    counts = {status: 0 for status in PUBLIC_STATUSES}
    if outcomes is None:
        outcomes = hourly_outcomes(session, account_id, since, subscription_id)
    for _hour, outcome, count in outcomes:
        if outcome in _FINAL_OUTCOMES:
            counts[_FINAL_OUTCOMES[outcome]] += count
    if subscription_id is not None and not owns_subscription(session, account_id,
                                                             subscription_id):
        return counts
    for status in ("pending", "paused"):
        counts[status] = _waiting(session, account_id, STORED_STATUSES[status], subscription_id)
    return counts
