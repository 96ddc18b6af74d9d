"""Ordering keys and the adaptive pace through real worker processes (threads pools).

- The race: emitter threads and a second emitting process put one key's
  events in at once, two worker processes deliver them; the receiver sees
  that key's events strictly one at a time, in emit (sequence) order.
- A key whose head retries (the receiver answers 500 for that event only)
  holds back its own successor alone: other keys and unkeyed deliveries keep
  flowing; the successor goes once the head is dead.
- The adaptive pace: a receiver answering 429 lowers the subscription's
  current in-flight limit, and every event still arrives.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.factories import make_account, make_subscription
from tests.support.pipeline import pipeline_env
from tests.support.stack import wait_until
from tests.support.worker import emit_with, running_workers
from webhooks import emit_event
from webhooks.events.samples import sample_data
from webhooks.storage.db import session_scope
from webhooks.storage.models import Attempt, Delivery, Subscription

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
# The service's own recover-after (the pipeline's 2 s left out).
ENV = pipeline_env(RETRY_DELAYS="5,5,5", PAUSE_AFTER="1000", RECOVER_AFTER=None)
DELIVERY_HEADER = "X-Service-Delivery-Id"


class SubjectReceiver:
    """Records (subject, delivery id, arrived, answered) per request, in arrival order;
    answers 500 to the subjects in ``failing``, 200 to the rest, after ``hold`` seconds
    (to widen any window in which two attempts of one key could overlap)."""

    def __init__(self, hold: float = 0.01):
        self.lock = threading.Lock()
        self.seen: list[dict] = []
        self.failing: set[str] = set()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                subject = json.loads(body)["data"]["subject"]
                entry = {"subject": subject, "delivery": self.headers[DELIVERY_HEADER],
                         "arrived": time.monotonic(), "answered": None}
                with receiver.lock:
                    receiver.seen.append(entry)
                time.sleep(hold)
                status = 500 if subject in receiver.failing else 200
                entry["answered"] = time.monotonic()  # before the answer leaves
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def subjects(self) -> list[str]:
        with self.lock:
            return [entry["subject"] for entry in self.seen]

    def entries(self) -> list[dict]:
        with self.lock:
            return list(self.seen)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def subject_receiver():
    receiver = SubjectReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def two_workers(postgres, db, monkeypatch):
    emit_with(monkeypatch, ENV)
    yield from running_workers(ENV, pool="threads", concurrency=4)


def _logs(workers) -> str:
    return "\n".join(worker.log() for worker in workers)


def _emit(account_id: str, subject: str, key: str | None = None) -> str:
    data = dict(sample_data("email.sent"), subject=subject)
    return emit_event(account_id, "email.sent", data, ordering_key=key).delivery_ids[0]


EMITTER = """
import sys
from webhooks import emit_event
from webhooks.events.samples import sample_data
account_id, key, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(count):
    data = dict(sample_data("email.sent"), subject=f"{key}:process:{i}")
    emit_event(account_id, "email.sent", data, ordering_key=key)
"""


def _sequences(delivery_ids) -> dict[str, int]:
    with session_scope() as session:
        return dict(session.execute(select(Delivery.id, Delivery.key_sequence)
                                    .where(Delivery.id.in_(list(delivery_ids)))).all())


def _statuses(subscription_id) -> dict[str, str]:
    with session_scope() as session:
        return dict(session.execute(select(Delivery.id, Delivery.status)
                                    .where(Delivery.subscription_id == subscription_id)).all())


def test_one_key_from_many_emitters_arrives_one_at_a_time_in_emit_order(two_workers,
                                                                        subject_receiver):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, subject_receiver.url)
    threads_n, per_thread, per_process = 4, 12, 12
    second = subprocess.Popen([sys.executable, "-c", EMITTER, account_id, "hot", str(per_process)],
                              cwd=ROOT, env={**os.environ, **ENV})
    emitted: dict[str, list[str]] = {}

    def emitter(n: int):
        emitted[n] = [_emit(account_id, f"hot:thread{n}:{i}", "hot") for i in range(per_thread)]
        emitted[f"cold{n}"] = [_emit(account_id, f"cold:{n}:{i}", f"cold-{n}") for i in range(3)]
        emitted[f"plain{n}"] = [_emit(account_id, f"plain:{n}:{i}") for i in range(3)]

    threads = [threading.Thread(target=emitter, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert second.wait(120) == 0
    total = threads_n * (per_thread + 6) + per_process
    wait_until(lambda: list(_statuses(subscription.id).values()).count("done") == total,
               timeout=180, what=lambda: f"{total} done\n{_logs(two_workers)}")

    hot = [entry for entry in subject_receiver.entries() if entry["subject"].startswith("hot:")]
    assert len({entry["delivery"] for entry in hot}) == threads_n * per_thread + per_process
    sequences = _sequences(entry["delivery"] for entry in hot)
    arrived = [sequences[entry["delivery"]] for entry in hot]
    assert arrived == sorted(arrived) and len(set(arrived)) == len(arrived), arrived
    # One at a time: each arrived only after the one before it was answered.
    for before, after in zip(hot, hot[1:]):
        assert after["arrived"] >= before["answered"], (before, after)
    # Each emitter's own events in the order it emitted them.
    for n in range(threads_n):
        mine = [sequences[d] for d in emitted[n]]
        assert mine == sorted(mine)


def test_a_retrying_head_holds_back_its_own_key_only(two_workers, subject_receiver):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, subject_receiver.url)
    subject_receiver.failing.add("stuck:head")
    head = _emit(account_id, "stuck:head", "stuck")
    successor = _emit(account_id, "stuck:next", "stuck")
    others = [_emit(account_id, f"k{n % 4}:{n}", f"k{n % 4}") for n in range(20)]
    others += [_emit(account_id, f"plain:{n}") for n in range(5)]

    def others_done():
        statuses = _statuses(subscription.id)
        return all(statuses[d] == "done" for d in others)

    wait_until(others_done, timeout=60, what=lambda: f"others done\n{_logs(two_workers)}")
    statuses = _statuses(subscription.id)
    # The head is still on its ladder (three retries, 5 s apart), its successor waits.
    assert statuses[head] == "pending" and statuses[successor] == "pending"
    assert "stuck:next" not in subject_receiver.subjects()

    wait_until(lambda: _statuses(subscription.id)[successor] == "done", timeout=60,
               what=lambda: f"the successor done\n{_logs(two_workers)}")
    assert _statuses(subscription.id)[head] == "dead"
    entries = subject_receiver.entries()
    last_head = max(e["answered"] for e in entries if e["subject"] == "stuck:head")
    successor_at = min(e["arrived"] for e in entries if e["subject"] == "stuck:next")
    assert successor_at >= last_head
    assert subject_receiver.subjects().count("stuck:head") == 4  # every attempt of the ladder


def test_429_answers_lower_the_current_limit_and_everything_still_arrives(two_workers, receiver):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, receiver.url("/busy"))
    receiver.script("/busy", 429, 429, 429, 429, 200)
    ids = [emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]
           for _ in range(10)]
    lowest = [None]

    def all_done():
        with session_scope() as session:
            limit = session.get(Subscription, subscription.id).in_flight_limit
            if limit is not None and (lowest[0] is None or limit < lowest[0]):
                lowest[0] = limit
        return list(_statuses(subscription.id).values()).count("done") == len(ids)

    wait_until(all_done, timeout=120, what=lambda: f"10 done\n{_logs(two_workers)}")
    assert lowest[0] is not None and 1 <= lowest[0] <= 5, lowest
    with session_scope() as session:
        codes = session.scalars(select(Attempt.status_code).join(Delivery)
                                .where(Delivery.subscription_id == subscription.id)).all()
    assert codes.count(429) == 4 and codes.count(200) == 10
