"""An operational endpoint that hangs never blocks customers' deliveries (issue 25).

Two worker processes; the operational endpoint holds every request longer
than the test waits. Three notices wait for it, yet only one attempt is in
flight (WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT, 1): the other process keeps
delivering the customer's events. Without that cap the notices take both
processes for the whole WEBHOOKS_TIMEOUT and the customer's deliveries wait.
"""

from __future__ import annotations

import pytest

from tests.factories import make_subscription
from tests.operational_helpers import add_endpoint, operator_deliveries
from tests.support.pipeline import pipeline_env, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery

pytestmark = pytest.mark.integration

HANG = 60  # seconds the operational endpoint holds a request: longer than any wait here
WORKER_ENV = pipeline_env(
    RECOVER_AFTER="120",
    TIMEOUT="40",  # a hung attempt holds its worker process this long
)
worker, account = worker_fixtures(WORKER_ENV, concurrency=2)  # ends the attempt still hanging


def statuses(delivery_ids) -> set[str]:
    with session_scope() as session:
        return {session.get(Delivery, d).status for d in delivery_ids}


def test_a_hanging_operational_endpoint_leaves_customers_deliveries_flowing(account, receiver):
    add_endpoint(receiver.url("/ops"), "delivery.failed")
    receiver.script("/ops", ("hang", HANG, 200))
    receiver.script("/refuses", 400)
    receiver.script("/customer", 200)
    make_subscription(account, receiver.url("/refuses"), event_types=["email.bounced"])
    make_subscription(account, receiver.url("/customer"), event_types=["email.sent"])

    refused = [emit_event(account, "email.bounced", sample_data("email.bounced")).delivery_ids[0]
               for _ in range(3)]
    wait_until(lambda: statuses(refused) == {"failed"}, what="three deliveries failed")
    wait_until(lambda: len(operator_deliveries()) == 3, what="their three notices stored")
    receiver.wait_for(1, "/ops")  # one notice hangs in a worker process

    sent = [emit_event(account, "email.sent", sample_data("email.sent")).delivery_ids[0]
            for _ in range(10)]
    wait_until(lambda: statuses(sent) == {"done"}, timeout=25,
               what="the customer's deliveries done while the operational endpoint hangs")
    assert len(receiver.received("/customer")) == 10
    assert len(receiver.received("/ops")) == 1  # the others wait for its slot
