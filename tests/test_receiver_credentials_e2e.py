"""Issue 39 end to end: two real worker processes send through a real CONNECT proxy
(tinyproxy, with credentials) to an https receiver that requires a client certificate and
an OAuth2 token, on PostgreSQL and Redis.

- every delivery arrives, through tunnels to the address the guard approved;
- one token serves every delivery of both processes; a 401 leads to exactly one new one;
- no private key, client secret, token or proxy password appears in any API answer,
  dashboard page, worker log line or metric.
"""

from __future__ import annotations

import re

import pytest
import trustme
from sqlalchemy import text

from tests.dashboard.helpers import sign_in
from tests.support.egress import TinyProxy, TokenServer, client_certificate, tls_receiver_context
from tests.support.fastreceiver import FastReceiver
from tests.support.pipeline import pipeline_env
from tests.support.stack import wait_until
from tests.support.worker import emit_with, running_workers
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_engine

pytestmark = pytest.mark.integration

PROXY_PASSWORD = "pp-Relay-41x-never-printed"
BASE = "/api/webhooks/subscriptions"


@pytest.fixture
def parts(tmp_path):
    """The CA, the proxy, the token endpoint and the receiver, all on loopback."""
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    proxy = TinyProxy(user="relay", password=PROXY_PASSWORD).start()
    tokens = TokenServer().start()
    receiver = FastReceiver(tls=tls_receiver_context(ca)).start()
    receiver.default = lambda arrival: 200 if tokens.valid(arrival.authorization) else 401
    yield ca, bundle, proxy, tokens, receiver
    receiver.stop()
    tokens.stop()
    proxy.stop()


@pytest.fixture
def env(parts, db, tmp_path, monkeypatch):
    _, bundle, proxy, _, _ = parts
    settings = pipeline_env(RETRY_DELAYS="1,1,1", CA_BUNDLE=str(bundle),
                            EGRESS_PROXY=proxy.url, LOG_LEVEL="DEBUG",
                            DATA_DIR=str(tmp_path / "data"))
    emit_with(monkeypatch, settings)
    return settings


@pytest.fixture
def two_workers(env):
    yield from running_workers(env, concurrency=4)



def _emit(account_id: str, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        ids += emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    assert outbox.flush(10)
    return ids


def _statuses(ids) -> dict[str, str]:
    with get_engine().connect() as connection:
        rows = connection.execute(text("SELECT id, status FROM deliveries WHERE id = ANY(:ids)"),
                                  {"ids": list(ids)}).all()
    return dict(rows)


def _all(ids, status: str) -> bool:
    found = _statuses(ids)
    return len(found) == len(ids) and set(found.values()) == {status}


def test_two_workers_deliver_through_the_proxy_with_certificate_and_one_token(
        parts, env, two_workers, alice):
    from web import create_app

    ca, _, proxy, tokens, receiver = parts
    app = create_app({"TESTING": True})
    api = app.test_client()
    certificate = client_certificate(ca)
    created = api.post(BASE, headers=alice.headers, json={
        "url": receiver.url("/mtls"), "client_certificate": certificate,
        "oauth2": tokens.settings(scope="webhooks")})
    assert created.status_code == 201, created.get_json()

    delivered = _emit(alice.account_id, 30)
    wait_until(lambda: _all(delivered, "done"), timeout=60, what="30 deliveries done")

    assert len(tokens.granted) == 1  # one token for both processes' eight threads
    assert receiver.count("/mtls") == 30
    assert {a.authorization for a in receiver.arrivals()} == {f"Bearer {tokens.granted[0]}"}
    tunnels = set(proxy.connects())
    assert f"127.0.0.1:{receiver.port}" in tunnels and f"localhost:{receiver.port}" not in tunnels
    assert any(target.endswith(f":{tokens.url.split(':')[2].split('/')[0]}") for target in tunnels)

    tokens.revoke_all()  # the receiver stops accepting it: the next attempt gets 401
    (refused,) = _emit(alice.account_id, 1)
    wait_until(lambda: _all([refused], "failed"), timeout=30, what="the 401 recorded")
    after = _emit(alice.account_id, 10)
    wait_until(lambda: _all(after, "done"), timeout=60, what="10 more done with a new token")
    assert len(tokens.granted) == 2  # exactly one new token after the 401

    secrets = [certificate["private_key"].splitlines()[1], tokens.client_secret,
               PROXY_PASSWORD, *tokens.granted]
    _no_secret_anywhere(app, api, alice, created.get_json()["id"], two_workers, secrets)


def _no_secret_anywhere(app, api, alice, subscription_id, workers, secrets) -> None:
    """Every answer, page, log line and metric, searched for each secret."""
    texts = {
        "get": api.get(f"{BASE}/{subscription_id}", headers=alice.headers),
        "list": api.get(BASE, headers=alice.headers),
        "deliveries": api.get("/api/webhooks/deliveries?limit=100", headers=alice.headers),
        "metrics": api.get("/metrics"),
    }
    texts = {name: response.get_data(as_text=True) for name, response in texts.items()}
    browser = app.test_client()
    sign_in(browser, alice.api_key)
    for path in ("/dashboard/", "/dashboard/subscriptions",
                 f"/dashboard/subscriptions/{subscription_id}",
                 f"/dashboard/subscriptions/{subscription_id}/edit", "/dashboard/deliveries"):
        page = browser.get(path)
        assert page.status_code == 200, path
        texts[path] = page.get_data(as_text=True)
    for index, worker in enumerate(workers):
        texts[f"worker {index} log"] = worker.log_path.read_text(errors="replace")
    assert re.search(r"delivery attempt \d+ of", texts["worker 0 log"] + texts["worker 1 log"])
    for name, body in texts.items():
        for secret in secrets:
            assert secret not in body, f"a secret appears in {name}"
