"""The broker loses everything (FLUSHDB: a Redis that kept nothing), or cannot be reached
when emit_event() is called: deliveries are delayed, never lost."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis

from tests.support.fastreceiver import Status
from tests.support.ledger import account, missing_arrivals, report
from tests.support.services import REDIS_URL
from tests.support.stack import wait_until
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.samples import sample_data

from .helpers import Clock, emit_many, first_time, make_account, make_subscription, status_counts, statuses

pytestmark = [pytest.mark.fault, pytest.mark.integration]


def _parked(ids) -> bool:
    from webhooks.storage.db import get_engine
    from sqlalchemy import text

    with get_engine().connect() as connection:
        rows = connection.execute(
            text("SELECT status, parked FROM deliveries WHERE id = ANY(:ids)"), {"ids": list(ids)}
        ).all()
    return len(rows) == len(ids) and all(row == ("pending", True) for row in rows)


def test_broker_flushed_with_deliveries_pending_waiting_and_parked(stack, fault_receiver, monkeypatch):
    """Deliveries in the three states the broker could hold them in, then FLUSHDB.

    - waiting: attempt 1 failed, the retry rode a countdown (the worker is
      stopped, which hands held countdowns back to the broker: all in Redis);
    - parked: emitted while the broker was refused (pending, parked in the database);
    - pending: freshly emitted, their messages queued in Redis.
    The flush leaves Redis empty; the restarted worker's sweep sends all 30.
    """
    clock = Clock()
    fault_receiver.rule("/waiting", first_time(500))
    account_id, _ = make_account()
    make_subscription(account_id, fault_receiver.url("/waiting"), ["email.sent"])
    make_subscription(account_id, fault_receiver.url("/parked"), ["email.opened"])
    make_subscription(account_id, fault_receiver.url("/fresh"), ["email.clicked"])

    waiting = emit_many(account_id, 10, "email.sent")
    wait_until(lambda: fault_receiver.count("/waiting") == 10
               and set(statuses(waiting).values()) == {"pending"}, what="10 first attempts failed")
    stack.stop()  # warm shutdown: the held countdowns go back to Redis

    monkeypatch.setattr(outbox, "_broker_down_until", time.monotonic() + 3600)
    parked = emit_many(account_id, 10, "email.opened")
    assert _parked(parked)
    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)
    fresh = emit_many(account_id, 10, "email.clicked")

    client = redis.Redis.from_url(REDIS_URL)
    held = client.dbsize()
    assert held > 0
    client.flushdb()
    assert client.dbsize() == 0
    stack.start()
    wait_until(lambda: status_counts()["done"] == 30, timeout=40, what="all 30 done after the flush")

    arrivals = fault_receiver.arrivals()
    result = report(account("broker flushed (pending, waiting, parked)", arrivals, seconds=clock(),
                            notes={"Redis keys flushed": held}))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert result.duplicates == 0
    assert result.attempts_recorded == 40  # 2 for each waiting delivery, 1 for the others
    assert {len(fault_receiver.arrivals(p)) for p in ("/parked", "/fresh")} == {10}
    assert status_counts(waiting + parked + fresh) == {"done": 30}


def test_broker_flushed_under_a_running_worker(stack, fault_receiver):
    """FLUSHDB while a worker is busy: queued messages vanish, retries are in flight.

    A Redis restarted without persistence also forgets its routing table; the
    workers, the scheduler and every publisher must carry on: all 110 end done.
    """
    clock = Clock()
    fault_receiver.rule("/stream", Status(200, delay=0.05))
    fault_receiver.rule("/retry", first_time(500))
    account_id, _ = make_account()
    make_subscription(account_id, fault_receiver.url("/stream"), ["email.sent"])
    make_subscription(account_id, fault_receiver.url("/retry"), ["email.opened"])
    retrying = emit_many(account_id, 10, "email.opened")
    streamed = emit_many(account_id, 100, "email.sent")
    fault_receiver.wait_for(30, "/stream")
    client = redis.Redis.from_url(REDIS_URL)
    flushed = client.dbsize()
    client.flushdb()
    # More work after the flush: emitted into a broker that forgot everything.
    later = emit_many(account_id, 20, "email.sent")
    wait_until(lambda: status_counts()["done"] == 130, timeout=60,
               what=f"all 130 done after a flush under load ({status_counts()})")

    arrivals = fault_receiver.arrivals()
    result = report(account("broker flushed under a running worker", arrivals, seconds=clock(),
                            notes={"Redis keys flushed": flushed}))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert len(retrying + streamed + later) == 130
    # A flush drops queued messages; it never makes an attempt run twice.
    assert result.duplicates == 0


class BlackHole:
    """A TCP server that accepts connections and never answers (a hung broker)."""

    def __init__(self):
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._held = []
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._held.append(conn)

    def close(self):
        self._closed = True
        self._sock.close()
        for conn in self._held:
            conn.close()


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def _broker_at(monkeypatch, url: str):
    """Point this process's publishing at ``url``, configured as celeryconfig configures Redis."""
    from celery import Celery

    from webhooks.broker import celery_app

    real = celery_app.celery_app
    app = Celery("unreachable", broker=url)
    app.conf.update(
        broker_connection_timeout=real.conf.broker_connection_timeout,
        broker_transport_options=dict(real.conf.broker_transport_options),
        task_publish_retry=real.conf.task_publish_retry,
        task_publish_retry_policy=real.conf.task_publish_retry_policy,
        task_default_queue=real.conf.task_default_queue,
    )
    monkeypatch.setattr(celery_app, "celery_app", app)
    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)


@pytest.mark.parametrize("broker", ["refused", "black hole"])
def test_broker_unreachable_when_emitting(stack, fault_receiver, monkeypatch, broker):
    """emit_event() raises nothing and returns once its deliveries are parked (CONTRACT 9.1):
    the first call waits out the broker's time-out, the calls after it park at once while the
    broker is marked down; the workers' sweep (on the real broker) delivers them all: the
    caller's broker was down, not theirs."""
    clock = Clock()
    hole = BlackHole() if broker == "black hole" else None
    port = hole.port if hole else _closed_port()
    _broker_at(monkeypatch, f"redis://127.0.0.1:{port}/0")
    account_id, _ = make_account()
    make_subscription(account_id, fault_receiver.url("/later"))
    data = sample_data("email.sent")
    took, ids = [], []
    for _ in range(20):
        started = time.monotonic()
        ids += emit_event(account_id, "email.sent", data).delivery_ids
        took.append(time.monotonic() - started)
    assert outbox.flush(0), "emit_event returned before its messages were published or parked"
    slowest, parked_after = max(took), took[0]
    try:
        # The broker's socket time-out (celeryconfig: at least 5 s) bounds the first call.
        assert took[0] < 7, f"the first emit_event call took {took[0]:.2f} s"
        assert max(took[1:]) < 0.5, f"an emit_event call after the first took {max(took[1:]):.2f} s"
        wait_until(lambda: status_counts(ids)["done"] == 20, timeout=30, what="all 20 delivered later")
    finally:
        if hole:
            hole.close()
    arrivals = fault_receiver.arrivals()
    result = report(account(f"broker unreachable at emit ({broker})", arrivals, seconds=clock(),
                            notes={"slowest emit_event s": round(slowest, 3),
                                   "first emit_event (gave up) s": round(parked_after, 1)}))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert result.duplicates == 0 and result.attempts_recorded == 20
