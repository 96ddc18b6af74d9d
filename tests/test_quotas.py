"""The per-account subscription limit, in the core function API and dashboard both call.

On PostgreSQL and SQLite; the concurrent case on the real PostgreSQL, where
two transactions can really overlap.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select, text

from tests.factories import make_account
from tests.support.stack import wait_until
from webhooks.config import reset_settings_cache
from webhooks.errors import Conflict
from webhooks.lifecycle import changes as store
from webhooks.storage.db import get_engine, get_sessionmaker, session_scope
from webhooks.storage.models import Subscription, utcnow


def create(account_id: str, session=None, **limit):
    """One subscription through the core; returns its id."""
    def run(s):
        return store.create_subscription(
            s, account_id, "https://example.com/hook", event_types=None, description=None,
            now=utcnow(), **limit,
        ).id

    if session is not None:
        return run(session)
    with session_scope() as s:
        return run(s)


def live_count(account_id: str) -> int:
    with session_scope() as session:
        return session.scalar(
            select(func.count()).select_from(Subscription).where(
                Subscription.account_id == account_id, Subscription.deleted_at.is_(None)
            )
        )


def test_one_more_than_the_limit_is_refused_and_stores_nothing(any_db):
    account_id, _ = make_account()
    for _ in range(3):
        create(account_id, max_subscriptions=3)
    with pytest.raises(Conflict) as refused:
        create(account_id, max_subscriptions=3)
    assert refused.value.code == "subscription_limit"
    assert "already has 3 subscriptions" in str(refused.value)
    assert live_count(account_id) == 3


def test_the_default_is_webhooks_max_subscriptions(any_db, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_MAX_SUBSCRIPTIONS", "2")
    reset_settings_cache()
    account_id, _ = make_account()
    create(account_id)
    create(account_id)
    with pytest.raises(Conflict):
        create(account_id)


def test_zero_means_no_limit(any_db, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_MAX_SUBSCRIPTIONS", "0")
    reset_settings_cache()
    account_id, _ = make_account()
    for _ in range(5):
        create(account_id)
    assert live_count(account_id) == 5


def test_deleted_subscriptions_do_not_count(any_db):
    account_id, _ = make_account()
    first = create(account_id, max_subscriptions=2)
    create(account_id, max_subscriptions=2)
    with session_scope() as session:
        store.delete_subscription(session, first, utcnow())
    create(account_id, max_subscriptions=2)
    assert live_count(account_id) == 2


def test_the_limit_is_per_account(any_db):
    alice, _ = make_account("alice")
    bob, _ = make_account("bob")
    create(alice, max_subscriptions=1)
    create(bob, max_subscriptions=1)
    with pytest.raises(Conflict):
        create(alice, max_subscriptions=1)


def _waiting_for_a_lock(pid: int) -> bool:
    with get_engine().connect() as connection:
        return bool(connection.execute(
            text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid AND wait_event_type = 'Lock'"),
            {"pid": pid},
        ).first())


def test_two_concurrent_creates_at_the_limit_let_exactly_one_in(db):
    """The first create holds its transaction open at the last free slot; the second,
    started meanwhile, must wait for it and then be refused."""
    account_id, _ = make_account()
    create(account_id, max_subscriptions=2)
    first = get_sessionmaker()()
    second = get_sessionmaker()()
    second_pid = second.execute(text("SELECT pg_backend_pid()")).scalar_one()
    outcome: list = []

    def create_second():
        try:
            outcome.append(create(account_id, second, max_subscriptions=2))
            second.commit()
        except Conflict as error:
            second.rollback()
            outcome.append(error)

    try:
        create(account_id, first, max_subscriptions=2)  # the last slot, not committed yet
        racer = threading.Thread(target=create_second)
        racer.start()
        # Without the lock the second create would not wait: it would count 1,
        # insert and finish, and the account would end with 3.
        wait_until(lambda: outcome or _waiting_for_a_lock(second_pid), timeout=10,
                   interval=0.02, what="the second create to wait for the first")
        first.commit()
        racer.join(timeout=10)
        assert not racer.is_alive()
    finally:
        first.close()
        second.close()
    assert len(outcome) == 1 and isinstance(outcome[0], Conflict), outcome
    assert outcome[0].code == "subscription_limit"
    assert live_count(account_id) == 2
