"""Every row of the delivery and subscription tables (SPEC 3.1, 3.2 and 7; docs/api.md,
"Statuses") through ``run_attempt`` with a fake sender, on SQLite: the fast tier.

No server: the database is a SQLite file, the sender a function, and the
outbox a list (what would go to the broker).
"""

from __future__ import annotations

import pytest

from tests.factories import make_account, make_subscription
from webhooks.config import load_settings
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import changes as store
from webhooks.sender.post import AttemptResult
from webhooks.services.attempt import run_attempt
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

SETTINGS = load_settings({"WEBHOOKS_RETRY_DELAYS": "60,300,1800,7200,43200",
                          "WEBHOOKS_PAUSE_AFTER": "25"})


@pytest.fixture
def outbox(sqlite_db, monkeypatch):
    """The messages that would go to the broker, in memory."""
    sent = []
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: sent.extend(items) or [])
    monkeypatch.setattr("webhooks.broker.outbox.publish", lambda items, timeout=None: sent.extend(items) or True)
    return sent


@pytest.fixture
def delivery(outbox):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    return delivery_id, subscription.id


def answering(status_code):
    """A fake sender: every attempt gets ``status_code`` (None: no response)."""
    error = None if status_code is not None else "connection refused"
    return lambda url, body, headers: AttemptResult(status_code, error, 3)


def attempt(delivery_id, status_code):
    """Make the delivery due and run its next attempt; returns its new status."""
    with session_scope() as session:
        row = session.get(Delivery, delivery_id)
        row.next_attempt_at, count = utcnow(), row.attempt_count
    return run_attempt(delivery_id, count, sender=answering(status_code), settings=SETTINGS)


def outcomes(delivery_id):
    with session_scope() as session:
        return [a.outcome for a in session.query(Attempt).filter_by(delivery_id=delivery_id)
                .order_by(Attempt.number)]


@pytest.mark.parametrize("status_code", [200, 201, 204, 299])
def test_2xx_is_done(delivery, status_code):
    delivery_id, _ = delivery
    assert attempt(delivery_id, status_code) == "done"
    assert outcomes(delivery_id) == ["success"]


@pytest.mark.parametrize("status_code", [400, 401, 404, 410, 499])
def test_4xx_other_than_429_fails_for_good(delivery, status_code):
    delivery_id, _ = delivery
    assert attempt(delivery_id, status_code) == "failed"
    assert outcomes(delivery_id) == ["permanent_failure"]


@pytest.mark.parametrize("status_code", [429, 500, 503, 302, 100, None])
def test_any_other_outcome_is_retried_after_the_ladder_wait(delivery, outbox, status_code):
    delivery_id, _ = delivery
    assert attempt(delivery_id, status_code) == "pending"
    assert outbox[-1].delivery_id == delivery_id and outbox[-1].countdown == 60


def test_the_sixth_failed_attempt_is_dead_and_the_ladder_is_walked(delivery, outbox):
    delivery_id, _ = delivery
    assert [attempt(delivery_id, 500) for _ in range(6)] == ["pending"] * 5 + ["dead"]
    assert outcomes(delivery_id) == ["retry"] * 5 + ["dead"]
    # 60 s and 300 s ride countdowns; 30 min, 2 h and 12 h are parked for the sweep.
    assert [d.countdown for d in outbox if d.delivery_id == delivery_id][1:] == [60, 300]
    with session_scope() as session:
        assert session.get(Delivery, delivery_id).parked is False  # dead: nothing to send


def test_25_consecutive_failures_pause_and_resume_releases(outbox):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "https://example.com/hook")
    ids = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
           for _ in range(26)]
    statuses = [attempt(delivery_id, 503) for delivery_id in ids[:25]]
    assert statuses == ["pending"] * 24 + ["paused"]
    with session_scope() as session:
        paused = session.get(Subscription, subscription.id)
        assert (paused.status, paused.consecutive_failures) == ("paused", 25)
        assert {session.get(Delivery, i).status for i in ids} == {"paused"}
        assert store.resume_subscription(session, subscription.id, utcnow()) == 26
    with session_scope() as session:
        assert session.get(Subscription, subscription.id).status == "active"


def test_a_success_resets_the_counter(delivery):
    delivery_id, subscription_id = delivery
    attempt(delivery_id, 500)
    attempt(delivery_id, 200)
    with session_scope() as session:
        assert session.get(Subscription, subscription_id).consecutive_failures == 0


@pytest.mark.parametrize("end_status", [404, "dead"])
def test_a_failed_or_dead_delivery_can_be_replayed(delivery, end_status):
    delivery_id, _ = delivery
    if end_status == "dead":
        for _ in range(6):
            attempt(delivery_id, 500)
    else:
        attempt(delivery_id, end_status)
    with session_scope() as session:
        replay = store.replay_delivery(session, session.get(Delivery, delivery_id), utcnow())
        replay_id = replay.id
    assert attempt(replay_id, 200) == "done"
    assert outcomes(replay_id) == ["success"]
