"""The fault suite: real faults injected into the real stack (PostgreSQL, Redis,
Celery worker processes, a real receiver), each case ending with every
delivery accounted for and its duplicate attempts reported.

One set of worker processes serves the whole folder (tests/support/stack.py
restarts it only when a case needs another configuration or killed it). The
test process emits with the workers' settings.
"""

from __future__ import annotations

import pytest

from tests.support.fastreceiver import FastReceiver
from tests.support.ledger import REPORTS
from tests.support.stack import Workers, use_env, worker_env


def pytest_configure(config):
    # Registered here too, so the suite runs under --strict-markers before setup.cfg lists them.
    config.addinivalue_line("markers", "fault: injects real faults into the whole stack (tests/fault)")
    config.addinivalue_line("markers", "soak: 10,000 events through the whole stack (tests/test_soak.py)")


def pytest_terminal_summary(terminalreporter):
    if not REPORTS:
        return
    terminalreporter.section("every delivery accounted for")
    for accounting in REPORTS:
        terminalreporter.write_line(accounting.line())


@pytest.fixture(scope="package")
def workers(postgres):
    """The fault suite's worker processes (started by the first case that needs them).

    Package-scoped: they must be gone before any other test's workers consume
    the same queue with another configuration.
    """
    from tests.support import services

    services.check_redis()
    pool = Workers()
    yield pool
    pool.stop()


@pytest.fixture
def fault_receiver():
    server = FastReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def stack(workers, db, redis_broker, monkeypatch):
    """The workers running with the default fault configuration, on a clean database and broker."""
    env = worker_env()
    use_env(monkeypatch, env)
    workers.use(env)
    return workers
