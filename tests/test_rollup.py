"""The attempt rollups agree with the attempts table, on PostgreSQL (one statement) and SQLite."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pytest
from sqlalchemy import func, select

from tests.factories import make_account, make_subscription
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record
from webhooks.storage import rollup
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Attempt, AttemptHour, AttemptTotal, Delivery, utcnow

RULES = Rules((60, 300, 1800, 7200, 43200), countdown_limit=300, pause_after=25)


def record_attempt(connection, claim, *, started_at, now, duration_ms, status_code):
    """Record ``claim``'s attempt as run_attempt does."""
    step = next_step(claim.attempt_number, status_code, claim.event_type, RULES)
    return record(connection, claim, step=step, rules=RULES, started_at=started_at, now=now,
                  duration_ms=duration_ms, status_code=status_code,
                  error=None if status_code else "refused", excerpt=None)


def emit(account_id: str) -> list[str]:
    return list(emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids)


def attempt(delivery_id: str, status_code: int | None, duration_ms: int,
            started_at: dt.datetime | None = None):
    """Claim and record the next attempt of a due delivery, as a worker does."""
    with get_engine().begin() as connection:
        count = connection.scalar(select(Delivery.attempt_count).where(Delivery.id == delivery_id))
        connection.execute(Delivery.__table__.update().where(Delivery.id == delivery_id)
                           .values(next_attempt_at=utcnow()))
    with get_engine().begin() as connection:
        claim = claim_attempt(connection, delivery_id, count, utcnow())
    assert claim is not None
    now = utcnow()
    with get_engine().begin() as connection:
        return record_attempt(connection, claim, started_at=started_at or now, now=now,
                              duration_ms=duration_ms, status_code=status_code)


def counted_hours() -> Counter:
    with session_scope() as session:
        rows = session.execute(
            select(AttemptHour.account_id, AttemptHour.subscription_id, AttemptHour.hour_start,
                   AttemptHour.outcome, func.sum(AttemptHour.attempts))
            .group_by(AttemptHour.account_id, AttemptHour.subscription_id, AttemptHour.hour_start,
                      AttemptHour.outcome))
        return Counter({tuple(row[:4]): int(row[4]) for row in rows})


def counted_totals() -> Counter:
    with session_scope() as session:
        rows = session.execute(
            select(AttemptTotal.outcome, AttemptTotal.duration_bucket,
                   func.sum(AttemptTotal.attempts), func.sum(AttemptTotal.duration_ms))
            .group_by(AttemptTotal.outcome, AttemptTotal.duration_bucket))
        return Counter({(outcome, bucket): (int(n), int(ms)) for outcome, bucket, n, ms in rows})


def from_attempts() -> tuple[Counter, Counter]:
    """Both rollups as counted from the attempts table itself, in Python."""
    hours, totals = Counter(), Counter()
    with session_scope() as session:
        rows = session.execute(
            select(Delivery.account_id, Delivery.subscription_id, Attempt.started_at,
                   Attempt.outcome, Attempt.duration_ms)
            .join(Delivery, Delivery.id == Attempt.delivery_id))
        sums: dict = {}
        for account_id, subscription_id, started_at, outcome, duration_ms in rows:
            hours[(account_id, subscription_id, rollup.floor_hour(started_at), outcome)] += 1
            key = (outcome, rollup.duration_bucket(duration_ms))
            n, ms = sums.get(key, (0, 0))
            sums[key] = (n + 1, ms + duration_ms)
        totals.update(sums)
    return hours, totals


@pytest.fixture
def two_accounts(any_db, published):
    alice, _ = make_account("alice")
    bob, _ = make_account("bob")
    return (alice, make_subscription(alice, "https://a.example.com/in").id,
            make_subscription(alice, "https://b.example.com/in").id,
            bob, make_subscription(bob, "https://c.example.com/in").id)


def test_each_recorded_attempt_is_counted_in_both_rollups(two_accounts):
    alice, _, _, bob, _ = two_accounts
    earlier = utcnow() - dt.timedelta(hours=3)
    first, second = emit(alice)
    (third,) = emit(bob)
    attempt(first, 500, 30, started_at=earlier)
    attempt(first, None, 2600)
    attempt(first, 200, 25)
    attempt(second, 410, 26)
    for _ in range(6):
        attempt(third, 503, 30001)
    hours, totals = from_attempts()
    assert counted_hours() == hours
    assert counted_totals() == totals
    assert sum(n for n, _ in totals.values()) == 10
    assert totals[("dead", len(rollup.DURATION_BUCKETS_MS))] == (1, 30001)


def test_duration_buckets_have_inclusive_upper_bounds():
    assert [rollup.duration_bucket(ms) for ms in (0, 25, 26, 50, 51, 30000, 30001)] == [
        0, 0, 1, 1, 2, 10, 11]


def test_the_statement_on_postgresql_buckets_as_python_does(db, published):
    """width_bucket in the record statement against duration_bucket(), at each bound."""
    account_id, _ = make_account()
    make_subscription(account_id, "https://a.example.com/in")
    durations = [0, 1, *[bound + step for bound in rollup.DURATION_BUCKETS_MS for step in (0, 1)]]
    for duration in durations:
        (delivery_id,) = emit(account_id)
        attempt(delivery_id, 200, duration)
    expected = Counter()
    for duration in durations:
        expected[("success", rollup.duration_bucket(duration))] += 1
    assert {key: n for key, (n, _) in counted_totals().items()} == expected


def test_a_record_that_is_not_ours_counts_nothing(two_accounts):
    alice = two_accounts[0]
    delivery_id = emit(alice)[0]
    with get_engine().begin() as connection:
        claim = claim_attempt(connection, delivery_id, 0, utcnow())
    with session_scope() as session:  # the sweep took the claim back meanwhile
        session.execute(Delivery.__table__.update().where(Delivery.id == delivery_id)
                        .values(status="pending", attempt_count=0))
    now = utcnow()
    with get_engine().begin() as connection:
        assert record_attempt(connection, claim, started_at=now, now=now, duration_ms=10,
                              status_code=200) is None
    assert counted_hours() == Counter() and counted_totals() == Counter()


def test_concurrent_records_of_one_subscription_are_all_counted(db, published):
    """Eight threads recording attempts of one subscription in the same hour lose no count."""
    account_id, _ = make_account()
    make_subscription(account_id, "https://a.example.com/in")
    ids = [emit(account_id)[0] for _ in range(40)]
    errors = []

    def work(chunk):
        try:
            for delivery_id in chunk:
                attempt(delivery_id, 200, 10)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(ids[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(counted_hours().values()) == 40
    assert counted_totals()[("success", 0)] == (40, 400)


def test_rebuild_recounts_both_rollups_from_the_attempts(two_accounts):
    alice, _, _, _, _ = two_accounts
    first, second = emit(alice)
    attempt(first, 500, 120)
    attempt(second, 200, 7)
    with get_engine().begin() as connection:
        connection.execute(AttemptHour.__table__.delete())
        connection.execute(AttemptTotal.__table__.update().values(attempts=99))
        rollup.rebuild(connection)
    hours, totals = from_attempts()
    assert counted_hours() == hours and counted_totals() == totals
