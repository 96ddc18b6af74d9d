"""The storage backends' contract: every transition, and every method of the interface,
behaves the same on SQLite and on PostgreSQL (webhooks/storage/backends).

Each test runs twice (``any_db``): the SQLite half is in the fast tier, the
PostgreSQL half in the full suite. The tests drive the lifecycle's own
functions, so they check the backend together with the statements it runs.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select

from tests.factories import make_account, make_subscription
from webhooks.events.samples import sample_data
from webhooks.lifecycle import changes, transitions
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record as record_attempt
from webhooks.lifecycle.recover import recover
from webhooks.storage import rollup, waiting_counts
from webhooks.storage.backends import Backend, backend_of
from webhooks.storage.db import get_engine, in_autocommit, session_scope
from webhooks.storage.models import (Attempt, AttemptTotal, Delivery, Event, ScheduledRun,
                                     Subscription, utcnow)

RULES = Rules((60, 300, 1800, 7200, 43200), countdown_limit=300, pause_after=2)


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook")


def emit(account_id, event_type="email.sent", **options):
    from webhooks.emit import emit_event

    return emit_event(account_id, event_type, sample_data(event_type), **options)


def row(delivery_id) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


def claim(delivery_id, count):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, count, utcnow())


def record(claimed, status_code, error_kind=None):
    now = utcnow()
    step = next_step(claimed.attempt_number, status_code, claimed.event_type, RULES)
    with get_engine().begin() as connection:
        return record_attempt(connection, claimed, step=step, rules=RULES, started_at=now,
                              now=now, duration_ms=7, status_code=status_code,
                              error=None if status_code else "refused", excerpt=None,
                              error_kind=error_kind)


def test_the_engine_has_its_backend(any_db):
    backend = backend_of(get_engine())
    assert isinstance(backend, Backend) and backend.name == get_engine().dialect.name
    assert backend_of(get_engine()) is backend  # chosen once


def test_claim_takes_a_due_delivery_once(account):
    account_id, subscription = account
    delivery_id = emit(account_id).delivery_ids[0]
    claimed = claim(delivery_id, 0)
    assert claimed.attempt_number == 1 and claimed.subscription_id == subscription.id
    assert claimed.body and claimed.secret == subscription.secret
    assert claim(delivery_id, 0) is None  # a duplicate message claims nothing
    assert row(delivery_id).status == "sending"


def test_record_of_a_success_ends_done_and_counts_the_attempt(account):
    account_id, subscription = account
    delivery_id = emit(account_id).delivery_ids[0]
    recorded = record(claim(delivery_id, 0), 200)
    assert recorded.status == "done" and recorded.dispatch is None
    with session_scope() as session:
        assert session.scalars(select(Attempt.status_code)).all() == [200]
        counted = session.scalar(select(func.sum(AttemptTotal.attempts)))
        assert counted == 1
    assert (row(delivery_id).status, row(delivery_id).claimed_at) == ("done", None)


def test_record_of_a_failure_retries_and_moves_the_counter(account):
    account_id, subscription = account
    delivery_id = emit(account_id).delivery_ids[0]
    recorded = record(claim(delivery_id, 0), 500)
    assert recorded.status == "pending" and recorded.dispatch.countdown == 60
    with session_scope() as session:
        assert session.get(Subscription, subscription.id).consecutive_failures == 1


def test_the_failure_kind_is_stored_with_the_attempt(account):
    account_id, _ = account
    delivery_id = emit(account_id).delivery_ids[0]
    record(claim(delivery_id, 0), None, error_kind="connection_refused")
    with session_scope() as session:
        assert session.scalars(select(Attempt.error_kind)).all() == ["connection_refused"]


def test_a_stale_record_changes_nothing(account):
    account_id, _ = account
    delivery_id = emit(account_id).delivery_ids[0]
    claimed = claim(delivery_id, 0)
    record(claimed, 200)
    assert record(claimed, 500) is None
    # A duplicate record (another started_at, as a second message's would have) stores no
    # second attempt: the move's condition keeps it out, not only the unique key, which on
    # PostgreSQL's partitioned table holds started_at (migration 0029).
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Attempt)) == 1


def test_partitions_are_created_once_where_the_engine_has_them(any_db):
    from webhooks.storage import partitions

    engine = get_engine()
    backend = backend_of(engine)
    wanted = partitions.ahead(utcnow() + dt.timedelta(days=300), 1)
    with engine.begin() as connection:
        created = backend.create_partitions(connection, wanted)
        again = backend.create_partitions(connection, wanted)
        listed = {p.name for p in backend.day_partitions(connection)}
        for partition in wanted if created else ():  # leave the session's database as it was
            connection.exec_driver_sql(f"DROP TABLE {partition.name}")
    expected = [p.name for p in wanted] if engine.dialect.name == "postgresql" else []
    assert created == expected and again == []
    assert set(expected) <= listed


def test_pause_holds_and_resume_releases(account):
    account_id, subscription = account
    first, second, third = (emit(account_id).delivery_ids[0] for _ in range(3))
    record(claim(first, 0), 500)
    recorded = record(claim(second, 0), 500)  # the counter reaches pause_after (2)
    assert recorded.paused_subscription and recorded.status == "paused"
    assert row(first).status == row(third).status == "paused"
    with session_scope() as session:
        released = changes.resume_subscription(session, subscription.id, utcnow())
    assert released == 3
    assert (row(third).status, row(third).parked) == ("pending", True)


def test_park_hands_a_pending_delivery_to_the_sweep(account):
    account_id, _ = account
    delivery_id = emit(account_id).delivery_ids[0]
    with session_scope() as session:
        transitions.park(session, [delivery_id], utcnow())
    assert row(delivery_id).parked is True


def test_a_repeated_idempotency_key_stores_one_event(account):
    account_id, _ = account
    first = emit(account_id, idempotency_key="k-1")
    again = emit(account_id, idempotency_key="k-1")
    assert again.id == first.id and again.duplicate
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 1


def test_replays_in_bulk_take_their_lock(account):
    account_id, subscription = account
    delivery_id = emit(account_id).delivery_ids[0]
    record(claim(delivery_id, 0), 404)
    since = utcnow() - dt.timedelta(minutes=1)
    with session_scope() as session:
        recovered = recover(session, subscription.id, since, None, now=utcnow(), batch=10, limit=10)
    assert recovered.replayed == 1


def test_counters_add_and_rebuild(account):
    account_id, subscription = account
    delivery_id = emit(account_id).delivery_ids[0]
    now = utcnow()
    with get_engine().begin() as connection:
        for _ in range(2):
            rollup.count_attempt(connection, delivery_id=delivery_id, subscription_id=subscription.id,
                                 started_at=now, outcome="success", duration_ms=3)
    with get_engine().begin() as connection:
        assert connection.scalar(select(func.sum(AttemptTotal.attempts))) == 2
        assert rollup.rebuild(connection) == (0, 0)  # no attempt rows: the counts start over


def test_waiting_counts_follow_the_statuses(account):
    account_id, _ = account
    delivery_id = emit(account_id).delivery_ids[0]
    claim(delivery_id, 0)
    with get_engine().begin() as connection:
        counts = waiting_counts.refresh(connection)
    assert (counts["pending"], counts["sending"]) == (0, 1)


def test_a_claimed_row_is_inserted_once_and_refusals_are_counted(any_db):
    runs = ScheduledRun.__table__
    backend = backend_of(get_engine())
    slot = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)

    def claim_row(run_id):
        values = {"task": "t", "slot_start": slot, "run_id": run_id, "claimed_at": slot,
                  "refused": 0}
        with get_engine().begin() as connection:
            return connection.execute(backend.claim_row(
                runs, values, ("task", "slot_start"), "run_id", "refused")).scalar_one()

    assert [claim_row(run) for run in ("a", "b", "a", "c")] == ["a", "a", "a", "a"]
    with get_engine().connect() as connection:
        assert connection.execute(select(runs.c.run_id, runs.c.refused)).all() == [("a", 2)]


def test_locks_and_snapshots_are_usable(account):
    engine = get_engine()
    backend = backend_of(engine)
    with backend.alone(engine, 4242) as taken:
        assert taken is True
    with session_scope() as session:
        backend.begin_snapshot(session)
        assert session.scalar(select(func.count()).select_from(Delivery)) == 0
    with engine.begin() as connection:
        backend.limit_statement_time(connection, 1000)
        statement = backend.skip_locked(select(Delivery.id))
        assert connection.execute(statement).all() == []
        assert in_autocommit(connection) is False  # a session's engine: BEGIN is SQLAlchemy's
