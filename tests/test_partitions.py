"""The attempts' day partitions (PostgreSQL, migration 0029): created ahead by the scheduler,
once however many run; dropped whole by retention, which keeps what its rule keeps; and the
rule that a duplicate attempt is never recorded twice, which the unique key alone no longer
enforces (it holds started_at). SQLite's plain table: tests/test_backend_contract.py."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, insert, select, text

from tests.factories import make_account, make_subscription, stored_delivery
from webhooks.lifecycle import retention
from webhooks.storage import partition_runs, partitions
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Attempt, Delivery, utcnow
from webhooks.storage.scheduled_runs import Slot

pytestmark = pytest.mark.database


@pytest.fixture
def days(db):
    """The day partitions a test creates are dropped after it (the session's database keeps
    the migration's own)."""
    engine = get_engine()
    with engine.connect() as connection:
        before = {p.name for p in backend_of(engine).day_partitions(connection)}
    yield engine
    with engine.begin() as connection:
        connection.execute(text("TRUNCATE attempts"))
        for partition in backend_of(engine).day_partitions(connection):
            if partition.name not in before:
                connection.execute(text(f"DROP TABLE {partition.name}"))
        for name in _children(connection):
            if partitions.is_kept(name):
                connection.execute(text(f"DROP TABLE {name}"))


def _children(connection) -> set[str]:
    return set(connection.execute(text(
        "SELECT inhrelid::regclass::text FROM pg_inherits "
        "WHERE inhparent = 'attempts'::regclass")).scalars())


def _names(engine) -> set[str]:
    with engine.connect() as connection:
        return {p.name for p in backend_of(engine).day_partitions(connection)}


def _day(moment: dt.datetime) -> dt.date:
    return moment.astimezone(dt.timezone.utc).date()


# ---------------------------------------------------------------- created ahead


def test_the_scheduler_creates_today_and_the_days_ahead_once(days):
    now = utcnow() + dt.timedelta(days=20)  # days the migration did not create
    wanted = {partitions.day_of(_day(now) + dt.timedelta(days=n)).name for n in range(4)}
    created = partition_runs.create_ahead(days, days_ahead=3, now=now)
    assert set(created) == wanted and wanted <= _names(days)
    assert partition_runs.create_ahead(days, days_ahead=3, now=now) == []  # idempotent


def test_concurrent_schedulers_create_each_day_once(days):
    now = utcnow() + dt.timedelta(days=40)
    results, errors = [], []

    def run():
        try:
            results.append(partition_runs.create_ahead(days, days_ahead=2, now=now))
        except Exception as error:  # pragma: no cover - what the test must not see
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    created = [name for names in results for name in names]
    assert sorted(created) == sorted({partitions.day_of(_day(now) + dt.timedelta(days=n)).name
                                      for n in range(3)})  # each once, by one of them


def test_a_run_of_a_slot_another_run_has_creates_nothing(days):
    now = utcnow() + dt.timedelta(days=60)
    start = now.replace(minute=0, second=0, microsecond=0)
    first = Slot("webhooks.partitions", start, "run-1", partition_runs.INTERVAL_S)
    second = Slot("webhooks.partitions", start, "run-2", partition_runs.INTERVAL_S)
    today = partitions.day_of(_day(now)).name
    tomorrow = partitions.day_of(_day(now) + dt.timedelta(days=1)).name
    assert partition_runs.create_ahead(days, days_ahead=0, now=now, slot=first) == [today]
    assert partition_runs.create_ahead(days, days_ahead=1, now=now, slot=second) == []
    assert tomorrow not in _names(days)


def test_a_day_whose_rows_are_in_the_default_partition_stays_there(days, caplog):
    account_id, subscription_id = _subscription()
    late = utcnow() + dt.timedelta(days=80)
    stored_delivery(account_id, subscription_id, late, "done", [late])  # no partition: the default
    assert partition_runs.create_ahead(days, days_ahead=0, now=late) == []
    assert "default partition holds rows" in caplog.text
    with days.connect() as connection:
        assert connection.execute(text(
            f"SELECT count(*) FROM {partitions.DEFAULT}")).scalar() == 1


# ---------------------------------------------------------------- dropped by retention


def _subscription():
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook").id


def _attempts_of(delivery_id) -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(Attempt)
                              .where(Attempt.delivery_id == delivery_id))


def _exists(delivery_id) -> bool:
    with session_scope() as session:
        return session.get(Delivery, delivery_id) is not None


def test_retention_drops_whole_old_days_and_keeps_younger_and_kept_rows(days):
    now = utcnow()
    cutoff = now - dt.timedelta(days=30)
    old_day = partitions.day_of(_day(now - dt.timedelta(days=35)))
    cut_day = partitions.day_of(_day(cutoff))  # holds the cut-off: not wholly old
    with days.begin() as connection:
        created = backend_of(days).create_partitions(connection, [
            partitions.day_of(old_day.start.date() + dt.timedelta(days=n)) for n in range(6)])
    assert old_day.name in created and cut_day.name in created
    utc = dt.timezone.utc
    at = old_day.start.replace(tzinfo=utc)
    account_id, subscription_id = _subscription()
    done = stored_delivery(account_id, subscription_id, at + dt.timedelta(hours=10), "done",
                     [at + dt.timedelta(hours=10)])
    # A retry after midnight: its second attempt in the next day's partition.
    retried = stored_delivery(account_id, subscription_id, at + dt.timedelta(hours=23), "dead",
                        [at + dt.timedelta(hours=23), at + dt.timedelta(hours=25)])
    pending = stored_delivery(account_id, subscription_id, at + dt.timedelta(hours=11), "pending",
                        [at + dt.timedelta(hours=11)])
    original = stored_delivery(account_id, subscription_id, at + dt.timedelta(hours=12), "failed",
                         [at + dt.timedelta(hours=12)])
    replay = stored_delivery(account_id, subscription_id, now - dt.timedelta(days=1), "done",
                       [now - dt.timedelta(days=1)], replay_of=original)
    # Created on the cut-off's day but before the cut-off: waits for its day to go whole.
    same_day = cut_day.start.replace(tzinfo=utc)
    waiting_for_its_day = stored_delivery(account_id, subscription_id, same_day, "done", [same_day])
    assert same_day < cutoff

    purged = retention.purge(days, retention_days=30, batch=100, now=now)

    left = _names(days)
    assert old_day.name not in left and cut_day.name in left
    assert not _exists(done) and not _exists(retried)
    assert _exists(pending) and _attempts_of(pending) == 1  # kept: in its day's kept rows
    assert _exists(original) and _attempts_of(original) == 1  # replayed: kept with it
    assert _exists(replay) and _exists(waiting_for_its_day)
    assert _attempts_of(waiting_for_its_day) == 1
    assert purged.report() == {"events": 2, "deliveries": 2, "attempts": 3}
    kept = partitions.kept_name(old_day)
    with days.connect() as connection:
        in_kept = connection.execute(text(f"SELECT delivery_id FROM {kept}")).scalars().all()
    assert sorted(in_kept) == sorted([pending, original])  # the rows of the dropped day kept

    # Once their deliveries go (the pending one finished, the replay gone), the batches
    # delete the kept rows, and the next purge drops the emptied table.
    with session_scope() as session:
        session.execute(text("DELETE FROM attempts WHERE delivery_id = :d"), {"d": replay})
        session.execute(text("DELETE FROM deliveries WHERE id = :d"), {"d": replay})
        session.execute(text("UPDATE deliveries SET status = 'done' WHERE id = :d"),
                        {"d": pending})
    retention.purge(days, retention_days=30, batch=100, now=now)
    assert not _exists(pending) and not _exists(original)
    with days.connect() as connection:
        assert kept in _children(connection)  # emptied, dropped by the next run
    retention.purge(days, retention_days=30, batch=100, now=now)
    with days.connect() as connection:
        assert kept not in _children(connection)


def test_with_retention_off_no_day_is_dropped(days):
    old = partitions.day_of(_day(utcnow() - dt.timedelta(days=400)))
    with days.begin() as connection:
        backend_of(days).create_partitions(connection, [old])
    retention.purge(days, retention_days=0, batch=100)
    assert old.name in _names(days)


def _old_day_with_kept_rows(engine):
    """A day 40 days old holding a pending delivery's two attempts, a replayed original's,
    and a finished delivery's; the attempts of the day as rows (every column, by id) and
    the ids of the kept ones."""
    day = partitions.day_of(_day(utcnow() - dt.timedelta(days=40)))
    with engine.begin() as connection:
        backend_of(engine).create_partitions(connection, [day])
    at = day.start.replace(tzinfo=dt.timezone.utc) + dt.timedelta(hours=3)
    account_id, subscription_id = _subscription()
    pending = stored_delivery(account_id, subscription_id, at, "pending",
                        [at, at + dt.timedelta(minutes=5)])
    original = stored_delivery(account_id, subscription_id, at, "failed", [at])
    stored_delivery(account_id, subscription_id, utcnow(), "done", [utcnow()], replay_of=original)
    stored_delivery(account_id, subscription_id, at, "done", [at])
    with engine.begin() as connection:  # every column of each row its own value
        connection.execute(text(
            "UPDATE attempts SET duration_ms = 7 + number, status_code = 502, "
            "error = 'timed out ' || id, response_excerpt = 'body ' || id, "
            "location = 'https://example.com/moved', error_kind = 'timeout' "
            "WHERE started_at >= :start AND started_at < :end"),
            {"start": day.start, "end": day.end})
    return day, _rows_of(engine, day), {pending, original}


def _rows_of(engine, day) -> list[tuple]:
    """The attempts of ``day``'s range read through ``attempts``, every column, by id."""
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(
            "SELECT * FROM attempts WHERE started_at >= :start AND started_at < :end "
            "ORDER BY id"), {"start": day.start, "end": day.end})]


def test_the_kept_rows_survive_the_drop_with_their_ids_and_values(days):
    day, before, kept_ids = _old_day_with_kept_rows(days)
    cutoff = day.end.replace(tzinfo=dt.timezone.utc)

    dropped = retention.drop_old_days(days, cutoff)

    assert [(d.name, d.rows, d.kept) for d in dropped] == [(day.name, 1, 3)]
    assert _rows_of(days, day) == [row for row in before if row[1] in kept_ids]
    kept = partitions.kept_name(day)
    with days.connect() as connection:
        assert kept in _children(connection) and day.name not in _children(connection)
        # Attached with the parent's keys and index, and without its CHECK of the bounds.
        indexes = connection.execute(text(
            "SELECT count(*) FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid "
            "WHERE x.indrelid = CAST(:kept AS regclass)"), {"kept": kept}).scalar()
        checks = connection.execute(text(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = CAST(:kept AS regclass) "
            "AND contype = 'c'"), {"kept": kept}).scalar()
    assert indexes == 3 and checks == 0


def _dies(engine, connection):
    """Kill ``connection``, the drop's (its server process ends, as when the process that
    runs the drop dies): PostgreSQL rolls its transaction back."""
    pid = connection.execute(text("SELECT pg_backend_pid()")).scalar()
    with engine.connect() as other:
        assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()


@pytest.mark.parametrize("dies", ["after the copy", "after the drop", "after the attach"])
def test_a_drop_that_dies_between_its_steps_loses_nothing(days, monkeypatch, dies):
    from webhooks.storage.backends import pg_partitions

    day, before, kept_ids = _old_day_with_kept_rows(days)
    cutoff = day.end.replace(tzinfo=dt.timezone.utc)
    copy, attach = pg_partitions._copy_kept, pg_partitions._attach

    def copy_then(connection, *args):
        kept = copy(connection, *args)
        if dies == "after the copy":
            _dies(days, connection)
        return kept

    def attach_then(connection, *args):
        if dies == "after the drop":
            _dies(days, connection)
        attach(connection, *args)
        if dies == "after the attach":
            _dies(days, connection)

    monkeypatch.setattr(pg_partitions, "_copy_kept", copy_then)
    monkeypatch.setattr(pg_partitions, "_attach", attach_then)
    with pytest.raises(Exception):
        retention.drop_old_days(days, cutoff)

    # The day as it was: every attempt readable through attempts, nothing kept apart.
    assert _rows_of(days, day) == before
    with days.connect() as connection:
        assert day.name in _children(connection)
        assert partitions.kept_name(day) not in _children(connection)
        assert not connection.execute(text("SELECT to_regclass(:kept)"),
                                      {"kept": partitions.kept_name(day)}).scalar()
    monkeypatch.undo()
    retention.drop_old_days(days, cutoff)  # the next run drops it
    assert _rows_of(days, day) == [row for row in before if row[1] in kept_ids]


# ---------------------------------------------------------------- a duplicate attempt


def test_the_unique_key_holds_started_at_so_the_record_keeps_a_number_once(days):
    """Two rows of one (delivery, number) at different times are no longer refused by the
    table: only the record's condition (the delivery still `sending` with that number,
    under its row lock) keeps the second out; tests/test_backend_contract.py checks that
    condition on both engines, concurrently here."""
    account_id, subscription_id = _subscription()
    now = utcnow()
    delivery_id = stored_delivery(account_id, subscription_id, now, "done", [now])
    with days.begin() as connection:
        connection.execute(insert(Attempt).values(
            delivery_id=delivery_id, number=1, started_at=now + dt.timedelta(seconds=1),
            duration_ms=1, outcome="success"))
    assert _attempts_of(delivery_id) == 2  # the table alone lets it in


def test_two_records_of_one_claim_at_once_store_one_attempt(days, published):
    from tests.test_backend_contract import RULES, claim, emit
    from webhooks.lifecycle.policy import next_step
    from webhooks.lifecycle.record import record as record_attempt

    account_id, _ = _subscription()
    delivery_id = emit(account_id).delivery_ids[0]
    claimed = claim(delivery_id, 0)
    step = next_step(claimed.attempt_number, 500, claimed.event_type, RULES)
    barrier, results = threading.Barrier(2), []

    def record(offset_ms):
        started = utcnow() + dt.timedelta(milliseconds=offset_ms)  # another started_at each
        barrier.wait()
        with get_engine().begin() as connection:
            results.append(record_attempt(
                connection, claimed, step=step, rules=RULES, started_at=started, now=started,
                duration_ms=5, status_code=500, error=None, excerpt=None))

    threads = [threading.Thread(target=record, args=(n,)) for n in (0, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(result is None for result in results) == [False, True]
    assert _attempts_of(delivery_id) == 1


def test_a_purge_past_its_deadline_stops_after_a_day_and_leaves_the_batches(days):
    now = utcnow()
    first = partitions.day_of(_day(now - dt.timedelta(days=50)))
    second = partitions.day_of(first.start.date() + dt.timedelta(days=1))
    with days.begin() as connection:
        backend_of(days).create_partitions(connection, [first, second])
    account_id, subscription_id = _subscription()
    at = first.start.replace(tzinfo=dt.timezone.utc) + dt.timedelta(hours=1)
    old = stored_delivery(account_id, subscription_id, at, "done", [at])
    retention.purge(days, retention_days=30, batch=100, now=now, deadline=0.0)
    left = _names(days)
    assert first.name not in left and second.name in left  # one day, then the deadline
    assert _exists(old)  # its batch waits for the next run
    retention.purge(days, retention_days=30, batch=100, now=now)
    assert second.name not in _names(days) and not _exists(old)
