"""One tenant cannot starve the others: an account that hammers Send test at a hanging
endpoint holds a few worker threads, and a healthy account's deliveries flow meanwhile.

A real threads worker with 6 threads. The attacker has 4 subscriptions pointing at an
endpoint that hangs for longer than the test, and sends 5 test pings to each (20 in
all): without the caps they would take every thread. test.ping's own cap (2 per
subscription) and the account's cap (3 in flight) leave it 3 threads at most.
"""

from __future__ import annotations

import pytest

from tests.factories import make_account, make_subscription
from tests.support.stack import wait_until
from tests.support.worker import threads_worker
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.emit import send_test
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription

pytestmark = pytest.mark.integration

HANG_S = 20.0
SETTINGS = {
    "WEBHOOKS_TIMEOUT": "15",
    "WEBHOOKS_TEST_MAX_IN_FLIGHT": "2",
    "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": "3",
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receivers are on 127.0.0.1
}


@pytest.fixture
def worker(postgres, db, monkeypatch):
    process = threads_worker(monkeypatch, SETTINGS, concurrency=6)
    yield process
    process.kill()


def test_send_test_at_a_hanging_endpoint_does_not_starve_a_healthy_account(worker, receiver):
    receiver.script("/hang", ("hang", HANG_S, 200))
    receiver.script("/healthy", 200)
    attacker, _ = make_account("attacker")
    hanging = [make_subscription(attacker, receiver.url("/hang")) for _ in range(4)]
    for subscription in hanging:
        for _ in range(5):
            with session_scope() as session:
                send_test(session, session.get(Subscription, subscription.id))
    assert outbox.flush(10)
    receiver.wait_for(3, "/hang", timeout=20)  # the attacker holds what its caps allow

    healthy, _ = make_account("healthy")
    make_subscription(healthy, receiver.url("/healthy"))
    ids = [emit_event(healthy, "email.sent", sample_data("email.sent")).delivery_ids[0]
           for _ in range(20)]
    # All twenty arrive while every hanging request is still open.
    receiver.wait_for(20, "/healthy", timeout=HANG_S / 2)
    wait_until(lambda: _statuses(ids) == {"done"}, timeout=10, what="the healthy deliveries done")
    assert len(receiver.received("/hang")) == 3, worker.log()


def _statuses(ids) -> set[str]:
    with session_scope() as session:
        return {session.get(Delivery, i).status for i in ids}
