"""Recover (webhooks/lifecycle/recover.py): replay a window's failed and dead deliveries, in batches,
never one twice. On PostgreSQL and SQLite."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from tests.test_store import emit
from webhooks.errors import InvalidWindow
from webhooks.lifecycle.recover import recover
from webhooks.storage.db import get_sessionmaker, session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

HOUR = dt.timedelta(hours=1)


@pytest.fixture
def subscription(any_db, published):
    account_id, _ = make_account()
    return make_subscription(account_id, "https://example.com/hook")


def _make(subscription, status, created_at, event_type="email.sent") -> str:
    delivery_id = emit(subscription.account_id, event_type).delivery_ids[0]
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == delivery_id)
                        .values(status=status, attempt_count=1, created_at=created_at))
    return delivery_id


def _recover(subscription, since, until=None, *, batch=500, limit=10000, now=None):
    session = get_sessionmaker()()
    try:
        return recover(session, subscription.id, since, until, now=now or utcnow(),
                       batch=batch, limit=limit)
    finally:
        session.close()


def _replays(subscription) -> dict[str, Delivery]:
    """The replays of the subscription's deliveries, by the id they replay."""
    with session_scope() as session:
        rows = session.scalars(select(Delivery).where(
            Delivery.subscription_id == subscription.id, Delivery.replay_of.is_not(None))).all()
        session.expunge_all()
    return {row.replay_of: row for row in rows}


def test_recover_replays_the_failed_and_dead_deliveries_of_the_window_only(subscription):
    now = utcnow()
    inside = now - 2 * HOUR
    failed = _make(subscription, "failed", inside)
    dead = _make(subscription, "dead", inside + dt.timedelta(minutes=1))
    for status in ("done", "pending", "paused", "sending"):
        _make(subscription, status, inside)
    before = _make(subscription, "failed", now - 5 * HOUR)
    after = _make(subscription, "dead", now - HOUR)

    recovered = _recover(subscription, now - 3 * HOUR, now - 90 * dt.timedelta(minutes=1))
    assert (recovered.replayed, recovered.more) == (2, False)
    replays = _replays(subscription)
    assert set(replays) == {failed, dead}
    assert before not in replays and after not in replays
    for original, replay in replays.items():
        assert (replay.status, replay.attempt_count, replay.parked) == ("pending", 0, True)
        assert replay.next_attempt_at is not None  # due now: the sweep sends it
        with session_scope() as session:
            assert session.get(Delivery, original).status in ("failed", "dead")  # left as it was


def test_recovering_again_replays_nothing_twice(subscription):
    now = utcnow()
    for minutes in range(3):
        _make(subscription, "failed", now - HOUR + dt.timedelta(minutes=minutes))
    assert _recover(subscription, now - 2 * HOUR).replayed == 3
    assert _recover(subscription, now - 2 * HOUR).replayed == 0
    assert len(_replays(subscription)) == 3


def test_a_delivery_replayed_by_hand_is_not_replayed_again(subscription):
    from webhooks.lifecycle.changes import replay_delivery

    now = utcnow()
    replayed = _make(subscription, "dead", now - HOUR)
    other = _make(subscription, "dead", now - HOUR)
    with session_scope() as session:
        replay_delivery(session, session.get(Delivery, replayed), now)
    assert _recover(subscription, now - 2 * HOUR).replayed == 1
    assert set(_replays(subscription)) == {replayed, other}


def test_recover_works_in_batches_and_stops_at_its_limit(subscription, monkeypatch):
    import webhooks.lifecycle.recover as module

    now = utcnow()
    ids = [_make(subscription, "failed", now - HOUR + dt.timedelta(seconds=i)) for i in range(7)]
    batches = []
    real = module._replay_batch
    monkeypatch.setattr(module, "_replay_batch",
                        lambda *args: batches.append(args[-1]) or real(*args))

    first = _recover(subscription, now - 2 * HOUR, batch=2, limit=5)
    assert (first.replayed, first.more) == (5, True)
    assert batches == [2, 2, 1]
    assert set(_replays(subscription)) == set(ids[:5])  # oldest first
    second = _recover(subscription, now - 2 * HOUR, batch=2, limit=5)
    assert (second.replayed, second.more) == (2, False)
    assert set(_replays(subscription)) == set(ids)


def test_each_batch_is_committed_before_the_next_begins(subscription, monkeypatch):
    import webhooks.lifecycle.recover as module

    now = utcnow()
    for i in range(4):
        _make(subscription, "failed", now - HOUR + dt.timedelta(seconds=i))
    seen = []
    real = module._replay_batch

    def watch(*args):
        with session_scope() as session:  # another connection: sees only what was committed
            seen.append(len(session.scalars(select(Delivery.id).where(
                Delivery.replay_of.is_not(None))).all()))
        return real(*args)

    monkeypatch.setattr(module, "_replay_batch", watch)
    _recover(subscription, now - 2 * HOUR, batch=2)
    assert seen == [0, 2, 4]


def test_a_paused_subscription_holds_the_replays(subscription):
    now = utcnow()
    _make(subscription, "failed", now - HOUR)
    ping = _make(subscription, "failed", now - HOUR, event_type="test.ping")
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(status="paused", paused_at=now))
    recovered = _recover(subscription, now - 2 * HOUR)
    assert (recovered.replayed, recovered.held) == (2, 1)  # the held one waits for resume
    statuses = {original: (r.status, r.parked) for original, r in _replays(subscription).items()}
    assert statuses.pop(ping) == ("pending", True)  # test.ping is never held
    assert list(statuses.values()) == [("paused", False)]


def test_held_adds_up_over_batches_and_is_0_while_active(subscription):
    now = utcnow()
    for i in range(3):
        _make(subscription, "failed", now - HOUR + dt.timedelta(seconds=i))
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(status="paused", paused_at=now))
    paused = _recover(subscription, now - 2 * HOUR, batch=2)
    assert (paused.replayed, paused.held) == (3, 3)
    _make(subscription, "dead", now - HOUR)
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(status="active", paused_at=None))
    active = _recover(subscription, now - 2 * HOUR)
    assert (active.replayed, active.held) == (1, 0)


@pytest.mark.parametrize("since, until, message", [
    (dt.timedelta(minutes=1), None, "since is in the future"),
    (-HOUR, -2 * HOUR, "since is after until"),
])
def test_a_window_that_starts_after_it_ends_or_in_the_future_is_refused(
        subscription, since, until, message):
    now = utcnow()
    _make(subscription, "failed", now - HOUR)
    with pytest.raises(InvalidWindow, match=message):
        _recover(subscription, now + since, None if until is None else now + until, now=now)
    assert _replays(subscription) == {}


def test_concurrent_recovers_of_one_window_replay_each_delivery_once(subscription):
    now = utcnow()
    for i in range(12):
        _make(subscription, "dead", now - HOUR + dt.timedelta(seconds=i))
    results, start = [], threading.Barrier(3)

    def work():
        start.wait()
        results.append(_recover(subscription, now - 2 * HOUR, batch=3).replayed)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(results) == 12
    assert len(_replays(subscription)) == 12
