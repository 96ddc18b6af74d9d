"""The attempt and emit engines keep every connection they open (db._pool_sizes).

Their connections carry the hot path's prepared statements; a connection the
pool closed on its way back had to be opened and prepared again at the next
peak, which a worker's 128 threads made happen 10 to 16 times a second.
"""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.integration

POOL_SIZE, MAX_OVERFLOW = 1, 2


@pytest.fixture
def small_pools(db, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DB_POOL_SIZE", str(POOL_SIZE))
    monkeypatch.setenv("WEBHOOKS_DB_MAX_OVERFLOW", str(MAX_OVERFLOW))
    reset_settings_cache()
    return db


def _peak(engine, width: int) -> set[int]:
    """Hold ``width`` connections at once, then give them all back; their backends' pids."""
    holding, release = threading.Barrier(width), threading.Event()
    pids: set[int] = set()
    lock = threading.Lock()

    def hold():
        with engine.connect() as connection:
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            with lock:
                pids.add(pid)
            holding.wait(timeout=10)
            release.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(width)]
    [t.start() for t in threads]
    deadline = time.monotonic() + 10
    while len(pids) < width and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    [t.join(timeout=10) for t in threads]
    assert len(pids) == width, "the connections were not all held at once"
    return pids


@pytest.mark.parametrize("kind", ["attempts", "autocommit"])
def test_a_hot_path_engine_keeps_what_it_opened_at_a_peak(small_pools, kind):
    from webhooks.storage.db import make_engine

    engine = make_engine(small_pools, pre_ping=False, **{kind: True})
    try:
        first = _peak(engine, POOL_SIZE + MAX_OVERFLOW)
        assert engine.pool.checkedin() == POOL_SIZE + MAX_OVERFLOW
        assert _peak(engine, POOL_SIZE + MAX_OVERFLOW) == first  # no new backend
    finally:
        engine.dispose()


def test_a_hot_path_engine_opens_no_more_than_size_and_overflow(small_pools):
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from webhooks.storage.db import make_engine

    engine = make_engine(small_pools, pre_ping=False, attempts=True)
    engine.pool._timeout = 0.2  # the pool's wait for a free connection, s
    try:
        held = [engine.connect() for _ in range(POOL_SIZE + MAX_OVERFLOW)]
        with pytest.raises(PoolTimeout):
            engine.connect()
        [connection.close() for connection in held]
    finally:
        engine.dispose()


def test_other_engines_close_overflow_connections_as_they_come_back(small_pools):
    """The web app's engines are as before: WEBHOOKS_DB_POOL_SIZE kept, the overflow closed."""
    from webhooks.storage.db import make_engine

    engine = make_engine(small_pools)
    try:
        _peak(engine, POOL_SIZE + MAX_OVERFLOW)
        assert engine.pool.checkedin() == POOL_SIZE
    finally:
        engine.dispose()
