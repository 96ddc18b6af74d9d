"""WEBHOOKS_READ_DATABASE_URL: which requests read the replica, and that nothing writes there.

The "replica" here is the test database reached through a URL whose sessions
are read-only (``default_transaction_read_only``), as a hot standby's are: a
write sent there fails as it would on a real replica. Every statement is
recorded with the URL of the engine that ran it, so each test sees where a
request read. docs/scaling.md says what runs on a real streaming replica.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tests.dashboard.helpers import post_form, sign_in

SUBSCRIPTIONS = "/api/webhooks/subscriptions"
DELIVERIES = "/api/webhooks/deliveries"
READ_ONLY = "options=-c%20default_transaction_read_only%3Don&application_name=replica27"


@pytest.fixture
def replica_url(db):
    return f"{db}{'&' if '?' in db else '?'}{READ_ONLY}"


@pytest.fixture
def app(db, redis_broker, replica_url, tmp_path, monkeypatch):
    from webhooks.config import reset_settings_cache
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_READ_DATABASE_URL", replica_url)
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("WEBHOOKS_SECRET_KEY", raising=False)
    reset_settings_cache()
    return create_app({"TESTING": True})


@pytest.fixture
def statements():
    """[(engine URL as text, SQL)] of every statement run while the test runs."""
    seen: list[tuple[str, str]] = []

    def record(connection, _cursor, statement, *_):
        if threading.current_thread().name == "replica-probe":
            return  # web/replica.py asking the replica how far behind it is
        if statement == "SELECT clock_timestamp()":
            return  # webhooks/storage/clock.py measuring its offset to the primary's clock
        seen.append((connection.engine.url.render_as_string(hide_password=False), statement))

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def _where(statements, replica_url) -> set[str]:
    """"replica" and/or "primary": where the recorded statements ran."""
    return {"replica" if "replica27" in url else "primary" for url, _ in statements}


def test_the_api_lists_read_the_replica(client, alice, statements, replica_url):
    created = client.post(SUBSCRIPTIONS, json={"url": "https://hooks.example.com/in"},
                          headers=alice.headers)
    assert created.status_code == 201
    assert _where(statements, replica_url) == {"primary"}
    statements.clear()

    listed = client.get(SUBSCRIPTIONS, headers=alice.headers)
    assert listed.status_code == 200
    assert [item["id"] for item in listed.get_json()["data"]] == [created.get_json()["id"]]
    assert client.get(DELIVERIES, headers=alice.headers).status_code == 200
    assert _where(statements, replica_url) == {"replica"}


def test_one_object_and_every_write_read_the_primary(client, alice, statements, replica_url):
    created = client.post(SUBSCRIPTIONS, json={"url": "https://hooks.example.com/in"},
                          headers=alice.headers).get_json()
    one = client.get(f"{SUBSCRIPTIONS}/{created['id']}", headers=alice.headers)
    changed = client.patch(f"{SUBSCRIPTIONS}/{created['id']}", json={"description": "d"},
                           headers=alice.headers)
    assert (one.status_code, changed.status_code) == (200, 200)
    assert _where(statements, replica_url) == {"primary"}


def test_metrics_read_the_replica(client, statements, replica_url):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"webhooks_database_up 1.0" in response.data
    assert _where(statements, replica_url) == {"replica"}


def test_dashboard_pages_read_the_primary_right_after_a_form(client, alice, statements,
                                                              replica_url):
    # Signing in stores the session every page checks: the next page reads the primary.
    assert sign_in(client, alice.api_key).status_code == 200
    statements.clear()
    assert client.get("/dashboard/subscriptions").status_code == 200
    assert _where(statements, replica_url) == {"primary"}

    made = post_form(client, "/dashboard/subscriptions/new", "/dashboard/subscriptions/new",
                     {"url": "https://hooks.example.com/in"})
    assert made.status_code in (302, 303), made.status_code
    statements.clear()
    page = client.get(made.headers["Location"])
    assert page.status_code == 200
    # Right after the change: the primary, so the page shows it even if the replica lags.
    assert _where(statements, replica_url) == {"primary"}


def test_dashboard_pages_read_the_replica_once_the_user_changed_nothing_for_a_while(
        alice, statements, replica_url, monkeypatch, app):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_READ_OWN_WRITES_FOR", "0")
    reset_settings_cache()
    client = app.test_client()
    assert sign_in(client, alice.api_key).status_code == 200
    statements.clear()
    assert client.get("/dashboard/subscriptions").status_code == 200
    assert _where(statements, replica_url) == {"replica"}


def test_without_it_everything_reads_the_primary(db, redis_broker, alice, statements, tmp_path,
                                                  monkeypatch):
    from webhooks.config import reset_settings_cache
    from web import create_app

    monkeypatch.delenv("WEBHOOKS_READ_DATABASE_URL", raising=False)
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path / "data"))
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    assert client.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert client.get("/metrics").status_code == 200
    assert _where(statements, "") == {"primary"}


def test_a_replica_that_does_not_answer_is_not_read(db, redis_broker, alice, statements,
                                                    tmp_path, monkeypatch):
    """Nothing listens at the replica's address: the lists and /metrics read the primary
    (web/replica.py's probe never answers) instead of failing."""
    from webhooks.config import reset_settings_cache
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_READ_DATABASE_URL",
                       "postgresql+psycopg2://postgres@127.0.0.1:9/none?connect_timeout=1")
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path / "data"))
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    assert client.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    response = client.get("/metrics")
    assert b"webhooks_database_up 1.0" in response.data
    assert _where(statements, "") == {"primary"}


def test_a_replica_further_behind_than_the_limit_is_not_read(db, redis_broker, alice,
                                                              statements, monkeypatch):
    from web import replica

    monkeypatch.setattr(replica, "LAG_QUERY", replica.text("SELECT 99"))
    monkeypatch.setattr(replica, "_probes", {})
    client_app = _app_with_replica(monkeypatch, db)
    assert client_app.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert _where(statements, "") == {"primary"}


def _app_with_replica(monkeypatch, db):
    from webhooks.config import reset_settings_cache
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_READ_DATABASE_URL", f"{db}{'&' if '?' in db else '?'}{READ_ONLY}")
    reset_settings_cache()
    return create_app({"TESTING": True}).test_client()


def test_a_replica_given_as_a_bare_postgresql_url_is_read(db, redis_broker, alice, statements,
                                                          monkeypatch):
    """The README calls it "a postgresql:// URL"; given so, the probe thread died on `import
    psycopg` (psycopg 3, not installed) and the replica was silently never read (issue 36)."""
    from web import replica

    monkeypatch.setattr(replica, "_probes", {})
    bare = db.replace("postgresql+psycopg2://", "postgresql://")
    client = _app_with_replica(monkeypatch, bare)
    assert client.get(SUBSCRIPTIONS, headers=alice.headers).status_code == 200
    assert _where(statements, "") == {"replica"}


def test_the_probe_outlives_a_replica_it_cannot_even_connect_to(caplog):
    """An engine that cannot be built (a driver that is not installed) is one more failed
    probe, logged once, without the URL's password; the thread keeps probing and reads
    stay on the primary. It used to end the thread before its first answer."""
    import logging

    from web import replica

    with caplog.at_level(logging.WARNING, logger="web.replica"):
        probe = replica._Probe("mysql://app:s3cret@replica.internal/webhooks")
        assert probe.first.wait(30), "the probe thread died before its first answer"
    assert not probe.usable(max_lag=10)
    [record] = [r for r in caplog.records if r.name == "web.replica"]
    assert "does not answer" in record.getMessage() and "s3cret" not in record.getMessage()
    assert probe.thread.is_alive()
