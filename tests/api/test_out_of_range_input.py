"""CONTRACT 9.2: a malformed or out-of-range cursor, date or number answers 400, never 500.

A date can be valid with its offset and outside the calendar in UTC:
``0001-01-01T00:00:00+14:00`` is a moment of year 0, and turning it into UTC
raises OverflowError. Each case was a 500 before (issue 22).
"""

from __future__ import annotations

import base64

import pytest

from .helpers import make_subscription

DELIVERIES = "/api/webhooks/deliveries"
SUBSCRIPTIONS = "/api/webhooks/subscriptions"
EDGES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()


def _error(response, code: str) -> str:
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == code
    return response.get_json()["error"]["message"]


@pytest.mark.parametrize("moment", EDGES)
def test_a_cursor_with_a_moment_outside_utc_is_a_400(client, alice, moment):
    cursor = _cursor(f"1|{moment}|00000000-0000-4000-8000-000000000000")
    _error(client.get(DELIVERIES, query_string={"cursor": cursor}, headers=alice.headers),
           "invalid_cursor")
    _error(client.get(SUBSCRIPTIONS, query_string={"cursor": cursor}, headers=alice.headers),
           "invalid_cursor")


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("moment", EDGES)
def test_recover_with_a_moment_outside_utc_is_a_400_naming_the_field(client, alice, field,
                                                                     moment):
    subscription_id = make_subscription(alice.account_id)
    body = {"since": "2026-01-01T00:00:00Z", field: moment}
    message = _error(client.post(f"{SUBSCRIPTIONS}/{subscription_id}/recover", json=body,
                                 headers=alice.headers), "validation_error")
    assert field in message and "UTC" in message


@pytest.mark.parametrize("limit", ["1e400", "99999999999999999999999", "-1", "0", "nan", "2.5"])
def test_an_out_of_range_limit_is_a_400(client, alice, limit):
    _error(client.get(DELIVERIES, query_string={"limit": limit}, headers=alice.headers),
           "invalid_parameter")
