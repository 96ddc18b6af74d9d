"""The ``db`` fixture empties the tables even when a worker's sweep deadlocks with it.

The sweep of a worker kept running by a module's fixture holds ``deliveries``
and then, through its trigger, wants ``waiting_counts``; TRUNCATE takes them in
the other order. This is what failed a CI run: PostgreSQL chose the TRUNCATE
as the deadlock's victim and the next test errored in its set-up.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from tests.conftest import TABLES
from tests.support.services import truncate
from webhooks.storage.db import get_engine

pytestmark = pytest.mark.database


def test_truncate_is_tried_again_when_chosen_as_a_deadlock_victim(db):
    engine = get_engine(db)
    outcome = []

    def empty_the_tables():
        try:
            truncate(engine, TABLES)
            outcome.append("ok")
        except Exception as error:  # reported by the assertion below
            outcome.append(error)

    truncating = threading.Thread(target=empty_the_tables, daemon=True)
    holder = engine.connect()
    transaction = holder.begin()
    try:
        # The holder checks for deadlock late, so the TRUNCATE's check (1 s) finds it first.
        holder.execute(text("SET LOCAL deadlock_timeout = '20s'"))
        holder.execute(text("LOCK TABLE deliveries IN ROW EXCLUSIVE MODE"))  # as an UPDATE does
        holder_pid = holder.execute(text("SELECT pg_backend_pid()")).scalar()
        truncating.start()
        _wait_until_blocked_by(engine, holder_pid, outcome)
        # The holder now wants what the TRUNCATE holds: a deadlock, TRUNCATE its victim.
        holder.execute(text("INSERT INTO waiting_counts (backend, pending, sending, paused) "
                            "VALUES (4242, 0, 0, 0)"))
        transaction.commit()
    finally:  # never leave a lock behind: the next test's TRUNCATE would wait for it
        if transaction.is_active:
            transaction.rollback()
        holder.close()
    truncating.join(30)
    assert outcome == ["ok"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM waiting_counts")).scalar() == 0


def _wait_until_blocked_by(engine, pid: int, outcome: list) -> None:
    """Until some session waits for a lock ``pid`` holds (10 s at most)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        # A new transaction each time: pg_stat_activity is a snapshot taken once per transaction.
        with engine.connect() as connection:
            blocked = connection.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"),
                {"pid": pid}).scalar()
        if blocked or outcome:
            return
        time.sleep(0.02)
    raise AssertionError(f"the TRUNCATE never waited for the holder: {outcome}")
