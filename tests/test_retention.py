"""Retention (webhooks/lifecycle/retention.py, `webhooks db purge`): what goes, what stays, in batches."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import func, insert, select

from tests.factories import make_account, make_subscription
from webhooks.lifecycle import retention
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import (Attempt, AttemptHour, Delivery, Event, OrderingKey, new_id,
                                      utcnow)
from webhooks.storage.rollup import count_attempt, floor_hour

NOW = dt.datetime(2026, 9, 1, 12, 30, tzinfo=dt.timezone.utc)
OLD = NOW - dt.timedelta(days=31)  # before the 30-day cut-off
RECENT = NOW - dt.timedelta(days=29)


@pytest.fixture
def subscription(any_db):
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook").id


def add_event(account_id: str, created_at: dt.datetime) -> str:
    event_id = new_id()
    with session_scope() as session:
        session.execute(insert(Event).values(
            id=event_id, account_id=account_id, type="email.sent", version="2026-07-30",
            idempotency_key=None, body=b"{}", created_at=created_at))
    return event_id


def add_delivery(subscription, created_at: dt.datetime, status: str, *, attempts: int = 1,
                 event_id: str | None = None, replay_of: str | None = None) -> str:
    """A delivery (and its own event unless given) with ``attempts`` attempt rows."""
    account_id, subscription_id = subscription
    event_id = event_id or add_event(account_id, created_at)
    delivery_id = new_id()
    with session_scope() as session:
        session.execute(insert(Delivery).values(
            id=delivery_id, account_id=account_id, event_id=event_id,
            subscription_id=subscription_id, event_type="email.sent", status=status,
            attempt_count=attempts, next_attempt_at=None, parked=False, replay_of=replay_of,
            created_at=created_at, updated_at=created_at))
        for number in range(1, attempts + 1):
            started = created_at + dt.timedelta(seconds=number)
            session.execute(insert(Attempt).values(
                delivery_id=delivery_id, number=number, started_at=started, duration_ms=10,
                status_code=500, error=None, outcome="retry", response_excerpt=None))
            count_attempt(session.connection(), delivery_id=delivery_id,
                          subscription_id=subscription_id, started_at=started, outcome="retry",
                          duration_ms=10)
    return delivery_id


def purge(days: int = 30, batch: int = 500, **options) -> retention.Purged:
    return retention.purge(get_engine(), retention_days=days, batch=batch, now=NOW, **options)


def exists(model, row_id) -> bool:
    with session_scope() as session:
        return session.get(model, row_id) is not None


def count(model) -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(model))


def test_old_finished_deliveries_go_with_their_attempts_and_events(subscription):
    gone = [add_delivery(subscription, OLD, status, attempts=n)
            for status, n in (("done", 1), ("failed", 2), ("dead", 6))]
    kept = [add_delivery(subscription, OLD, status) for status in ("pending", "sending", "paused")]
    recent = add_delivery(subscription, RECENT, "done")

    purged = purge()

    assert purged.report() == {"events": 3, "deliveries": 3, "attempts": 9}
    assert not any(exists(Delivery, d) for d in gone)
    assert all(exists(Delivery, d) for d in [*kept, recent])
    with session_scope() as session:
        left = session.scalars(select(Attempt.delivery_id)).all()
        events = set(session.scalars(select(Event.id)))
        their_events = set(session.scalars(select(Delivery.event_id)))
    assert sorted(left) == sorted([*kept, recent])  # one attempt each
    assert events == their_events  # the kept deliveries keep their events


def test_an_event_goes_only_when_no_delivery_of_it_is_left(subscription):
    account_id, _ = subscription
    shared = add_event(account_id, OLD)
    done = add_delivery(subscription, OLD, "done", event_id=shared)
    waiting = add_delivery(subscription, OLD, "pending", event_id=shared)
    lonely = add_event(account_id, OLD)  # no subscription wanted it
    fresh_lonely = add_event(account_id, RECENT)

    purged = purge()

    assert (purged.deliveries, purged.events) == (1, 1)
    assert not exists(Delivery, done) and exists(Delivery, waiting)
    assert exists(Event, shared) and not exists(Event, lonely) and exists(Event, fresh_lonely)


def test_an_original_is_kept_while_a_kept_delivery_replays_it(subscription):
    original = add_delivery(subscription, OLD, "dead", attempts=6)
    replay = add_delivery(subscription, RECENT, "pending", replay_of=original)
    old_original = add_delivery(subscription, OLD - dt.timedelta(days=1), "failed")
    old_replay = add_delivery(subscription, OLD, "done", replay_of=old_original)

    purged = purge()

    assert exists(Delivery, original) and exists(Delivery, replay)
    # Both old and finished: the replay goes, then (in the same purge) its original.
    assert not exists(Delivery, old_replay) and not exists(Delivery, old_original)
    assert purged.deliveries == 2


def test_retention_of_0_days_keeps_everything(subscription):
    add_delivery(subscription, OLD - dt.timedelta(days=3000), "done")
    assert purge(days=0).report() == {"events": 0, "deliveries": 0, "attempts": 0}
    assert count(Delivery) == 1


def test_work_goes_in_batches_and_stops_at_the_deadline(subscription):
    for _ in range(5):
        add_delivery(subscription, OLD, "done")
    first = purge(batch=2, deadline=time.monotonic())  # the deadline passed: one batch only
    assert first.deliveries == 2 and count(Delivery) == 3
    rest = purge(batch=2)
    assert rest.deliveries == 3 and count(Delivery) == 0


def test_the_rollup_loses_its_hours_before_the_cut_off_only(subscription):
    add_delivery(subscription, OLD, "pending")  # kept, but its old hour is not
    add_delivery(subscription, RECENT, "pending")
    purged = purge()
    with session_scope() as session:
        hours = session.scalars(select(AttemptHour.hour_start)).all()
    assert purged.attempt_hours == 1
    assert hours == [floor_hour(RECENT + dt.timedelta(seconds=1))]


def test_two_purges_at_once_delete_each_row_once(db):
    subscription = make_account()[0]
    subscription = (subscription, make_subscription(subscription, "https://e.example.com/").id)
    for _ in range(60):
        add_delivery(subscription, OLD, "done", attempts=2)
    results = []
    threads = [threading.Thread(target=lambda: results.append(purge(batch=5))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.deliveries for r in results) == 60
    assert sum(r.attempts for r in results) == 120
    assert count(Delivery) == count(Attempt) == count(Event) == 0


@pytest.mark.process
def test_webhooks_db_purge_prints_what_it_deleted(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")}
    env["WEBHOOKS_DATA_DIR"] = str(tmp_path)

    def run(*args, **extra):
        return subprocess.run([sys.executable, "-m", "webhooks.cli", *args], cwd=tmp_path,
                              env={**env, **extra}, capture_output=True, text=True, timeout=60)

    assert run("db", "upgrade").returncode == 0
    url = f"sqlite:///{tmp_path / 'webhooks.db'}"
    result = run("db", "purge", WEBHOOKS_DATABASE_URL=url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"events": 0, "deliveries": 0, "attempts": 0}
    bad = run("db", "purge", WEBHOOKS_DATABASE_URL=url, WEBHOOKS_RETENTION_DAYS="-1")
    assert bad.returncode == 2 and "WEBHOOKS_RETENTION_DAYS" in bad.stderr


@pytest.mark.process
@pytest.mark.parametrize("days, scheduled", [("30", True), ("0", False)])
def test_the_scheduler_purges_only_while_retention_is_on(tmp_path, days, scheduled):
    """Read in a fresh interpreter, as beat reads celeryconfig."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = ("import celeryconfig, json; "
              "print(json.dumps(celeryconfig.beat_schedule, default=lambda every: every.seconds))")
    env = {**os.environ, "WEBHOOKS_RETENTION_DAYS": days, "WEBHOOKS_AUDIT_RETENTION_DAYS": days,
           "WEBHOOKS_PURGE_INTERVAL": "120",
           "WEBHOOKS_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    schedule = json.loads(out.stdout)
    assert ("webhooks-purge" in schedule) is scheduled
    if scheduled:
        assert schedule["webhooks-purge"]["task"] == "webhooks.purge"
        assert schedule["webhooks-purge"]["schedule"] == 120
        assert schedule["webhooks-purge"]["options"]["queue"] == "webhooks.maintenance"


def test_a_scheduled_run_does_nothing_while_another_one_runs(db):
    account_id, _ = make_account()
    subscription = (account_id, make_subscription(account_id, "https://e.example.com/").id)
    add_delivery(subscription, utcnow() - dt.timedelta(days=40), "done")
    engine = get_engine()

    def scheduled():
        return retention.run_scheduled(engine, retention_days=30, batch=10, seconds=5)

    with engine.connect() as other_run:
        other_run.execute(select(func.pg_advisory_lock(retention.RUN_LOCK_KEY)))
        assert scheduled().rows == 0
        other_run.execute(select(func.pg_advisory_unlock(retention.RUN_LOCK_KEY)))
        other_run.commit()
    assert scheduled().deliveries == 1


# ---------------------------------------------------------------- the purge's own queue


def test_the_purge_travels_on_its_own_queue_and_deliveries_and_the_sweep_do_not():
    from webhooks.broker.celery_app import (DELIVER_TASK, DELIVERY_QUEUE, MAINTENANCE_QUEUE, PURGE_TASK,
                                SWEEP_TASK, get_app)

    router = get_app().amqp.router
    assert router.route({}, PURGE_TASK)["queue"].name == MAINTENANCE_QUEUE
    for task in (DELIVER_TASK, SWEEP_TASK):
        assert router.route({}, task)["queue"].name == DELIVERY_QUEUE


def test_the_procfile_and_webhooks_dev_run_workers_of_both_queues():
    from pathlib import Path

    from webhooks.cli.devserver import process_specs

    procfile = (Path(__file__).resolve().parents[1] / "Procfile").read_text()
    (worker_line,) = [line for line in procfile.splitlines() if line.startswith("worker:")]
    assert "--queues webhooks,webhooks.maintenance" in worker_line
    dev_worker = dict(process_specs(host="127.0.0.1", port=5000))["worker"]
    assert dev_worker[dev_worker.index("--queues") + 1] == "webhooks,webhooks.maintenance"


@pytest.mark.process
def test_a_worker_started_for_the_delivery_queue_alone_still_runs_the_purge(db, redis_broker):
    """A worker run with ``--queues webhooks`` (the Procfile's line before this queue) takes
    the maintenance queue too: otherwise nothing would purge."""
    from tests.support.services import REDIS_URL
    from tests.support.worker import WorkerProcess
    from webhooks.broker.celery_app import PURGE_TASK, get_app

    account_id, _ = make_account()
    subscription = (account_id, make_subscription(account_id, "https://e.example.com/").id)
    old = utcnow() - dt.timedelta(days=40)
    gone, kept = add_delivery(subscription, old, "done"), add_delivery(subscription, old, "pending")
    worker = WorkerProcess({"WEBHOOKS_DATABASE_URL": db, "WEBHOOKS_BROKER_URL": REDIS_URL,
                            "WEBHOOKS_RETENTION_DAYS": "30"},
                           pool="threads", concurrency=2, beat=False, queues="webhooks").start()
    try:
        get_app().send_task(PURGE_TASK)  # routed as beat sends it: onto webhooks.maintenance
        deadline = time.monotonic() + 30
        while exists(Delivery, gone) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not exists(Delivery, gone), worker.log()
    finally:
        worker.stop()
    assert exists(Delivery, kept)


# ---- ordering keys (lifecycle/ordering.py): a key's row goes once nothing unfinished needs it

@pytest.fixture
def two_subscriptions(any_db, published):
    account_id, _ = make_account()
    return account_id, [make_subscription(account_id, f"https://example.com/{name}").id
                        for name in ("a", "b")]


def emit_keyed(account_id: str, key: str) -> list[str]:
    """One event with ``key``; its deliveries' ids, one per subscription, in their order."""
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data

    ids = emit_event(account_id, "email.sent", sample_data("email.sent"), ordering_key=key).delivery_ids
    with session_scope() as session:
        by_subscription = {d.subscription_id: d.id for d in session.scalars(
            select(Delivery).where(Delivery.id.in_(ids)))}
    return [by_subscription[s] for s in sorted(by_subscription)]


def settle(ids: list[str], status: str, created_at: dt.datetime = OLD) -> None:
    """Make these deliveries ``status``, created at ``created_at`` (the test's clock)."""
    with session_scope() as session:
        session.execute(Delivery.__table__.update().where(Delivery.id.in_(ids)).values(
            status=status, created_at=created_at, updated_at=created_at))


def key_rows(account_id: str) -> dict[str, int]:
    with session_scope() as session:
        return dict(session.execute(select(OrderingKey.ordering_key, OrderingKey.last_sequence)
                                    .where(OrderingKey.account_id == account_id)).all())


def claimable(delivery_id: str) -> bool:
    from webhooks.lifecycle.claim import claim

    with get_engine().begin() as connection:
        return claim(connection, delivery_id, 0, utcnow()) is not None


def test_a_key_row_goes_with_its_old_deliveries_only_once_none_of_the_key_is_unfinished(
        two_subscriptions):
    account_id, _ = two_subscriptions
    settle(emit_keyed(account_id, "idle"), "done")  # 1: old, finished on both subscriptions
    settle(emit_keyed(account_id, "live"), "dead")  # 1: old, finished
    on_a, on_b = emit_keyed(account_id, "live")  # 2: finished on a, still pending on b
    settle([on_a], "done", RECENT)
    settle(emit_keyed(account_id, "recent"), "done", RECENT)  # nothing old to purge
    assert key_rows(account_id) == {"idle": 1, "live": 2, "recent": 1}

    purged = purge()
    assert purged.deliveries == 4 and purged.ordering_keys == 1
    # "live" keeps its numbers while its delivery on b is unfinished.
    assert key_rows(account_id) == {"live": 2, "recent": 1}

    # The next event of the purged key starts again at 1, ahead of nothing; the one
    # after it waits for it, on each subscription.
    first, second = emit_keyed(account_id, "idle"), emit_keyed(account_id, "idle")
    assert key_rows(account_id)["idle"] == 2
    assert [claimable(d) for d in second] == [False, False]
    assert [claimable(d) for d in first] == [True, True]
    # The kept key goes on from 2: its new event on b waits for the pending one before it.
    later_a, later_b = emit_keyed(account_id, "live")
    assert key_rows(account_id)["live"] == 3
    assert claimable(later_a) and not claimable(later_b)
    assert claimable(on_b)


def test_a_key_row_stays_while_its_last_unfinished_delivery_is_old(two_subscriptions):
    account_id, _ = two_subscriptions
    settle(emit_keyed(account_id, "slow")[:1], "done")  # b's delivery: old but pending
    purged = purge()
    assert purged.deliveries == 1 and purged.ordering_keys == 0
    assert key_rows(account_id) == {"slow": 1}


def test_a_purge_keeps_the_row_of_a_key_that_an_emit_holds(db, published):
    from webhooks.lifecycle import ordering

    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    old = emit_keyed(account_id, "busy")
    settle(old, "done")
    with get_engine().begin() as emitting:  # an emit of the key, not yet committed
        assert ordering.next_sequence(emitting, account_id, "busy") == 2
        purged = purge()  # does not wait for the emitter's row lock: it skips the row
    assert purged.deliveries == 1 and purged.ordering_keys == 0
    assert key_rows(account_id) == {"busy": 2}
