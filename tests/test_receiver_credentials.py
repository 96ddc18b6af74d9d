"""Client certificates and OAuth2 tokens on the wire (CONTRACT 10.3), with the real sender.

A TLS receiver that requires a client certificate from a trustme CA, and a
token endpoint (tests/support/egress.py). Tokens are shared through their
database rows (SQLite here; tests/test_receiver_credentials_e2e.py runs two
worker processes on PostgreSQL): several senders stand for several
processes.
"""

from __future__ import annotations

import socket
import threading

import pytest
import trustme

from tests.factories import make_account, make_subscription
from tests.support.egress import (TokenServer, client_certificate, localhost_resolver,
                                  tls_receiver_context)
from tests.support.fastreceiver import FastReceiver
from webhooks.sender.oauth2 import Granted
from webhooks.sender.oauth2_tokens import SharedTokens
from webhooks.sender.post import HttpSender, ReceiverCredentials

BODY = b'{"type":"email.sent"}'
HEADERS = {"Content-Type": "application/json"}




@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def bundle(ca, tmp_path):
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def sender(bundle):
    return HttpSender(timeout=5.0, allow_private=True, ca_bundle=bundle,
                      resolver=localhost_resolver)


@pytest.fixture
def tls_receiver(ca):
    server = FastReceiver(tls=tls_receiver_context(ca)).start()
    yield server
    server.stop()


@pytest.fixture
def tokens():
    server = TokenServer().start()
    yield server
    server.stop()


@pytest.fixture
def receiver(tokens):
    """An http receiver that answers 401 to a missing, unknown or revoked Bearer token."""
    server = FastReceiver().start()
    server.default = lambda arrival: 200 if tokens.valid(arrival.authorization) else 401
    yield server
    server.stop()


@pytest.fixture
def subscription_id(sqlite_db):
    account_id, _ = make_account()
    return make_subscription(account_id, "http://localhost/").id


# --- client certificates ------------------------------------------------------------------


def test_a_receiver_that_requires_a_certificate_accepts_every_delivery_with_it(
        sender, tls_receiver, ca):
    with_certificate = ReceiverCredentials("s-1", client_certificate=client_certificate(ca))

    without = sender(tls_receiver.url("/mtls"), BODY, HEADERS)
    accepted = [sender(tls_receiver.url("/mtls"), BODY, HEADERS, credentials=with_certificate)
                for _ in range(5)]

    assert without.status_code is None and without.error_kind.value in ("tls", "connection")
    assert [result.status_code for result in accepted] == [200] * 5
    assert tls_receiver.count("/mtls") == 5


def test_a_connection_that_presented_a_certificate_is_never_reused_without_it(
        sender, tls_receiver, ca):
    with_certificate = ReceiverCredentials("s-1", client_certificate=client_certificate(ca))

    first = sender(tls_receiver.url("/a"), BODY, HEADERS, credentials=with_certificate)
    then_without = sender(tls_receiver.url("/a"), BODY, HEADERS)  # same thread, same host

    assert first.status_code == 200
    assert then_without.status_code is None and tls_receiver.count("/a") == 1


def test_a_certificate_from_an_untrusted_ca_is_refused_by_the_receiver(sender, tls_receiver):
    stranger = ReceiverCredentials("s-1", client_certificate=client_certificate(trustme.CA()))

    result = sender(tls_receiver.url("/mtls"), BODY, HEADERS, credentials=stranger)

    assert result.status_code is None and tls_receiver.count() == 0


# --- OAuth2 ------------------------------------------------------------------------------


def test_one_token_serves_many_deliveries_and_is_sent_as_bearer(
        sender, receiver, tokens, subscription_id):
    credentials = ReceiverCredentials(subscription_id, oauth2=tokens.settings(scope="hooks"))

    results = [sender(receiver.url("/o"), BODY, HEADERS, credentials=credentials)
               for _ in range(20)]

    assert [r.status_code for r in results] == [200] * 20
    assert len(tokens.granted) == 1
    assert tokens.forms[0] == {"grant_type": ["client_credentials"], "scope": ["hooks"]}
    assert {a.authorization for a in receiver.arrivals()} == {f"Bearer {tokens.granted[0]}"}


def test_concurrent_attempts_of_two_processes_fetch_one_token(
        bundle, receiver, tokens, subscription_id):
    processes = [HttpSender(timeout=5.0, allow_private=True, ca_bundle=bundle,
                            tokens=SharedTokens()) for _ in range(2)]
    credentials = ReceiverCredentials(subscription_id, oauth2=tokens.settings())
    start = threading.Barrier(8)
    results = []

    def attempt(sender):
        start.wait()
        results.append(sender(receiver.url("/c"), BODY, HEADERS, credentials=credentials))

    threads = [threading.Thread(target=attempt, args=(processes[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(r.status_code for r in results) == [200] * 8
    assert len(tokens.granted) == 1


def test_a_401_drops_the_token_once_and_exactly_one_new_token_follows(
        bundle, receiver, tokens, subscription_id):
    sender = HttpSender(timeout=5.0, allow_private=True, ca_bundle=bundle)
    credentials = ReceiverCredentials(subscription_id, oauth2=tokens.settings())
    assert sender(receiver.url("/r"), BODY, HEADERS, credentials=credentials).status_code == 200
    tokens.revoke_all()  # the receiver no longer accepts the token the service holds
    start = threading.Barrier(6)
    refused = []

    def attempt():
        start.wait()
        refused.append(sender(receiver.url("/r"), BODY, HEADERS, credentials=credentials))

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    after = [sender(receiver.url("/r"), BODY, HEADERS, credentials=credentials)
             for _ in range(5)]

    # Those that read the token before the first 401 came back got 401 (at least one; the
    # others may already hold the new token): however many, one new token.
    statuses = [r.status_code for r in refused]
    assert 401 in statuses and set(statuses) <= {200, 401}
    assert [r.status_code for r in after] == [200] * 5
    assert len(tokens.granted) == 2  # the first, and exactly one after the 401s


@pytest.mark.parametrize("status, said", [(503, "the token URL answered 503 "
                                                "temporarily_unavailable"),
                                          (400, "the token URL answered 400")])
def test_a_failing_token_url_fails_the_attempt_without_calling_the_endpoint(
        sender, receiver, tokens, subscription_id, status, said):
    tokens.fail_with = status
    credentials = ReceiverCredentials(subscription_id, oauth2=tokens.settings())

    result = sender(receiver.url("/never"), BODY, HEADERS, credentials=credentials)

    assert result.status_code is None and result.error_kind.value == "oauth2"
    assert said in result.error and "the endpoint was not called" in result.error
    assert receiver.count() == 0


def test_a_wrong_client_secret_is_named_by_the_token_urls_error_code(
        sender, receiver, tokens, subscription_id):
    settings = {**tokens.settings(), "client_secret": "not-the-secret-Xy"}
    result = sender(receiver.url("/never"), BODY, HEADERS,
                    credentials=ReceiverCredentials(subscription_id, oauth2=settings))

    assert result.error_kind.value == "oauth2"
    assert "the token URL answered 401 invalid_client" in result.error
    assert "not-the-secret-Xy" not in result.error and receiver.count() == 0


def test_a_token_url_that_cannot_be_reached_is_an_oauth2_failure(sender, receiver,
                                                                  subscription_id):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    settings = {"token_url": f"http://127.0.0.1:{closed}/token", "client_id": "c",
                "client_secret": "s"}
    result = sender(receiver.url("/never"), BODY, HEADERS,
                    credentials=ReceiverCredentials(subscription_id, oauth2=settings))

    assert result.error_kind.value == "oauth2"
    assert "token URL: connection refused" in result.error and receiver.count() == 0


class _Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_is_refreshed_30_s_before_it_expires_and_used_meanwhile(subscription_id):
    clock, granted = _Clock(), []

    def grant():
        granted.append(f"tok{len(granted)}")
        return Granted(granted[-1], expires_in=600)

    shared = SharedTokens(now=clock)
    deadline = type("Deadline", (), {"remaining": lambda self: 5.0, "expired": False,
                                     "budget": 5.0})()
    settings = {"token_url": "https://id.example/token", "client_id": "c", "client_secret": "s"}

    assert shared.token(subscription_id, settings, grant, deadline) == "tok0"
    clock.now += 569  # 31 s before expiry: still the same token
    assert shared.token(subscription_id, settings, grant, deadline) == "tok0"
    clock.now += 2  # 29 s before expiry: refreshed
    assert shared.token(subscription_id, settings, grant, deadline) == "tok1"
    changed = {**settings, "scope": "other"}  # other settings: never the old token
    assert shared.token(subscription_id, changed, grant, deadline) == "tok2"


def test_a_token_without_expires_in_is_used_for_300_s(subscription_id):
    clock, granted = _Clock(), []

    def grant():
        granted.append(f"tok{len(granted)}")
        return Granted(granted[-1], expires_in=None)

    shared = SharedTokens(now=clock)
    deadline = type("Deadline", (), {"remaining": lambda self: 5.0, "expired": False,
                                     "budget": 5.0})()
    settings = {"token_url": "https://id.example/token", "client_id": "c", "client_secret": "s"}
    assert shared.token(subscription_id, settings, grant, deadline) == "tok0"
    clock.now += 269
    assert shared.token(subscription_id, settings, grant, deadline) == "tok0"
    clock.now += 2
    assert shared.token(subscription_id, settings, grant, deadline) == "tok1"


def test_a_dropped_token_is_dropped_once_whoever_drops_it_again(subscription_id):
    clock, granted = _Clock(), []

    def grant():
        granted.append(f"tok{len(granted)}")
        return Granted(granted[-1], expires_in=3600)

    processes = [SharedTokens(now=clock), SharedTokens(now=clock)]
    deadline = type("Deadline", (), {"remaining": lambda self: 5.0, "expired": False,
                                     "budget": 5.0})()
    settings = {"token_url": "https://id.example/token", "client_id": "c", "client_secret": "s"}
    assert processes[0].token(subscription_id, settings, grant, deadline) == "tok0"
    assert processes[1].token(subscription_id, settings, grant, deadline) == "tok0"

    processes[0].drop(subscription_id, "tok0")  # both got 401 for tok0
    assert processes[0].token(subscription_id, settings, grant, deadline) == "tok1"
    processes[1].drop(subscription_id, "tok0")  # late: tok1 is not dropped
    assert processes[1].token(subscription_id, settings, grant, deadline) == "tok1"
    assert granted == ["tok0", "tok1"]


@pytest.mark.parametrize("status, body, complete, said", [
    (200, b'{"access_token": "a"}' + b" " * 70000, False, "over 64 KiB"),
    (200, b"<html>", True, "without a JSON object"),
    (200, b'{"token_type": "Bearer"}', True, "without an access_token"),
    (200, b'{"access_token": "a b"}', True, "cannot be sent as a Bearer token"),
    (200, b'{"access_token": "abc", "token_type": "mac"}', True, "another type than Bearer"),
    (500, b'{"error": "server_error"}', True, "answered 500 server_error"),
])
def test_what_the_token_urls_answer_must_hold(status, body, complete, said):
    from webhooks.sender.oauth2 import TokenFailure, granted

    with pytest.raises(TokenFailure) as refused:
        granted(status, body, complete)
    assert said in refused.value.failure.text and refused.value.failure.kind.value == "oauth2"


def test_expires_in_is_read_as_seconds_and_a_token_is_never_printed():
    from webhooks.sender.oauth2 import granted

    token = granted(200, b'{"access_token": "tok.EN-1", "expires_in": "120"}', True)
    assert token.expires_in == 120.0 and token.lifetimes(1000.0) == (1090.0, 1120.0)
    assert "tok.EN-1" not in repr(token)
