"""The ``db`` fixture empties the tables even when a worker's sweep deadlocks with it.

The sweep of a worker kept running by a module's fixture holds ``deliveries``
and then, through its trigger, wants ``waiting_counts``; TRUNCATE takes them in
the other order. This is what failed a CI run: PostgreSQL chose the TRUNCATE
as the deadlock's victim and the next test errored in its set-up.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from tests.conftest import TABLES
from tests.support.services import truncate
from webhooks.db import get_engine

pytestmark = pytest.mark.database


def test_truncate_is_tried_again_when_chosen_as_a_deadlock_victim(db):
    engine = get_engine(db)
    holder = engine.connect()
    transaction = holder.begin()
    # The holder checks for deadlock late, so the TRUNCATE's check (1 s) finds it first.
    holder.execute(text("SET LOCAL deadlock_timeout = '20s'"))
    holder.execute(text("LOCK TABLE deliveries IN ROW EXCLUSIVE MODE"))  # as an UPDATE takes it
    truncated = []

    def empty_the_tables():
        try:
            truncate(engine, TABLES)
            truncated.append("ok")
        except Exception as error:  # reported by the assertion below
            truncated.append(error)

    truncating = threading.Thread(target=empty_the_tables)
    with engine.connect() as watcher:
        holder_pid = holder.execute(text("SELECT pg_backend_pid()")).scalar()
        truncating.start()
        _wait_until_blocked_by(watcher, holder_pid, truncated)
    # Now the holder wants what the TRUNCATE holds: a deadlock, and TRUNCATE is its victim.
    holder.execute(text("INSERT INTO waiting_counts (backend, pending, sending, paused) "
                        "VALUES (4242, 0, 0, 0)"))
    transaction.commit()
    holder.close()
    truncating.join(30)
    assert truncated == ["ok"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM waiting_counts")).scalar() == 0


def _wait_until_blocked_by(connection, pid: int, outcome: list) -> None:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        blocked = connection.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"),
            {"pid": pid}).scalar()
        if blocked:
            return
        time.sleep(0.02)
    raise AssertionError(f"the TRUNCATE never waited for the holder: {outcome}")
