"""The waiting counts (webhooks/storage/waiting_counts.py) equal a count of the deliveries after every kind of
change, on PostgreSQL (statement triggers, a row per backend) and SQLite (row triggers)."""

from __future__ import annotations

import datetime as dt
import time

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


def test_metrics_show_the_kept_counts(subscription_id):
    """The scrape reads waiting_counts, not the deliveries: a count set by hand shows."""
    from web.metrics import read_snapshot

    with get_engine().begin() as connection:
        connection.execute(update(WaitingCount).values(pending=WaitingCount.pending + 7))
        if connection.dialect.name == "postgresql":  # no row yet on an empty database
            connection.execute(text("INSERT INTO waiting_counts VALUES (0, 7, 0, 0) "
                                    "ON CONFLICT (backend) DO NOTHING"))
    with get_engine().begin() as connection:
        assert read_snapshot(connection, utcnow())["waiting"]["pending"] == 7


def test_recount_sets_the_counts_from_the_table(subscription_id):
    ids = [emit(_account(subscription_id))[0] for _ in range(4)]
    other_account, _ = make_account("other")
    make_subscription(other_account, "https://o.example.com/in")
    emit(other_account)
    with get_engine().begin() as connection:
        connection.execute(update(Delivery).where(Delivery.id == ids[0]).values(status="paused"))
        connection.execute(update(Delivery).where(Delivery.id == ids[1]).values(status="sending"))
        connection.execute(delete(WaitingCount))
    assert kept()["pending"] == 0
    with get_engine().begin() as connection:
        assert waiting.recount(connection) == {"pending": 3, "sending": 1, "paused": 1}
    emit(_account(subscription_id))  # and the triggers go on from there
    assert agree()["pending"] == 4


# ---------------------------------------------------------------- PostgreSQL: rows per backend


def rows() -> dict[int, tuple]:
    with get_engine().connect() as connection:
        return {row.backend: (row.pending, row.sending, row.paused)
                for row in connection.execute(select(WaitingCount))}


def backend_alive(pid: int) -> bool:
    with get_engine().connect() as connection:
        return bool(connection.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}))


def test_each_backend_counts_in_its_own_row_and_the_sweep_folds_the_gone(db, monkeypatch):
    from sqlalchemy import create_engine

    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)
    account_id, _ = make_account()
    make_subscription(account_id, "https://e.example.com/in")
    emit(account_id)
    other = create_engine(db)  # a second process's connection
    with other.begin() as connection:
        pid = connection.scalar(select(func.pg_backend_pid()))
        connection.execute(update(Delivery).values(status="failed"))
    assert rows()[pid] == (-1, 0, 0)  # the emit's +1 pending is in another backend's row
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}
    run_sweep()
    assert pid in rows()  # still connected: left alone
    other.dispose()  # the backend goes (a moment after its client)
    deadline = time.monotonic() + 10
    while backend_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    run_sweep()
    assert pid not in rows()
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}


def test_truncate_empties_the_counts(db, monkeypatch):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)
    account_id, _ = make_account()
    make_subscription(account_id, "https://e.example.com/in")
    emit(account_id)
    with get_engine().begin() as connection:
        connection.execute(text("TRUNCATE deliveries CASCADE"))
    assert agree() == {"pending": 0, "sending": 0, "paused": 0}
