"""The sweep runs once per interval whatever beat does: the real scheduler process (the
Procfile's ``celery -A worker beat``) killed and restarted several times within one
interval, then run twice at once, with a real worker on PostgreSQL and Redis. A resume's
sweep, which names no slot, still runs while the beat's slots are taken.

Each send is followed by its Celery task id: from the beat's log (DEBUG: "webhooks.sweep
sent. id->X") to the worker's (DEBUG: "run X has slot S" when it ran; INFO: "... this one
(X) does nothing" when refused), and the slots against ``scheduled_runs``. Each beat starts
from a schedule file older than its slot, as a beat killed a while after its last sync
finds it, so it sends the slot it is in at once.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from tests.factories import AUDIT_ACTOR, make_account, make_subscription
from tests.support.services import PG_URL, REDIS_URL
from tests.support.stack import use_env, wait_until
from tests.support.worker import BeatProcess, WorkerProcess, empty_broker
from webhooks.storage.db import get_engine
from webhooks.storage.models import ScheduledRun

pytestmark = pytest.mark.integration

# Long enough for several restarts of beat within one slot on the shared 2-core machine.
INTERVAL_S = 15
ENV = {
    "WEBHOOKS_DATABASE_URL": PG_URL,
    "WEBHOOKS_BROKER_URL": REDIS_URL,
    "WEBHOOKS_SWEEP_INTERVAL": str(INTERVAL_S),
    "WEBHOOKS_RETENTION_DAYS": "0",  # the sweep alone on the schedule
    "WEBHOOKS_AUDIT_RETENTION_DAYS": "0",
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
}
RAN = re.compile(r"webhooks\.sweep: run (\S+) has slot (\S+)\"")
REFUSED = re.compile(r"webhooks\.sweep: the run of slot (\S+) was made already \(by \S+\); "
                     r"this one \((\S+)\) does nothing")


@pytest.fixture(scope="module")
def worker(postgres):
    empty_broker()
    process = WorkerProcess(ENV, pool="threads", concurrency=4, beat=False,
                            loglevel="DEBUG").start()
    yield process
    process.stop()


@pytest.fixture
def stack(worker, db, monkeypatch, tmp_path):
    use_env(monkeypatch, ENV)
    stale = stale_schedule(tmp_path / "stale" / "schedule")
    beats = []

    def beat(name: str) -> BeatProcess:
        """A beat started from the stale schedule file (its own copy)."""
        for part in stale.parent.iterdir():
            shutil.copy2(part, tmp_path / part.name.replace("schedule", name))
        process = BeatProcess(ENV, tmp_path / name, tmp_path / f"{name}.log")
        beats.append(process)
        return process.start()

    yield worker, beat, beats
    for process in beats:
        process.kill()


def stale_schedule(path: Path) -> Path:
    """beat's schedule file as a beat killed a while after its last sync leaves it: its
    last sweep a day ago (beat syncs at its first send, then every 3 minutes)."""
    from webhooks.broker.celery_app import PrivateScheduler, get_app
    from webhooks.storage import clock

    path.parent.mkdir()
    scheduler = PrivateScheduler(app=get_app(), schedule_filename=str(path))
    scheduler.schedule["webhooks-sweep"].last_run_at = clock.now() - dt.timedelta(days=1)
    scheduler.close()
    return path


def outcomes(worker) -> dict[str, tuple[str, str]]:
    """Task id -> ("ran" or "refused", slot), from the worker's log."""
    log = worker.log_path.read_text(errors="replace")
    found = {run_id: ("ran", slot) for run_id, slot in RAN.findall(log)}
    found.update({run_id: ("refused", slot) for slot, run_id in REFUSED.findall(log)})
    return found


def table() -> dict[str, int]:
    """Slot start (ISO) -> sends refused, from scheduled_runs."""
    with get_engine().connect() as connection:
        return {start.isoformat(): refused for start, refused in connection.execute(
            select(ScheduledRun.slot_start, ScheduledRun.refused))}


def sent_once(process: BeatProcess, count: int = 1) -> list[str]:
    return wait_until(lambda: len(process.sent()) >= count and process.sent(), 60,
                      what=f"{count} sends of the beat")


def test_restarts_within_one_interval_and_two_beats_run_each_slot_once(stack):
    from webhooks.broker.slots import slot_start
    from webhooks.storage import clock

    worker, beat, beats = stack
    now = clock.now()  # start as a slot begins: the restarts have the whole slot
    time.sleep((slot_start(now, INTERVAL_S) + dt.timedelta(seconds=INTERVAL_S) - now)
               .total_seconds() + 0.05)
    first = beat("first")
    (first_send,) = sent_once(first)  # a stale file: sent at once, for this slot
    first.kill()
    restarts = []
    for number in range(3):  # killed and restarted, three times, quickly
        restarted = beat(f"restart-{number}")
        restarts += sent_once(restarted)  # sent at once again, for the slot it is in
        restarted.kill()
    pair = [beat("one"), beat("two")]  # two beats by mistake: at once, then at a slot's start
    for process in pair:  # both run until each has sent twice, then both stop together
        sent_once(process, 2)
    for process in pair:
        process.kill()

    sends = [run_id for process in beats for run_id in process.sent()]
    wait_until(lambda: set(sends) <= set(outcomes(worker)), 60, what="every send to be run")
    seen = outcomes(worker)
    ran = Counter(slot for run_id, (what, slot) in seen.items() if what == "ran")
    refused = Counter(slot for run_id, (what, slot) in seen.items() if what == "refused")
    assert set(seen) == set(sends)  # no send lost, none run twice
    assert set(ran.values()) == {1}, ran  # each slot ran once
    assert table() == {slot: refused[slot] for slot in ran}
    first_slot = seen[first_send][1]
    within = [run_id for run_id in restarts if seen[run_id][1] == first_slot]
    assert within and all(seen[run_id][0] == "refused" for run_id in within), (seen, restarts)
    both = shared_slots([[seen[run_id] for run_id in process.sent()[1:]] for process in pair])
    assert both, [process.sent() for process in pair]  # the two beats met at a slot's start
    for slot, whats in both.items():  # one of the two ran it, the other was refused
        assert sorted(whats) == ["ran", "refused"], (slot, whats)


def shared_slots(per_beat: list[list[tuple[str, str]]]) -> dict[str, list[str]]:
    """Slot -> outcomes, for the slots that both beats sent at a slot's start (a beat waited
    on while the other runs may send one slot more than the other)."""
    slots = [{slot: what for what, slot in outcomes_of_one} for outcomes_of_one in per_beat]
    return {slot: [slots[0][slot], slots[1][slot]] for slot in slots[0].keys() & slots[1].keys()}


def test_a_resumes_sweep_runs_while_the_beats_slots_are_taken(stack, receiver):
    """No beat runs and every slot of the next minutes is claimed: only the sweep the
    resume asks for (no slot) can send what the resume released."""
    from webhooks.broker.slots import slot_start
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data
    from webhooks.services import pausing
    from webhooks.storage import clock
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Subscription

    account_id, _ = make_account()
    subscription = make_subscription(account_id, receiver.url("/hook"), status="paused")
    emitted = emit_event(account_id, "email.sent", sample_data("email.sent"))
    now = slot_start(clock.now(), INTERVAL_S)
    with get_engine().begin() as connection:  # as beat's runs claim them
        for n in range(-1, 30):
            start = now + dt.timedelta(seconds=n * INTERVAL_S)
            connection.execute(insert(ScheduledRun).values(
                task="webhooks.sweep", slot_start=start, run_id="beat's", claimed_at=start,
                refused=0))
    claimed = table()
    with session_scope() as session:
        assert pausing.resume(session, session.get(Subscription, subscription.id),
                              actor=AUDIT_ACTOR) == 1
    wait_until(lambda: receiver.received("/hook"), 30, what="the released delivery")
    assert receiver.received("/hook")[0].headers["X-Service-Event-Id"] == emitted.id
    assert table() == claimed  # the resume's sweep claimed and was refused nothing
