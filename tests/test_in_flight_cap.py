"""WEBHOOKS_MAX_IN_FLIGHT: at most N attempts in flight per subscription, the rest wait.

On PostgreSQL and SQLite (the same code serves both): a claim past the cap
parks the delivery as waiting (no message, no due time); each recorded
attempt of the subscription releases the oldest waiting one; the sweep
releases them for a subscription with nothing in flight.
"""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from tests.test_store import delivery, emit, record
from webhooks.lifecycle.claim import Caps, claim as claim_attempt
from webhooks.lifecycle.sweep import sweep
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, utcnow

CAP = 2


@pytest.fixture
def subscription(any_db, published):
    account_id, _ = make_account()
    return make_subscription(account_id, "https://example.com/hook")


def claim(delivery_id, count=0, cap=CAP):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, count, utcnow(), Caps(subscription=cap))


def is_waiting(delivery_id) -> bool:
    row = delivery(delivery_id)
    return (row.status, row.parked, row.next_attempt_at) == ("pending", True, None)


def emit_n(subscription, n, event_type="email.sent"):
    return [emit(subscription.account_id, event_type).delivery_ids[0] for _ in range(n)]


def test_a_claim_past_the_cap_waits_and_a_record_releases_the_oldest(subscription, published):
    first, second, third, fourth = emit_n(subscription, 4)
    claims = [claim(first), claim(second)]
    assert all(claims)
    assert claim(third) is None and is_waiting(third)
    assert claim(fourth) is None and is_waiting(fourth)
    assert delivery(third).attempt_count == 0  # waiting is not an attempt

    outcome = record(claims[0], 200)
    assert [(d.delivery_id, d.attempt_count) for d in outcome.released] == [(third, 0)]
    row = delivery(third)
    assert (row.status, row.parked) == ("pending", False) and row.next_attempt_at is not None
    assert is_waiting(fourth)  # one slot freed, one delivery released
    assert claim(third) is not None


def test_a_failed_attempt_releases_too_and_its_retry_is_not_held_by_the_cap(subscription, published):
    first, second, third = emit_n(subscription, 3)
    claimed = [claim(first), claim(second)]
    assert claim(third) is None
    outcome = record(claimed[0], 500)
    assert outcome.status == "pending" and outcome.dispatch is not None  # its retry, on a countdown
    assert [d.delivery_id for d in outcome.released] == [third]


def test_without_a_cap_nothing_waits(subscription):
    ids = emit_n(subscription, 4)
    assert all(claim(delivery_id, cap=0) for delivery_id in ids)


def test_test_ping_is_never_held_by_the_cap(subscription):
    emit_n(subscription, CAP)
    assert all(claim(d) for d in [delivery.id for delivery in _pending(subscription)])
    ping = emit(subscription.account_id, "test.ping").delivery_ids[0]
    assert claim(ping) is not None


def test_a_stale_message_does_not_park_a_delivery(subscription):
    ids = emit_n(subscription, CAP + 1)
    for delivery_id in ids[:CAP]:
        claim(delivery_id)
    last = ids[-1]
    assert claim(last, count=3) is None  # a message for another attempt
    row = delivery(last)
    assert (row.parked, row.next_attempt_at is not None) == (False, True)


def test_the_cap_counts_only_this_subscriptions_attempts(subscription):
    other = make_subscription(subscription.account_id, "https://example.org/other")
    for _ in range(CAP):
        emit(subscription.account_id)  # fans out to both subscriptions
    mine, theirs = _pending(subscription), _pending(other)
    assert all(claim(d.id) for d in mine)  # this subscription is at its cap
    assert all(claim(d.id) for d in theirs)  # the other is not held by it


def test_the_sweep_releases_waiting_deliveries_of_an_idle_subscription(subscription):
    ids = emit_n(subscription, CAP + 3)
    held = [claim(d) for d in ids[:CAP]]
    for delivery_id in ids[CAP:]:
        assert claim(delivery_id) is None
    assert _sweep() == []  # attempts in flight: their records release, not the sweep

    # Both workers die without recording: the sweep takes the claims back after the
    # time-out plus recover_after, and releases CAP waiting deliveries meanwhile.
    with get_engine().begin() as connection:
        connection.execute(update(Delivery).where(Delivery.id.in_([c.delivery_id for c in held]))
                           .values(status="pending", attempt_count=0, claimed_at=None))
    released = _sweep()
    assert sorted(d.delivery_id for d in released) == sorted(ids[CAP:CAP + CAP])
    assert is_waiting(ids[-1])


def test_with_the_cap_turned_off_the_sweep_releases_every_waiting_delivery(subscription):
    ids = emit_n(subscription, CAP + 3)
    for delivery_id in ids:
        claim(delivery_id)
    with get_engine().begin() as connection:  # the claims end; no record releases anything
        connection.execute(update(Delivery).where(Delivery.status == "sending")
                           .values(status="done"))
    assert sorted(d.delivery_id for d in _sweep(max_in_flight=0)) == sorted(ids[CAP:])


def _sweep(max_in_flight=CAP):
    with session_scope() as session:
        return sweep(session, utcnow() + dt.timedelta(seconds=1), timeout=15,
                           recover_after=120, batch=100, max_in_flight=max_in_flight)


def _pending(subscription):
    with session_scope() as session:
        return session.scalars(select(Delivery).where(
            Delivery.subscription_id == subscription.id, Delivery.status == "pending")).all()


def test_an_event_for_a_subscription_with_waiting_deliveries_queues_without_a_message(
    subscription, published
):
    ids = emit_n(subscription, CAP + 1)
    for delivery_id in ids:
        claim(delivery_id)
    assert is_waiting(ids[-1])
    before = len(published.settled())
    queued = emit_n(subscription, 1)[0]
    assert is_waiting(queued)
    assert len(published.settled()) == before  # no broker message: a release sends it

    # A test ping is never queued: "Send test" must go out at once.
    ping = emit(subscription.account_id, "test.ping").delivery_ids[0]
    assert not is_waiting(ping)
    assert [p.delivery_id for p in published.settled()][-1] == ping


def test_releases_follow_the_order_of_creation(subscription):
    ids = emit_n(subscription, CAP + 3)
    held = [claim(d) for d in ids]
    released = []
    for claim_ in held[:CAP]:
        released += [d.delivery_id for d in record(claim_, 200).released]
    assert released == ids[CAP:CAP + CAP]


def test_concurrent_claims_never_overshoot_the_cap(subscription):
    """Eight threads claim at once: exactly CAP win, the rest wait (a soft cap would let
    several see the same count and all claim)."""
    ids = emit_n(subscription, 8)
    barrier = threading.Barrier(len(ids))
    results = {}

    def worker(delivery_id):
        barrier.wait()
        results[delivery_id] = claim(delivery_id)

    threads = [threading.Thread(target=worker, args=(d,)) for d in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(1 for c in results.values() if c is not None) == CAP
    assert sum(1 for d in ids if is_waiting(d)) == len(ids) - CAP


# --- a subscription's own max_in_flight ---------------------------------------------------


def _own_cap(subscription, value):
    from webhooks.storage.models import Subscription

    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(max_in_flight=value))


def test_a_subscription_s_max_in_flight_lowers_the_service_s(subscription):
    _own_cap(subscription, 1)
    first, second = emit_n(subscription, 2)
    assert claim(first, cap=10) is not None
    assert claim(second, cap=10) is None and is_waiting(second)


def test_a_subscription_s_max_in_flight_raises_the_service_s(subscription):
    _own_cap(subscription, 3)
    ids = emit_n(subscription, 4)
    assert all(claim(delivery_id, cap=1) for delivery_id in ids[:3])
    assert claim(ids[3], cap=1) is None and is_waiting(ids[3])


def test_a_subscription_s_max_in_flight_holds_with_every_service_cap_off(subscription):
    _own_cap(subscription, 1)
    first, second = emit_n(subscription, 2)
    assert claim(first, cap=0) is not None
    assert claim(second, cap=0) is None and is_waiting(second)


def test_the_sweep_releases_up_to_the_subscription_s_own_cap(subscription):
    _own_cap(subscription, 2)
    ids = emit_n(subscription, 5)
    for delivery_id in ids:
        with session_scope() as session:
            session.execute(update(Delivery).where(Delivery.id == delivery_id)
                            .values(parked=True, next_attempt_at=None))
    with session_scope() as session:
        released = sweep(session, utcnow(), timeout=15, recover_after=120, batch=100,
                         max_in_flight=10)
    assert sorted(d.delivery_id for d in released) == sorted(ids[:2])
