"""The waiting counts (webhooks/storage/waiting_counts.py) equal a count of the deliveries after every kind of
change, on PostgreSQL and SQLite, and nothing on the hot path writes a counter for them (issue 43)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import delete, func, select, text, update

from tests.factories import make_account, make_subscription
from tests.test_rollup import attempt, emit
from webhooks.lifecycle import retention
from webhooks.storage import waiting_counts as waiting
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, WaitingCount, utcnow
from webhooks.lifecycle.changes import (delete_subscription, hold_pending, pause_subscription,
                            replay_delivery, resume_subscription)
from webhooks.services.sweep import run_sweep


def counted() -> dict[str, int]:
    """The waiting statuses counted on the deliveries table itself."""
    with get_engine().connect() as connection:
        rows = dict(connection.execute(
            select(Delivery.status, func.count()).group_by(Delivery.status)).all())
    return {status: rows.get(status, 0) for status in waiting.WAITING}


def kept() -> dict[str, int]:
    """What a scrape reads after a sweep counted."""
    with get_engine().begin() as connection:
        waiting.refresh(connection)
    with get_engine().connect() as connection:
        return waiting.read(connection)


def agree() -> dict[str, int]:
    assert kept() == counted()
    return kept()


@pytest.fixture
def subscription_id(any_db, monkeypatch):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)  # no broker needed
    account_id, _ = make_account()
    return make_subscription(account_id, "https://e.example.com/in").id


def _account(subscription_id: str) -> str:
    from webhooks.storage.models import Subscription

    with session_scope() as session:
        return session.get(Subscription, subscription_id).account_id


def test_every_change_of_status_is_counted(subscription_id):
    account_id = _account(subscription_id)
    first, second, _third = (emit(account_id)[0] for _ in range(3))
    assert agree() == {"pending": 3, "sending": 0, "paused": 0}
    attempt(first, 200, 40)  # claim (sending) then record (done)
    attempt(second, 503, 40)  # a retry: pending again
    assert agree() == {"pending": 2, "sending": 0, "paused": 0}
    now = utcnow()
    with session_scope() as session:
        pause_subscription(session, subscription_id, now)
        hold_pending(session, subscription_id, now)
    assert agree() == {"pending": 0, "sending": 0, "paused": 2}
    with session_scope() as session:
        resume_subscription(session, subscription_id, now)
    assert agree() == {"pending": 2, "sending": 0, "paused": 0}
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == first).values(status="dead"))
        replay_delivery(session, session.get(Delivery, first), now)
    assert agree() == {"pending": 3, "sending": 0, "paused": 0}
    with session_scope() as session:
        delete_subscription(session, subscription_id, now)  # its unfinished ones fail
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}


def test_a_claim_in_flight_is_sending(subscription_id):
    from webhooks.lifecycle.claim import claim

    (delivery_id,) = emit(_account(subscription_id))
    with get_engine().begin() as connection:
        assert claim(connection, delivery_id, 0, utcnow() + dt.timedelta(hours=1)) is not None
    assert agree() == {"pending": 0, "sending": 1, "paused": 0}


def test_one_statement_over_many_rows_and_deletes_are_counted(subscription_id):
    account_id = _account(subscription_id)
    for _ in range(40):
        emit(account_id)
    with get_engine().begin() as connection:
        connection.execute(update(Delivery).values(status="paused"))
    assert agree()["paused"] == 40
    with get_engine().begin() as connection:
        some = select(Delivery.id).limit(15).scalar_subquery()
        connection.execute(delete(Delivery).where(Delivery.id.in_(some)))
    assert agree()["paused"] == 25
    old = utcnow() - dt.timedelta(days=40)
    with get_engine().begin() as connection:  # finished and old: retention takes them
        connection.execute(update(Delivery).values(status="done", created_at=old))
    assert retention.purge(get_engine(), retention_days=30, batch=7).deliveries == 25
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}


def test_metrics_show_what_the_last_sweep_counted(subscription_id):
    from web.metrics import read_snapshot

    account_id = _account(subscription_id)
    emit(account_id), emit(account_id)
    with get_engine().begin() as connection:
        assert read_snapshot(connection, utcnow())["waiting"]["pending"] == 0  # not counted yet
    run_sweep()
    emit(account_id)  # after the sweep: the next one counts it
    with get_engine().begin() as connection:
        assert read_snapshot(connection, utcnow())["waiting"]["pending"] == 2
    assert agree()["pending"] == 3


def test_emit_claim_and_record_write_no_counter_of_the_waiting(subscription_id):
    """The triggers of migration 0008 wrote waiting_counts in every emit, claim and record;
    0028 dropped them: until a sweep counts, the table holds no count."""
    account_id = _account(subscription_id)
    first, second = emit(account_id)[0], emit(account_id)[0]
    attempt(first, 200, 40)
    attempt(second, 503, 40)
    with get_engine().connect() as connection:
        assert connection.scalar(select(func.count()).select_from(WaitingCount).where(
            (WaitingCount.pending != 0) | (WaitingCount.sending != 0)
            | (WaitingCount.paused != 0))) == 0
    assert agree() == {"pending": 1, "sending": 0, "paused": 0}


def test_truncate_empties_the_counts(db, monkeypatch):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)
    account_id, _ = make_account()
    make_subscription(account_id, "https://e.example.com/in")
    emit(account_id)
    with get_engine().begin() as connection:
        connection.execute(text("TRUNCATE deliveries CASCADE"))
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}
