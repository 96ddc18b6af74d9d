"""Which subscription URLs the API accepts (web/targets.py): special IPv6 ranges, and the
URL read exactly as the transport (requests, urllib3) will read it when it sends."""

from __future__ import annotations

import pytest

API = "/api/webhooks/subscriptions"

pytestmark = pytest.mark.database


def create(client, caller, url: str):
    return client.post(API, json={"url": url}, headers=caller.headers)


@pytest.mark.parametrize("url", [
    "http://[fec0::1]/hook", "http://[::7f00:1]/hook", "http://[::ffff:0:7f00:1]/hook",
    "http://[64:ff9b:1::a00:1]/hook", "http://[64:ff9b::10.0.0.1]/hook",
    "http://[2002:c0a8:101::1]/hook",
])
def test_special_ipv6_literals_are_refused_at_creation(client, alice, url):
    response = create(client, alice, url)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"]["code"] == "target_not_allowed"
