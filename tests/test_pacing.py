"""A subscription's rate_limit (webhooks/lifecycle/pacing.py): slots shared by every claim, waiting
that is not an attempt, on PostgreSQL and SQLite. Times are given, never waited for."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select, update

from tests.factories import make_account, make_subscription
from tests.test_store import delivery, emit, record
from webhooks.lifecycle import pacing
from webhooks.lifecycle.claim import Claim, claim
from webhooks.lifecycle.policy import Rules
from webhooks.sender.post import AttemptResult
from webhooks.services.attempt import run_attempt
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Attempt, Subscription, utcnow

RULES = Rules((60, 300), countdown_limit=300, pause_after=25)


@pytest.fixture
def limited(any_db, published):
    """A subscription limited to 2 attempts per second."""
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    _set(subscription.id, rate_limit=2.0)
    return subscription


def _set(subscription_id, **values):
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(**values))


def _subscription(subscription_id) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def admit(delivery_id, now, count=0, rules=RULES, room=True):
    """Claim and admit in one transaction, as a worker does (delivery._claim)."""
    with get_engine().begin() as connection:
        claimed = claim(connection, delivery_id, count, now)
        if claimed is None:
            return None
        return pacing.admit(connection, claimed, now, rules, countdown_room=lambda: room)


def test_attempts_over_the_rate_wait_for_their_own_slots_and_are_not_attempts(limited):
    now = utcnow()
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(3)]
    first, second, third = (admit(delivery_id, now) for delivery_id in ids)

    assert isinstance(first, Claim)
    assert isinstance(second, pacing.Paced) and isinstance(third, pacing.Paced)
    assert second.wait == pytest.approx(0.5, abs=0.01) and third.wait == pytest.approx(1.0, abs=0.01)
    assert (second.dispatch.delivery_id, second.dispatch.attempt_count) == (ids[1], 0)
    assert second.dispatch.countdown == pytest.approx(0.5, abs=0.01)
    for delivery_id, wait in ((ids[1], 0.5), (ids[2], 1.0)):
        row = delivery(delivery_id)
        assert (row.status, row.attempt_count, row.paced, row.parked) == ("pending", 0, True, False)
        assert (row.next_attempt_at - now).total_seconds() == pytest.approx(wait, abs=0.01)
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Attempt)) == 0
    assert _subscription(limited.id).consecutive_failures == 0


def test_a_paced_delivery_goes_at_its_slot_without_taking_another(limited):
    now = utcnow()
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(2)]
    admit(ids[0], now)
    paced = admit(ids[1], now)
    slots_taken = _subscription(limited.id).rate_next_slot
    at_its_slot = now + dt.timedelta(seconds=paced.wait)
    claimed = admit(ids[1], at_its_slot)
    assert isinstance(claimed, Claim) and claimed.attempt_number == 1
    assert _subscription(limited.id).rate_next_slot == slots_taken


def test_after_its_attempt_a_delivery_takes_a_new_slot_for_its_retry(limited):
    now = utcnow()
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(2)]
    admit(ids[0], now)
    paced = admit(ids[1], now)
    claimed = admit(ids[1], now + dt.timedelta(seconds=paced.wait))
    record(claimed, 500)
    assert delivery(ids[1]).paced is False


def test_a_wait_beyond_the_countdown_limit_or_the_budget_is_parked_for_the_sweep(limited):
    _set(limited.id, rate_limit=0.01)  # one attempt per 100 s
    now = utcnow()
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(3)]
    admit(ids[0], now)
    long_wait = admit(ids[1], now, rules=Rules((60,), countdown_limit=30, pause_after=25))
    no_room = admit(ids[2], now, room=False)
    for paced in (long_wait, no_room):
        assert isinstance(paced, pacing.Paced) and paced.dispatch is None
        row = delivery(paced.delivery_id)
        assert (row.status, row.parked, row.paced) == ("pending", True, True)
    assert long_wait.wait == pytest.approx(100, abs=0.1)
    assert no_room.wait == pytest.approx(200, abs=0.1)


def test_without_a_limit_nothing_waits_and_no_slot_is_kept(any_db, published):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    now = utcnow()
    ids = [emit(account_id).delivery_ids[0] for _ in range(3)]
    assert all(isinstance(admit(delivery_id, now), Claim) for delivery_id in ids)
    assert _subscription(subscription.id).rate_next_slot is None


def test_an_idle_subscription_starts_from_now_not_from_its_old_slot(limited):
    _set(limited.id, rate_next_slot=utcnow().timestamp() - 3600)
    delivery_id = emit(limited.account_id).delivery_ids[0]
    assert isinstance(admit(delivery_id, utcnow()), Claim)


def test_concurrent_claims_take_distinct_slots_spaced_by_the_rate(limited):
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(8)]
    now = utcnow()
    results, start = {}, threading.Barrier(len(ids))

    def work(delivery_id):
        start.wait()
        results[delivery_id] = admit(delivery_id, now)

    threads = [threading.Thread(target=work, args=(delivery_id,)) for delivery_id in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    waits = sorted(0.0 if isinstance(r, Claim) else r.wait for r in results.values())
    assert waits == pytest.approx([i * 0.5 for i in range(8)], abs=0.01)


class Ok:
    def __call__(self, url, body, headers):
        return AttemptResult(status_code=200, error=None, duration_ms=1)


def _no_hold(monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_SLOT_HOLD_MS", "0")
    reset_settings_cache()


def test_run_attempt_sends_one_and_hands_the_others_to_countdowns(limited, published,
                                                                   monkeypatch):
    _no_hold(monkeypatch)
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(3)]
    published.settled().clear()
    statuses = [run_attempt(delivery_id, 0, sender=Ok()) for delivery_id in ids]
    assert statuses == ["done", None, None]
    countdowns = sorted((d.delivery_id, d.attempt_count) for d in published)
    assert countdowns == sorted((delivery_id, 0) for delivery_id in ids[1:])
    assert all(0 < d.countdown <= 1.5 for d in published)


def test_a_slot_within_the_hold_is_held_and_a_later_one_given_back(limited):
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(3)]
    now = utcnow()
    with get_engine().begin() as connection:
        answers = [pacing.admit(connection, claim(connection, delivery_id, 0, now), now, RULES,
                                hold_max=0.6) for delivery_id in ids]
    first, second, third = answers
    assert isinstance(first, Claim)
    assert isinstance(second, pacing.Held)  # its slot, 0.5 s on, is within the hold
    assert (second.slot - now).total_seconds() == pytest.approx(0.5, abs=0.01)
    assert isinstance(third, pacing.Paced) and third.wait == pytest.approx(1.0, abs=0.01)
    assert delivery(second.claim.delivery_id).status == "sending"  # the claim is kept
    assert delivery(third.delivery_id).status == "pending"  # given back


class Timed:
    """A sender that notes when (monotonic seconds) each POST went."""

    def __init__(self):
        self.sent: list[float] = []

    def __call__(self, url, body, headers):
        import time

        self.sent.append(time.monotonic())
        return AttemptResult(status_code=200, error=None, duration_ms=1)


def test_run_attempt_holds_a_near_slot_and_sends_at_it(limited, published):
    _set(limited.id, rate_limit=20.0)  # slots 50 ms apart: each within the default hold
    ids = [emit(limited.account_id).delivery_ids[0] for _ in range(4)]
    published.settled().clear()
    sender = Timed()
    statuses = [run_attempt(delivery_id, 0, sender=sender) for delivery_id in ids]
    assert statuses == ["done"] * 4  # none given back
    assert list(published) == []  # no countdown message
    # Each waited for its own slot (150 ms after the first's; the first went a few ms
    # after its own claim, so the span is a little shorter).
    assert sender.sent[-1] - sender.sent[0] >= 0.12, sender.sent
    with session_scope() as session:
        counts = dict(session.execute(select(Attempt.delivery_id, func.count())
                                      .group_by(Attempt.delivery_id)).all())
    assert counts == {delivery_id: 1 for delivery_id in ids}


def test_the_hold_never_reaches_half_the_recovery_time(monkeypatch):
    from webhooks.config import get_settings, reset_settings_cache
    from webhooks.services.attempt import slot_hold

    monkeypatch.setenv("WEBHOOKS_SLOT_HOLD_MS", "5000")
    monkeypatch.setenv("WEBHOOKS_RECOVER_AFTER", "4")
    reset_settings_cache()
    assert slot_hold(get_settings()) == 2.0
    monkeypatch.setenv("WEBHOOKS_RECOVER_AFTER", "120")
    reset_settings_cache()
    assert slot_hold(get_settings()) == 5.0
