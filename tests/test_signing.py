"""sign()/verify() against an HMAC computed independently here, and hypothesis."""

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks.signing import InvalidSignature, sign, verify

SECRET = "whsec_test-secret"
BODY = b'{"version":"2026-07-30","id":"x","type":"test.ping","mode":"live","created_at":"","data":{}}'
NOW = 1_790_000_000


def independent_header(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()},t={timestamp}"


def test_sign_matches_an_independent_hmac():
    assert sign(SECRET, BODY, NOW) == independent_header(SECRET, BODY, NOW)


def test_verify_accepts_its_own_signature():
    verify(SECRET, BODY, sign(SECRET, BODY, NOW), now=NOW)


@pytest.mark.parametrize("skew", [-300, 300, 0])
def test_verify_accepts_the_tolerance_edges(skew):
    verify(SECRET, BODY, sign(SECRET, BODY, NOW + skew), now=NOW)


def test_verify_rejects_stale_timestamps():
    with pytest.raises(InvalidSignature, match="past"):
        verify(SECRET, BODY, sign(SECRET, BODY, NOW - 301), now=NOW)


def test_verify_rejects_future_timestamps():
    with pytest.raises(InvalidSignature, match="future"):
        verify(SECRET, BODY, sign(SECRET, BODY, NOW + 301), now=NOW)


def test_custom_tolerance():
    header = sign(SECRET, BODY, NOW - 100)
    with pytest.raises(InvalidSignature):
        verify(SECRET, BODY, header, now=NOW, tolerance=60)


def test_verify_rejects_a_changed_body():
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(SECRET, BODY + b" ", sign(SECRET, BODY, NOW), now=NOW)


def test_verify_rejects_reserialised_json():
    import json

    reencoded = json.dumps(json.loads(BODY)).encode()
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(SECRET, reencoded, sign(SECRET, BODY, NOW), now=NOW)


def test_verify_rejects_another_secret():
    with pytest.raises(InvalidSignature, match="does not match"):
        verify("whsec_other", BODY, sign(SECRET, BODY, NOW), now=NOW)


def test_timestamp_is_part_of_the_mac():
    header = sign(SECRET, BODY, NOW)
    forged = header.replace(f"t={NOW}", f"t={NOW + 1}")
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(SECRET, BODY, forged, now=NOW)


def test_parts_in_either_order():
    digest, stamp = sign(SECRET, BODY, NOW).split(",")
    verify(SECRET, BODY, f"{stamp},{digest}", now=NOW)


@pytest.mark.parametrize(
    "header, reason",
    [
        ("", "missing"),
        ("sha256=abc", "malformed"),
        ("t=1", "malformed"),
        (f"sha256={'0' * 64},t=abc", "timestamp"),
        (f"sha256={'0' * 64},t=-5", "timestamp"),
        (f"sha256={'A' * 64},t={NOW}", "digest"),
        (f"sha256={'0' * 63},t={NOW}", "digest"),
        (f"sha256={'0' * 64},t={NOW},v1=x", "malformed"),
        (f"sha256={'0' * 64},sha256={'0' * 64},t={NOW}", "malformed"),
        (f"sha1={'0' * 40},t={NOW}", "malformed"),
    ],
)
def test_malformed_headers_say_what_failed(header, reason):
    with pytest.raises(InvalidSignature, match=reason):
        verify(SECRET, BODY, header, now=NOW)


def test_sign_requires_whole_seconds():
    with pytest.raises(TypeError):
        sign(SECRET, BODY, 1.5)


@given(secret=st.text(min_size=1), body=st.binary(), timestamp=st.integers(0, 2**40))
def test_any_body_and_secret_round_trip(secret, body, timestamp):
    header = sign(secret, body, timestamp)
    assert header == independent_header(secret, body, timestamp)
    verify(secret, body, header, now=timestamp)


@given(secret=st.text(min_size=1), body=st.binary(), flip=st.integers(0, 10_000))
def test_any_single_byte_change_is_rejected(secret, body, flip):
    header = sign(secret, body, NOW)
    if not body:
        tampered = bytearray(b"x")  # any byte differs from the empty body
    else:
        tampered = bytearray(body)
        tampered[flip % len(tampered)] ^= 0x01
    with pytest.raises(InvalidSignature):
        verify(secret, bytes(tampered), header, now=NOW)


@given(header=st.text(), body=st.binary())
def test_verify_only_ever_raises_invalid_signature(header, body):
    try:
        verify(SECRET, body, header, now=NOW)
    except InvalidSignature:
        pass


# --- several secrets (a receiver during a staged rotation) ---------------------------------

OLD, NEW = "whsec_old-secret", "whsec_new-secret"


@pytest.mark.parametrize("signed_with", [OLD, NEW])
def test_verify_accepts_a_signature_of_any_of_several_secrets(signed_with):
    header = sign(signed_with, BODY, NOW)
    verify([OLD, NEW], BODY, header, now=NOW)
    verify((NEW, OLD), BODY, header, now=NOW)


def test_verify_with_several_secrets_rejects_a_signature_of_none_of_them():
    with pytest.raises(InvalidSignature, match="any of the 2 secrets"):
        verify([OLD, NEW], BODY, sign("whsec_third", BODY, NOW), now=NOW)


def test_verify_with_several_secrets_still_checks_the_timestamp():
    with pytest.raises(InvalidSignature, match="past"):
        verify([OLD, NEW], BODY, sign(NEW, BODY, NOW - 301), now=NOW)


def test_verify_needs_at_least_one_secret_of_text():
    with pytest.raises(ValueError, match="at least one secret"):
        verify([], BODY, sign(OLD, BODY, NOW), now=NOW)
    with pytest.raises(TypeError):
        verify([OLD, b"whsec_bytes"], BODY, sign(OLD, BODY, NOW), now=NOW)
