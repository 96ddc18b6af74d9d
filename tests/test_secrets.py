"""Secrets: API keys are stored only hashed; signing secrets and API keys never appear in
any log or error body; a rotated secret signs from the next attempt on.

The log test runs a full cycle through the whole stack (a real worker process
logging at DEBUG to its file, the web app in this process under caplog at
DEBUG): create an account, a subscription through the API, emit, deliver,
fail, rotate the secret, fail for good, replay, send a test event, and a few
requests that fail; then it searches every captured line for every secret.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time

import pytest
from sqlalchemy import text

from tests.support.fastreceiver import FastReceiver
from tests.support.stack import Workers, terminate_backends, use_env, wait_until, worker_env
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.samples import sample_data
from webhooks.signing import InvalidSignature, verify
from webhooks.storage.db import get_engine, session_scope

pytestmark = pytest.mark.integration

API = "/api/webhooks"
# Attempt 1 fails and waits 3 s: time enough to rotate the secret before attempt 2.
SECRETS_ENV = worker_env(RETRY_DELAYS="3,1", TIMEOUT="2")


@pytest.fixture(scope="module")
def debug_worker(postgres):
    from tests.support import services

    services.check_redis()
    workers = Workers()
    yield workers
    workers.stop()


@pytest.fixture
def cycle(debug_worker, db, redis_broker, monkeypatch):
    use_env(monkeypatch, SECRETS_ENV)
    debug_worker.use(SECRETS_ENV, concurrency=2, loglevel="DEBUG")
    receiver = FastReceiver().start()
    yield debug_worker, receiver
    receiver.stop()


def _dump_database() -> str:
    """Every row of every table in the test database, as text."""
    with get_engine().connect() as connection:
        tables = connection.execute(text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        rows = []
        for table in tables:
            rows += connection.execute(text(f'SELECT row_to_json(t)::text FROM "{table}" t')).scalars().all()
    return "\n".join(rows)


def test_api_keys_are_stored_only_hashed(db):
    from click.testing import CliRunner

    from webhooks.tenants.accounts import create_account
    from webhooks.cli import main

    with session_scope() as session:
        account, key = create_account(session, "direct")
    printed = CliRunner().invoke(main, ["accounts", "create", "Through the CLI"])
    assert printed.exit_code == 0, printed.output
    cli_key = json.loads(printed.output)["api_key"]
    dump = _dump_database()
    for api_key in (key, cli_key):
        assert api_key not in dump
        assert api_key.removeprefix("whk_") not in dump
        assert hashlib.sha256(api_key.encode()).hexdigest() in dump  # what is stored instead
    assert "Through the CLI" in dump  # the dump did read the accounts


def _search(haystacks: dict[str, str], secrets: dict[str, str]) -> list[str]:
    """Every (secret, where, line) where a secret shows."""
    found = []
    for where, content in haystacks.items():
        for name, secret in secrets.items():
            for line in content.splitlines():
                if secret in line:
                    found.append(f"{name} in {where}: {line[:300]}")
    return found


def test_a_full_cycle_logs_no_secret_and_rotation_signs_the_next_attempt(cycle, caplog):
    """Also the rotation case: attempt 1 verifies with the old secret only, attempt 2 (a
    retry of the same delivery, after the rotation) and the replay with the new one only."""
    from tests.api.helpers import new_caller
    from web import create_app

    workers, receiver = cycle
    caplog.set_level(logging.DEBUG)
    script = [500, 404]  # attempt 1 is retried, attempt 2 fails the delivery for good; then 200

    def rule(arrival):
        return script.pop(0) if script else 200

    receiver.rule("/cycle", rule)
    client = create_app({"TESTING": True}).test_client()
    caller = new_caller("cycle")
    bodies = []  # (HTTP status, what to show): the error ones are searched for secrets

    def call(method, path, **kwargs):
        response = getattr(client, method)(API + path, headers=caller.headers, **kwargs)
        shown = response.get_data(as_text=True)
        status = response.status_code
        bodies.append((status, f"{method.upper()} {path} -> {status} {shown}"))
        return response

    created = call("post", "/subscriptions", json={"url": receiver.url("/cycle")})
    assert created.status_code == 201
    subscription_id, old_secret = created.get_json()["id"], created.get_json()["secret"]

    event = emit_event(caller.account_id, "email.sent", sample_data("email.sent"))
    (delivery_id,) = event.delivery_ids
    receiver.wait_for(1, "/cycle")
    wait_until(lambda: _status(delivery_id) == ("pending", 1), what="attempt 1 recorded")
    rotated = call("post", f"/subscriptions/{subscription_id}/rotate-secret")
    assert rotated.status_code == 200
    new_secret = rotated.get_json()["secret"]
    assert new_secret != old_secret
    wait_until(lambda: _status(delivery_id) == ("failed", 2), what="attempt 2 failed the delivery")

    replay = call("post", f"/deliveries/{delivery_id}/replay")
    assert replay.status_code == 202
    replay_id = replay.get_json()["id"]
    test_sent = call("post", f"/subscriptions/{subscription_id}/test")
    assert test_sent.status_code == 202
    test_delivery = test_sent.get_json()["delivery_id"]
    wait_until(lambda: _status(replay_id)[0] == "done" and _status(test_delivery)[0] == "done",
               what="the replay and the test event delivered")
    # Requests that fail, and one that offers a secret back: no error body repeats it.
    call("patch", f"/subscriptions/{subscription_id}", json={"secret": new_secret})
    call("post", "/subscriptions", json={"url": receiver.url("/x"), "secret": old_secret})
    call("get", f"/subscriptions/{subscription_id}/nope")
    for header in (f"Bearer {caller.api_key}x", f"Basic {caller.api_key}", caller.api_key):
        response = client.get(API + "/subscriptions", headers={"Authorization": header})
        assert response.status_code == 401
        bodies.append((401, f"401 for {header[:6]}…: {response.get_data(as_text=True)}"))
    assert outbox.flush(10)

    # Rotation: attempt 1 was signed with the old secret, everything after with the new one.
    arrivals = receiver.arrivals("/cycle")
    by_delivery = {}
    for arrival in arrivals:
        by_delivery.setdefault(arrival.delivery_id, []).append(arrival)
    first, second = by_delivery[delivery_id]
    assert (first.attempt, second.attempt) == (1, 2)
    _verifies_only_with(first, old_secret, new_secret)
    _verifies_only_with(second, new_secret, old_secret)
    for arrival in by_delivery[replay_id] + by_delivery[test_sent.get_json()["delivery_id"]]:
        _verifies_only_with(arrival, new_secret, old_secret)

    time.sleep(0.5)  # the worker writes its last lines
    logging.getLogger("webhooks").debug("capture check")  # proves the in-process capture works
    secrets = {"API key": caller.api_key, "old signing secret": old_secret,
               "new signing secret": new_secret}
    in_process = "\n".join(
        f"{r.name} {r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    worker_log = workers.logs()
    assert "webhooks.deliver" in worker_log and "delivery attempt 2 of" in worker_log
    assert "capture check" in in_process
    found = _search({"in-process logs": in_process, "worker log": worker_log,
                     # By status, not by text: "401" also turns up in ports and ids.
                     "API error bodies": "\n".join(text for status, text in bodies if status >= 400)},
                    secrets)
    assert found == [], "secrets in logs or error bodies:\n" + "\n".join(found)


def _status(delivery_id):
    with get_engine().connect() as connection:
        return tuple(connection.execute(
            text("SELECT status, attempt_count FROM deliveries WHERE id = :d"), {"d": delivery_id}).one())


def _verifies_only_with(arrival, right, wrong):
    verify(right, arrival.body, arrival.signature)
    with pytest.raises(InvalidSignature):
        verify(wrong, arrival.body, arrival.signature)


@pytest.mark.parametrize("body", [None, {"activate_in": 3600}], ids=["at-once", "staged"])
def test_a_database_error_while_rotating_logs_no_secret(db, redis_broker, caplog, monkeypatch,
                                                        body):
    """The connection dies just before the new secret is written (at once, or staged): the
    request answers 500, and neither the log of that failure nor the body holds the new
    secret or the key."""
    from tests.api.helpers import make_subscription, new_caller
    from web import create_app
    from webhooks.tenants.schemes import new_secret

    caplog.set_level(logging.DEBUG)
    client = create_app({"TESTING": True}).test_client()
    caller = new_caller("rotating")
    subscription_id = make_subscription(caller.account_id)
    issued = []

    def secret_then_outage(scheme):
        issued.append(new_secret(scheme))
        terminate_backends()  # the request's own connection too: its UPDATE will fail
        return issued[-1]

    monkeypatch.setattr("webhooks.tenants.rotation.new_secret", secret_then_outage)
    response = client.post(f"{API}/subscriptions/{subscription_id}/rotate-secret",
                           headers=caller.headers, json=body)
    assert response.status_code == 500
    assert response.get_json() == {"error": {"code": "internal_error",
                                             "message": "The server could not complete this request."}}
    logged = "\n".join(
        f"{r.name} {r.levelname} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "unhandled error" in logged or "commit failed" in logged  # the failure was logged
    found = _search({"logs": logged, "error body": response.get_data(as_text=True)},
                    {"new signing secret": issued[0], "API key": caller.api_key})
    assert found == [], "secrets in the log of a failed rotation:\n" + "\n".join(found)
    with session_scope() as session:  # nothing was stored: the old secret still signs
        stored = session.execute(
            text("SELECT secret, next_secret FROM subscriptions WHERE id = :s"),
            {"s": subscription_id}).one()
    assert issued[0] not in stored
