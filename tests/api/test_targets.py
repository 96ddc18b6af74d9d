"""Which subscription URLs the API accepts (webhooks/sender/target_urls.py, web/targets.py): special IPv6 ranges, and the
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


# ---------------------------------------------------------------- one reading of the URL

@pytest.mark.parametrize("url", ["http://127.0.0.1\\@example.com/", "http://example.com\\@127.0.0.1/",
                                 "https://hooks.example.com/in\\x"])
def test_a_backslash_is_refused_with_the_reason(client, alice, url):
    response = create(client, alice, url)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "validation_error" and "backslash" in error["message"], error


def test_patch_refuses_a_backslash_too(client, alice):
    created = create(client, alice, "https://hooks.example.com/in").get_json()
    response = client.patch(f"{API}/{created['id']}", json={"url": "http://127.0.0.1\\@example.com/"},
                            headers=alice.headers)
    assert response.status_code == 400 and "backslash" in response.get_json()["error"]["message"]


@pytest.mark.parametrize("url", ["http://127.0.0.%31/hook", "http://%31%32%37.0.0.1/hook",
                                 "http://loc%61lhost/hook", "http://[::%31]/hook"])
def test_the_host_checked_is_the_host_requests_connects_to(client, alice, url):
    """requests decodes %xx in the host: 127.0.0.%31 is sent to 127.0.0.1."""
    response = create(client, alice, url)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"]["code"] == "target_not_allowed"


def test_a_url_whose_parsers_disagree_is_refused_with_both_readings(monkeypatch):
    """As if urllib3 read another host than urlsplit: the URL is refused, naming both."""
    from urllib3.util import Url

    from webhooks.sender import target_urls as targets

    monkeypatch.setattr(targets, "parse_url", lambda url: Url(scheme="http", host="10.0.0.1"))
    problem = targets.url_problem("http://hooks.example.com/in")
    assert problem is not None and "10.0.0.1" in problem and "hooks.example.com" in problem


@pytest.mark.parametrize("url", ["https://hooks.example.com/in", "https://bücher.de/x",
                                 "http://u:p%40ss@hooks.example.com:8443/in?a=b:c@d#frag",
                                 "http://a@b@hooks.example.com/", "https://Hooks.Example.COM./in"])
def test_ordinary_urls_still_pass(url):
    from web.targets import url_problem

    assert url_problem(url) is None
