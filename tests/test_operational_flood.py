"""One account's flood of pause and resume notices does not hold back another account's
notice (issue 36, item 3): a real worker, PostgreSQL and Redis, and an operator endpoint
that takes one notice at a time and 0.2 s to answer each.

Before the budget (webhooks/operational/budget.py), 200 pause and resume pairs of account
A queued 400 notices ahead of account B's subscription.paused: 54.7 s late at that endpoint.
How late B's notice is comes from how many notices the endpoint had to take before it,
0.2 s each (the endpoint takes one at a time), not from a clock in this test, so that a
slow machine does not decide the outcome; the wall-clock lateness is printed beside it.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.factories import make_account, make_subscription
from tests.operational_helpers import add_endpoint
from tests.support.pipeline import pipeline_env, worker_fixtures
from webhooks.services import pausing
from webhooks.services.audit import Actor
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

pytestmark = pytest.mark.integration

ANSWER_S = 0.2  # the operator endpoint's time per notice
LATE_LIMIT_S = 2.0
# The service's own recover-after and time-out (the pipeline's shorter ones left out).
WORKER_ENV = pipeline_env(OPERATIONAL_MAX_IN_FLIGHT="1", RECOVER_AFTER=None, TIMEOUT=None)
worker, account = worker_fixtures(WORKER_ENV, concurrency=4)


@pytest.fixture
def operator(account, receiver):
    """The worker runs; this process pauses and resumes with its settings. The operator
    endpoint takes both notices, ANSWER_S each."""
    receiver.script("/ops", ("hang", ANSWER_S, 200))
    add_endpoint(receiver.url("/ops"), "subscription.paused,subscription.resumed")
    return receiver


def _change(subscription_id: str, change) -> None:
    with session_scope() as session:
        change(session, session.get(Subscription, subscription_id), actor=Actor.cli("tests"))


def _about(request) -> str:
    return json.loads(request.body)["data"]["subscription_id"]


def test_a_flood_of_one_account_delays_another_account_s_notice_less_than_2_s(operator):
    flooding, _ = make_account("flooding")
    theirs = make_subscription(flooding, operator.url("/customer-a")).id
    for _ in range(200):
        _change(theirs, pausing.pause)
        _change(theirs, pausing.resume)
    other, _ = make_account("other")
    mine = make_subscription(other, operator.url("/customer-b")).id
    paused_at = time.time()
    _change(mine, pausing.pause)

    most = int(LATE_LIMIT_S / ANSWER_S)  # notices the endpoint may take first
    deadline = time.time() + 60
    while time.time() < deadline:
        after = [r for r in operator.received("/ops") if r.at >= paused_at]
        if any(_about(r) == mine for r in after) or len(after) > most:
            break
        time.sleep(0.05)
    after = [r for r in operator.received("/ops") if r.at >= paused_at]
    arrived = [r for r in after if _about(r) == mine]
    assert arrived, f"B's notice not among the first {len(after)} after its pause"
    ahead = after.index(arrived[0])
    print(f"B's notice came after {ahead} other notices, "
          f"{arrived[0].at - paused_at:.2f} s after its pause")
    # The one in flight when B paused, then those taken before B's: each ANSWER_S.
    assert (ahead + 1) * ANSWER_S < LATE_LIMIT_S
    assert json.loads(arrived[0].body)["type"] == "subscription.paused"
