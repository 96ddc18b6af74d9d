"""The whole pipeline: a real Celery worker process on the real Redis and PostgreSQL,
posting to a real local HTTP receiver. Short ladder (1 s steps) to keep it quick."""

from __future__ import annotations

import json
import time

import pytest

from tests.factories import make_subscription
from tests.support.pipeline import PIPELINE_ENV, attempts_of, delivery_status, worker_fixtures
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.samples import sample_data
from webhooks.signing import verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, utcnow

pytestmark = pytest.mark.integration

WORKER_ENV = PIPELINE_ENV
HEADERS = ["Version", "Signature", "Event", "Mode", "Event-Id", "Delivery-Id", "Attempt"]


# ``pipeline``: the worker is running; this process emits with its settings; an account.
worker, pipeline = worker_fixtures(WORKER_ENV, account_name="pipeline")


def test_each_of_the_15_types_arrives_signed_with_the_seven_headers(pipeline, receiver):
    subscription = make_subscription(pipeline, receiver.url("/all"))
    emitted = {}
    for event_type in EVENT_TYPE_NAMES:
        data = sample_data(event_type)
        emitted[event_type] = (emit_event(pipeline, event_type, data), data)
    requests = receiver.wait_for(15, "/all")
    assert len(requests) == 15
    by_type = {r.headers["X-Service-Event"]: r for r in requests}
    assert set(by_type) == set(EVENT_TYPE_NAMES)
    for event_type, (event, data) in emitted.items():
        request = by_type[event_type]
        for name in HEADERS:
            assert f"X-Service-{name}" in request.headers, name
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["X-Service-Attempt"] == "1"
        assert request.headers["X-Service-Event-Id"] == event.id
        assert request.headers["X-Service-Delivery-Id"] == event.delivery_ids[0]
        assert request.headers["X-Service-Mode"] == "live"
        verify(subscription.secret, request.body, request.headers["X-Service-Signature"])
        envelope = json.loads(request.body)
        assert list(envelope) == ["version", "id", "type", "mode", "created_at", "data"]
        assert envelope["version"] == request.headers["X-Service-Version"] == "2026-07-30"
        assert envelope["type"] == event_type and envelope["id"] == event.id
        assert envelope["created_at"].endswith("Z")
        assert envelope["data"] == data
    wait_until(lambda: all(delivery_status(e.delivery_ids[0]) == "done"
                           for e, _ in emitted.values()), what="all done")


def test_always_500_gets_exactly_six_attempts_then_dead(pipeline, receiver):
    receiver.script("/fail", 500)
    subscription = make_subscription(pipeline, receiver.url("/fail"))
    event = emit_event(pipeline, "email.sent", sample_data("email.sent"))
    delivery_id = event.delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "dead", timeout=40, what="dead")
    time.sleep(2.5)  # nothing more may arrive
    requests = receiver.received("/fail")
    assert [r.headers["X-Service-Attempt"] for r in requests] == ["1", "2", "3", "4", "5", "6"]
    stamps = []
    for request in requests:
        verify(subscription.secret, request.body, request.headers["X-Service-Signature"])
        stamp = int(request.headers["X-Service-Signature"].rsplit("t=", 1)[1])
        assert abs(stamp - request.at) <= 2  # signed when sent, not when first tried
        stamps.append(stamp)
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 4
    assert len({r.body for r in requests}) == 1  # the same bytes on every attempt
    assert attempts_of(delivery_id) == [(n, 500, "retry") for n in range(1, 6)] + [(6, 500, "dead")]


def test_410_ends_failed_after_one_attempt(pipeline, receiver):
    receiver.script("/gone", 410)
    make_subscription(pipeline, receiver.url("/gone"))
    delivery_id = emit_event(pipeline, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "failed", what="failed")
    time.sleep(2)
    assert len(receiver.received("/gone")) == 1
    assert attempts_of(delivery_id) == [(1, 410, "permanent_failure")]


def test_429_then_200_ends_done(pipeline, receiver):
    receiver.script("/busy", 429, 200)
    make_subscription(pipeline, receiver.url("/busy"))
    delivery_id = emit_event(pipeline, "email.sent", sample_data("email.sent")).delivery_ids[0]
    wait_until(lambda: delivery_status(delivery_id) == "done", what="done")
    assert [r.headers["X-Service-Attempt"] for r in receiver.received("/busy")] == ["1", "2"]
    assert attempts_of(delivery_id) == [(1, 429, "retry"), (2, 200, "success")]


def test_25_consecutive_failures_pause_then_resume_delivers_what_was_held(pipeline, receiver):
    from webhooks.broker import outbox
    from webhooks.lifecycle import changes as store

    receiver.script("/broken", 503)
    subscription = make_subscription(pipeline, receiver.url("/broken"))
    events = [emit_event(pipeline, "email.sent", sample_data("email.sent")) for _ in range(25)]
    ids = [e.delivery_ids[0] for e in events]

    def subscription_row():
        with session_scope() as session:
            return session.get(Subscription, subscription.id)

    wait_until(lambda: subscription_row().status == "paused", what="paused")
    time.sleep(1)  # attempts claimed before the pause may still land
    after_pause = len(receiver.received("/broken"))
    time.sleep(3)
    assert len(receiver.received("/broken")) == after_pause, "a request arrived after the pause"
    assert subscription_row().consecutive_failures == after_pause
    assert 25 <= after_pause <= 26  # at most one attempt was already in flight (2 processes)
    wait_until(lambda: {delivery_status(i) for i in ids} == {"paused"}, what="all held")

    receiver.script("/broken", 200)
    with session_scope() as session:
        assert store.resume_subscription(session, subscription.id, utcnow()) == 25
    assert outbox.request_sweep()
    wait_until(lambda: {delivery_status(i) for i in ids} == {"done"}, what="all delivered")
    row = subscription_row()
    assert (row.status, row.consecutive_failures) == ("active", 0)
    delivered = {r.headers["X-Service-Delivery-Id"] for r in receiver.received("/broken")[after_pause:]}
    assert delivered == set(ids)


def test_worker_killed_mid_attempt_does_not_lose_the_delivery(pipeline, receiver, worker):
    receiver.script("/slow", ("hang", 3, 200), 200)
    make_subscription(pipeline, receiver.url("/slow"))
    delivery_id = emit_event(pipeline, "email.sent", sample_data("email.sent")).delivery_ids[0]
    receiver.wait_for(1, "/slow")
    assert delivery_status(delivery_id) == "sending"
    worker.kill()  # SIGKILL the main process, its pool children and beat
    worker.start()
    wait_until(lambda: delivery_status(delivery_id) == "done", timeout=40, what="done after kill")
    requests = receiver.received("/slow")
    assert {r.headers["X-Service-Delivery-Id"] for r in requests} == {delivery_id}
    assert len(requests) == 2  # the attempt the kill interrupted, and its recovery
    assert attempts_of(delivery_id) == [(1, 200, "success")]
