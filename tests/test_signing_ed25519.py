"""Ed25519 signatures (CONTRACT 10.2): ``v1a`` made with a ``whsk_`` private key, checked by
``cryptography`` alone from the ``whpk_`` public key and by ``webhooks.verify``; the JSON
Web Key of a public key (RFC 8037, with its RFC 7638 thumbprint as ``kid``); what answers
may show of a key-pair subscription; private keys masked in log lines."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.ed25519 import v1a_results
from tests.support.examples import examples
from webhooks.config.logs import redact
from webhooks.signing import (
    InvalidSignature,
    key_id,
    public_jwk,
    public_key_of,
    sign,
    sign_standard,
    standard_headers,
    verify,
)
from webhooks.tenants.keypairs import key_set_entries, public_keys_at, shown_secrets
from webhooks.tenants.schemes import new_secret, scheme_problem

NOW = 1_790_000_000
BODY = b'{"id":"evt","type":"email.sent","data":{"n":1}}'
MESSAGE_ID = "3f0c2a8e-0000-4000-8000-000000000001"

# RFC 8037 appendix A.1 and A.3: an Ed25519 key pair as a JWK (d, x) and x's JWK thumbprint.
RFC_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def _from_base64url(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def _whsk(raw: bytes) -> str:
    return "whsk_" + base64.b64encode(raw).decode()


def _public_bytes(public_key: str) -> bytes:
    assert public_key.startswith("whpk_")
    return base64.b64decode(public_key[len("whpk_"):], validate=True)


@pytest.fixture
def private_key() -> str:
    return new_secret("standard-ed25519")


def test_a_new_private_key_is_whsk_and_the_base64_of_a_32_byte_seed():
    keys = {new_secret("standard-ed25519") for _ in range(5)}
    assert len(keys) == 5
    for key in keys:
        assert key.startswith("whsk_") and len(base64.b64decode(key[5:], validate=True)) == 32
    assert scheme_problem("standard-ed25519") is None


def test_the_public_key_is_the_rfc_8032_one_of_the_seed():
    assert public_key_of(_whsk(_from_base64url(RFC_D))) == (
        "whpk_" + base64.b64encode(_from_base64url(RFC_X)).decode())


def test_the_jwk_is_rfc_8037s_with_the_rfc_7638_thumbprint_as_kid():
    public_key = "whpk_" + base64.b64encode(_from_base64url(RFC_X)).decode()
    assert public_jwk(public_key) == {"kty": "OKP", "crv": "Ed25519", "x": RFC_X,
                                      "kid": RFC_THUMBPRINT, "use": "sig", "alg": "EdDSA"}
    assert key_id(public_key) == RFC_THUMBPRINT


def test_a_v1a_signature_verifies_with_cryptography_alone(private_key):
    headers = standard_headers([private_key], MESSAGE_ID, BODY, NOW)
    assert headers["webhook-signature"].startswith("v1a,")
    assert len(base64.b64decode(headers["webhook-signature"][4:])) == 64
    assert v1a_results(public_key_of(private_key), headers, BODY) == [True]


@pytest.mark.parametrize("tamper", ["body", "timestamp", "id"])
def test_a_tampered_delivery_fails_both_checks(private_key, tamper):
    headers = standard_headers([private_key], MESSAGE_ID, BODY, NOW)
    body = BODY
    if tamper == "body":
        body = BODY.replace(b'"n":1', b'"n":2')
    elif tamper == "timestamp":
        headers["webhook-timestamp"] = str(NOW + 1)
    else:
        headers["webhook-id"] = MESSAGE_ID[:-1] + "2"
    public_key = public_key_of(private_key)
    assert v1a_results(public_key, headers, body) == [False]
    with pytest.raises(InvalidSignature, match="does not match the body and public key"):
        verify(public_key, body, headers, now=NOW)


def test_verify_takes_a_public_key_and_the_headers_in_any_case(private_key):
    headers = standard_headers([private_key], MESSAGE_ID, BODY, NOW)
    public_key = public_key_of(private_key)
    verify(public_key, BODY, headers, now=NOW)
    verify(public_key, BODY, {name.title(): value for name, value in headers.items()}, now=NOW)
    verify([new_secret("standard"), public_key], BODY, headers, now=NOW)  # any of them
    with pytest.raises(InvalidSignature, match="public key"):
        verify(public_key_of(new_secret("standard-ed25519")), BODY, headers, now=NOW)
    with pytest.raises(InvalidSignature, match="in the past"):
        verify(public_key, BODY, headers, now=NOW + 301)


def test_a_staged_rotation_signs_twice_each_valid_under_its_own_key(private_key):
    following = new_secret("standard-ed25519")
    headers = standard_headers([private_key, following], MESSAGE_ID, BODY, NOW)
    entries = headers["webhook-signature"].split(" ")
    assert [entry.partition(",")[0] for entry in entries] == ["v1a", "v1a"]
    assert v1a_results(public_key_of(private_key), headers, BODY) == [True, False]
    assert v1a_results(public_key_of(following), headers, BODY) == [False, True]
    for key in (private_key, following):
        verify(public_key_of(key), BODY, headers, now=NOW)


def test_a_public_key_checks_no_hmac_signature():
    secret = new_secret("standard")
    hmac_signed = standard_headers([secret], MESSAGE_ID, BODY, NOW)
    public_key = public_key_of(new_secret("standard-ed25519"))
    with pytest.raises(InvalidSignature, match="holds no v1a signature"):
        verify(public_key, BODY, hmac_signed, now=NOW)
    with pytest.raises(InvalidSignature, match="pass the request's headers"):
        verify(public_key, BODY, sign(secret, BODY, NOW), now=NOW)
    with pytest.raises(InvalidSignature, match="has no webhook-signature header"):
        verify(public_key, BODY, {"X-Service-Signature": sign(secret, BODY, NOW)}, now=NOW)
    ed_signed = standard_headers([new_secret("standard-ed25519")], MESSAGE_ID, BODY, NOW)
    with pytest.raises(InvalidSignature, match="holds no v1 signature"):
        verify(secret, BODY, ed_signed, now=NOW)


def test_the_service_schemes_verify_exactly_as_before():
    """CONTRACT 4 and 8.3: a secret, or several, with the header's value."""
    secret = new_secret("service")
    header = sign(secret, BODY, NOW)
    verify(secret, BODY, header, now=NOW)
    verify([new_secret("service"), secret], BODY, header, now=NOW)
    with pytest.raises(InvalidSignature, match="any of the 2 secrets"):
        verify([new_secret("service"), new_secret("service")], BODY, header, now=NOW)
    standard = new_secret("standard")
    assert sign_standard(standard, MESSAGE_ID, BODY, NOW).startswith("v1,")


@settings(max_examples=examples(40), deadline=None)
@given(body=st.binary(min_size=1, max_size=300), flip=st.integers(min_value=0))
def test_any_body_verifies_and_any_changed_byte_fails(body, flip):
    private_key = _whsk(hashlib.sha256(body).digest())  # a key per example, no randomness
    headers = standard_headers([private_key], MESSAGE_ID, body, NOW)
    verify(public_key_of(private_key), body, headers, now=NOW)
    index = flip % len(body)
    changed = body[:index] + bytes([body[index] ^ 0x01]) + body[index + 1:]
    with pytest.raises(InvalidSignature):
        verify(public_key_of(private_key), changed, headers, now=NOW)


# ----------------------------------------------------------------- what answers show


def _row(scheme: str, secret: str, next_secret=None, active_at=None):
    return SimpleNamespace(id="sub-1", signature_scheme=scheme, secret=secret,
                           next_secret=next_secret, next_secret_active_at=active_at)


def test_a_key_pair_shows_public_keys_only_and_swaps_when_due():
    now = dt.datetime(2026, 7, 30, tzinfo=dt.timezone.utc)
    later = now + dt.timedelta(hours=1)
    current, following = new_secret("standard-ed25519"), new_secret("standard-ed25519")
    row = _row("standard-ed25519", current, following, later)
    assert shown_secrets(row, now) is None
    keys = public_keys_at(row, now)
    assert (keys.public_key, keys.next_public_key, keys.next_public_key_active_at) == (
        public_key_of(current), public_key_of(following), later)
    assert keys.key_id == key_id(keys.public_key) and keys.next_key_id == key_id(
        keys.next_public_key)
    swapped = public_keys_at(row, later)
    assert (swapped.public_key, swapped.next_public_key) == (public_key_of(following), None)
    entries = key_set_entries(row, now)
    assert [entry["x"] for entry in entries] == [
        base64.urlsafe_b64encode(_public_bytes(key)).rstrip(b"=").decode()
        for key in (keys.public_key, keys.next_public_key)]
    assert {entry["subscription_id"] for entry in entries} == {"sub-1"}
    assert all(current not in str(entry) and following not in str(entry) for entry in entries)


def test_an_hmac_subscription_shows_its_secrets_and_no_key():
    now = dt.datetime(2026, 7, 30, tzinfo=dt.timezone.utc)
    row = _row("standard", new_secret("standard"))
    assert public_keys_at(row, now) is None and key_set_entries(row, now) == []
    assert shown_secrets(row, now).secret == row.secret


def test_a_private_key_is_masked_in_log_lines(private_key):
    line = redact(f"signing with {private_key} and {new_secret('standard')} failed")
    assert private_key[5:] not in line and "whsk_[redacted]" in line
    # Standard base64 runs to its end, "+" and "/" and padding included.
    assert redact("whsec_ab+c/d== next") == "whsec_[redacted] next"
