"""Standard Webhooks signatures (CONTRACT 9.3), checked by the reference library.

``standardwebhooks`` (PyPI, a test dependency) is the format's own Python
implementation: every header set signed here must verify there, and a
delivery it would reject must be rejected by ``verify()`` too.
"""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import given, strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from webhooks.signing import (InvalidSignature, sign, sign_standard, standard_headers,
                              verify)

NOW = 1_790_000_000
BODY = b'{"type":"email.sent","data":{"a":1}}'
MESSAGE_ID = "2f1c1c1e-0b55-4a83-9d1e-5a2f6f0c9b11"


def _secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def _reference_accepts(secret: str, body: bytes, headers: dict) -> bool:
    """The reference library's verdict, at the real current time (as it has no ``now``)."""
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False


def _now_headers(secrets, body=BODY):
    import time

    return standard_headers(secrets, MESSAGE_ID, body, int(time.time()))


def test_the_reference_library_verifies_what_we_sign():
    secret = _secret()
    assert _reference_accepts(secret, BODY, _now_headers([secret]))
    assert not _reference_accepts(secret, BODY + b" ", _now_headers([secret]))
    assert not _reference_accepts(_secret(), BODY, _now_headers([secret]))


def test_while_a_rotation_is_staged_both_secrets_verify():
    current, following = _secret(), _secret()
    headers = _now_headers([current, following])
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert _reference_accepts(current, BODY, headers)
    assert _reference_accepts(following, BODY, headers)
    verify(following, BODY, headers)
    verify([current, following], BODY, headers)


def test_verify_takes_the_request_headers_of_either_scheme():
    secret = _secret()
    standard = standard_headers([secret], MESSAGE_ID, BODY, NOW)
    verify(secret, BODY, {k.title(): v for k, v in standard.items()}, now=NOW)
    service = {"X-Service-Signature": sign("s3cret", BODY, NOW), "Content-Type": "application/json"}
    verify("s3cret", BODY, service, now=NOW)
    verify("s3cret", BODY, service["X-Service-Signature"], now=NOW)  # the value alone, as before


@pytest.mark.parametrize("change, reason", [
    ({"webhook-timestamp": str(NOW - 301)}, "in the past"),
    ({"webhook-timestamp": str(NOW + 301)}, "in the future"),
    ({"webhook-timestamp": "12.5"}, "whole unix seconds"),
    ({"webhook-id": ""}, "required"),
    ({"webhook-signature": "v2,abc"}, "no v1 signature"),
    ({"webhook-signature": "v1,AAAA"}, "does not match"),
])
def test_a_bad_standard_delivery_says_why(change, reason):
    secret = _secret()
    headers = {**standard_headers([secret], MESSAGE_ID, BODY, NOW), **change}
    with pytest.raises(InvalidSignature, match=reason):
        verify(secret, BODY, headers, now=NOW)


def test_a_mapping_without_a_signature_header_is_refused():
    with pytest.raises(InvalidSignature, match="missing"):
        verify("s", BODY, {"Content-Type": "application/json"}, now=NOW)


def test_a_secret_that_is_not_base64_is_a_value_error():
    with pytest.raises(ValueError, match="base64"):
        sign_standard("whsec_not base64!", MESSAGE_ID, BODY, NOW)


@given(body=st.binary(max_size=300).map(lambda b: b.hex().encode()),
       message_id=st.uuids().map(str), key=st.binary(min_size=24, max_size=64))
def test_any_body_we_sign_the_reference_verifies(body, message_id, key):
    import time

    secret = "whsec_" + base64.b64encode(key).decode()
    headers = standard_headers([secret], message_id, body, int(time.time()))
    Webhook(secret).verify(body, headers, json_parse=False)  # raises if it does not verify
    verify(secret, body, headers)


def test_verify_takes_a_web_framework_s_header_object():
    """Werkzeug's Headers (Flask's request.headers) is no Mapping; verify takes it as it is."""
    from werkzeug.datastructures import Headers

    secret = _secret()
    verify(secret, BODY, Headers(standard_headers([secret], MESSAGE_ID, BODY, NOW)), now=NOW)
    verify("s3cret", BODY, Headers({"X-Service-Signature": sign("s3cret", BODY, NOW)}), now=NOW)
