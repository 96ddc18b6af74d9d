"""Beat's slot schedule (webhooks/broker/slots.py): one send per slot of the database's
clock, at its start, naming the slot; its schedule file stays Celery's own. And beat's
sends taken late by slow workers, claimed on both engines (webhooks/storage/scheduled_runs.py)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest
from celery import Celery

from sqlalchemy import select

from webhooks.broker.celery_app import PrivateScheduler
from webhooks.broker.slots import SLOT_MARGIN_S, SlotSchedule, slot_start
from webhooks.storage import clock as database_clock
from webhooks.storage.db import get_engine
from webhooks.storage.models import ScheduledRun
from webhooks.storage.scheduled_runs import Slot, claim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0 = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.timezone.utc)


class FakeClock:
    """The database's clock as the schedule reads it, moved by the test."""

    def __init__(self, at: dt.datetime):
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("moment, seconds, start", [
    (T0 + dt.timedelta(seconds=3.7), 5, T0),
    (T0 + dt.timedelta(seconds=5), 5, T0 + dt.timedelta(seconds=5)),
    (T0 - dt.timedelta(microseconds=1), 5, T0 - dt.timedelta(seconds=5)),
    (T0 + dt.timedelta(seconds=1.3), 0.5, T0 + dt.timedelta(seconds=1)),
    (T0 + dt.timedelta(seconds=59.9), 60, T0),
])
def test_a_slot_starts_at_a_multiple_of_its_length_since_the_epoch(moment, seconds, start):
    assert slot_start(moment, seconds) == start


def test_every_moment_of_a_slot_names_the_same_start_whatever_its_time_zone():
    paris = dt.timezone(dt.timedelta(hours=1))
    moments = [T0 + dt.timedelta(seconds=2.5 + i * 0.001) for i in range(2500)]
    assert {slot_start(m, 2.5) for m in moments} == {T0 + dt.timedelta(seconds=2.5)}
    assert slot_start((T0 + dt.timedelta(seconds=3)).astimezone(paris), 2.5) == \
        T0 + dt.timedelta(seconds=2.5)


def test_due_when_the_last_send_was_in_another_slot_and_checked_again_as_the_next_starts():
    clock = FakeClock(T0 + dt.timedelta(seconds=3))
    every = SlotSchedule(10, nowfun=clock)
    until_next = 7 + SLOT_MARGIN_S
    assert tuple(every.is_due(T0 - dt.timedelta(seconds=5))) == (True, pytest.approx(until_next))
    assert tuple(every.is_due(T0 + dt.timedelta(seconds=0.5))) == (False, pytest.approx(until_next))
    # Sent by a beat whose clock was ahead: another slot, so due (never stuck until then).
    assert every.is_due(T0 + dt.timedelta(seconds=95)).is_due
    assert every.remaining_estimate(T0 + dt.timedelta(seconds=1)) == \
        dt.timedelta(seconds=until_next)


@pytest.fixture
def beat(tmp_path, monkeypatch):
    """A PrivateScheduler on a fake clock whose one entry is a slot schedule of 10 s; the
    tasks it sends are collected instead of published."""
    clock = FakeClock(T0 + dt.timedelta(seconds=3))
    app = Celery("slots-test", broker="memory://")
    app.conf.beat_schedule = {"every-10": {"task": "tests.periodic",
                                           "schedule": SlotSchedule(10, nowfun=clock)}}
    scheduler = PrivateScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
    sent = []
    monkeypatch.setattr(scheduler, "send_task",
                        lambda name, args, kwargs, **options: sent.append(kwargs))
    yield scheduler, clock, sent
    scheduler.close()


def test_beat_sends_once_per_slot_at_its_start_naming_the_slot(beat):
    scheduler, clock, sent = beat
    wakes = []
    while clock.at < T0 + dt.timedelta(seconds=45):
        delay = scheduler.tick()
        if delay:  # beat sleeps this long
            clock.advance(delay)
            wakes.append(clock.at)
    # A fresh schedule's first send is at the next slot's start, then one per slot.
    assert sent == [{"slot": (T0 + dt.timedelta(seconds=s)).isoformat()} for s in (10, 20, 30, 40)]
    assert all(0 < (wake - slot_start(wake, 10)).total_seconds() <= SLOT_MARGIN_S
               for wake in wakes[:4])


@pytest.mark.process
def test_the_schedule_file_keeps_celery_classes_and_memory_the_slot_schedule(beat, tmp_path):
    scheduler, clock, sent = beat
    clock.advance(7.1)
    scheduler.tick()
    scheduler.sync()  # shelve's writeback re-reads what it wrote after a sync
    assert isinstance(scheduler.schedule["every-10"].schedule, SlotSchedule)
    assert scheduler.schedule["every-10"].kwargs == {}  # the slot went on a copy
    scheduler.close()
    # Read where this project cannot be imported, as a rolled-back release's beat would.
    script = ("import sys, shelve; sys.modules['webhooks'] = None; "
              "entry = shelve.open(sys.argv[1])['entries']['every-10']; "
              "print(type(entry.schedule).__module__, entry.schedule.seconds, entry.kwargs)")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "schedule")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["celery.schedules", "10.0", "{}"]


def test_a_restarted_beat_whose_file_is_older_than_its_last_send_sends_the_slot_again(
        beat, tmp_path):
    """beat syncs its file at its first send and then every 3 minutes: killed later, it
    restarts with an older last run, and sends the current slot at once (which the run's
    claim then refuses: tests/test_beat_restarts.py)."""
    scheduler, clock, sent = beat
    scheduler.apply_async(scheduler.schedule["every-10"])  # the synced send, slot T0
    scheduler.close()
    app = scheduler.app
    clock.advance(10)  # killed in the next slot, after sending it (not synced)
    restarted = PrivateScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
    again = []
    restarted.send_task = lambda name, args, kwargs, **options: again.append(kwargs)
    restarted.tick()
    restarted.close()
    assert again == [{"slot": (T0 + dt.timedelta(seconds=10)).isoformat()}]


@pytest.mark.process
def test_celeryconfig_schedules_the_sweep_the_purge_and_the_partitions_by_slots():
    script = ("import celeryconfig, json; print(json.dumps({name: [type(entry['schedule']).__name__, "
              "entry['schedule'].seconds] for name, entry in celeryconfig.beat_schedule.items()}))")
    env = {**os.environ, "WEBHOOKS_RETENTION_DAYS": "30", "WEBHOOKS_SWEEP_INTERVAL": "7",
           "WEBHOOKS_PURGE_INTERVAL": "120"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == \
        '{"webhooks-sweep": ["SlotSchedule", 7.0], "webhooks-purge": ["SlotSchedule", 120.0], ' \
        '"webhooks-partitions": ["SlotSchedule", 3600.0]}'



def test_a_send_decided_just_before_a_slot_starts_names_the_slot_beat_records(tmp_path):
    """The clock moves on between beat's decision and the send: the send names the slot of
    the time beat records as its last run, so no slot is sent twice (one was, when the
    slot was read again at the send). Each start just before a slot's start is tried."""
    for start_ms in range(9900, 10000, 2):
        moving = FakeClock(T0 + dt.timedelta(milliseconds=start_ms))

        def now():  # every reading of the clock moves it on by 4 ms
            moving.advance(0.004)
            return moving.at

        app = Celery("slots-test", broker="memory://")
        app.conf.beat_schedule = {"every-10": {"task": "tests.periodic",
                                               "schedule": SlotSchedule(10, nowfun=now)}}
        scheduler = PrivateScheduler(app=app, schedule_filename=str(tmp_path / f"s{start_ms}"))
        sent = []
        scheduler.send_task = lambda name, args, kwargs, **options: sent.append(kwargs["slot"])
        scheduler.schedule["every-10"].last_run_at = T0 - dt.timedelta(seconds=5)
        while moving.at < T0 + dt.timedelta(seconds=25):
            delay = scheduler.tick()
            if delay:
                moving.advance(delay)
        scheduler.close()
        assert len(sent) == len(set(sent)) >= 2, (start_ms, sent)


# ---------------------------------------------------------------- beat's sends, taken late

# When the workers take the run beat sent for each slot (seconds after T0, by slot start):
# late behind a backlog, in a pile after a stall, on time again.
TAKEN_AT = {10: 10.5,                  # on time
            20: 31.0, 30: 33.0,        # 20 late (takes slot 30); 30's own run then refused
            40: 52.0, 50: 64.0,        # late, one behind the other (take 50, then 60)
            60: 95.0, 70: 95.1, 80: 95.2, 90: 95.3,  # a stall: the pile takes slot 90 once
            100: 100.5,                # on time
            110: 125.0, 120: 125.1}    # late (takes 120); 120's own run then refused


def test_runs_taken_late_still_run_once_in_each_slot_they_start_in(beat, any_db, monkeypatch):
    """A slow machine delays the periodic runs and never cancels them: a run that starts
    after its slot ended runs unless a run of its slot or a later one has been made, and
    no slot runs twice. The claims read the same (fake) clock as beat."""
    scheduler, clock, sent = beat
    while clock.at < T0 + dt.timedelta(seconds=125):
        clock.advance(scheduler.tick() or 0.001)
    assert [dt.datetime.fromisoformat(kwargs["slot"]) for kwargs in sent] == \
        [T0 + dt.timedelta(seconds=s) for s in TAKEN_AT]
    monkeypatch.setattr(database_clock, "now", clock)
    made, ran = set(), {}
    for kwargs in sorted(sent, key=lambda kwargs: _taken_at(kwargs["slot"])):
        clock.at = _taken_at(kwargs["slot"])
        own = dt.datetime.fromisoformat(kwargs["slot"])
        run = Slot.sent("tests.periodic", kwargs["slot"], f"run-{own:%M%S}", 10)
        with get_engine().begin() as connection:
            ran[own] = claim(connection, run)
        if not any(start >= own for start in made):
            assert ran[own], f"the run of {own} was cancelled although no later run was made"
        made |= _claimed_slots()
    assert sorted(_offset(start) for start in made) == [10, 30, 50, 60, 90, 100, 120]
    assert [_offset(own) for own, has in ran.items() if has] == [10, 20, 40, 50, 60, 100, 110]
    # Each slot in which a run started has exactly one run (the table's key: never two).
    started_in = {slot_start(_taken_at(kwargs["slot"]), 10) for kwargs in sent}
    assert started_in == made


def _taken_at(slot: str) -> dt.datetime:
    return T0 + dt.timedelta(seconds=TAKEN_AT[_offset(dt.datetime.fromisoformat(slot))])


def _offset(start: dt.datetime) -> int:
    return round((start - T0).total_seconds())


def _claimed_slots() -> set[dt.datetime]:
    with get_engine().connect() as connection:
        return set(connection.execute(select(ScheduledRun.slot_start)).scalars())

