"""Shared fixtures. The environment is set before any webhooks module is imported,
because celeryconfig reads the settings when the Celery app is first configured."""

from __future__ import annotations

import os

from tests.support.services import PG_URL, REDIS_URL

# Forced, not defaulted: the suite truncates and flushes what these name, so it
# must never pick up a developer's own WEBHOOKS_DATABASE_URL or broker.
os.environ["WEBHOOKS_DATABASE_URL"] = PG_URL
os.environ["WEBHOOKS_BROKER_URL"] = REDIS_URL

import pytest  # noqa: E402
from sqlalchemy import text  # noqa: E402

from tests.support import services  # noqa: E402
from tests.support.receiver import Receiver  # noqa: E402

TABLES = "waiting_counts, attempt_totals, attempt_hours, attempts, deliveries, events, subscriptions, accounts"

# The tiers (README, "Tests"): `--tier fast` keeps the tests that need no server:
# no PostgreSQL, no Redis, no worker process, no command run as a process of
# its own. They run on SQLite and local sockets.
SERVER_FIXTURES = {"postgres", "redis_broker", "workers"}
SERVER_MARKERS = {"integration", "fault", "soak", "schemathesis", "database", "process"}


def pytest_addoption(parser):
    parser.addoption("--tier", choices=("fast", "all"), default="all",
                     help="fast: only the tests that need no PostgreSQL, Redis or worker")


def _needs_a_server(item) -> bool:
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if any(item.get_closest_marker(name) for name in SERVER_MARKERS):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "postgresql" in params.values()  # the PostgreSQL half of a test run on both


def pytest_configure(config):
    if config.getoption("--tier") == "fast":
        # A quick signal: fewer generated examples per property (make test runs them all).
        from hypothesis import settings

        settings.register_profile("fast", max_examples=25)
        settings.load_profile("fast")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--tier") != "fast":
        return
    dropped = [item for item in items if _needs_a_server(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not _needs_a_server(item)]


@pytest.fixture(scope="session")
def postgres():
    """The migrated test database on the real PostgreSQL (created afresh per run)."""
    services.check_postgres()
    services.recreate_database()
    from webhooks.migrate import upgrade

    upgrade(PG_URL)
    return PG_URL


@pytest.fixture
def db(postgres, monkeypatch):
    """A clean PostgreSQL database for one test; settings point at it."""
    _use_database(monkeypatch, postgres)
    from webhooks.db import get_engine

    with get_engine(postgres).begin() as connection:
        connection.execute(text(f"TRUNCATE {TABLES} CASCADE"))
    yield postgres


@pytest.fixture(scope="session")
def _migrated_sqlite(tmp_path_factory):
    """A SQLite file migrated once per run; each test gets a copy (migrating takes 0.3 s)."""
    from webhooks.migrate import upgrade

    from webhooks.db import get_engine

    path = tmp_path_factory.mktemp("sqlite-template") / "webhooks.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    get_engine(url).dispose()
    import sqlite3

    with sqlite3.connect(path) as connection:  # everything in the main file, none in the WAL
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture
def sqlite_db(tmp_path, monkeypatch, _migrated_sqlite):
    """A fresh migrated SQLite file for one test; settings point at it."""
    import shutil

    path = tmp_path / "webhooks.db"
    shutil.copyfile(_migrated_sqlite, path)
    url = f"sqlite:///{path}"
    _use_database(monkeypatch, url)
    yield url


@pytest.fixture(params=["postgresql", "sqlite"])
def any_db(request):
    """Runs the test once on PostgreSQL and once on SQLite."""
    name = "db" if request.param == "postgresql" else "sqlite_db"
    return request.getfixturevalue(name)


def _use_database(monkeypatch, url: str) -> None:
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", url)
    reset_settings_cache()


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Every test starts and ends with settings read from the environment."""
    from webhooks.config import reset_settings_cache

    reset_settings_cache()
    yield
    reset_settings_cache()


@pytest.fixture
def redis_broker():
    """The real Redis, emptied for this test."""
    services.check_redis()
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def published(monkeypatch):
    """Capture the deliver messages that would go to the broker (call .settled() to read)."""
    from tests.factories import Published

    sent = Published()
    monkeypatch.setattr("webhooks.queue.publish", lambda items: sent.extend(items) or [])
    return sent


# Callers of the web app; each folder (tests/api, tests/dashboard) defines its own `app`.
@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def alice(db):
    from tests.api.helpers import new_caller

    return new_caller("alice")


@pytest.fixture
def bob(db):
    from tests.api.helpers import new_caller

    return new_caller("bob")
