"""One run of a periodic task per slot (webhooks/storage/scheduled_runs.py), on both engines:
the claim, the sweep and the purge behind it, and the tasks as beat and a resume send them."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from sqlalchemy import insert, select, text

from tests.factories import make_account, make_subscription
from webhooks.broker import outbox
from webhooks.broker.celery_app import PURGE_TASK, SWEEP_TASK
from webhooks.events.samples import sample_data
from webhooks.lifecycle import retention
from webhooks.services.sweep import run_sweep
from webhooks.storage import clock
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, ScheduledRun, utcnow
from webhooks.storage.scheduled_runs import KEEP, Slot, claim, slot_start

# Slots of an hour from a second ago: none ends while a test runs (a run whose slot has
# ended claims the slot of now instead: the tests of late runs, below).
START = utcnow().replace(microsecond=0) - dt.timedelta(seconds=1)
HOUR = 3600.0


def slot(task: str, run_id: str, start: dt.datetime = START, seconds: float = HOUR) -> Slot:
    return Slot(task, start, run_id, seconds)


def claimed(slot: Slot) -> bool:
    with get_engine().begin() as connection:
        return claim(connection, slot)


def rows() -> list[tuple]:
    with get_engine().connect() as connection:
        return [tuple(row) for row in connection.execute(
            select(ScheduledRun.task, ScheduledRun.slot_start, ScheduledRun.run_id,
                   ScheduledRun.refused).order_by(ScheduledRun.task, ScheduledRun.slot_start))]


def test_the_first_run_of_a_slot_has_it_and_every_other_is_refused_and_counted(any_db):
    assert claimed(slot(SWEEP_TASK, "run-a"))
    assert not claimed(slot(SWEEP_TASK, "run-b"))  # beat restarted: sent again
    assert not claimed(slot(SWEEP_TASK, "run-c"))  # a second beat
    assert claimed(slot(SWEEP_TASK, "run-a"))      # run-a's retry keeps its slot
    assert claimed(slot(SWEEP_TASK, "run-d", START + dt.timedelta(seconds=5)))  # the next slot
    assert claimed(slot(PURGE_TASK, "run-e"))      # another task's slot of the same time
    assert rows() == [(PURGE_TASK, START, "run-e", 0),
                      (SWEEP_TASK, START, "run-a", 2),
                      (SWEEP_TASK, START + dt.timedelta(seconds=5), "run-d", 0)]


def test_a_claim_deletes_its_tasks_rows_older_than_a_day(any_db):
    old = START - KEEP - dt.timedelta(seconds=5)
    with get_engine().begin() as connection:  # claimed a day ago
        for task, start, run_id in ((SWEEP_TASK, old, "old-sweep"), (PURGE_TASK, old, "old-purge"),
                                    (SWEEP_TASK, START - KEEP, "kept")):
            connection.execute(insert(ScheduledRun).values(
                task=task, slot_start=start, run_id=run_id, claimed_at=start, refused=0))
    assert claimed(slot(SWEEP_TASK, "now"))
    assert [(task, run_id) for task, _, run_id, _ in rows()] == \
        [(PURGE_TASK, "old-purge"), (SWEEP_TASK, "kept"), (SWEEP_TASK, "now")]


def test_a_slot_as_a_message_names_it():
    assert Slot.sent(SWEEP_TASK, None, "r", 5) is None
    assert Slot.sent(SWEEP_TASK, "", "r", 5) is None
    assert Slot.sent(SWEEP_TASK, START.isoformat(), "r", HOUR) == slot(SWEEP_TASK, "r")
    naive = Slot.sent(SWEEP_TASK, "2026-11-25T12:00:00", "r", 5)
    assert (naive.start, naive.end) == (dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc),
                                        dt.datetime(2026, 11, 25, 12, 0, 5, tzinfo=dt.timezone.utc))


# ---------------------------------------------------------------- late runs


class DatabaseClock:
    """The database's clock as the claims and the sweep read it: stopped at ``t0``, a
    slot's start (slots of 5 s), and moved by the test, so that a run's lateness, not the
    machine's speed, decides."""

    def __init__(self, t0: dt.datetime):
        self.t0 = self.at = t0

    def __call__(self) -> dt.datetime:
        return self.at

    def move_to(self, seconds: float) -> None:
        """``seconds`` after ``t0``."""
        self.at = self.t0 + dt.timedelta(seconds=seconds)


@pytest.fixture
def database_clock(monkeypatch):
    stopped = DatabaseClock(slot_start(utcnow(), 5))
    monkeypatch.setattr(clock, "now", stopped)
    return stopped


def sent(t0: dt.datetime, run_id: str, after: float, task: str = SWEEP_TASK) -> Slot:
    """The run beat sent for the slot of 5 s starting ``after`` s after ``t0``."""
    return Slot(task, t0 + dt.timedelta(seconds=after), run_id, 5)


def test_a_run_after_its_slot_ended_claims_the_slot_of_now_instead(any_db, database_clock):
    """It waited in the queue past its slot (a backlog, a slow machine): it still runs."""
    t0, move_to = database_clock.t0, database_clock.move_to
    move_to(12.3)
    assert claimed(sent(t0, "late", 0))
    assert rows() == [(SWEEP_TASK, t0 + dt.timedelta(seconds=10), "late", 0)]


def test_late_runs_that_queued_up_make_one_run_per_slot_they_start_in(any_db, database_clock):
    t0, move_to = database_clock.t0, database_clock.move_to
    outcomes = []
    for at, run_id, slot_sent in ((12.3, "0", 0), (12.4, "5", 5), (12.5, "10", 10),  # a pile
                                  (15.1, "15", 15),   # on time again
                                  (16.0, "10-again", 10),  # late: slot 15's run was made
                                  (27.0, "20", 20)):  # late, alone in slot 25
        move_to(at)
        outcomes.append(claimed(sent(t0, run_id, slot_sent)))
    assert outcomes == [True, False, False, True, False, True]
    assert rows() == [(SWEEP_TASK, t0 + dt.timedelta(seconds=10), "0", 2),
                      (SWEEP_TASK, t0 + dt.timedelta(seconds=15), "15", 1),
                      (SWEEP_TASK, t0 + dt.timedelta(seconds=25), "20", 0)]


def test_a_slot_a_late_run_took_refuses_its_own_send(any_db, database_clock):
    t0, move_to = database_clock.t0, database_clock.move_to
    move_to(10.2)
    assert claimed(sent(t0, "late", 0))
    move_to(10.3)
    assert not claimed(sent(t0, "own", 10))  # one run in the slot, whoever sent it
    assert rows() == [(SWEEP_TASK, t0 + dt.timedelta(seconds=10), "late", 1)]


def test_a_late_runs_retry_keeps_the_slot_it_took(any_db, database_clock):
    t0, move_to = database_clock.t0, database_clock.move_to
    move_to(7)
    assert claimed(sent(t0, "late", 0))
    move_to(8)
    assert claimed(sent(t0, "late", 0))  # its retry (the same task id), in the same slot
    assert rows() == [(SWEEP_TASK, t0 + dt.timedelta(seconds=5), "late", 0)]


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
    assert claimed(slot(SWEEP_TASK, "first"))
    assert run_sweep(slot=slot(SWEEP_TASK, "second")) == 0
    assert is_parked(parked) and published == []
    assert rows()[0][3] == 1  # the refusal is counted (committed although nothing else was)
    assert run_sweep(slot=slot(SWEEP_TASK, "next", START + dt.timedelta(seconds=5))) == 1
    assert not is_parked(parked)


def test_a_sweep_without_a_slot_always_runs(parked, published):
    assert claimed(slot(SWEEP_TASK, "beat's"))
    assert run_sweep() == 1
    assert [d.delivery_id for d in published] == [parked]
    assert len(rows()) == 1  # it claimed nothing


def test_a_failed_sweep_leaves_its_slot_to_the_next_send(parked, monkeypatch):
    from webhooks.services import sweep as sweep_module

    def broken(*args, **kwargs):
        raise RuntimeError("the sweep failed")

    monkeypatch.setattr(sweep_module, "sweep", broken)
    with pytest.raises(RuntimeError):
        run_sweep(slot=slot(SWEEP_TASK, "failed"))
    monkeypatch.undo()
    assert rows() == []  # the claim went with the sweep's transaction
    assert run_sweep(slot=slot(SWEEP_TASK, "again")) == 1


def test_a_late_sweep_still_sweeps_and_a_pile_of_them_sweeps_once(parked, published,
                                                                  database_clock):
    """Slow workers delay the sweep's recovery and never cancel it."""
    database_clock.move_to(12.3)  # the sweeps sent for 0 and 5 both start in slot 10
    assert run_sweep(slot=sent(database_clock.t0, "late-0", 0)) == 1
    assert [d.delivery_id for d in published] == [parked]
    with session_scope() as session:
        outbox.park(session, [parked])  # lost again
    assert run_sweep(slot=sent(database_clock.t0, "late-5", 5)) == 0
    assert is_parked(parked)
    database_clock.move_to(15.2)
    assert run_sweep(slot=sent(database_clock.t0, "late-10", 10)) == 1
    assert not is_parked(parked)


@pytest.fixture
def queued(any_db, published, monkeypatch):
    """A delivery whose message is in the queue (published, not yet taken), and its due
    time; WEBHOOKS_RECOVER_AFTER is 5 s."""
    from webhooks.config import reset_settings_cache
    from webhooks.emit import emit_event

    monkeypatch.setenv("WEBHOOKS_RECOVER_AFTER", "5")
    reset_settings_cache()
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    delivery_id = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
    published.clear()
    with session_scope() as session:
        return delivery_id, session.get(Delivery, delivery_id).next_attempt_at


def test_a_late_sweep_judges_lost_messages_by_when_it_was_sent(queued, published,
                                                               database_clock):
    """A message published after the sweep's own is still queued behind it, not lost: a
    late sweep sent it again (every queued one, under load)."""
    delivery_id, due = queued
    database_clock.at = due + dt.timedelta(seconds=12)  # 12 s overdue: over recover-after
    sent_before_it = Slot(SWEEP_TASK, slot_start(due, 5) - dt.timedelta(seconds=5), "late", 5)
    assert run_sweep(slot=sent_before_it) == 0
    assert published == []
    database_clock.at += dt.timedelta(seconds=5)  # the next slot (the late run took this one)
    next_one = Slot(SWEEP_TASK, slot_start(database_clock.at, 5), "on-time", 5)
    assert run_sweep(slot=next_one) == 1  # sent after it: it was lost
    assert [d.delivery_id for d in published] == [delivery_id]


def test_a_purge_sent_for_a_slot_another_run_has_deletes_nothing(any_db):
    from tests.test_retention import add_delivery

    account_id, _ = make_account()
    subscription = (account_id, make_subscription(account_id, "https://e.example.com/").id)
    add_delivery(subscription, utcnow() - dt.timedelta(days=40), "done")

    def purge(run_id):
        return retention.run_scheduled(get_engine(), retention_days=30, batch=10, seconds=5,
                                       slot=slot(PURGE_TASK, run_id))

    assert claimed(slot(PURGE_TASK, "first"))
    assert purge("second").deliveries == 0
    assert purge("first").deliveries == 1  # the first run's retry keeps the slot


# ---------------------------------------------------------------- the tasks, as beat sends them


def test_the_tasks_run_once_per_slot_beat_names_and_always_without_one(
        parked, published, monkeypatch):
    from webhooks.config import reset_settings_cache
    from worker import tasks

    for name in ("WEBHOOKS_SWEEP_INTERVAL", "WEBHOOKS_PURGE_INTERVAL"):
        monkeypatch.setenv(name, str(HOUR))  # the slot cannot end while the test runs
    reset_settings_cache()
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


def test_the_tasks_beat_sent_run_when_they_start_late(parked, published, database_clock,
                                                     monkeypatch):
    from webhooks.config import reset_settings_cache
    from worker import tasks

    for name in ("WEBHOOKS_SWEEP_INTERVAL", "WEBHOOKS_PURGE_INTERVAL"):
        monkeypatch.setenv(name, "5")
    reset_settings_cache()
    database_clock.move_to(12.3)
    slot = database_clock.t0.isoformat()  # two slots ago
    tasks.sweep.apply(kwargs={"slot": slot}).get()
    tasks.purge.apply(kwargs={"slot": slot}).get()
    assert [d.delivery_id for d in published] == [parked]
    now = database_clock.t0 + dt.timedelta(seconds=10)
    assert [(task, start, refused) for task, start, _, refused in rows()] == \
        [(PURGE_TASK, now, 0), (SWEEP_TASK, now, 0)]


# ---------------------------------------------------------------- claims at once (PostgreSQL)


@pytest.mark.parametrize("first_commits", [True, False])
def test_a_claim_waits_for_an_uncommitted_claim_of_its_slot(db, first_commits):
    """Refused once the first commits; claimed if the first rolls back (a sweep that failed)."""
    engine = get_engine()
    outcome = []
    with engine.connect() as first:
        transaction = first.begin()
        assert claim(first, slot(SWEEP_TASK, "first"))
        second = threading.Thread(
            target=lambda: outcome.append(claimed(slot(SWEEP_TASK, "second"))))
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



@pytest.mark.process
def test_a_worker_whose_clock_is_90_s_ahead_runs_the_slot_beat_sent(db):
    """Lateness is judged by the database's clock: Celery's ``expires``, judged by the
    worker's own, dropped every sweep on the cluster's skewed worker host."""
    import os
    import subprocess
    import sys

    from tests.support.celeryconf import ROOT
    from webhooks.broker.slots import slot_start
    from webhooks.storage import clock

    library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
    if not os.path.exists(library):
        pytest.skip("libfaketime is not installed (Debian package faketime)")
    left = 60 - (clock.now() - slot_start(clock.now(), 60)).total_seconds()
    if left < 10:  # the slot must not end while the process starts
        time.sleep(left + 0.1)
    now = slot_start(clock.now(), 60)  # beat's slot of a minute, sent as it began
    script = ("import sys; from webhooks.storage.db import get_engine; "
              "from webhooks.storage.scheduled_runs import Slot, claim\n"
              "with get_engine().begin() as connection:\n"
              "    print(claim(connection, Slot('webhooks.sweep', "
              "__import__('datetime').datetime.fromisoformat(sys.argv[1]), 'skewed', 60)))")
    env = {**os.environ, "WEBHOOKS_DATABASE_URL": db, "LD_PRELOAD": library,
           "FAKETIME": "+90s", "FAKETIME_DONT_RESET": "1"}
    out = subprocess.run([sys.executable, "-c", script, now.isoformat()], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True"], out.stderr
    assert rows() == [(SWEEP_TASK, now, "skewed", 0)]
