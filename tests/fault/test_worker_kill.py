"""SIGKILL a worker (main process, pool children and beat) mid-attempt, and while it
holds countdown retries in memory: a restart and the sweep finish every delivery."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text, update

from tests.support.fastreceiver import Hang
from tests.support.ledger import account, missing_arrivals, report
from tests.support.stack import use_env, wait_until, worker_env
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Subscription

from .helpers import (
    Clock, emit_many, first_requests, first_time, make_account, make_subscription, status_counts,
    statuses,
)

pytestmark = [pytest.mark.fault, pytest.mark.integration]


def test_sigkill_in_the_middle_of_attempts(stack, fault_receiver):
    """Four attempts hang at the receiver (the worker's whole pool); SIGKILL, restart.

    The interrupted attempts were never recorded: the sweep takes their claims
    back once WEBHOOKS_TIMEOUT + WEBHOOKS_RECOVER_AFTER have passed, and the
    retry carries the same attempt number. Those are the only duplicates.
    """
    clock = Clock()
    fault_receiver.rule("/slow", first_requests(4, Hang(30)))
    account_id, _ = make_account()
    make_subscription(account_id, fault_receiver.url("/slow"))
    ids = emit_many(account_id, 6)
    in_flight = fault_receiver.wait_for(4, "/slow")
    assert status_counts(ids)["sending"] >= 4
    stack.kill()
    interrupted = {a.delivery_id for a in in_flight}
    stack.start()
    wait_until(lambda: status_counts(ids)["done"] == 6, timeout=40, what="all 6 done after the kill")
    arrivals = fault_receiver.arrivals()
    result = report(account("SIGKILL mid-attempt", arrivals, seconds=clock(),
                            notes={"interrupted attempts": len(interrupted)}))
    assert result.problems == []
    assert not missing_arrivals(arrivals)
    # Only the interrupted attempts came twice, each with the same attempt number.
    assert result.duplicates == len(interrupted) and result.duplicated_deliveries == len(interrupted)
    assert result.attempts_recorded == 6


def test_sigkill_while_holding_countdown_retries(stack, fault_receiver):
    """Every delivery fails once (500) and waits 4 s on a countdown the worker holds in memory.

    SIGKILL loses those messages (the broker only gives unacknowledged ones
    back after its visibility timeout, minutes later); after a restart the
    sweep finds the deliveries overdue and sends them: all end done, nothing twice.
    """
    clock = Clock()
    fault_receiver.rule("/flaky", first_time(500))
    account_id, _ = make_account()
    make_subscription(account_id, fault_receiver.url("/flaky"))
    ids = emit_many(account_id, 20)

    def all_waiting():
        rows = statuses(ids)
        return len(rows) == 20 and all(s == "pending" for s in rows.values()) \
            and fault_receiver.count("/flaky") == 20

    wait_until(all_waiting, timeout=20, interval=0.05, what="20 first attempts recorded")
    stack.kill()  # within the 4 s wait: every retry is a countdown held by the dead worker
    killed_after = time.time() - min(a.at for a in fault_receiver.arrivals())
    # No attempt 2 went out before the kill: all 20 retries died with the worker.
    assert fault_receiver.count("/flaky") == 20
    stack.start()
    wait_until(lambda: status_counts(ids)["done"] == 20, timeout=40, what="all 20 done after the kill")
    arrivals = fault_receiver.arrivals()
    result = report(account("SIGKILL holding countdown retries", arrivals, seconds=clock(),
                            notes={"held retries": 20,
                                   "killed s after the first failure": round(killed_after, 1)}))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert result.duplicates == 0
    assert result.attempts_recorded == 40 and result.requests_received == 40


def _waiting_for_a_lock(statement: str) -> int:
    """Backends of the test database waiting for a lock while running ``statement``."""
    with get_engine().connect() as connection:
        return connection.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE :statement"),
            {"statement": f"%{statement}%"}).scalar_one()


def _hold_row(connection, subscription_id: str):
    """Lock the subscription's row against updates (not against the foreign keys of new
    deliveries) in a transaction of ``connection``; returns the transaction."""
    transaction = connection.begin()
    connection.execute(text("SELECT 1 FROM subscriptions WHERE id = :id FOR NO KEY UPDATE"),
                       {"id": subscription_id})
    return transaction


def test_sigkill_with_a_batch_of_records_in_flight(workers, db, redis_broker, monkeypatch,
                                                   fault_receiver):
    """A threads worker groups the records of concurrent successes into one statement
    (lifecycle/group_commit.py). Its batch is held in flight on a row lock, and the
    worker killed: after a restart and the sweep every delivery ends done, none lost.

    Each subscription has a failure counted, so that each success writes its row. The
    first record, alone, waits for the first subscription's row; the ten records of
    the second subscription's attempts wait behind it in the worker; the first is let
    go as the second subscription's row is taken, so that the ten run as one batch,
    which then waits for that row.
    """
    env = worker_env()
    use_env(monkeypatch, env)
    workers.use(env, pool="threads", concurrency=32)
    clock = Clock()
    subscriptions = []
    for path in ("/first", "/rest"):
        account_id, _ = make_account(path[1:])
        subscriptions.append((account_id, make_subscription(account_id, fault_receiver.url(path)).id))
    with session_scope() as session:
        session.execute(update(Subscription).values(consecutive_failures=1))
    (first_account, first), (rest_account, rest) = subscriptions
    with get_engine().connect() as first_holder, get_engine().connect() as rest_holder:
        holding_first = _hold_row(first_holder, first)
        ids = emit_many(first_account, 1)
        wait_until(lambda: _waiting_for_a_lock("webhooks_record_success"), timeout=30,
                   what="the first record, alone, waiting for its subscription's row")
        ids += emit_many(rest_account, 10)
        fault_receiver.wait_for(10, "/rest")
        time.sleep(2.0)  # their answers read, their records wait behind the first one
        holding_rest = _hold_row(rest_holder, rest)
        holding_first.commit()
        wait_until(lambda: _waiting_for_a_lock("webhooks_records_"), timeout=30,
                   what="a batch of records waiting for the second subscription's row")
        workers.kill()
        holding_rest.rollback()
    workers.start()
    wait_until(lambda: status_counts(ids)["done"] == 11, timeout=60,
               what="all 11 done after the kill")
    arrivals = fault_receiver.arrivals()
    result = report(account("SIGKILL with a batch of records in flight", arrivals,
                            seconds=clock(), notes={"records in the batch": "up to 10"}))
    assert result.problems == [] and not missing_arrivals(arrivals)
