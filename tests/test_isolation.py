"""A hanging endpoint beside a healthy one, through a real threads worker.

The worker runs the Procfile's pool (threads) with 4 threads and
WEBHOOKS_MAX_IN_FLIGHT=1: the hanging endpoint may hold one thread, so the
healthy endpoint's deliveries go out while it hangs, and the hanging
endpoint's deliveries still all arrive, one at a time.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from tests.factories import make_account, make_subscription
from tests.support.stack import wait_until
from tests.support.worker import threads_worker
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery

pytestmark = pytest.mark.integration

HANG_S = 3.0
SLOW_EVENTS = 2
SETTINGS = {
    "WEBHOOKS_MAX_IN_FLIGHT": "1",
    "WEBHOOKS_TIMEOUT": "5",
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
}


@pytest.fixture
def worker(postgres, db, monkeypatch):
    process = threads_worker(monkeypatch, SETTINGS, concurrency=4)
    yield process
    process.stop()


def test_a_hanging_endpoint_holds_one_thread_and_the_healthy_one_flows(worker, receiver):
    account_id, _ = make_account()
    receiver.script("/slow", ("hang", HANG_S, 200))
    receiver.script("/fast", 200)
    slow = make_subscription(account_id, receiver.url("/slow"), event_types=["email.bounced"])
    make_subscription(account_id, receiver.url("/fast"), event_types=["email.sent"])

    slow_ids = [emit_event(account_id, "email.bounced", sample_data("email.bounced")).delivery_ids[0]
                for _ in range(SLOW_EVENTS)]
    for _ in range(10):
        emit_event(account_id, "email.sent", sample_data("email.sent"))

    # All ten healthy deliveries arrive while the first slow attempt is still hanging
    # (measured from the slow request's arrival, so a slow machine does not matter).
    fast = receiver.wait_for(10, "/fast", timeout=30)
    first_slow = receiver.wait_for(1, "/slow", timeout=30)[0]
    assert max(r.at for r in fast) < first_slow.at + HANG_S, worker.log()
    assert len([r for r in receiver.received("/slow") if r.at < first_slow.at + HANG_S]) == 1

    # The slow endpoint gets every delivery, once each, one at a time.
    wait_until(lambda: _statuses(slow_ids) == ["done"] * SLOW_EVENTS, timeout=30,
               what=f"the slow deliveries to finish: {_statuses(slow_ids)}\n{worker.log()}")
    windows = _attempt_windows(slow.id)
    assert len(windows) == SLOW_EVENTS
    for (_, end), (next_start, _) in zip(windows, windows[1:]):
        assert next_start >= end, f"attempts overlapped: {windows}"
    arrived = [r.headers["X-Service-Delivery-Id"] for r in receiver.received("/slow")]
    assert sorted(arrived) == sorted(slow_ids)


def _statuses(ids):
    with session_scope() as session:
        return [session.get(Delivery, i).status for i in ids]


def _attempt_windows(subscription_id):
    with session_scope() as session:
        rows = session.execute(
            select(Attempt.started_at, Attempt.duration_ms)
            .join(Delivery, Delivery.id == Attempt.delivery_id)
            .where(Delivery.subscription_id == subscription_id)
            .order_by(Attempt.started_at)
        ).all()
    # Milliseconds are rounded down when stored: allow 1 ms between windows.
    return [(start, start + dt.timedelta(milliseconds=duration - 1)) for start, duration in rows]
