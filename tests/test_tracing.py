"""OpenTelemetry traces (CONTRACT 10.6), in one process on SQLite, exported over OTLP/HTTP to
a real receiver (tests/support/otlp_receiver.py) that decodes what the SDK's exporter sends.

Across worker processes, on PostgreSQL and through the sweep: tests/test_tracing_e2e.py.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os

import pytest
from opentelemetry import trace
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from tests.support.otlp_receiver import OtlpReceiver
from webhooks.config import tracing
from webhooks.config.logs import JsonFormatter
from webhooks.emit import emit_event, emit_events
from webhooks.errors import ConfigError
from webhooks.events.samples import sample_data
from webhooks.services.attempt import run_attempt
from webhooks.sender.post import AttemptResult
from webhooks.services.audit import Actor
from webhooks.services.recovery import recover
from webhooks.services.replay import replay
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

TESTER = Actor.cli("tests")  # who replays and recovers here, for the audit log


class Answers:
    """A fake sender: answers the given statuses in turn (the last one thereafter) and
    keeps the headers of each request."""

    def __init__(self, *statuses: int):
        self.statuses, self.headers = list(statuses), []

    def __call__(self, url, body, headers):
        self.headers.append(headers)
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return AttemptResult(status_code=status, error=None, duration_ms=1)


@pytest.fixture
def quiet_publish(monkeypatch):
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: [])


@pytest.fixture
def traced(monkeypatch):
    """Tracing on in this process, exporting to a started OTLP receiver (yielded)."""
    receiver = OtlpReceiver().start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "webhooks-tests")
    tracing.reset()
    yield receiver
    tracing.reset()  # exports what is held; the next on() reads the (restored) variables
    receiver.stop()


@pytest.fixture
def untraced(monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    tracing.reset()
    yield
    tracing.reset()


def _exported(receiver: OtlpReceiver, name: str | None = None):
    tracing.flush()
    return receiver.received(name)


def _ids(traceparent: str | None) -> tuple[str, str] | None:
    """(trace id, span id) of a W3C traceparent (its flags aside: sampled, and the SDK's
    random-trace-id flag)."""
    return None if traceparent is None else tuple(traceparent.split("-")[1:3])


def _make_due(delivery_id: str) -> None:
    """The delivery's retry is due now (instead of after its ladder's wait)."""
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == delivery_id)
                        .values(next_attempt_at=utcnow()))


def _stored_context(delivery_id: str) -> str | None:
    with session_scope() as session:
        return session.get(Delivery, delivery_id).trace_context


@pytest.mark.parametrize("env, on", [
    ({}, False),
    ({"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
     False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
])
def test_only_the_standard_variables_turn_tracing_on(env, on):
    assert tracing.wanted(env) is on


def test_an_exporter_or_protocol_it_cannot_use_is_a_config_error_naming_the_variable(
        monkeypatch, untraced):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        tracing.check(os.environ)  # as the worker and the web process check at start
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        tracing.on()
    tracing.reset()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        tracing.on()


def test_url_full_never_carries_credentials():
    assert (tracing.url_without_credentials("https://user:s3cret@hooks.example.com:8443/in?a=1")
            == "https://REDACTED:REDACTED@hooks.example.com:8443/in?a=1")
    assert tracing.url_without_credentials("https://hooks.example.com/in") == \
        "https://hooks.example.com/in"


def test_off_no_span_is_made_nothing_is_stored_and_no_traceparent_is_sent(
        sqlite_db, quiet_publish, untraced, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_TRACE_RECEIVERS", "1")
    account_id, _ = make_account("untraced")
    make_subscription(account_id, "https://example.com/hook")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    sender = Answers(200)
    assert run_attempt(delivery_id, 0, sender=sender) == "done"
    assert tracing.on() is False and tracing._tracer is None  # no tracer: no span can be made
    assert _stored_context(delivery_id) is None
    assert "traceparent" not in sender.headers[0]


def test_emit_and_attempts_are_one_trace_under_the_callers_span(
        sqlite_db, quiet_publish, traced, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_TRACE_RECEIVERS", "1")
    account_id, _ = make_account("traced")
    subscription = make_subscription(account_id, "https://user:pw@example.com/hook")
    assert tracing.on()
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    delivery_log = logging.getLogger("webhooks.delivery")
    delivery_log.addHandler(handler)
    level = delivery_log.level
    delivery_log.setLevel(logging.INFO)  # setLevel: it clears the loggers' cached answers
    try:
        with trace.get_tracer("caller").start_as_current_span("caller's request") as caller:
            emitted = emit_event(account_id, "email.sent", sample_data("email.sent"))
        (delivery_id,) = emitted.delivery_ids
        sender = Answers(503, 200)
        assert run_attempt(delivery_id, 0, sender=sender) == "pending"
        _make_due(delivery_id)
        assert run_attempt(delivery_id, 1, sender=sender) == "done"
    finally:
        delivery_log.removeHandler(handler)
        delivery_log.setLevel(level)

    (emit,) = _exported(traced, "webhooks.emit")
    caller_context = caller.get_span_context()
    assert emit.trace_id == format(caller_context.trace_id, "032x")
    assert emit.parent_span_id == format(caller_context.span_id, "016x")
    assert emit.kind == "PRODUCER"
    assert emit.attributes == {"webhooks.account_id": account_id, "webhooks.event_id": emitted.id,
                               "webhooks.event_type": "email.sent", "webhooks.deliveries": 1}
    assert emit.resource["service.name"] == "webhooks-tests"
    assert _ids(_stored_context(delivery_id)) == (emit.trace_id, emit.span_id)

    first, second = sorted(_exported(traced, "webhooks.attempt"),
                           key=lambda span: span.attributes["webhooks.attempt"])
    for number, span in ((1, first), (2, second)):
        assert (span.trace_id, span.parent_span_id, span.kind) == (emit.trace_id, emit.span_id,
                                                                   "CLIENT")
        assert span.attributes["webhooks.delivery_id"] == delivery_id
        assert span.attributes["webhooks.subscription_id"] == subscription.id
        assert span.attributes["webhooks.attempt"] == number
        assert span.attributes["http.request.method"] == "POST"
        assert span.attributes["url.full"] == "https://REDACTED:REDACTED@example.com/hook"
        assert span.attributes["server.address"] == "example.com"
    assert (first.status, first.attributes["webhooks.outcome"],
            first.attributes["http.response.status_code"]) == ("ERROR", "retry", 503)
    assert (second.status, second.attributes["webhooks.outcome"],
            second.attributes["http.response.status_code"]) == ("UNSET", "success", 200)
    # WEBHOOKS_TRACE_RECEIVERS: each request carried its attempt span's traceparent.
    assert [_ids(headers["traceparent"]) for headers in sender.headers] == [
        (span.trace_id, span.span_id) for span in (first, second)]
    # The attempt's log line names its span.
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [(line["trace_id"], line["span_id"]) for line in logged] == [
        (span.trace_id, span.span_id) for span in (first, second)]


def test_a_failed_attempt_without_an_answer_is_an_error_span_without_a_status_code(
        sqlite_db, quiet_publish, traced):
    account_id, _ = make_account("no-answer")
    make_subscription(account_id, "https://example.com/hook")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids

    def refused(url, body, headers):
        return AttemptResult(status_code=None, error="connection refused", duration_ms=1)

    run_attempt(delivery_id, 0, sender=refused)
    (span,) = _exported(traced, "webhooks.attempt")
    assert (span.status, span.status_message) == ("ERROR", "connection refused")
    assert "http.response.status_code" not in span.attributes


def test_a_replay_starts_a_new_trace_linked_to_the_original(sqlite_db, quiet_publish, traced):
    account_id, _ = make_account("replayed")
    make_subscription(account_id, "https://example.com/hook")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    assert run_attempt(delivery_id, 0, sender=Answers(400)) == "failed"
    with session_scope() as session:
        replay_id = replay(session, session.get(Delivery, delivery_id), actor=TESTER).id
    assert run_attempt(replay_id, 0, sender=Answers(200)) == "done"

    (emit,) = _exported(traced, "webhooks.emit")
    (replayed,) = _exported(traced, "webhooks.replay")
    assert replayed.trace_id != emit.trace_id and replayed.parent_span_id == ""
    assert replayed.links == [(emit.trace_id, emit.span_id)]
    assert replayed.attributes["webhooks.replay_of"] == delivery_id
    assert replayed.attributes["webhooks.delivery_id"] == replay_id
    attempts = {span.attributes["webhooks.delivery_id"]: span
                for span in _exported(traced, "webhooks.attempt")}
    assert (attempts[delivery_id].trace_id, attempts[delivery_id].status) == (emit.trace_id, "ERROR")
    assert attempts[replay_id].trace_id == replayed.trace_id
    assert attempts[replay_id].parent_span_id == replayed.span_id


def test_emit_events_makes_one_emit_span_per_event(sqlite_db, quiet_publish, traced):
    account_id, _ = make_account("batch")
    make_subscription(account_id, "https://example.com/a")
    make_subscription(account_id, "https://example.com/b", event_types=["email.sent"])
    with trace.get_tracer("caller").start_as_current_span("import job") as caller:
        ids = emit_events(account_id, [
            {"type": "email.sent", "data": sample_data("email.sent")},
            {"type": "email.bounced", "data": sample_data("email.bounced")}])
    spans = {span.attributes["webhooks.event_id"]: span
             for span in _exported(traced, "webhooks.emit")}
    assert set(spans) == set(ids)
    assert [spans[i].attributes["webhooks.deliveries"] for i in ids] == [2, 1]
    assert {span.parent_span_id for span in spans.values()} == {
        format(caller.get_span_context().span_id, "016x")}
    with session_scope() as session:
        stored = {(d.event_id, _ids(d.trace_context)) for d in session.query(Delivery)}
    assert stored == {(i, (spans[i].trace_id, spans[i].span_id)) for i in ids}


def test_recovers_replays_start_new_traces_linked_to_their_originals(
        sqlite_db, quiet_publish, traced):
    """recover's replays are parked for the sweep (no message): each still has its trace."""
    account_id, _ = make_account("recovered")
    subscription_id = make_subscription(account_id, "https://example.com/hook").id
    originals = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
                 for _ in range(2)]
    for delivery_id in originals:
        assert run_attempt(delivery_id, 0, sender=Answers(400)) == "failed"
    with session_scope() as session:
        recovered = recover(session, session.get(Subscription, subscription_id),
                            utcnow() - dt.timedelta(hours=1), None, actor=TESTER)
        assert recovered.replayed == 2
    with session_scope() as session:
        replays = dict(session.execute(select(Delivery.replay_of, Delivery.id)
                                       .where(Delivery.replay_of.is_not(None))).all())
    emits = {span.span_id: span for span in _exported(traced, "webhooks.emit")}
    original_context = {delivery_id: _ids(_stored_context(delivery_id)) for delivery_id in originals}
    replay_spans = {span.attributes["webhooks.replay_of"]: span
                    for span in _exported(traced, "webhooks.replay")}
    for original in originals:
        span = replay_spans[original]
        assert span.links == [original_context[original]]
        assert original_context[original][1] in emits
        assert span.trace_id != original_context[original][0]
        assert _ids(_stored_context(replays[original])) == (span.trace_id, span.span_id)
