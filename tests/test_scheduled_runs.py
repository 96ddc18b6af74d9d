"""One run of a periodic task per slot (webhooks/storage/scheduled_runs.py), on both engines:
the claim, the sweep and the purge behind it, and the tasks as beat and a resume send them."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from sqlalchemy import select, text

from tests.factories import make_account, make_subscription
from webhooks.broker import outbox
from webhooks.broker.celery_app import PURGE_TASK, SWEEP_TASK
from webhooks.events.samples import sample_data
from webhooks.lifecycle.sweep import run_sweep
from webhooks.storage import retention
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, ScheduledRun, utcnow
from webhooks.storage.scheduled_runs import KEEP, Slot, claim

START = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.timezone.utc)


def claimed(slot: Slot) -> bool:
    with get_engine().begin() as connection:
        return claim(connection, slot)


def rows() -> list[tuple]:
    with get_engine().connect() as connection:
        return [tuple(row) for row in connection.execute(
            select(ScheduledRun.task, ScheduledRun.slot_start, ScheduledRun.run_id,
                   ScheduledRun.refused).order_by(ScheduledRun.task, ScheduledRun.slot_start))]


def test_the_first_run_of_a_slot_has_it_and_every_other_is_refused_and_counted(any_db):
    assert claimed(Slot(SWEEP_TASK, START, "run-a"))
    assert not claimed(Slot(SWEEP_TASK, START, "run-b"))  # beat restarted: sent again
    assert not claimed(Slot(SWEEP_TASK, START, "run-c"))  # a second beat
    assert claimed(Slot(SWEEP_TASK, START, "run-a"))      # run-a's retry keeps its slot
    assert claimed(Slot(SWEEP_TASK, START + dt.timedelta(seconds=5), "run-d"))  # the next slot
    assert claimed(Slot(PURGE_TASK, START, "run-e"))      # another task's slot of the same time
    assert rows() == [(PURGE_TASK, START, "run-e", 0),
                      (SWEEP_TASK, START, "run-a", 2),
                      (SWEEP_TASK, START + dt.timedelta(seconds=5), "run-d", 0)]


def test_a_claim_deletes_its_tasks_rows_older_than_a_day(any_db):
    old = START - KEEP - dt.timedelta(seconds=5)
    assert claimed(Slot(SWEEP_TASK, old, "old-sweep"))
    assert claimed(Slot(PURGE_TASK, old, "old-purge"))
    assert claimed(Slot(SWEEP_TASK, START - KEEP, "kept"))
    assert claimed(Slot(SWEEP_TASK, START, "now"))
    assert [(task, run_id) for task, _, run_id, _ in rows()] == \
        [(PURGE_TASK, "old-purge"), (SWEEP_TASK, "kept"), (SWEEP_TASK, "now")]


def test_a_slot_as_a_message_names_it():
    assert Slot.sent(SWEEP_TASK, None, "r") is None
    assert Slot.sent(SWEEP_TASK, "", "r") is None
    assert Slot.sent(SWEEP_TASK, START.isoformat(), "r") == Slot(SWEEP_TASK, START, "r")
    assert Slot.sent(SWEEP_TASK, "2026-11-25T12:00:00", "r").start == START  # naive: UTC


# ---------------------------------------------------------------- the sweep and the purge


@pytest.fixture
def parked(any_db, published):
    """A delivery parked and due: the next sweep that runs sends it."""
    from webhooks.emit import emit_event

    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    delivery_id = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
    with session_scope() as session:
        outbox.park(session, [delivery_id])
    published.clear()
    return delivery_id


def is_parked(delivery_id) -> bool:
    with session_scope() as session:
        return session.get(Delivery, delivery_id).parked


def test_a_sweep_sent_for_a_slot_another_run_has_does_nothing(parked, published):
    assert claimed(Slot(SWEEP_TASK, START, "first"))
    assert run_sweep(slot=Slot(SWEEP_TASK, START, "second")) == 0
    assert is_parked(parked) and published == []
    assert rows()[0][3] == 1  # the refusal is counted (committed although nothing else was)
    assert run_sweep(slot=Slot(SWEEP_TASK, START + dt.timedelta(seconds=5), "next")) == 1
    assert not is_parked(parked)


def test_a_sweep_without_a_slot_always_runs(parked, published):
    assert claimed(Slot(SWEEP_TASK, START, "beat's"))
    assert run_sweep() == 1
    assert [d.delivery_id for d in published] == [parked]
    assert len(rows()) == 1  # it claimed nothing


def test_a_failed_sweep_leaves_its_slot_to_the_next_send(parked, monkeypatch):
    from webhooks.lifecycle import sweep as sweep_module

    def broken(*args, **kwargs):
        raise RuntimeError("the sweep failed")

    monkeypatch.setattr(sweep_module, "sweep", broken)
    with pytest.raises(RuntimeError):
        run_sweep(slot=Slot(SWEEP_TASK, START, "failed"))
    monkeypatch.undo()
    assert rows() == []  # the claim went with the sweep's transaction
    assert run_sweep(slot=Slot(SWEEP_TASK, START, "again")) == 1


def test_a_purge_sent_for_a_slot_another_run_has_deletes_nothing(any_db):
    from tests.test_retention import add_delivery

    account_id, _ = make_account()
    subscription = (account_id, make_subscription(account_id, "https://e.example.com/").id)
    add_delivery(subscription, utcnow() - dt.timedelta(days=40), "done")

    def purge(run_id):
        return retention.run_scheduled(get_engine(), retention_days=30, batch=10, seconds=5,
                                       slot=Slot(PURGE_TASK, START, run_id))

    assert claimed(Slot(PURGE_TASK, START, "first"))
    assert purge("second").deliveries == 0
    assert purge("first").deliveries == 1  # the first run's retry keeps the slot


# ---------------------------------------------------------------- the tasks, as beat sends them


def test_the_tasks_run_once_per_slot_beat_names_and_always_without_one(parked, published):
    from worker import tasks

    slot = START.isoformat()
    tasks.sweep.apply(kwargs={"slot": slot}).get()  # beat's send: runs, sends the delivery
    assert [d.delivery_id for d in published] == [parked]
    with session_scope() as session:
        outbox.park(session, [parked])  # lost again
    tasks.sweep.apply(kwargs={"slot": slot}).get()  # beat restarted: the same slot again
    assert is_parked(parked)
    tasks.sweep.apply().get()  # a resume's sweep: no slot
    assert not is_parked(parked)
    tasks.purge.apply(kwargs={"slot": slot}).get()
    tasks.purge.apply(kwargs={"slot": slot}).get()
    assert [(task, refused) for task, _, _, refused in rows()] == [(PURGE_TASK, 1),
                                                                  (SWEEP_TASK, 1)]


# ---------------------------------------------------------------- claims at once (PostgreSQL)


@pytest.mark.parametrize("first_commits", [True, False])
def test_a_claim_waits_for_an_uncommitted_claim_of_its_slot(db, first_commits):
    """Refused once the first commits; claimed if the first rolls back (a sweep that failed)."""
    engine = get_engine()
    outcome = []
    with engine.connect() as first:
        transaction = first.begin()
        assert claim(first, Slot(SWEEP_TASK, START, "first"))
        second = threading.Thread(
            target=lambda: outcome.append(claimed(Slot(SWEEP_TASK, START, "second"))))
        second.start()
        _wait_until_waiting_for_a_lock(engine)
        assert outcome == []
        transaction.commit() if first_commits else transaction.rollback()
        second.join(30)
    assert outcome == [not first_commits]
    assert rows() == [(SWEEP_TASK, START, "first" if first_commits else "second",
                       1 if first_commits else 0)]


def _wait_until_waiting_for_a_lock(engine) -> None:
    deadline = time.monotonic() + 10
    with engine.connect() as connection:
        while time.monotonic() < deadline:
            waiting = connection.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()")).scalar()
            if waiting:
                return
            connection.commit()
            time.sleep(0.02)
    raise AssertionError("the second claim never waited for the first")

