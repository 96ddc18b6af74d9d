"""The operator's view: GET /metrics, GET /healthz, and the JSON log lines."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from webhooks.config.logs import CONTEXT_FIELDS, JsonFormatter, configure_logging, redact
from webhooks.storage import waiting_counts
from webhooks.storage.db import session_scope
from webhooks.storage.models import utcnow

from tests.api.helpers import emit, make_subscription, set_delivery
from tests.dashboard.rows import add_attempts, pause_subscription

DOWN_DATABASE = "postgresql+psycopg2://postgres@127.0.0.1:1/nothing"
DOWN_BROKER = "redis://127.0.0.1:1/0"


@pytest.fixture
def app(db, redis_broker, tmp_path, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
    reset_settings_cache()
    from web import create_app

    return create_app({"TESTING": True})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def no_publish(monkeypatch):
    from webhooks.broker import outbox

    monkeypatch.setattr(outbox, "publish", lambda items, timeout=None: True)


def database_down(monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", DOWN_DATABASE)
    reset_settings_cache()


def broker_down(monkeypatch):
    from webhooks.broker.celery_app import celery_app

    monkeypatch.setattr(celery_app.conf, "broker_write_url", DOWN_BROKER)


def scrape(client) -> dict[str, dict]:
    """{sample name: {labels as a sorted tuple: value}} of one scrape."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


# ---------------------------------------------------------------- /metrics


TOKEN = "m3trics-t0ken-for-tests"


@pytest.fixture
def token_client(db, redis_broker, tmp_path, monkeypatch):
    """The app with WEBHOOKS_METRICS_TOKEN set."""
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("WEBHOOKS_METRICS_TOKEN", TOKEN)
    reset_settings_cache()
    from web import create_app

    return create_app({"TESTING": True}).test_client()


@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer wrong-token-of-some-length",
                                           f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
                                           "Bearer t\u00f6ken"])
def test_metrics_with_a_token_set_answer_401_without_it(token_client, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = token_client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "webhooks_" not in response.get_data(as_text=True)


def test_metrics_with_a_token_set_answer_the_right_bearer(token_client):
    response = token_client.get("/metrics", headers={"Authorization": f"bearer  {TOKEN} "})
    assert response.status_code == 200 and "webhooks_database_up" in response.get_data(as_text=True)


def test_the_token_is_compared_in_constant_time(token_client, monkeypatch):
    import hmac

    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    token_client.get("/metrics", headers={"Authorization": "Bearer not-it"})
    assert compared == [(b"not-it", TOKEN.encode())]


def test_metrics_answer_this_host_without_a_token(client):
    """Other clients get 403 (tests/test_metrics_access.py)."""
    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize("value", ["short", "has a space in it!!", "t\u00f6ken-with-umlaut-xx"])
def test_a_weak_or_unsendable_metrics_token_stops_the_process(value):
    from webhooks.config import load_settings
    from webhooks.errors import ConfigError

    with pytest.raises(ConfigError, match="WEBHOOKS_METRICS_TOKEN"):
        load_settings({"WEBHOOKS_METRICS_TOKEN": value})


def test_every_metric_is_named_webhooks_and_reads_zero_on_an_empty_database(client):
    body = client.get("/metrics").get_data(as_text=True)
    names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line and line[0] != "#"}
    assert names and all(name.startswith("webhooks_") for name in names)
    samples = scrape(client)
    assert samples["webhooks_database_up"][()] == 1
    assert samples["webhooks_subscriptions_paused"][()] == 0
    assert samples["webhooks_queue_lag_seconds"][()] == 0
    assert samples["webhooks_attempts_total"][(("outcome", "dead"),)] == 0
    assert samples["webhooks_attempt_duration_seconds_count"][()] == 0


def _by_subscription(delivery_ids, *subscription_ids) -> tuple[str, ...]:
    """The deliveries ``delivery_ids`` of these subscriptions, in the subscriptions' order."""
    from sqlalchemy import select

    from webhooks.storage.models import Delivery

    with session_scope() as session:
        of = dict(session.execute(select(Delivery.subscription_id, Delivery.id)
                                  .where(Delivery.id.in_(delivery_ids))).all())
    return tuple(of[subscription_id] for subscription_id in subscription_ids)


def test_metrics_read_the_database_at_scrape_time(client, no_publish):
    from tests.api.helpers import new_caller

    account_id = new_caller("acme").account_id
    active = make_subscription(account_id, "https://a.example.com/in")
    paused = make_subscription(account_id, "https://b.example.com/in")
    # Each event's deliveries by subscription: emit returns them in the order it found
    # the subscriptions, which follows the table's layout, not their creation.
    done_id, held_id = _by_subscription(emit(account_id)[1], active, paused)
    overdue_id, _other = _by_subscription(emit(account_id)[1], active, paused)
    pause_subscription(paused)  # holds the pending deliveries of `paused`
    set_delivery(overdue_id, next_attempt_at=utcnow() - dt.timedelta(seconds=90))
    set_delivery(done_id, status="done", attempt_count=1)
    now = utcnow()
    add_attempts(done_id, [(200, "success")], started=now - dt.timedelta(seconds=30))
    add_attempts(held_id, [(500, "retry"), (500, "retry"), (None, "dead")],
                 started=now - dt.timedelta(seconds=60))
    # Counters since the start: an attempt of an hour ago counts as much as a recent one.
    add_attempts(overdue_id, [(404, "permanent_failure")], started=now - dt.timedelta(hours=1))
    with session_scope() as session:  # the waiting gauges are what the last sweep counted
        waiting_counts.refresh(session.connection())

    samples = scrape(client)
    assert samples["webhooks_subscriptions"][()] == 2
    assert samples["webhooks_subscriptions_paused"][()] == 1
    waiting = samples["webhooks_deliveries_waiting"]
    # overdue_id pending, and the two deliveries of `paused` held.
    assert waiting[(("status", "pending"),)] == 1
    assert waiting[(("status", "paused"),)] == 2
    assert waiting[(("status", "sending"),)] == 0
    assert 90 <= samples["webhooks_queue_lag_seconds"][()] < 150
    total = samples["webhooks_attempts_total"]
    assert {k[0][1]: v for k, v in total.items()} == {
        "success": 1, "retry": 2, "permanent_failure": 1, "dead": 1}
    buckets = {k[0][1]: v for k, v in samples["webhooks_attempt_duration_seconds_bucket"].items()}
    # Durations 40 ms (success), 40, 80, 120 ms (the other delivery's attempts 1-3), 40 ms.
    assert buckets["0.025"] == 0
    assert buckets["0.05"] == 3
    assert buckets["0.1"] == 4
    assert buckets["0.25"] == buckets["+Inf"] == 5
    assert samples["webhooks_attempt_duration_seconds_count"][()] == 5
    assert samples["webhooks_attempt_duration_seconds_sum"][()] == pytest.approx(0.32)


def test_attempt_counters_come_from_the_rollup_not_the_attempts_table(client, no_publish):
    """The attempts table is history that retention deletes; the counters stay where they were."""
    from sqlalchemy import delete

    from tests.api.helpers import new_caller
    from webhooks.storage.models import Attempt

    account_id = new_caller("acme").account_id
    make_subscription(account_id, "https://a.example.com/in")
    _, (delivery_id,) = emit(account_id)
    add_attempts(delivery_id, [(500, "retry"), (200, "success")])
    with session_scope() as session:
        session.execute(delete(Attempt))
    total = scrape(client)["webhooks_attempts_total"]
    assert total[(("outcome", "retry"),)] == 1 and total[(("outcome", "success"),)] == 1


def test_metrics_still_answer_when_the_database_is_down(client, monkeypatch):
    database_down(monkeypatch)
    samples = scrape(client)
    assert samples == {"webhooks_database_up": {(): 0}}


# ---------------------------------------------------------------- /healthz


def test_healthz_is_ok_when_the_database_and_the_broker_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok", "database": "ok", "broker": "ok"}


def test_healthz_names_the_broker_when_it_is_down(client, monkeypatch):
    broker_down(monkeypatch)
    started = time.monotonic()
    response = client.get("/healthz")
    assert time.monotonic() - started < 5
    assert response.status_code == 503
    assert response.json["status"] == "unavailable"
    assert response.json["failing"] == ["broker"]
    assert response.json["database"] == "ok"
    assert response.json["broker"].startswith("unavailable: ")


def test_healthz_names_the_database_when_it_is_down(client, monkeypatch):
    database_down(monkeypatch)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json["failing"] == ["database"]
    assert response.json["broker"] == "ok"
    assert "127.0.0.1" not in response.get_data(as_text=True)  # details go to the log only


def test_healthz_names_both_when_both_are_down(client, monkeypatch):
    database_down(monkeypatch)
    broker_down(monkeypatch)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json["failing"] == ["database", "broker"]


def test_a_check_that_hangs_fails_at_the_time_out(monkeypatch):
    from web import health

    monkeypatch.setitem(health.CHECKS, "broker", lambda: time.sleep(1.0))
    monkeypatch.setitem(health.CHECKS, "database", lambda: None)
    started = time.monotonic()
    results = health.run_checks(timeout=0.2)
    assert time.monotonic() - started < 0.8
    assert results == {"database": "ok", "broker": "unavailable: no answer within 0.2 s"}


# ---------------------------------------------------------------- JSON log lines


def record(message, *args, exc_info=None, **extra) -> logging.LogRecord:
    logger = logging.getLogger("webhooks.delivery")
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, args, exc_info,
                             extra=extra)


def test_a_log_line_is_one_json_object_with_the_delivery_ids():
    line = JsonFormatter().format(record(
        "delivery attempt %d of %s: %s", 2, "d-1", "retry",
        delivery_id="d-1", event_id="e-1", subscription_id="s-1", attempt=2, status_code=None,
        outcome="retry", url="https://user:pw@example.com/hook", secret="whsec_abc",
    ))
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "delivery attempt 2 of d-1: retry"
    assert parsed["level"] == "INFO" and parsed["logger"] == "webhooks.delivery"
    assert parsed["timestamp"].endswith("Z")
    assert dt.datetime.fromisoformat(parsed["timestamp"].replace("Z", "+00:00"))
    assert {k: parsed[k] for k in ("delivery_id", "event_id", "subscription_id", "attempt",
                                   "outcome")} == {
        "delivery_id": "d-1", "event_id": "e-1", "subscription_id": "s-1", "attempt": 2,
        "outcome": "retry"}
    # None values are left out; extras outside the list (url, secret) never get in.
    assert set(parsed) <= {"timestamp", "level", "logger", "message", *CONTEXT_FIELDS}
    assert "status_code" not in parsed and "whsec_abc" not in line and "pw@" not in line


def test_secrets_in_messages_and_tracebacks_are_masked():
    try:
        raise ValueError("bad secret whsec_Zm9vYmFy-_x for key whk_c2VjcmV0")
    except ValueError:
        import sys

        exc_info = sys.exc_info()
    line = JsonFormatter().format(record(
        "signed with %s via %s", "whsec_abcDEF123", "redis://:hunter2@cache:6379/0",
        exc_info=exc_info, account_id="a-1"))
    parsed = json.loads(line)
    assert parsed["message"] == "signed with whsec_[redacted] via redis://:[redacted]@cache:6379/0"
    assert "Zm9vYmFy" not in parsed["exception"] and "c2VjcmV0" not in parsed["exception"]
    assert "ValueError" in parsed["exception"]
    assert parsed["account_id"] == "a-1"
    assert redact("postgresql://app:pa55@db/webhooks") == "postgresql://app:[redacted]@db/webhooks"


@pytest.mark.parametrize("text, masked", [
    ("https://user:s3cret@host/path", "https://user:***@host/path"),
    # urllib3 and urlsplit split the authority at its last "@": all of "p@ss" is the password.
    ("http://u:p@ss@host:8080/x?q=a:b@c", "http://u:***@host:8080/x?q=a:b@c"),
    ("http://me@corp:pw@host/", "http://me@corp:***@host/"),
    ("http://user@host:8080/", "http://user@host:8080/"),
    ("https://host/p?u=a:b@c", "https://host/p?u=a:b@c"),
    ("to http://a:b@h1/ and http://c:d@h2/", "to http://a:***@h1/ and http://c:***@h2/"),
])
def test_url_passwords_are_masked_up_to_the_last_at_sign(text, masked):
    from webhooks.config.logs import mask_url_passwords

    assert mask_url_passwords(text) == masked
    assert redact(text) == masked.replace("***", "[redacted]")


def test_configure_logging_installs_one_json_handler(monkeypatch):
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    try:
        first = configure_logging(stream=io.StringIO())
        stream = io.StringIO()
        second = configure_logging("DEBUG", stream=stream)
        assert first not in root.handlers and second in root.handlers
        assert sum(isinstance(h.formatter, JsonFormatter) for h in root.handlers) == 1
        logging.getLogger("webhooks.test").info("hello", extra={"delivery_id": "d-9"})
        assert json.loads(stream.getvalue()) | {"timestamp": None} == {
            "timestamp": None, "level": "INFO", "logger": "webhooks.test", "message": "hello",
            "delivery_id": "d-9"}
    finally:
        for handler in list(root.handlers):
            if handler not in saved_handlers:
                root.removeHandler(handler)
        root.setLevel(saved_level)


def test_dashboard_actions_log_ids_and_never_the_secret(client, caplog, no_publish):
    from tests.api.helpers import new_caller
    from tests.dashboard.helpers import post_form, sign_in

    caller = new_caller("acme")
    subscription_id = make_subscription(caller.account_id)
    sign_in(client, caller.api_key)
    page = f"/dashboard/subscriptions/{subscription_id}"
    with caplog.at_level(logging.INFO, logger="web.dashboard"):
        post_form(client, page, f"{page}/test")
        post_form(client, page, f"{page}/rotate-secret")
        client.get(f"{page}/secret")
    with session_scope() as session:
        from webhooks.storage.models import Subscription

        secret = session.get(Subscription, subscription_id).secret
    lines = [JsonFormatter().format(r) for r in caplog.records if r.name == "web.dashboard"]
    parsed = [json.loads(line) for line in lines]
    sent = next(p for p in parsed if p["message"] == "test event sent from the dashboard")
    assert sent["subscription_id"] == subscription_id and sent["account_id"] == caller.account_id
    assert sent["event_id"] and sent["delivery_id"]
    assert any(p["message"] == "signing secret rotated in the dashboard" for p in parsed)
    assert all(secret not in line and caller.api_key not in line for line in lines)
