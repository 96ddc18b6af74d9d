"""Operational webhooks end to end (CONTRACT 9.3): a real worker, PostgreSQL and Redis.

Each notice is delivered to the operator's endpoint like any delivery: the
envelope with its type, signed with the endpoint's secret; it is stored in
the transaction of the change it reports, so a rolled-back change sends
nothing; and a notice about the operator's own endpoint is never raised.
"""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import text

from tests.factories import AUDIT_ACTOR, make_subscription
from tests.operational_helpers import add_endpoint, cli, notices, operator_deliveries, operator_events
from tests.support.pipeline import delivery_status, pipeline_env, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Subscription

pytestmark = pytest.mark.integration

WORKER_ENV = pipeline_env(
    RETRY_DELAYS="1,1",  # three attempts, then dead
    PAUSE_AFTER="4",  # one more than a dead delivery's failures
)
# ``account``: the worker is running; this process emits with its settings. A customer account.
worker, account = worker_fixtures(WORKER_ENV)


def test_a_4xx_sends_delivery_failed_signed_with_the_operational_secret(account, receiver):
    endpoint = add_endpoint(receiver.url("/ops"))
    receiver.script("/customer", 422)
    subscription = make_subscription(account, receiver.url("/customer"))
    event = emit_event(account, "email.sent", sample_data("email.sent"))

    [notice] = notices(receiver.wait_for(1, "/ops"), endpoint["secret"])
    assert notice["type"] == "delivery.failed"
    assert notice["data"] == {
        "account_id": account, "subscription_id": subscription.id,
        "delivery_id": event.delivery_ids[0], "event_id": event.id,
        "event_type": "email.sent", "attempt_count": 1, "status_code": 422}
    # Recorded like any delivery, and visible to the operator.
    wait_until(lambda: operator_deliveries() == [("delivery.failed", "done")], what="recorded")
    listed = json.loads(cli("operational", "list").output)["data"]
    assert [row["deliveries"]["done"] for row in listed] == [1]


def test_the_ladder_running_out_sends_delivery_dead(account, receiver):
    endpoint = add_endpoint(receiver.url("/ops"), "delivery.dead")
    receiver.script("/customer", 500)
    subscription = make_subscription(account, receiver.url("/customer"))
    event = emit_event(account, "email.sent", sample_data("email.sent"))

    [notice] = notices(receiver.wait_for(1, "/ops"), endpoint["secret"])
    assert delivery_status(event.delivery_ids[0]) == "dead"
    assert notice["type"] == "delivery.dead"
    assert notice["data"] == {
        "account_id": account, "subscription_id": subscription.id,
        "delivery_id": event.delivery_ids[0], "event_id": event.id,
        "event_type": "email.sent", "attempt_count": 3, "status_code": 500}


def test_a_pause_by_failures_and_the_resume_each_send_their_notice(account, receiver):
    from webhooks.services import pausing

    endpoint = add_endpoint(receiver.url("/ops"), "subscription.paused,subscription.resumed")
    receiver.script("/customer", 503)
    subscription = make_subscription(account, receiver.url("/customer"))
    for _ in range(2):
        emit_event(account, "email.sent", sample_data("email.sent"))

    [paused] = notices(receiver.wait_for(1, "/ops"), endpoint["secret"])
    assert paused["type"] == "subscription.paused"
    data = paused["data"]
    assert (data["account_id"], data["subscription_id"], data["reason"]) == (
        account, subscription.id, "failures")
    assert data["consecutive_failures"] >= 4
    with session_scope() as session:
        row = session.get(Subscription, subscription.id)
        assert row.status == "paused"
        assert data["paused_at"] == row.paused_at.isoformat()

    receiver.script("/customer", 200)
    with session_scope() as session:
        pausing.resume(session, session.get(Subscription, subscription.id), actor=AUDIT_ACTOR)
    resumed = notices(receiver.wait_for(2, "/ops"), endpoint["secret"])[1]
    assert resumed["type"] == "subscription.resumed"
    assert set(resumed["data"]) == {"account_id", "subscription_id", "resumed_at", "suppressed"}
    assert resumed["data"]["suppressed"] == 0
    assert (resumed["data"]["account_id"], resumed["data"]["subscription_id"]) == (
        account, subscription.id)


def test_a_rolled_back_change_sends_nothing(account, receiver):
    from webhooks.operational.notices import notify_delivery_ended
    from webhooks.services import pausing

    endpoint = add_endpoint(receiver.url("/ops"))
    subscription = make_subscription(account, receiver.url("/customer"), status="paused")

    # A resume whose transaction rolls back: the notice was stored in it, and goes with it.
    with session_scope() as session:
        pausing.resume(session, session.get(Subscription, subscription.id), actor=AUDIT_ACTOR)
        assert session.execute(text("SELECT count(*) FROM events")).scalar() == 1
        session.rollback()
    # A delivery's end whose record rolls back (the connection of lifecycle/record.py).
    with get_engine().connect() as connection:
        with connection.begin() as transaction:
            assert notify_delivery_ended(
                connection, "dead", subscription_id=subscription.id,
                delivery_id=subscription.id, event_id=subscription.id,
                event_type="email.sent", attempt_count=6, status_code=500)
            transaction.rollback()
    assert operator_events() == 0

    # The same resume, committed, sends exactly its one notice.
    with session_scope() as session:
        pausing.resume(session, session.get(Subscription, subscription.id), actor=AUDIT_ACTOR)
    [notice] = notices(receiver.wait_for(1, "/ops"), endpoint["secret"])
    assert notice["type"] == "subscription.resumed"
    time.sleep(2)  # nothing else may arrive
    assert len(receiver.received("/ops")) == 1


def test_a_failing_operational_endpoint_raises_no_notice_about_itself(account, receiver):
    add_endpoint(receiver.url("/ops"))
    receiver.script("/ops", 400)  # every notice fails at once
    receiver.script("/customer", 400)
    make_subscription(account, receiver.url("/customer"))
    emit_event(account, "email.sent", sample_data("email.sent"))

    wait_until(lambda: operator_deliveries() == [("delivery.failed", "failed")],
               what="the notice's delivery failed")
    time.sleep(2)  # a notice about that failure would arrive meanwhile
    assert operator_events() == 1
    assert len(receiver.received("/ops")) == 1


def test_an_operational_endpoint_paused_by_failures_is_resumed_from_the_cli(account, receiver):
    endpoint = add_endpoint(receiver.url("/ops"), "delivery.failed")
    receiver.script("/ops", 500)
    receiver.script("/customer", 400)
    make_subscription(account, receiver.url("/customer"))
    for _ in range(2):  # two notices, three attempts each: the fourth failure pauses it
        emit_event(account, "email.sent", sample_data("email.sent"))

    def listed():
        return json.loads(cli("operational", "list").output)["data"][0]

    wait_until(lambda: listed()["status"] == "paused", what="the endpoint paused")
    wait_until(lambda: listed()["deliveries"]["paused"] >= 1, what="a notice held")
    assert operator_events() == 2  # no notice about the operator's own endpoint

    receiver.script("/ops", 200)
    resumed = cli("operational", "resume", endpoint["id"])
    assert resumed.exit_code == 0 and json.loads(resumed.output)["released"] >= 1
    wait_until(lambda: listed()["deliveries"]["done"] >= 1, what="the held notice delivered")
    assert listed()["status"] == "active"
    assert operator_events() == 2
