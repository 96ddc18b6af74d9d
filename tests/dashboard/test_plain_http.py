"""Over plain http with Secure cookies, the sign-in page says why signing in cannot work and
how to fix it, instead of "reload the page" forever (issue 22, finding 6)."""

from __future__ import annotations

import pytest

from webhooks.config import reset_settings_cache

from .helpers import csrf_token

pytestmark = pytest.mark.database

ADVICE = "reached over plain http"


def _app(monkeypatch, **env):
    from web import create_app

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    return create_app({"TESTING": True})


def test_plain_http_with_secure_cookies_says_what_is_wrong_and_how_to_fix_it(app, alice):
    # A browser drops a Secure cookie that came over http: no cookie comes back.
    browser = app.test_client(use_cookies=False)
    page = browser.get("/dashboard/").get_data(as_text=True)
    assert ADVICE in page
    assert "WEBHOOKS_SECURE_COOKIES=false" in page and "https" in page
    refused = browser.post("/dashboard/sign-in", data={
        "csrf_token": csrf_token(page), "api_key": alice.api_key})
    assert refused.status_code == 400
    shown = refused.get_data(as_text=True)
    assert "The form could not be accepted" in shown and ADVICE in shown


def test_https_says_nothing_of_it(app):
    page = app.test_client().get("/dashboard/", base_url="https://localhost")
    assert ADVICE not in page.get_data(as_text=True)


def test_forwarded_proto_counts_only_from_a_trusted_proxy(db, redis_broker, data_dir, monkeypatch):
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    untrusted = _app(monkeypatch).test_client().get("/dashboard/", headers=forwarded)
    assert ADVICE in untrusted.get_data(as_text=True)
    trusted = _app(monkeypatch, WEBHOOKS_TRUSTED_PROXIES="1").test_client().get(
        "/dashboard/", headers=forwarded)
    assert ADVICE not in trusted.get_data(as_text=True)


def test_without_secure_cookies_plain_http_is_fine(db, redis_broker, data_dir, monkeypatch):
    page = _app(monkeypatch, WEBHOOKS_SECURE_COOKIES="false").test_client().get("/dashboard/")
    assert ADVICE not in page.get_data(as_text=True)
