"""Endpoint-aware delivery (CONTRACT 9.4) through a real worker process on the real Redis
and PostgreSQL: a 503's ``Retry-After`` stretches the wait before the next attempt (capped
by WEBHOOKS_RETRY_AFTER_MAX), and a ``410 Gone`` fails the delivery and pauses the
subscription at once, holding the rest, while a test.ping answered 410 pauses nothing."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from tests.factories import make_subscription
from tests.support.pipeline import PIPELINE_ENV, attempts_of, delivery_status, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle.pace_rate import FLOOR_PER_S
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

pytestmark = pytest.mark.integration

# A ladder of 1 s steps, pausing only after 25 failures: a pause seen here is the 410's.
ENV = {**PIPELINE_ENV, "WEBHOOKS_RETRY_AFTER_MAX": "3600"}


worker, account = worker_fixtures(ENV)


def _delivery(delivery_id: str) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


def _recorded(delivery_id: str, attempts: int) -> bool:
    """The delivery's attempt ``attempts`` is recorded (the claim counts it while it is
    still in flight: ``sending``)."""
    delivery = _delivery(delivery_id)
    return delivery.attempt_count == attempts and delivery.status != "sending"


def _subscription(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def test_retry_after_on_a_503_sets_the_next_attempt(account, receiver):
    receiver.script("/busy", ("headers", 503, {"Retry-After": "120"}), 200)
    make_subscription(account, receiver.url("/busy"))
    delivery_id = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    receiver.wait_for(1, "/busy")
    wait_until(lambda: _recorded(delivery_id, 1), what="attempt 1 recorded")
    delivery = _delivery(delivery_id)
    wait = (delivery.next_attempt_at - utcnow()).total_seconds()
    assert delivery.status == "pending" and 110 <= wait <= 121  # not the ladder's 1 s
    time.sleep(3)
    assert len(receiver.received("/busy")) == 1  # the ladder's step has passed: no retry yet


def test_retry_after_as_a_date_past_the_cap_waits_the_cap(account, receiver):
    far = utcnow() + dt.timedelta(days=2)
    receiver.script("/later", ("headers", 429, {"Retry-After": far.strftime(
        "%a, %d %b %Y %H:%M:%S GMT")}), 200)
    make_subscription(account, receiver.url("/later"))
    delivery_id = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: _recorded(delivery_id, 1), what="attempt 1 recorded")
    delivery = _delivery(delivery_id)
    wait = (delivery.next_attempt_at - utcnow()).total_seconds()
    assert 3590 <= wait <= 3601  # WEBHOOKS_RETRY_AFTER_MAX, not two days
    assert delivery.parked  # longer than the countdown limit: the sweep carries it


def test_a_retry_after_that_does_not_parse_keeps_the_ladder(account, receiver):
    receiver.script("/junk", ("headers", 503, {"Retry-After": "soon, please"}), 200)
    make_subscription(account, receiver.url("/junk"))
    delivery_id = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "done", what="done on the ladder")
    assert attempts_of(delivery_id) == [(1, 503, "retry"), (2, 200, "success")]


def test_410_fails_the_delivery_and_pauses_the_subscription_holding_the_rest(account, receiver):
    receiver.script("/gone", ("hang", 1, 410), 200)
    subscription = make_subscription(account, receiver.url("/gone"))
    with session_scope() as session:  # one at a time: the second waits for the first's slot
        session.get(Subscription, subscription.id).max_in_flight = 1
    first = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    receiver.wait_for(1, "/gone")
    # Emitted while the first attempt is in flight: waiting when the 410 comes back.
    second = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: delivery_status(first) == "failed", what="failed")
    row = _subscription(subscription.id)
    assert (row.status, row.paused_reason, row.consecutive_failures) == ("paused", "gone", 1)
    wait_until(lambda: delivery_status(second) == "paused", what="the second held")
    third = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    time.sleep(2)
    assert delivery_status(third) == "paused"
    assert attempts_of(first) == [(1, 410, "permanent_failure")]
    assert len(receiver.received("/gone")) == 1  # nothing was sent after the 410

    from webhooks.broker import outbox
    from webhooks.lifecycle import changes

    with session_scope() as session:
        changes.resume_subscription(session, subscription.id, utcnow())
    assert outbox.request_sweep()
    wait_until(lambda: {delivery_status(second), delivery_status(third)} == {"done"},
               what="resumed and sent")
    assert _subscription(subscription.id).paused_reason is None


def test_a_test_ping_answered_410_fails_but_pauses_nothing(account, receiver):
    receiver.script("/ping-gone", 410)
    subscription = make_subscription(account, receiver.url("/ping-gone"))
    ping = emit_event(account, "test.ping", sample_data("test.ping")).delivery_ids[0]
    wait_until(lambda: delivery_status(ping) == "failed", what="failed")
    row = _subscription(subscription.id)
    assert (row.status, row.paused_reason, row.consecutive_failures) == ("active", None, 1)


def test_a_429_paces_the_subscription_to_the_rate_its_receiver_accepted(account, receiver):
    """The adaptive pace's rate (pace_rate.py) through the real worker: five accepted, then
    a 429; the deliveries after it go at the paced rate (just under five a second), each
    in one attempt, none counted as a failure, and the API shows the rate in force."""
    from webhooks.services.subscriptions import option_values

    receiver.script("/quota", 200)
    subscription = make_subscription(account, receiver.url("/quota"))
    accepted = [emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
                for _ in range(5)]
    wait_until(lambda: all(delivery_status(d) == "done" for d in accepted), what="5 done")
    receiver.script("/quota", ("headers", 429, {"Retry-After": "1"}), 200)
    refused = emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: _subscription(subscription.id).pace_rate is not None, what="paced")
    rate = _subscription(subscription.id).pace_rate
    assert FLOOR_PER_S <= rate <= 0.95 * 5 + 1e-9  # at most 5 accepted in the window

    start = len(receiver.received("/quota"))
    paced = [emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
             for _ in range(10)]
    wait_until(lambda: all(delivery_status(d) == "done" for d in [*paced, refused]),
               what="the paced deliveries done")
    arrivals = sorted(r.at for r in receiver.received("/quota")[start:])
    # 11 arrivals (the ten and the refused one's retry) at no more than the paced rate.
    assert len(arrivals) == 11
    assert arrivals[-1] - arrivals[0] >= 0.9 * 10 / (rate * 1.01)
    assert all(attempts_of(d) == [(1, 200, "success")] for d in paced)  # waiting: no attempt
    assert [code for _, code, _ in attempts_of(refused)] == [429, 200]
    row = _subscription(subscription.id)
    assert row.consecutive_failures == 0
    with session_scope() as session:
        shown = option_values(session.get(Subscription, subscription.id))["current_rate_limit"]
    assert rate <= shown <= rate * 1.05  # climbing from it
