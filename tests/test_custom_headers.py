"""Custom headers per subscription (webhooks/tenants/custom_headers.py): which names are refused,
how they join a delivery's headers, and that their values never reach a log line."""

from __future__ import annotations

import io
import logging

import pytest
from sqlalchemy import update

from tests.factories import make_account, make_subscription
from tests.test_delivery_wire import CLAIM
from tests.test_store import emit
from webhooks.config import load_settings
from webhooks.config.logs import JsonFormatter
from webhooks.services.attempt import delivery_headers, run_attempt
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription
from webhooks.tenants import custom_headers

SERVICE_HEADERS = ["X-Service-Signature", "x-service-event-id", "X-SERVICE-ATTEMPT",
                   "X-Service-Version", "X-Service-Event", "X-Service-Mode",
                   "X-Service-Delivery-Id"]
OTHER_RESERVED = ["Content-Type", "content-length", "HOST", "User-Agent", "Connection",
                  "Transfer-Encoding", "Keep-Alive", "Proxy-Authorization", "proxy-connection",
                  "TE", "Trailer", "Upgrade", "Content-Encoding", "Accept-Encoding"]


@pytest.mark.parametrize("name", SERVICE_HEADERS + OTHER_RESERVED)
def test_the_service_s_own_and_hop_by_hop_headers_are_reserved_in_any_case(name):
    assert custom_headers.reserved([name, "Authorization"], "Service") == [name]


def test_the_delivery_headers_are_reserved_under_the_configured_service_name():
    assert custom_headers.reserved(["X-Acme-Signature", "X-Service-Signature"], "Acme") == [
        "X-Acme-Signature"]


@pytest.mark.parametrize("headers, problem", [
    ({f"X-H{i}": "v" for i in range(21)}, "at most 20 headers"),
    ({"Bad Name": "v"}, "is not a header name"),
    ({"X-Ünïcode": "v"}, "is not a header name"),
    ({"X:Colon": "v"}, "is not a header name"),
    ({"": "v"}, "is not a header name"),
    ({"X-A": "v", "x-a": "w"}, "name the same header"),
    ({"X-A": "x" * 1001}, "over 1000 characters"),
    ({"X-A": "line\nbreak"}, "printable ASCII"),
    ({"X-A": "caf\u00e9"}, "printable ASCII"),
    ({"X-A": " padded"}, "begin or end with a space"),
    ({"X-A": 5}, "must be a string"),
])
def test_malformed_headers_are_described_without_quoting_the_value(headers, problem):
    found = custom_headers.problems(headers)
    assert any(problem in text for text in found), found
    for value in headers.values():
        if isinstance(value, str) and len(value) > 3:
            assert all(value not in text for text in found)


def test_twenty_printable_headers_are_fine():
    headers = {f"X-Custom-{i}": f"value {i}: !~" for i in range(20)}
    headers["Authorization"] = "x" * 1000
    headers.pop("X-Custom-0")
    assert custom_headers.problems(headers) == []


def test_custom_headers_are_sent_with_a_delivery_and_ours_always_win():
    claim = CLAIM.__class__(**{**CLAIM.__dict__, "headers": {
        "Authorization": "Bearer abc", "X-Route": "eu-1",
        # Saved under another service name, or forced into the row: never sent over ours.
        "x-service-signature": "forged", "Content-Type": "text/plain"}})
    headers = delivery_headers(claim, load_settings({}), timestamp=1_790_000_000)
    assert headers["Authorization"] == "Bearer abc" and headers["X-Route"] == "eu-1"
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Service-Signature"].startswith("sha256=")
    assert "x-service-signature" not in headers
    assert [name.lower() for name in headers].count("content-type") == 1


def test_without_custom_headers_the_delivery_headers_are_unchanged():
    assert delivery_headers(CLAIM, load_settings({}), 1_790_000_000) == delivery_headers(
        CLAIM.__class__(**{**CLAIM.__dict__, "headers": {}}), load_settings({}), 1_790_000_000)


def test_a_delivery_carries_the_headers_to_the_endpoint_and_no_log_line_holds_a_value(
        db, published, receiver, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    monkeypatch.setenv("WEBHOOKS_RETRY_DELAYS", "0,0,0,0,0")  # the retry is due at once
    reset_settings_cache()
    secret_value = "Bearer tok-7f3e9c-not-for-logs"
    account_id, _ = make_account()
    subscription = make_subscription(account_id, receiver.url("/hook"))
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(headers={"Authorization": secret_value, "X-Tenant": "acme"}))
    receiver.script("/hook", 500, 200)  # a failed attempt too: its log lines must not leak it
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous_level = root.level
    root.setLevel(logging.DEBUG)  # urllib3 and requests log their requests at DEBUG
    try:
        delivery_id = emit(account_id).delivery_ids[0]
        assert run_attempt(delivery_id, 0) == "pending"
        assert run_attempt(delivery_id, 1) == "done"
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
    arrived = receiver.received("/hook")
    assert [r.headers["Authorization"] for r in arrived] == [secret_value] * 2
    assert all(r.headers["X-Tenant"] == "acme" for r in arrived)
    logged = stream.getvalue()
    assert "delivery attempt 2" in logged  # the lines were captured
    assert "tok-7f3e9c" not in logged
