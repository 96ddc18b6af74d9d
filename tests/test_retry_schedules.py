"""A subscription's own retry schedule through the whole pipeline (CONTRACT 10.4): a real
worker on the real Redis and PostgreSQL, a local receiver that always answers 500. The
subscription with ``[1, 1]`` is ``dead`` after exactly 3 attempts, about 1 s apart; another
of the same account keeps the service's ladder (3 s steps here)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from tests.support.services import PG_URL, REDIS_URL
from tests.support.worker import emit_with, running_worker
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription

pytestmark = pytest.mark.integration

LADDER_STEP = 3  # seconds: the service's ladder, far from the schedule's 1 s
WORKER_ENV = {
    "WEBHOOKS_DATABASE_URL": PG_URL,
    "WEBHOOKS_BROKER_URL": REDIS_URL,
    "WEBHOOKS_RETRY_DELAYS": ",".join([str(LADDER_STEP)] * 5),
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_TIMEOUT": "5",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
    "WEBHOOKS_PAUSE_AFTER": "25",
}


@pytest.fixture(scope="module")
def worker(postgres):
    yield from running_worker(WORKER_ENV)


def wait_until(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def status_of(delivery_id):
    with session_scope() as session:
        return session.get(Delivery, delivery_id).status


def attempts_of(delivery_id):
    with session_scope() as session:
        return [(a.number, a.status_code, a.outcome) for a in session.scalars(
            select(Attempt).where(Attempt.delivery_id == delivery_id).order_by(Attempt.number))]


def test_one_one_is_dead_after_three_attempts_while_the_other_keeps_the_ladder(
        worker, db, receiver, monkeypatch):
    emit_with(monkeypatch, WORKER_ENV)
    receiver.script("/short", 500)
    receiver.script("/ladder", 500)
    account_id, _ = make_account()
    short = make_subscription(account_id, receiver.url("/short")).id
    make_subscription(account_id, receiver.url("/ladder"))
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == short)
                        .values(retry_schedule=[1, 1]))
    emitted = emit_event(account_id, "email.sent", sample_data("email.sent"))
    by_subscription = {}
    with session_scope() as session:
        for delivery in session.scalars(select(Delivery).where(
                Delivery.event_id == emitted.id)):
            by_subscription[delivery.subscription_id] = delivery.id
    short_delivery = by_subscription.pop(short)
    [ladder_delivery] = by_subscription.values()

    wait_until(lambda: status_of(short_delivery) == "dead", 20, "the [1, 1] delivery dead")
    assert attempts_of(short_delivery) == [(1, 500, "retry"), (2, 500, "retry"),
                                           (3, 500, "dead")]
    times = [request.at for request in receiver.received("/short")]
    assert len(times) == 3
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    assert all(0.9 <= gap < LADDER_STEP - 0.5 for gap in gaps), gaps  # 1 s, not the ladder

    receiver.wait_for(2, "/ladder", timeout=20)
    ladder_times = [request.at for request in receiver.received("/ladder")]
    assert ladder_times[1] - ladder_times[0] >= LADDER_STEP - 0.1  # the ladder's step
    # Its second attempt recorded (the request arrives before its record): still retrying,
    # past where [1, 1] ended.
    wait_until(lambda: len(attempts_of(ladder_delivery)) >= 2, 10, "the second attempt recorded")
    assert attempts_of(ladder_delivery)[:2] == [(1, 500, "retry"), (2, 500, "retry")]
    assert status_of(ladder_delivery) in ("pending", "sending")
    time.sleep(1.5)
    assert len(receiver.received("/short")) == 3  # nothing after dead
