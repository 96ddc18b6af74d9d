"""Shared fixtures. The environment is set before any webhooks module is imported,
because celeryconfig reads the settings when the Celery app is first configured."""

from __future__ import annotations

import os
import re

from tests.support.services import PG_URL, REDIS_URL

# Forced, not defaulted: the suite truncates and flushes what these name, so it
# must never pick up a developer's own WEBHOOKS_DATABASE_URL or broker.
os.environ["WEBHOOKS_DATABASE_URL"] = PG_URL
os.environ["WEBHOOKS_BROKER_URL"] = REDIS_URL

import pytest  # noqa: E402

from tests.support import services  # noqa: E402
from tests.support.receiver import Receiver  # noqa: E402

TABLES = "audit_log, publishers, notice_budgets, oauth2_tokens, scheduled_runs, portal_links, dashboard_sessions, ordering_keys, waiting_counts, attempt_totals, attempt_hours, attempts, deliveries, events, subscriptions, accounts"

# The tiers (README, "Tests"): `--tier fast` keeps the tests that need no server:
# no PostgreSQL, no Redis, no worker process, no command run as a process of
# its own. They run on SQLite and local sockets.
SERVER_FIXTURES = {"postgres", "redis_broker", "workers"}
SERVER_MARKERS = {"integration", "fault", "soak", "schemathesis", "database", "process",
                  "cluster"}
# A module's own markers: `pytestmark = pytest.mark.x` or `= [pytest.mark.x, ...]` at column 0.
_PYTESTMARK = re.compile(r"^pytestmark\s*=\s*(\[[^\]]*\]|.*)$", re.MULTILINE)
_MARK_NAME = re.compile(r"\bmark\.(\w+)")


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


@pytest.hookimpl(trylast=True)  # after xdist's own, which registers "dsession" on a controller
def pytest_configure(config):
    if config.pluginmanager.has_plugin("dsession") and not hasattr(config, "workerinput"):
        # The xdist controller runs no test: its workers lease their own Redis dbs.
        services.release_redis_db()
    if config.getoption("--tier") == "fast":
        # A quick signal: fewer generated examples per property (make test runs them all).
        from hypothesis import settings

        settings.register_profile("fast", max_examples=25)
        settings.load_profile("fast")


def pytest_unconfigure(config):
    services.release_redis_db()


def pytest_ignore_collect(collection_path, config):
    """In the fast tier, a test module marked for a server as a whole is not even imported.

    Every one of its tests would be deselected anyway; importing it can cost
    seconds per xdist worker (test_schemathesis.py builds an app and its
    OpenAPI document at import). ``make test`` collects everything.
    """
    if config.getoption("--tier") != "fast" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return True if SERVER_MARKERS & _module_markers(collection_path) else None


def _module_markers(path) -> set[str]:
    """The marker names in a module's top-level ``pytestmark = ...``, read without importing it."""
    statement = _PYTESTMARK.search(path.read_text(encoding="utf-8"))
    return set(_MARK_NAME.findall(statement.group(1))) if statement else set()


# The modules that take longest (seconds of one xdist worker, a full run on 28 November
# 2026), run first: with `--dist loadfile --no-loadscope-reorder` the workers take the files
# in collection order, so the long ones start at once and the short ones fill in after,
# instead of a long file starting last while the other workers idle (xdist's own order puts
# the files with most tests first, and these have few). A module not named keeps its place.
LONGEST_FIRST = {
    "tests/test_benchmark_smoke.py": 121, "tests/test_soak.py": 85, "tests/test_cli.py": 85,
    "tests/test_dev_e2e.py": 77, "tests/cluster/test_short_run.py": 72,
    "tests/test_ordering_e2e.py": 49, "tests/test_event_schemas.py": 46,
    "tests/test_beat_restarts.py": 40, "tests/dashboard/test_browser_subscription_features.py": 39,
    "tests/test_readme_walkthrough.py": 37, "tests/test_pipeline.py": 33,
    "tests/fault/test_worker_kill.py": 30, "tests/api/test_generated_client.py": 30,
    "tests/api/test_schemathesis.py": 28, "tests/fault/test_hostile_receivers.py": 25,
    "tests/dashboard/test_browser.py": 23, "tests/fault/test_broker_loss.py": 22,
    "tests/test_integrate_node.py": 22, "tests/test_operational_flood.py": 22,
    "tests/test_subscription_limits_e2e.py": 22,
}


def _longest_first(items) -> None:
    """Reorder ``items`` in place: LONGEST_FIRST's modules by their seconds, then the rest
    in collection order (a stable sort keeps each module's tests in their order)."""
    items.sort(key=lambda item: -LONGEST_FIRST.get(item.nodeid.split("::")[0], 0))


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    if config.getoption("--tier") != "fast":
        return
    dropped = [item for item in items if _needs_a_server(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not _needs_a_server(item)]


@pytest.fixture(scope="session")
def postgres():
    """The migrated test database on the real PostgreSQL (created afresh per run; dropped at
    its end when it is the run's own, tests/support/services.py)."""
    services.check_postgres()
    services.recreate_database()
    from webhooks.storage.db import dispose_engine
    from webhooks.storage.migrate import upgrade

    upgrade(PG_URL)
    yield PG_URL
    dispose_engine()
    services.drop_run_database()


@pytest.fixture
def db(postgres, monkeypatch):
    """A clean PostgreSQL database for one test; settings point at it. Emptied with DELETE
    (services.empty): its tables keep their statistics; ``truncate`` forgets them too."""
    _use_database(monkeypatch, postgres)
    from webhooks.storage.db import get_engine

    services.empty(get_engine(postgres), TABLES)
    yield postgres


@pytest.fixture(scope="session")
def _sqlite_url(tmp_path_factory):
    """A SQLite file migrated once per run (0.3 s), shared by this process's tests."""
    from webhooks.storage.migrate import upgrade

    url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'webhooks.db'}"
    upgrade(url)
    return url


@pytest.fixture
def sqlite_db(_sqlite_url, monkeypatch):
    """The migrated SQLite database, emptied for this test; settings point at it.

    One file and one engine for every test of a process, like ``db``: a file
    and engine of each test's own cost it a new pool and a cold statement
    cache (SQLAlchemy compiles per engine), about a third of the fast tier's time.
    """
    from webhooks.storage.db import get_engine

    _use_database(monkeypatch, _sqlite_url)
    services.empty(get_engine(_sqlite_url), TABLES)  # children first: foreign keys are on
    yield _sqlite_url


@pytest.fixture(params=["postgresql", "sqlite"])
def any_db(request):
    """Runs the test once on PostgreSQL and once on SQLite."""
    name = "db" if request.param == "postgresql" else "sqlite_db"
    return request.getfixturevalue(name)


def _use_database(monkeypatch, url: str) -> None:
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", url)
    reset_settings_cache()


@pytest.fixture(scope="session", autouse=True)
def _composed():
    """The suite is an entrance, as the web app, the worker and the CLI are: the lifecycle's
    listeners are registered once (webhooks/composition.py)."""
    from webhooks.composition import compose

    compose()


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
    """Capture the deliver messages, sweep and release requests that would go to the broker
    (call .settled() to read; ``.sweeps`` counts the sweeps, ``.releases`` the releases)."""
    from tests.factories import Published

    sent = Published()
    monkeypatch.setattr("webhooks.broker.outbox.send_to_broker", lambda items: sent.extend(items) or [])
    monkeypatch.setattr("webhooks.broker.outbox.request_sweep", sent.request_sweep)
    monkeypatch.setattr("webhooks.broker.outbox.request_release", sent.request_release)
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
