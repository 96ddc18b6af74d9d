"""HSTS over https only, X-Forwarded-Proto believed only from trusted proxies, and the
dev server's plain-http cookie setting (web/security.py, WEBHOOKS_SECURE_COOKIES)."""

from __future__ import annotations

import pytest

from webhooks.config import load_settings, reset_settings_cache
from webhooks.errors import ConfigError

PATH = "/api/webhooks/event-types"  # answers without a key or the database
YEAR = 365 * 24 * 3600


def _client(monkeypatch, **env: str):
    for name, value in env.items():
        monkeypatch.setenv(f"WEBHOOKS_{name}", value)
    reset_settings_cache()
    from web import create_app

    return create_app({"TESTING": True, "SECRET_KEY": "x" * 32}).test_client()


def test_an_answer_over_https_carries_hsts(monkeypatch):
    response = _client(monkeypatch).get(PATH, base_url="https://hooks.example")
    assert response.status_code == 200
    assert response.headers["Strict-Transport-Security"] == f"max-age={YEAR}"


def test_an_answer_over_plain_http_carries_no_hsts(monkeypatch):
    response = _client(monkeypatch).get(PATH, base_url="http://hooks.example")
    assert "Strict-Transport-Security" not in response.headers


def test_x_forwarded_proto_is_ignored_without_a_trusted_proxy(monkeypatch):
    response = _client(monkeypatch).get(PATH, headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" not in response.headers


def test_x_forwarded_proto_is_believed_from_a_trusted_proxy(monkeypatch):
    client = _client(monkeypatch, TRUSTED_PROXIES="1")
    response = client.get(PATH, headers={"X-Forwarded-Proto": "https"})
    assert response.headers["Strict-Transport-Security"] == f"max-age={YEAR}"


def test_hsts_max_age_is_configurable_and_zero_sends_none(monkeypatch):
    day = _client(monkeypatch, HSTS_MAX_AGE="86400").get(PATH, base_url="https://hooks.example")
    assert day.headers["Strict-Transport-Security"] == "max-age=86400"
    off = _client(monkeypatch, HSTS_MAX_AGE="0").get(PATH, base_url="https://hooks.example")
    assert "Strict-Transport-Security" not in off.headers


def test_the_settings_default_to_secure_and_no_proxy(tmp_path):
    settings = load_settings({"WEBHOOKS_DATA_DIR": str(tmp_path)})
    assert (settings.secure_cookies, settings.trusted_proxies, settings.hsts_max_age) == (True, 0, YEAR)


@pytest.mark.parametrize("name, value", [("WEBHOOKS_SECURE_COOKIES", "sometimes"),
                                         ("WEBHOOKS_TRUSTED_PROXIES", "-1"),
                                         ("WEBHOOKS_TRUSTED_PROXIES", "one"),
                                         ("WEBHOOKS_HSTS_MAX_AGE", "1.5")])
def test_malformed_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


def test_webhooks_dev_turns_secure_cookies_off_unless_told_otherwise(tmp_path):
    from webhooks.cli.devserver import dev_environment

    base = {"WEBHOOKS_DATA_DIR": str(tmp_path)}
    assert dev_environment(base, port=5000)["WEBHOOKS_SECURE_COOKIES"] == "false"
    kept = dev_environment({**base, "WEBHOOKS_SECURE_COOKIES": "true"}, port=5000)
    assert kept["WEBHOOKS_SECURE_COOKIES"] == "true"
