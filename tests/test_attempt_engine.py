"""The attempt engine (db.get_attempt_engine) on the real PostgreSQL.

Its connections are in autocommit mode and do not wait for the WAL flush:
a claim commits in its one round trip, a transaction's BEGIN rides with its
first statement, and a crash of the database can lose the last claims and
records. These tests pin what that must never change: nothing after a claim
needs its transaction (the sweep stands in for it), each failure's record is
one transaction with the pause it leads to, and a lost commit costs a
repeated attempt, never a delivery.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import delete, select, text, update

from tests.factories import make_account, make_subscription
from webhooks.config import get_settings, reset_settings_cache
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import record as record_module
from webhooks.lifecycle.sweep import sweep
from webhooks.sender.post import AttemptResult
from webhooks.services.attempt import run_attempt
from webhooks.storage.db import dispose_engine, get_attempt_engine, get_engine, session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

pytestmark = pytest.mark.database


class Receiver:
    """A fake sender: answers ``status`` and remembers each (delivery id, attempt) sent."""

    def __init__(self, status: int = 200):
        self.status, self.sent = status, []

    def __call__(self, url, body, headers):
        header = get_settings().header
        self.sent.append((headers[header("Delivery-Id")], headers[header("Attempt")]))
        return AttemptResult(status_code=self.status, error=None, duration_ms=1)


@pytest.fixture
def quiet_publish(monkeypatch):
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: [])


def _one_delivery() -> tuple[str, str]:
    account_id, _ = make_account("attempt-engine")
    subscription = make_subscription(account_id, "https://example.com/hook")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    return delivery_id, subscription.id


def _row(delivery_id: str) -> tuple[str, int, int]:
    with session_scope() as session:
        delivery = session.get(Delivery, delivery_id)
        attempts = session.scalars(select(Attempt.id).where(Attempt.delivery_id == delivery_id))
        return delivery.status, delivery.attempt_count, len(attempts.all())


def _synchronous_commit(engine) -> str:
    with engine.connect() as connection:
        return connection.execute(text("SHOW synchronous_commit")).scalar_one()


def test_attempts_commit_without_waiting_for_the_flush_unless_told(db, monkeypatch):
    assert _synchronous_commit(get_attempt_engine()) == "off"
    assert _synchronous_commit(get_engine()) == "on"  # emit_event, the API, the sweep
    monkeypatch.setenv("WEBHOOKS_DURABLE_ATTEMPTS", "true")
    reset_settings_cache()
    dispose_engine()
    try:
        assert _synchronous_commit(get_attempt_engine()) == "on"
    finally:
        monkeypatch.delenv("WEBHOOKS_DURABLE_ATTEMPTS")
        reset_settings_cache()
        dispose_engine()


def test_a_paused_subscriptions_delivery_is_held_without_being_claimed(db, quiet_publish):
    """The claim refuses it, and one statement holds it: nothing was claimed, so nothing
    is given back (the claim needs no transaction around what follows it)."""
    delivery_id, subscription_id = _one_delivery()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(status="paused"))
        # As a retry parked for the sweep would be: held, it is parked no more (hold_pending).
        session.execute(update(Delivery).where(Delivery.id == delivery_id).values(parked=True))
    receiver = Receiver()
    assert run_attempt(delivery_id, 0, sender=receiver) is None
    assert receiver.sent == [] and _row(delivery_id) == ("paused", 0, 0)
    with session_scope() as session:
        assert session.get(Delivery, delivery_id).parked is False


def test_a_claim_commits_as_it_returns_and_the_sweep_stands_in_for_what_follows(
        db, quiet_publish, monkeypatch):
    """On the attempt engine the claim commits in its own round trip. If what follows it
    fails (here the rate limit's check), the delivery stays claimed, and the sweep takes
    the claim back, as after a worker's crash; the next message sends attempt 1."""
    delivery_id, subscription_id = _one_delivery()
    with session_scope() as session:  # a rate limit: the check runs (pacing.limited)
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(rate_limit=1000.0))
    seen_by_others = []

    def admit_that_fails(connection, claimed, *args, **kwargs):
        seen_by_others.append(_row(delivery_id))  # another connection, during the attempt
        raise RuntimeError("the rate limit's check failed")

    monkeypatch.setattr("webhooks.lifecycle.pacing.admit", admit_that_fails)
    with pytest.raises(RuntimeError):
        run_attempt(delivery_id, 0, sender=Receiver())
    assert seen_by_others == [("sending", 1, 0)]  # committed before what follows it ran
    assert _row(delivery_id) == ("sending", 1, 0)
    later = utcnow() + dt.timedelta(seconds=600)
    with session_scope() as session:
        found = sweep(session, later, timeout=15, recover_after=120, batch=100)
    assert [(d.delivery_id, d.attempt_count) for d in found] == [(delivery_id, 0)]


def test_a_failures_record_and_the_pause_it_leads_to_are_one_transaction(
        db, quiet_publish, monkeypatch):
    """The attempt that reaches the pause threshold records and pauses in one transaction:
    if pausing fails, then (the internal-error record pausing too) nothing is recorded."""
    monkeypatch.setenv("WEBHOOKS_PAUSE_AFTER", "1")
    reset_settings_cache()
    delivery_id, _ = _one_delivery()

    def pause_that_fails(*args):
        raise RuntimeError("pausing failed")

    monkeypatch.setattr(record_module, "pause_subscription", pause_that_fails)
    with pytest.raises(RuntimeError):
        run_attempt(delivery_id, 0, sender=Receiver(status=500))
    assert _row(delivery_id) == ("sending", 1, 0)  # claimed, nothing recorded: the sweep's


def _due_at(delivery_id: str) -> dt.datetime | None:
    with session_scope() as session:
        return session.get(Delivery, delivery_id).next_attempt_at


def _lose(delivery_id: str, status: str, count: int, due_at: dt.datetime | None) -> None:
    """What a database crash that lost the last commits leaves: the row as it was
    after the last commit that reached the disk."""
    with session_scope() as session:
        session.execute(delete(Attempt).where(Attempt.delivery_id == delivery_id))
        session.execute(update(Delivery).where(Delivery.id == delivery_id).values(
            status=status, attempt_count=count, next_attempt_at=due_at,
            claimed_at=utcnow() if status == "sending" else None))


@pytest.mark.parametrize("lost, state", [
    ("the claim and the record", ("pending", 0)),  # the broker message was acknowledged
    ("the record", ("sending", 1)),
])
def test_a_lost_commit_costs_a_repeated_attempt_never_the_delivery(
        db, quiet_publish, lost, state):
    delivery_id, _ = _one_delivery()
    receiver, due_at = Receiver(), _due_at(delivery_id)
    assert run_attempt(delivery_id, 0, sender=receiver) == "done"
    _lose(delivery_id, *state, due_at)
    later = utcnow() + dt.timedelta(seconds=600)
    with session_scope() as session:
        found = sweep(session, later, timeout=15, recover_after=120, batch=100)
    assert [(d.delivery_id, d.attempt_count) for d in found] == [(delivery_id, 0)]
    with session_scope() as session:  # the sweep's message is due now
        session.execute(update(Delivery).where(Delivery.id == delivery_id)
                        .values(next_attempt_at=utcnow()))
    assert run_attempt(delivery_id, 0, sender=receiver) == "done"
    assert receiver.sent == [(delivery_id, "1"), (delivery_id, "1")]  # the same attempt, twice
    assert _row(delivery_id) == ("done", 1, 1)
