"""One event's trace across two worker processes, a parked retry sent by the sweep, and a
replay's linked trace, exported over OTLP/HTTP to a real receiver (tests/support/otlp_receiver.py).

This process emits (PostgreSQL's one-statement path) under a span of its own; a first
worker makes each delivery's first attempt, then stops; a second one, started after,
makes the retry, which no broker message carries (WEBHOOKS_COUNTDOWN_LIMIT=0 parks every
retry for the sweep, as a retry hours away is), and the replay's attempt.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace

from tests.factories import make_account, make_subscription
from tests.support import services
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.stack import wait_until
from tests.support.worker import WorkerProcess, emit_with, empty_broker
from webhooks.config import tracing
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.services.audit import Actor
from webhooks.services.replay import replay
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery

pytestmark = pytest.mark.integration

SETTINGS = {
    "WEBHOOKS_SWEEP_INTERVAL": "1",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
    "WEBHOOKS_RETRY_DELAYS": "4",  # long enough for the first worker to stop before it
    "WEBHOOKS_COUNTDOWN_LIMIT": "0",  # every retry is parked: the sweep sends it
    "WEBHOOKS_TRACE_RECEIVERS": "1",
    "OTEL_BSP_SCHEDULE_DELAY": "100",
}


@pytest.fixture
def otlp(monkeypatch):
    receiver = OtlpReceiver().start()
    yield receiver
    tracing.reset()
    receiver.stop()


def _worker(env: dict, name: str) -> WorkerProcess:
    return WorkerProcess({**env, "OTEL_RESOURCE_ATTRIBUTES": f"webhooks.test.worker={name}"},
                         pool="threads", concurrency=2, beat=True)


def _delivery(delivery_id: str) -> Delivery:
    with session_scope() as session:
        delivery = session.get(Delivery, delivery_id)
        session.expunge(delivery)
        return delivery


def _ids(traceparent: str) -> tuple[str, str]:
    return tuple(traceparent.split("-")[1:3])


def test_one_events_attempts_are_one_trace_across_workers_the_sweep_and_a_replay(
        postgres, db, monkeypatch, receiver, otlp):
    env = {"WEBHOOKS_DATABASE_URL": services.PG_URL, "WEBHOOKS_BROKER_URL": services.REDIS_URL,
           "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, **SETTINGS}
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    emit_with(monkeypatch, env)
    tracing.reset()
    empty_broker()
    account_id, _ = make_account("traced-e2e")
    retried = make_subscription(account_id, receiver.url("/retried"))
    failing = make_subscription(account_id, receiver.url("/failing"))
    receiver.script("/retried", 503, 200)
    receiver.script("/failing", 400, 200)

    first = _worker(env, "first").start()
    try:
        assert tracing.on()
        with trace.get_tracer("caller").start_as_current_span("POST /orders") as caller:
            emitted = emit_event(account_id, "email.sent", sample_data("email.sent"))
        by_subscription = {_delivery(d).subscription_id: d for d in emitted.delivery_ids}
        retried_id, failed_id = by_subscription[retried.id], by_subscription[failing.id]
        wait_until(lambda: _delivery(failed_id).status == "failed"
                   and _delivery(retried_id).attempt_count == 1
                   and _delivery(retried_id).status == "pending",
                   timeout=30, what=f"the first attempts to be recorded\n{first.log()}")
    finally:
        first.stop()
    assert _delivery(retried_id).parked  # no message carries the retry: only the sweep sends it

    second = _worker(env, "second").start()
    try:
        wait_until(lambda: _delivery(retried_id).status == "done", timeout=30,
                   what=f"the sweep to send the retry\n{second.log()}")
        with session_scope() as session:
            replay_id = replay(session, session.get(Delivery, failed_id),
                               actor=Actor.cli("tests")).id
        wait_until(lambda: _delivery(replay_id).status == "done", timeout=30,
                   what=f"the replay to be delivered\n{second.log()}")
        tracing.flush()
        spans = otlp.wait_for(
            lambda spans: sum(s.name == "webhooks.attempt" for s in spans) == 4,
            "four attempt spans")
    finally:
        second.stop()
    second_log = second.log_path.read_text(errors="replace")

    (emit,) = [s for s in spans if s.name == "webhooks.emit"]
    assert (emit.trace_id, emit.parent_span_id) == (
        format(caller.get_span_context().trace_id, "032x"),
        format(caller.get_span_context().span_id, "016x"))
    assert emit.attributes["webhooks.deliveries"] == 2
    assert emit.resource["service.name"] == "webhooks"  # the default
    assert "webhooks.test.worker" not in emit.resource  # this process's, not a worker's

    attempts = sorted((s for s in spans if s.name == "webhooks.attempt"),
                      key=lambda s: (s.attributes["webhooks.delivery_id"],
                                     s.attributes["webhooks.attempt"]))
    of = {(s.attributes["webhooks.delivery_id"], s.attributes["webhooks.attempt"]): s
          for s in attempts}
    # The event's three attempts, made by two processes, are children of its emit span.
    for key, worker, status, code in (((retried_id, 1), "first", "ERROR", 503),
                                      ((retried_id, 2), "second", "UNSET", 200),
                                      ((failed_id, 1), "first", "ERROR", 400)):
        span = of[key]
        assert (span.trace_id, span.parent_span_id) == (emit.trace_id, emit.span_id), key
        assert span.resource["webhooks.test.worker"] == worker, key
        assert span.resource["service.name"] == "webhooks", key  # the default
        assert (span.status, span.attributes["http.response.status_code"]) == (status, code), key
        assert span.attributes["url.full"].startswith("http://127.0.0.1:"), key
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.kind == "CLIENT"
    assert of[(retried_id, 1)].attributes["webhooks.outcome"] == "retry"
    assert of[(failed_id, 1)].attributes["webhooks.outcome"] == "permanent_failure"
    assert of[(retried_id, 2)].attributes["webhooks.subscription_id"] == retried.id

    # The replay: a new trace, linked to the original's, with its attempt in it.
    (replayed,) = [s for s in spans if s.name == "webhooks.replay"]
    assert replayed.trace_id != emit.trace_id and replayed.links == [(emit.trace_id, emit.span_id)]
    replay_attempt = of[(replay_id, 1)]
    assert (replay_attempt.trace_id, replay_attempt.parent_span_id) == (replayed.trace_id,
                                                                        replayed.span_id)
    assert replay_attempt.status == "UNSET"

    # The receiver got each attempt's traceparent (WEBHOOKS_TRACE_RECEIVERS=1).
    sent = [_ids(r.headers["traceparent"]) for r in receiver.received("/retried")]
    assert sent == [(of[(retried_id, n)].trace_id, of[(retried_id, n)].span_id) for n in (1, 2)]
    # The second worker's log line of the retry names its trace and span.
    lines = [json.loads(line) for line in second_log.splitlines() if line.startswith("{")]
    (logged,) = [line for line in lines if line.get("delivery_id") == retried_id
                 and line.get("attempt") == 2]
    assert (logged["trace_id"], logged["span_id"]) == (emit.trace_id, of[(retried_id, 2)].span_id)
