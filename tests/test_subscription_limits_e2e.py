"""A subscription's own limits through a real worker process (threads pool, with beat).

- ``rate_limit`` 2 per second: 20 events emitted at once arrive spread over at
  least 9 s, every one of them, each in one attempt (waiting is not an attempt).
- ``max_in_flight`` 1 against a slow receiver (the service's cap stays at 10,
  and the worker has 4 threads): never two requests open at once.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select, update

from tests.factories import make_account, make_subscription
from tests.support.stack import wait_until
from tests.support.worker import threads_worker
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription

pytestmark = pytest.mark.integration

SETTINGS = {
    "WEBHOOKS_TIMEOUT": "5",
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
}


@pytest.fixture
def worker(postgres, db, monkeypatch):
    process = threads_worker(monkeypatch, SETTINGS, concurrency=4)
    yield process
    process.stop()


def _subscription(receiver, path, **limits) -> str:
    account_id, _ = make_account()
    subscription = make_subscription(account_id, receiver.url(path))
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(**limits))
    return account_id, subscription.id


def _done(subscription_id) -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(Delivery).where(
            Delivery.subscription_id == subscription_id, Delivery.status == "done"))


def _attempts(subscription_id):
    with session_scope() as session:
        return session.execute(
            select(Attempt.delivery_id, Attempt.number, Attempt.started_at, Attempt.duration_ms)
            .join(Delivery, Delivery.id == Attempt.delivery_id)
            .where(Delivery.subscription_id == subscription_id)
            .order_by(Attempt.started_at)
        ).all()


def test_a_rate_limit_of_2_per_second_spreads_20_events_over_9_seconds(worker, receiver):
    account_id, subscription_id = _subscription(receiver, "/paced", rate_limit=2.0)
    ids = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
           for _ in range(20)]

    arrived = receiver.wait_for(20, "/paced", timeout=90)
    wait_until(lambda: _done(subscription_id) == 20, timeout=30,
               what=lambda: f"20 done, {_done(subscription_id)} so far\n{worker.log()}")
    times = sorted(request.at for request in arrived)
    assert times[-1] - times[0] >= 9.0, (times, worker.log())
    # Every delivery arrived once, in one attempt: waiting for the rate is not an attempt.
    delivered = sorted(request.headers["X-Service-Delivery-Id"] for request in arrived)
    assert delivered == sorted(ids)
    attempts = _attempts(subscription_id)
    assert sorted((a.delivery_id, a.number) for a in attempts) == sorted((i, 1) for i in ids)


def test_max_in_flight_1_never_opens_two_requests_at_once(worker, receiver):
    hang_s, events = 1.0, 4
    receiver.script("/slow", ("hang", hang_s, 200))
    account_id, subscription_id = _subscription(receiver, "/slow", max_in_flight=1)
    for _ in range(events):
        emit_event(account_id, "email.sent", sample_data("email.sent"))

    arrived = receiver.wait_for(events, "/slow", timeout=60)
    wait_until(lambda: _done(subscription_id) == events, timeout=30,
               what=lambda: f"{events} done\n{worker.log()}")
    # A request arrives only after the previous one was answered (it hangs hang_s).
    times = sorted(request.at for request in arrived)
    for earlier, later in zip(times, times[1:]):
        assert later - earlier >= hang_s - 0.01, (times, worker.log())
    # And the attempts recorded by the workers never overlap.
    windows = [(a.started_at, a.started_at + dt.timedelta(milliseconds=a.duration_ms - 1))
               for a in _attempts(subscription_id)]
    assert len(windows) == events
    for (_, end), (next_start, _) in zip(windows, windows[1:]):
        assert next_start >= end, windows
