"""What one attempt puts on the wire, with requests mocked by `responses` (no sockets)."""

from __future__ import annotations

import requests
import responses

from webhooks.config import load_settings
from webhooks.lifecycle.claim import Claim
from webhooks.sender.post import HttpSender
from webhooks.services.attempt import delivery_headers
from webhooks.signing import verify

URL = "https://hooks.example.com/webhooks"
CLAIM = Claim(
    delivery_id="5c0b8f7e-7d7c-4f5e-9a55-0d3c7f1c2a10",
    attempt_number=3,
    event_id="0e6f2a7e-1f7b-4c55-8d4e-3a8c9b7d6e51",
    event_type="email.sent",
    subscription_id="9a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
    url=URL,
    secret="whsec_unit",
    body=b'{"version":"2026-07-30","id":"0e6f2a7e-1f7b-4c55-8d4e-3a8c9b7d6e51","data":{"x":"\xc3\xa9"}}',
    version="2026-07-30",
)


def test_headers_carry_the_contract_names_and_a_signature_of_this_moment():
    settings = load_settings({"WEBHOOKS_SERVICE_NAME": "Acme"})
    headers = delivery_headers(CLAIM, settings, timestamp=1_790_000_000)
    assert headers["X-Acme-Version"] == "2026-07-30"
    assert headers["X-Acme-Event"] == "email.sent"
    assert headers["X-Acme-Mode"] == "live"
    assert headers["X-Acme-Event-Id"] == CLAIM.event_id
    assert headers["X-Acme-Delivery-Id"] == CLAIM.delivery_id
    assert headers["X-Acme-Attempt"] == "3"
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Acme-Signature"].endswith(",t=1790000000")
    verify("whsec_unit", CLAIM.body, headers["X-Acme-Signature"], now=1_790_000_000)


@responses.activate
def test_the_exact_body_bytes_are_posted_and_the_status_reported():
    responses.add(responses.POST, URL, status=202, body="accepted")
    headers = delivery_headers(CLAIM, load_settings({}), timestamp=1_790_000_000)
    result = HttpSender(timeout=5, allow_private=True).post(URL, CLAIM.body, headers)
    assert (result.status_code, result.error, result.excerpt) == (202, None, "accepted")
    sent = responses.calls[0].request
    assert sent.body == CLAIM.body  # byte for byte: the receiver verifies these bytes
    assert sent.headers["X-Service-Attempt"] == "3"


@responses.activate
def test_a_connection_error_becomes_a_recorded_error_not_an_exception():
    responses.add(responses.POST, URL, body=requests.ConnectionError("connection reset"))
    result = HttpSender(timeout=5, allow_private=True).post(URL, CLAIM.body, {})
    assert result.status_code is None and result.error.startswith("connection error")
