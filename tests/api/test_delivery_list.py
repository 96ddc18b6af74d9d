"""The delivery list read as merged per-status index ranges (web/delivery_list.py), on both
databases: the pages are the newest-first order of every matching row, whatever the filters."""

from __future__ import annotations

import datetime as dt
import itertools
import random

import pytest
from sqlalchemy import event, insert, select, update

from tests.factories import make_account, make_subscription
from web import delivery_list
from web.delivery_list import STORED_STATUSES, DeliveryFilters, delivery_page
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Attempt, Delivery, DeliveryStatus

from .helpers import insert_deliveries

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc)
STATUSES = [status.value for status in DeliveryStatus]


@pytest.fixture
def rows(any_db):
    """40 deliveries of two subscriptions, two types and every status, with tied times."""
    account_id, _ = make_account("alice")
    first = make_subscription(account_id, "https://a.example.com/in").id
    second = make_subscription(account_id, "https://b.example.com/in").id
    shuffle = random.Random(7)
    ids = []
    for subscription_id, event_type in itertools.product((first, second), ("email.sent", "email.opened")):
        created = [T0 + dt.timedelta(seconds=shuffle.randrange(6)) for _ in range(10)]
        ids += insert_deliveries(account_id, subscription_id, created, event_type)
    with session_scope() as session:  # one transaction: the fixture runs 28 times
        for delivery_id in ids:
            session.execute(update(Delivery).where(Delivery.id == delivery_id)
                            .values(status=shuffle.choice(STATUSES)))
    return account_id, first, second


def walk(account_id: str, filters: DeliveryFilters, limit: int) -> list[str]:
    """Every page, following next_cursor to the end."""
    seen, cursor = [], None
    while True:
        with session_scope() as session:
            page, cursor = delivery_page(
                session, account_id, DeliveryFilters(**{**filters.__dict__, "cursor": cursor}), limit)
        seen += [delivery.id for delivery in page]
        assert len(page) <= limit
        if cursor is None:
            return seen


def expected(account_id: str, filters: DeliveryFilters) -> list[str]:
    with session_scope() as session:
        rows = session.scalars(select(Delivery).where(Delivery.account_id == account_id)).all()
        failed_so = set(session.scalars(select(Attempt.delivery_id).where(
            Attempt.error_kind == filters.error_kind))) if filters.error_kind else set()
    matching = [
        row for row in rows
        if (not filters.status or row.status in STORED_STATUSES[filters.status])
        and (not filters.subscription_id or row.subscription_id == filters.subscription_id)
        and (not filters.event_type or row.event_type == filters.event_type)
        and (not filters.event_id or row.event_id == filters.event_id)
        and (not filters.error_kind or row.id in failed_so)
    ]
    matching.sort(key=lambda row: (row.created_at, row.id), reverse=True)
    return [row.id for row in matching]


@pytest.mark.parametrize("status", [None, "pending", "done"])
@pytest.mark.parametrize("by", ["account", "subscription", "event_type", "both"])
def test_every_filter_pages_through_exactly_the_matching_rows_in_order(rows, status, by):
    account_id, first, _ = rows
    filters = DeliveryFilters(
        status=status,
        subscription_id=first if by in ("subscription", "both") else None,
        event_type="email.opened" if by in ("event_type", "both") else None,
    )
    want = expected(account_id, filters)
    assert walk(account_id, filters, limit=3) == want
    assert walk(account_id, filters, limit=50) == want


def test_pending_includes_an_attempt_in_flight(rows):
    account_id, first, _ = rows
    with session_scope() as session:
        statuses = {row.status for row in session.scalars(select(Delivery))}
    assert {"pending", "sending"} <= statuses
    listed = walk(account_id, DeliveryFilters(status="pending"), limit=4)
    with session_scope() as session:
        shown = {session.get(Delivery, d).status for d in listed}
    assert shown == {"pending", "sending"}


def test_another_accounts_subscription_gives_an_empty_page_without_reading_its_rows(rows):
    _, first, _ = rows
    stranger, _ = make_account("mallory")
    statements = []
    engine = get_engine()

    def record(_conn, _cursor, statement, *_):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with session_scope() as session:
            page = delivery_page(session, stranger, DeliveryFilters(subscription_id=first), 10)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert page == ([], None)
    assert statements and not [s for s in statements if "FROM deliveries" in s]


def _time_out_every_third(account_id: str) -> None:
    """An attempt that timed out for every third of the account's deliveries of each
    subscription and status (the first of each, by id, among them: so every combination the
    test filters on has a match whatever the random ids), and one that was refused for the
    others."""
    with session_scope() as session:
        rows = session.execute(select(Delivery.subscription_id, Delivery.status, Delivery.id)
                               .where(Delivery.account_id == account_id)
                               .order_by(Delivery.subscription_id, Delivery.status, Delivery.id))
        attempts = []
        for _, group in itertools.groupby(rows, key=lambda row: row[:2]):
            attempts += [
                dict(delivery_id=row.id, number=1, started_at=T0, duration_ms=10,
                     status_code=None, error="no answer", outcome="retry",
                     error_kind="timeout" if index % 3 == 0 else "connection_refused")
                for index, row in enumerate(group)]
        session.execute(insert(Attempt), attempts)


@pytest.mark.parametrize("status", [None, "pending"])
def test_the_event_and_error_kind_filters_page_through_the_matching_rows_in_order(rows, status):
    account_id, first, _ = rows
    _time_out_every_third(account_id)
    with session_scope() as session:
        event_id = session.scalar(select(Delivery.event_id).where(
            Delivery.subscription_id == first).limit(1))
    for filters in (DeliveryFilters(status=status, event_id=event_id),
                    DeliveryFilters(status=status, error_kind="timeout"),
                    DeliveryFilters(status=status, error_kind="timeout", subscription_id=first)):
        want = expected(account_id, filters)
        assert want, filters
        assert walk(account_id, filters, limit=2) == want


def test_a_shape_is_built_once_and_takes_each_calls_values(rows):
    """The statement of a shape is reused (not rebuilt) and binds the values of each call: the
    same shape with another subscription, type or cursor lists that one's rows."""
    account_id, first, second = rows
    walk(account_id, DeliveryFilters(subscription_id=first, event_type="email.sent"), limit=3)
    built = delivery_list._statement.cache_info().currsize
    for subscription_id, event_type in itertools.product((first, second),
                                                        ("email.sent", "email.opened")):
        filters = DeliveryFilters(subscription_id=subscription_id, event_type=event_type)
        assert walk(account_id, filters, limit=3) == expected(account_id, filters)
    assert delivery_list._statement.cache_info().currsize == built
