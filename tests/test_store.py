"""State transitions on the real databases: claims, records, pause, resume, sweep.

Runs on PostgreSQL and on SQLite (the same code serves both). Messages are
not published here: ``dispatch`` is replaced by a list so each test sees
exactly what would go to the broker.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select

from tests.factories import make_account, make_subscription
from webhooks.events.samples import sample_data
from webhooks.lifecycle import changes as store
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record as record_attempt
from webhooks.lifecycle.sweep import sweep
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

LADDER = (60, 300, 1800, 7200, 43200)


@pytest.fixture
def setup(any_db, published):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    return account_id, subscription


def emit(account_id, event_type="email.sent"):
    from webhooks.emit import emit_event

    return emit_event(account_id, event_type, sample_data(event_type))


def delivery(delivery_id) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


def claim(delivery_id, count):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, count, utcnow())


def record(claim_, status_code, *, pause_after=25, countdown_limit=300, ladder=LADDER,
           countdown_room=True):
    now = utcnow()
    rules = Rules(ladder, countdown_limit, pause_after)
    step = next_step(claim_.attempt_number, status_code, claim_.event_type, rules,
                     countdown_room=lambda: countdown_room)
    with get_engine().begin() as connection:
        return record_attempt(
            connection, claim_, step=step, rules=rules, started_at=now, now=now, duration_ms=5,
            status_code=status_code, error=None if status_code else "connection refused",
            excerpt="ok",
        )


def test_emit_creates_one_pending_delivery_and_publishes_after_commit(setup, published):
    account_id, subscription = setup
    event = emit(account_id)
    assert len(event.delivery_ids) == 1
    assert [(p.delivery_id, p.attempt_count) for p in published.settled()] == [(event.delivery_ids[0], 0)]
    row = delivery(event.delivery_ids[0])
    assert (row.status, row.attempt_count, row.subscription_id) == ("pending", 0, subscription.id)


def test_claim_is_exclusive_and_a_duplicate_message_is_a_no_op(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    first = claim(delivery_id, 0)
    assert first is not None and first.attempt_number == 1
    assert claim(delivery_id, 0) is None  # the same message again
    assert delivery(delivery_id).status == "sending"


def test_success_is_done_and_records_the_attempt(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    result = record(claim(delivery_id, 0), 200)
    assert result.status == "done" and result.dispatch is None
    with session_scope() as session:
        attempts = session.scalars(select(Attempt).where(Attempt.delivery_id == delivery_id)).all()
    assert [(a.number, a.status_code, a.outcome) for a in attempts] == [(1, 200, "success")]


def test_410_is_failed_after_one_attempt(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    assert record(claim(delivery_id, 0), 410).status == "failed"
    assert claim(delivery_id, 1) is None


def test_short_retry_rides_the_countdown_and_long_one_is_parked(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    first = record(claim(delivery_id, 0), 500)
    assert first.status == "pending" and first.dispatch.countdown == 60
    assert delivery(delivery_id).parked is False
    # A message arriving before the row is due claims nothing.
    assert claim(delivery_id, 1) is None
    _make_due(delivery_id)
    second = record(claim(delivery_id, 1), 503)
    assert second.dispatch.countdown == 300
    _make_due(delivery_id)
    third = record(claim(delivery_id, 2), None)
    assert third.status == "pending" and third.dispatch is None  # 30 min: parked
    row = delivery(delivery_id)
    assert row.parked is True
    assert dt.timedelta(minutes=29) < row.next_attempt_at - utcnow() <= dt.timedelta(minutes=30)


def test_attempt_six_failing_is_dead(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    statuses = []
    for count in range(6):
        _make_due(delivery_id)
        statuses.append(record(claim(delivery_id, count), 500).status)
    assert statuses == ["pending"] * 5 + ["dead"]
    assert delivery(delivery_id).attempt_count == 6


def test_counter_resets_on_success(setup):
    account_id, subscription = setup
    for _ in range(3):
        record(claim(emit(account_id).delivery_ids[0], 0), 500)
    assert _subscription(subscription.id).consecutive_failures == 3
    record(claim(emit(account_id).delivery_ids[0], 0), 204)
    assert _subscription(subscription.id).consecutive_failures == 0


def test_pause_at_threshold_holds_everything_pending(setup):
    account_id, subscription = setup
    ids = [emit(account_id).delivery_ids[0] for _ in range(4)]
    results = [record(claim(ids[i], 0), 500, pause_after=3) for i in range(3)]
    assert [r.paused_subscription for r in results] == [False, False, True]
    assert results[2].status == "paused" and results[2].dispatch is None
    sub = _subscription(subscription.id)
    assert sub.status == "paused" and sub.paused_at is not None
    assert {delivery(i).status for i in ids} == {"paused"}
    assert claim(ids[3], 0) is None  # held: no attempt
    # New events while paused are held at once, keeping count 0.
    held = delivery(emit(account_id).delivery_ids[0])
    assert (held.status, held.attempt_count) == ("paused", 0)


def test_paused_subscription_still_gets_test_ping(setup):
    account_id, subscription = setup
    with session_scope() as session:
        session.get(Subscription, subscription.id).status = "paused"
    ping = emit(account_id, "test.ping").delivery_ids[0]
    assert delivery(ping).status == "pending"
    assert claim(ping, 0) is not None


def test_test_ping_failures_count_but_never_pause_by_themselves(setup):
    """CONTRACT 9.1: five failed Send tests reach the threshold of 3 and pause nothing;
    the next failure of another type pauses, holding that delivery."""
    account_id, subscription = setup
    pings = [emit(account_id, "test.ping").delivery_ids[0] for _ in range(5)]
    results = [record(claim(ping, 0), 500, pause_after=3) for ping in pings]
    assert [r.paused_subscription for r in results] == [False] * 5
    sub = _subscription(subscription.id)
    assert (sub.status, sub.consecutive_failures) == ("active", 5)
    other = emit(account_id).delivery_ids[0]
    recorded = record(claim(other, 0), 500, pause_after=3)
    assert recorded.paused_subscription and recorded.status == "paused"
    assert _subscription(subscription.id).status == "paused"


def test_resume_releases_held_deliveries_for_the_sweep(setup, published):
    account_id, subscription = setup
    ids = [emit(account_id).delivery_ids[0] for _ in range(2)]
    for delivery_id in ids:
        record(claim(delivery_id, 0), 500, pause_after=2)
    assert {delivery(i).status for i in ids} == {"paused"}
    with session_scope() as session:
        assert store.resume_subscription(session, subscription.id, utcnow()) == 2
    sub = _subscription(subscription.id)
    assert (sub.status, sub.consecutive_failures, sub.paused_at) == ("active", 0, None)
    published.settled().clear()
    with session_scope() as session:
        found = sweep(session, utcnow(), timeout=15, recover_after=120, batch=100)
    assert sorted((d.delivery_id, d.attempt_count) for d in found) == sorted((i, 1) for i in ids)


def test_sweep_recovers_a_dead_workers_claim_with_its_count(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    claim(delivery_id, 0)  # the worker dies here
    later = utcnow() + dt.timedelta(seconds=200)
    with session_scope() as session:
        found = sweep(session, later, timeout=15, recover_after=120, batch=100)
    assert [(d.delivery_id, d.attempt_count) for d in found] == [(delivery_id, 0)]
    row = delivery(delivery_id)
    assert (row.status, row.attempt_count) == ("pending", 0)


def test_sweep_republishes_lost_messages_once_per_interval(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    now = utcnow()
    with session_scope() as session:
        assert sweep(session, now, timeout=15, recover_after=120, batch=100) == []
    later = now + dt.timedelta(seconds=121)
    with session_scope() as session:
        found = sweep(session, later, timeout=15, recover_after=120, batch=100)
    assert [d.delivery_id for d in found] == [delivery_id]
    with session_scope() as session:
        assert sweep(session, later, timeout=15, recover_after=120, batch=100) == []


def test_sweep_sends_parked_deliveries_when_due(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    record(claim(delivery_id, 0), 500, countdown_limit=10)  # 60 s > 10 s: parked
    with session_scope() as session:
        assert sweep(session, utcnow(), timeout=15, recover_after=120, batch=100) == []
    due = utcnow() + dt.timedelta(seconds=61)
    with session_scope() as session:
        found = sweep(session, due, timeout=15, recover_after=120, batch=100)
    assert [(d.delivery_id, d.attempt_count) for d in found] == [(delivery_id, 1)]
    assert delivery(delivery_id).parked is False


def test_late_record_after_recovery_is_not_recorded_twice(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    slow = claim(delivery_id, 0)
    with session_scope() as session:
        sweep(session, utcnow() + dt.timedelta(seconds=200), timeout=15, recover_after=120,
                    batch=100)
    _make_due(delivery_id)
    fast = claim(delivery_id, 0)
    assert record(fast, 200).status == "done"
    assert record(slow, 200) is None
    with session_scope() as session:
        count = session.scalar(select(func.count()).select_from(Attempt))
    assert count == 1


def test_replay_creates_a_new_delivery(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    record(claim(delivery_id, 0), 404)  # a 4xx that does not pause (410 would: CONTRACT 9.4)
    with session_scope() as session:
        replay = store.replay_delivery(session, session.get(Delivery, delivery_id), utcnow())
        replay_id = replay.id
    row = delivery(replay_id)
    assert (row.status, row.attempt_count, row.replay_of) == ("pending", 0, delivery_id)
    assert delivery(delivery_id).status == "failed"


def test_replay_of_a_done_delivery_conflicts(setup):
    from webhooks.errors import Conflict

    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    record(claim(delivery_id, 0), 200)
    with session_scope() as session, pytest.raises(Conflict):
        store.replay_delivery(session, session.get(Delivery, delivery_id), utcnow())


def test_deleted_subscription_gets_no_further_attempts(setup):
    account_id, subscription = setup
    delivery_id = emit(account_id).delivery_ids[0]
    with session_scope() as session:
        store.delete_subscription(session, subscription.id, utcnow())
    assert delivery(delivery_id).status == "failed"
    assert claim(delivery_id, 0) is None
    assert emit(account_id).delivery_ids == ()


def test_counter_is_exact_under_concurrent_failures(db, published):
    """16 threads record 160 failures at once on one subscription: the counter says 160."""
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    claims = []
    for _ in range(160):
        claims.append(claim(emit(account_id).delivery_ids[0], 0))
    barrier = threading.Barrier(16)

    def work(chunk):
        barrier.wait()
        for item in chunk:
            record(item, 500, pause_after=1000)

    threads = [threading.Thread(target=work, args=(claims[i::16],)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _subscription(subscription.id).consecutive_failures == 160


def test_concurrent_failures_pause_exactly_once(db, published):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    claims = [claim(emit(account_id).delivery_ids[0], 0) for _ in range(40)]
    results, barrier = [], threading.Barrier(8)

    def work(chunk):
        barrier.wait()
        for item in chunk:
            results.append(record(item, 500, pause_after=25))

    threads = [threading.Thread(target=work, args=(claims[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.paused_subscription for r in results) == 1
    sub = _subscription(subscription.id)
    assert (sub.status, sub.consecutive_failures) == ("paused", 40)


def _make_due(delivery_id):
    with session_scope() as session:
        session.get(Delivery, delivery_id).next_attempt_at = utcnow() - dt.timedelta(seconds=1)


def _subscription(subscription_id) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def test_full_countdown_cap_parks_even_a_short_wait(setup):
    account_id, _ = setup
    delivery_id = emit(account_id).delivery_ids[0]
    claimed = claim(delivery_id, 0)
    result = record(claimed, 500, countdown_room=False)
    assert result.status == "pending" and result.dispatch is None
    assert delivery(delivery_id).parked is True


def test_countdown_budget_counts_riding_retries_and_stops_at_the_cap(setup, monkeypatch):
    from webhooks.broker.countdowns import CountdownBudget, riding_countdowns

    account_id, _ = setup
    ids = [emit(account_id).delivery_ids[0] for _ in range(3)]
    for delivery_id in ids[:2]:
        record(claim(delivery_id, 0), 500)  # 60 s waits riding countdowns
    with get_engine().begin() as connection:
        assert riding_countdowns(connection, utcnow()) == 2
        budget = CountdownBudget(maximum=3)
        assert budget.take(connection, utcnow()) is True  # 2 riding + 1 issued = 3
        assert budget.take(connection, utcnow()) is False
        assert CountdownBudget(maximum=2).take(connection, utcnow()) is False
