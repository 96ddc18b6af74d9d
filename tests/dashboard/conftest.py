"""Fixtures for the dashboard tests: the app on the real PostgreSQL and Redis, signed-in clients.

Like the API tests, no worker runs here (tests/dashboard/test_browser.py starts
one): deliveries stay as the pages left them.
"""

from __future__ import annotations

import pytest


from .helpers import sign_in


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A data folder of this test's own (the session key file lands there)."""
    from webhooks.config import reset_settings_cache

    folder = tmp_path / "data"
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(folder))
    monkeypatch.delenv("WEBHOOKS_SECRET_KEY", raising=False)
    reset_settings_cache()
    return folder


@pytest.fixture
def app(db, redis_broker, data_dir):
    from web import create_app

    return create_app({"TESTING": True})


@pytest.fixture
def alice_client(app, alice):
    """A browser-like client signed in as alice."""
    client = app.test_client()
    response = sign_in(client, alice.api_key)
    assert response.status_code == 200
    return client


@pytest.fixture
def allow_private(monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    reset_settings_cache()
