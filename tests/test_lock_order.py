"""Writers that lock the same rows take them in one order, or skip them: no deadlock.

On a loaded machine two deadlocks showed (docs/reliability.md): batched records
whose backends share a rollup shard took the rollups' rows item by item, in
opposite orders; and overlapping sweeps took back the same stale claims in the
orders of their own plans. Each is reproduced here on PostgreSQL with two
connections that go on at the same moment: the records behind a third
transaction that both wait for (without the fix: a deadlock in each of the
``RECORD_ROUNDS`` rounds, in both forms), the sweeps behind a barrier (without
the fix: a deadlock in 15 to 20 of the ``ROUNDS`` rounds, in five runs). A
record that moves its subscription's adaptive limit locked the subscription's
row after its rollups' rows (a deadlock in each round without the fix). And a
record made a deadlock's victim anyway runs again instead of becoming a failed
attempt (without the fix: recorded as an internal error, the delivery pending).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading

import pytest
from sqlalchemy import create_engine, func, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from tests.factories import make_account, make_subscription
from tests.support.threads import started_thread, wait_for
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import adaptive_pace, transitions
from webhooks.lifecycle.claim import Caps, claim_many
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record, record_many
from webhooks.sender.post import AttemptResult
from webhooks.services import attempt as attempt_module
from webhooks.storage import rollup
from webhooks.storage.conflicts import CONFLICT_TRIES, rolled_back_by_conflict
from webhooks.storage.db import attempt_transaction, get_attempt_engine, session_scope
from webhooks.storage.models import (Attempt, AttemptHour, AttemptTotal, Delivery, Subscription,
                                     utcnow)

pytestmark = pytest.mark.database

RULES = Rules((60, 300), countdown_limit=300, pause_after=25)
ROUNDS = 20  # of the overlapping sweeps (each has two threads meet at a barrier)
RECORD_ROUNDS = 5  # of the records (a held row makes each round deadlock without the fix)
# One duration in each bucket of the histogram, bucket 0 first: one row of attempt_totals each.
DURATIONS = [*rollup.DURATION_BUCKETS_MS, rollup.DURATION_BUCKETS_MS[-1] + 1]
SUBSCRIPTIONS = len(DURATIONS)


def _together(*works) -> list:
    """Run each of ``works`` on its own thread, all released at once by a barrier; what
    each raised (None if nothing), in order. A work is a callable that gets ready (opens
    its connection, say) and returns what to run once the barrier falls."""
    barrier, errors = threading.Barrier(len(works)), [None] * len(works)

    def run(index, work):
        ready = work()
        barrier.wait(10)
        errors[index] = _error_of(ready)

    threads = [started_thread(lambda i=i, w=w: run(i, w)) for i, w in enumerate(works)]
    for thread in threads:
        thread.join(60)
    return errors


def _error_of(work) -> Exception | None:
    """What ``work()`` raised; None if nothing."""
    try:
        work()
    except Exception as exc:  # noqa: BLE001 - the test counts them
        return exc
    return None


def _started(errors: list, work) -> threading.Thread:
    """A thread running ``work``, which adds what it raised (None if nothing) to ``errors``."""
    return started_thread(lambda: errors.append(_error_of(work)))


def _joined(threads, errors) -> int:
    """Wait for ``threads``; how many of their ``errors`` are conflicts' victims."""
    for thread in threads:
        thread.join(30)
    return _deadlocks(errors)


def _deadlocks(errors) -> int:
    """How many of ``errors`` are conflicts' victims; fails on any other error."""
    unexpected = [e for e in errors if e is not None and not rolled_back_by_conflict(e)]
    assert not unexpected, unexpected
    return sum(e is not None for e in errors)


# ------------------------------------------------------------------ the rollups


@pytest.fixture
def one_shard(db):
    """Two autocommit connections (as the attempt engine's) whose backends count in the
    same rollup shard (pid mod SHARDS), so that their records lock the same rows."""
    engine = create_engine(db, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    by_shard: dict[int, object] = {}
    opened = []
    while True:
        connection = engine.connect()
        opened.append(connection)
        shard = connection.scalar(text("SELECT pg_backend_pid()")) % rollup.SHARDS
        if shard in by_shard:
            pair = (by_shard[shard], connection)
            break
        by_shard[shard] = connection
    for connection in opened:
        if connection not in pair:
            connection.close()
    yield pair
    for connection in pair:
        connection.close()
    engine.dispose()


def _claimed_round(account_id: str, groups: list[tuple[str, list[str]]]) -> list[list]:
    """For each group (an event type, the ids of the subscriptions that take it), an event
    of that type, its deliveries all claimed; the claims of each group's event, in the
    order of its subscriptions' ids."""
    events = [emit_event(account_id, event_type, sample_data(event_type)).delivery_ids
              for event_type, _ in groups]
    with attempt_transaction(get_attempt_engine()) as connection:
        claims = claim_many(connection, [(d, 0, Caps(0, 0, 0)) for ids in events for d in ids],
                            utcnow())
    assert all(claims)
    by_delivery = {c.delivery_id: c for c in claims}
    rounds = []
    for ids, (_, subscription_ids) in zip(events, groups):
        by_subscription = {by_delivery[d].subscription_id: by_delivery[d] for d in ids}
        rounds.append([by_subscription[s] for s in subscription_ids])
    return rounds


def _success(claim, duration_ms: int) -> dict:
    now = utcnow()
    return dict(claim=claim, step=next_step(claim.attempt_number, 200, claim.event_type, RULES),
                rules=RULES, started_at=now, now=now, duration_ms=duration_ms, status_code=200,
                error=None, excerpt="ok")


def _subscriptions(account_id: str, count: int, event_type: str = "email.sent") -> list[str]:
    return sorted(make_subscription(account_id, f"https://example.com/{n}",
                                    event_types=[event_type]).id for n in range(count))


def _records_batch(connection, attempts):
    return lambda: record_many(connection, attempts)


def _records_alone(connection, attempts):
    return lambda: [record(connection, **one) for one in attempts]


MIDDLE = SUBSCRIPTIONS // 2  # the bucket whose row of attempt_totals the blocker holds


@contextlib.contextmanager
def _blocking_the_middle_bucket(engine, shard: int):
    """A transaction holding the shard's row of attempt_totals for the middle bucket, so
    that records running into it wait there until it ends (with the block), then all go
    on at once."""
    with engine.begin() as blocker:
        blocker.execute(select(AttemptTotal.shard).where(
            AttemptTotal.outcome == "success", AttemptTotal.duration_bucket == MIDDLE,
            AttemptTotal.shard == shard).with_for_update())
        yield


def _waiting(pids) -> int:
    """How many of the backends ``pids`` wait for a lock."""
    with session_scope() as session:
        return session.scalar(text(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids) "
            "AND wait_event_type = 'Lock'"), {"pids": list(pids)})


@pytest.mark.parametrize("other", [_records_batch, _records_alone], ids=["batch", "alone"])
def test_records_that_share_a_shard_never_deadlock_on_the_rollups(db, one_shard, published,
                                                                  other):
    """A batch of successes, one a subscription, whose durations' buckets rise with the
    subscriptions' ids, against: another batch of as many other subscriptions whose
    buckets fall (the same rows of attempt_totals in the opposite order); or records one
    by one of the same subscriptions, buckets falling (the first, of the subscription the
    batch counts first, in the bucket it counts last: "a batched record of two
    subscriptions against a single one", docs/reliability.md).

    A third transaction holds the middle bucket's row, so that both run into a wait
    before it is released, and then go on together. Counted item by item, each then
    held a row the other wanted next: a deadlock in every round. Now every record
    takes all its rows of attempt_hours, then of attempt_totals, each in key order."""
    account_id, _ = make_account("lock-order")
    ours = ("email.sent", _subscriptions(account_id, SUBSCRIPTIONS))
    theirs = (ours if other is _records_alone
              else ("email.opened", _subscriptions(account_id, SUBSCRIPTIONS, "email.opened")))
    first, second = one_shard
    pids = [c.scalar(text("SELECT pg_backend_pid()")) for c in one_shard]
    shard = pids[0] % rollup.SHARDS
    with session_scope() as session:  # the rows the blocker can lock
        session.add_all(AttemptTotal(outcome="success", duration_bucket=bucket, shard=shard,
                                     attempts=0, duration_ms=0)
                        for bucket in range(len(DURATIONS)))
    blocker_engine = create_engine(db, poolclass=NullPool)
    deadlocks = 0
    for _ in range(RECORD_ROUNDS):
        rising, falling = _claimed_round(account_id, [ours, theirs])
        errors: list = []
        with _blocking_the_middle_bucket(blocker_engine, shard):
            threads = [_started(errors, work) for work in (
                _records_batch(first, [_success(c, ms) for c, ms in zip(rising, DURATIONS)]),
                other(second, [_success(c, ms) for c, ms in zip(falling, reversed(DURATIONS))]))]
            wait_for(lambda: _waiting(pids) == 2, "both waiting")
        deadlocks += _joined(threads, errors)
    blocker_engine.dispose()
    assert deadlocks == 0, f"{deadlocks} of {RECORD_ROUNDS} rounds deadlocked"
    counted = sorted({*ours[1], *theirs[1]})
    per_subscription = RECORD_ROUNDS * (2 if theirs is ours else 1)
    with session_scope() as session:
        assert set(session.scalars(select(Delivery.status))) == {"done"}
        assert (session.scalar(select(func.count()).select_from(Attempt))
                == 2 * SUBSCRIPTIONS * RECORD_ROUNDS)
        hours = session.execute(select(AttemptHour.subscription_id, func.sum(AttemptHour.attempts))
                                .group_by(AttemptHour.subscription_id)).all()
        totals = session.execute(select(AttemptTotal.duration_bucket,
                                        func.sum(AttemptTotal.attempts),
                                        func.sum(AttemptTotal.duration_ms))
                                 .group_by(AttemptTotal.duration_bucket)).all()
    assert sorted(hours) == [(s, per_subscription) for s in counted]
    assert sorted(totals) == [(bucket, 2 * RECORD_ROUNDS, 2 * RECORD_ROUNDS * ms)
                              for bucket, ms in enumerate(DURATIONS)]


def _committed(connection, work):
    """``work()`` on an autocommit connection, then COMMIT (or ROLLBACK if it raised) the
    transaction it opened, as db.attempt_transaction ends a record's."""
    def run():
        try:
            work()
        except BaseException:
            connection.exec_driver_sql("ROLLBACK")
            raise
        connection.exec_driver_sql("COMMIT")
    return run


def test_a_paced_success_never_deadlocks_with_a_record_that_resets_the_counter(
        db, one_shard, published):
    """Two successes of one subscription whose adaptive limit was lowered, sharing a shard.
    The first's statement found no failure to forget, so it did not lock the subscription's
    row, and waits for its rollup row (held by a third transaction); a failure is counted
    meanwhile, so the second's statement locks the row to reset the counter, then waits for
    the same rollup row. Released, the first took it, then wanted the subscription's row to
    raise the limit, which the second held: a deadlock in every round. Now a record that
    moves the limit locks the subscription's row first, before any rollup row."""
    account_id, _ = make_account("paced")
    subscription_id = make_subscription(account_id, "https://example.com/paced").id
    pace = adaptive_pace.Pace(enabled=True, service_cap=100)
    pids = [c.scalar(text("SELECT pg_backend_pid()")) for c in one_shard]
    shard = pids[0] % rollup.SHARDS
    hour = rollup.floor_hour(utcnow())
    with session_scope() as session:  # the rows the blocker holds
        session.add_all(AttemptHour(subscription_id=subscription_id, hour_start=start,
                                    outcome="success", shard=shard, account_id=account_id,
                                    attempts=0)
                        for start in (hour, hour + dt.timedelta(hours=1)))
    blocker_engine = create_engine(db, poolclass=NullPool)
    deadlocks = 0
    for _ in range(RECORD_ROUNDS):
        with session_scope() as session:
            session.execute(update(Subscription).where(Subscription.id == subscription_id)
                            .values(consecutive_failures=0, max_in_flight=100, in_flight_limit=50))
        ids = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
               for _ in range(2)]
        with attempt_transaction(get_attempt_engine()) as connection:
            claims = claim_many(connection, [(d, 0, Caps(0, 0, 0)) for d in ids], utcnow())
        assert all(c is not None and c.in_flight_limit == 50 for c in claims)
        errors: list = []
        with contextlib.ExitStack() as held:
            blocker = held.enter_context(blocker_engine.begin())
            blocker.execute(select(AttemptHour.shard).where(
                AttemptHour.subscription_id == subscription_id).with_for_update())
            threads = [_started(errors, _committed(
                one_shard[0], lambda: record(one_shard[0], **_success(claims[0], 5), pace=pace)))]
            wait_for(lambda: _waiting(pids[:1]) == 1, "the first record waiting")
            with session_scope() as session:  # a failure counted, unless the row is held
                session.execute(text(
                    "UPDATE subscriptions SET consecutive_failures = 1 WHERE id IN (SELECT id "
                    "FROM subscriptions WHERE id = :s FOR NO KEY UPDATE SKIP LOCKED)"),
                    {"s": subscription_id})
            threads.append(_started(errors, _committed(
                one_shard[1], lambda: record(one_shard[1], **_success(claims[1], 5), pace=pace))))
            wait_for(lambda: _waiting(pids) == 2, "both records waiting")
        deadlocks += _joined(threads, errors)
    blocker_engine.dispose()
    assert deadlocks == 0, f"{deadlocks} of {RECORD_ROUNDS} rounds deadlocked"
    with session_scope() as session:
        assert set(session.scalars(select(Delivery.status))) == {"done"}
        assert session.scalar(select(func.sum(AttemptHour.attempts))) == 2 * RECORD_ROUNDS


# ------------------------------------------------------------------ a conflict's victim


class _Ok:
    def __init__(self):
        self.sent = 0

    def __call__(self, url, body, headers):
        self.sent += 1
        return AttemptResult(status_code=200, error=None, duration_ms=7)


def test_a_record_made_a_deadlocks_victim_runs_again_and_is_not_a_failed_attempt(db, published):
    """A holder locks every rollup row the record of a 2xx will want, waits until the
    record waits for it, then asks for the record's delivery row: a deadlock, whose
    victim is the record (the holder checks late). Rolled back whole, the record runs
    again and counts a success: once, and the receiver was sent the attempt once. Before,
    it was recorded as an internal error, and the delivery was due to be sent again."""
    account_id, _ = make_account("victim")
    subscription = make_subscription(account_id, "https://example.com/victim")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    hour = rollup.floor_hour(utcnow())
    with session_scope() as session:
        for shard in range(rollup.SHARDS):
            for start in (hour, hour + dt.timedelta(hours=1)):  # the hour may turn meanwhile
                session.add(AttemptHour(subscription_id=subscription.id, hour_start=start,
                                        outcome="success", shard=shard, account_id=account_id,
                                        attempts=0))
            session.add(AttemptTotal(outcome="success", duration_bucket=rollup.duration_bucket(7),
                                     shard=shard, attempts=0, duration_ms=0))
    holder_engine = create_engine(db, poolclass=NullPool)
    holding, done = threading.Event(), threading.Event()

    def hold():
        with holder_engine.begin() as holder:
            holder.execute(text("SET LOCAL deadlock_timeout = '20s'"))
            holder.execute(select(AttemptHour.shard).with_for_update())
            holder.execute(select(AttemptTotal.shard).with_for_update())
            pid = holder.scalar(text("SELECT pg_backend_pid()"))
            holding.set()
            wait_for(lambda: _blocked_by(pid), "the record waiting for the holder")
            holder.execute(select(Delivery.id).where(Delivery.id == delivery_id)
                           .with_for_update())  # the record's: a deadlock, the record its victim
        done.set()

    holder = started_thread(hold)
    holding.wait(10)
    sender = _Ok()
    status = attempt_module.run_attempt(delivery_id, 0, sender=sender)
    holder.join(30)
    assert done.is_set() and status == "done" and sender.sent == 1
    with session_scope() as session:
        assert session.scalars(select(Attempt.outcome)).all() == ["success"]
        assert session.scalar(select(func.sum(AttemptHour.attempts))) == 1
        assert session.scalar(select(func.sum(AttemptTotal.attempts))) == 1
    holder_engine.dispose()



def _blocked_by(pid: int) -> bool:
    """True while some backend waits for a lock that backend ``pid`` holds."""
    with session_scope() as session:
        return bool(session.scalar(text(
            "SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"),
            {"pid": pid}))


# ------------------------------------------------------------------ overlapping sweeps


STALE_EVENTS, STALE_SUBSCRIPTIONS = 20, 40  # 800 stale claims a round


def _stale_claims(account_id: str) -> list[str]:
    """Deliveries claimed long ago (the sweep's first step takes them back), each at a
    random time: they lie in the table in the order they were made, in the index of
    claims in the order of those times, and in the primary key in the order of their ids
    (random UUIDs), three different orders."""
    ids = []
    for _ in range(STALE_EVENTS):
        ids += emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    with session_scope() as session:
        session.execute(text("SET LOCAL enable_indexscan = off"))  # new versions: made order
        session.execute(text("SET LOCAL enable_bitmapscan = off"))
        session.execute(text(
            "UPDATE deliveries SET status = 'sending', attempt_count = 1, claimed_at = "
            "(now() AT TIME ZONE 'utc') - interval '1 year' - random() * interval '1 day' "
            "WHERE id = ANY(:ids)"), {"ids": ids})
    return ids


def _sweep_with(engine, ids: list[str], plan: str, taken: list):
    """The sweep's first step over ``ids``, in a transaction whose planner may use only
    ``plan`` to find them (PostgreSQL locks rows in the order its plan finds them: two
    sweeps of different sizes may plan differently)."""
    switches = {"index": ("enable_seqscan", "enable_bitmapscan"),
                "bitmap": ("enable_seqscan", "enable_indexscan")}[plan]

    def ready():
        session = Session(engine)
        session.begin()
        for switch in switches:
            session.execute(text(f"SET LOCAL {switch} = off"))

        def run():
            with session:
                stale = (Delivery.status == "sending", Delivery.claimed_at < utcnow())
                taken.extend(transitions.take_swept(
                    session, ids, dict(status="pending", claimed_at=None,
                                       attempt_count=Delivery.attempt_count - 1,
                                       next_attempt_at=utcnow()), *stale))
                session.commit()
        return run
    return ready


def test_overlapping_sweeps_never_deadlock_and_take_each_claim_back_once(db, published):
    """Two sweeps take back the same stale claims at once, one finding them on the index of
    claims (in the order of their claim times), the other by a bitmap (in the order they
    lie in the table): each waited for a row the other held. Now each skips the rows the
    other holds: every claim is taken back once, by one of them."""
    account_id, _ = make_account("sweeps")
    _subscriptions(account_id, STALE_SUBSCRIPTIONS)
    engine = create_engine(db, poolclass=NullPool)
    deadlocks = 0
    for _ in range(ROUNDS):
        ids = _stale_claims(account_id)
        by_index, by_bitmap = [], []
        deadlocks += _deadlocks(_together(_sweep_with(engine, ids, "index", by_index),
                                          _sweep_with(engine, ids, "bitmap", by_bitmap)))
        taken = [d for d, _ in by_index] + [d for d, _ in by_bitmap]
        assert sorted(taken) == sorted(ids)
        assert all(count == 0 for _, count in by_index + by_bitmap)
    assert deadlocks == 0, f"{deadlocks} of {ROUNDS} rounds deadlocked"
    engine.dispose()


def test_a_swept_move_still_returns_its_rows_in_the_order_of_the_ids(db, published):
    account_id, _ = make_account("order")
    make_subscription(account_id, "https://example.com/order", event_types=["email.sent"])
    ids = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
           for _ in range(6)]
    wanted = [*reversed(ids[3:]), *ids[:3]]
    with session_scope() as session:
        rows = transitions.take_swept(session, wanted, dict(updated_at=utcnow()))
    assert [d for d, _ in rows] == wanted


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_transaction_rolled_back_by_a_conflict_runs_again_three_times_at_most(db, sqlstate):
    """The attempt path's transactions run again while PostgreSQL says (by SQLSTATE, not
    by message) that it rolled them back as a deadlock's victim or a serialization
    failure: one that gets through on its third run returns its answer; one that does
    not raises the third error, and the record then becomes an internal error."""
    runs = []

    def conflicted(times):
        def work(connection):
            runs.append(sqlstate)
            if len(runs) <= times:
                connection.exec_driver_sql(
                    f"DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{sqlstate}'; END $$")
            return "answered"
        return work

    assert attempt_module._in_transaction(get_attempt_engine(), conflicted(2), "testing") \
        == "answered"
    assert len(runs) == CONFLICT_TRIES == 3
    runs.clear()
    with pytest.raises(OperationalError) as raised:
        attempt_module._in_transaction(get_attempt_engine(), conflicted(3), "testing")
    assert len(runs) == CONFLICT_TRIES and rolled_back_by_conflict(raised.value)
