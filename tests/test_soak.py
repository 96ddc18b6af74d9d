"""Soak: 10,000 events over 20 subscriptions of 4 accounts through the whole stack.

Two real worker processes (prefork, concurrency 4) on the real PostgreSQL and
Redis deliver to the fast asyncio receiver. 10 % of the endpoints fail, in
mixed ways: one answers per delivery 500 once, 500 always, 404 (410 would pause it) or hangs past
the time-out once; one refuses connections (nothing listens) and so pauses
after WEBHOOKS_PAUSE_AFTER failures. The ladder is short (1 s steps).

At the end, for every subscription, done + failed + dead + paused + pending
equals the deliveries created (= the events emitted of its types), nothing
is left in progress (``sending``) or pending, every healthy delivery arrived
exactly once, and no attempt arrived twice (no fault was injected here, so
a duplicate would be a bug). WEBHOOKS_SOAK_EVENTS changes the count.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections import Counter, defaultdict

import pytest
from sqlalchemy import text

from tests.support.fastreceiver import Hang, ReceiverProcess
from tests.support.ledger import account, missing_arrivals, report
from tests.support.stack import Workers, use_env, wait_until, worker_env
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_sessionmaker

pytestmark = [pytest.mark.soak, pytest.mark.integration, pytest.mark.timeout(400)]

EVENTS = int(os.environ.get("WEBHOOKS_SOAK_EVENTS", "10000"))
ACCOUNTS = 4
SUBSCRIPTIONS_PER_ACCOUNT = 5
EMIT_THREADS = 4
EMIT_BATCH = int(os.environ.get("WEBHOOKS_SOAK_BATCH", "100"))  # events per emitting transaction
POOL = os.environ.get("WEBHOOKS_SOAK_POOL", "prefork")
CONCURRENCY = int(os.environ.get("WEBHOOKS_SOAK_CONCURRENCY", "4"))
# TIMEOUT 5: a healthy endpoint starved of CPU for a moment must not time out.
SOAK_ENV = worker_env(RETRY_DELAYS="1,1,1", TIMEOUT="5", PAUSE_AFTER="25", SWEEP_INTERVAL="1",
                      RECOVER_AFTER="5", DB_POOL_SIZE="4")


def _fate(delivery_id: str) -> str:
    """How the flaky endpoint treats one delivery, fixed by its id (every attempt agrees)."""
    bucket = int(hashlib.sha256(delivery_id.encode()).hexdigest()[:8], 16) % 100
    if bucket < 10:
        return "500 always"
    if bucket < 30:
        return "500 once"
    if bucket < 35:
        return "404"
    if bucket < 37:
        return "hang once"
    return "200"


def _flaky(arrival):
    fate = _fate(arrival.delivery_id)
    if fate == "500 always":
        return 500
    if fate == "500 once":
        return 500 if arrival.attempt == 1 else 200
    if fate == "404":
        return 404
    if fate == "hang once":
        return Hang(30) if arrival.attempt == 1 else 200
    return 200


EXPECTED_END = {
    "500 always": "dead", "500 once": "done", "404": "failed", "hang once": "done", "200": "done",
}


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture
def soak_stack(db, redis_broker, monkeypatch):
    use_env(monkeypatch, SOAK_ENV)
    receiver = ReceiverProcess(rules={"/flaky": _flaky}).start()
    workers = Workers().use(SOAK_ENV, count=2, concurrency=CONCURRENCY, pool=POOL)
    yield workers, receiver
    receiver.stop()
    workers.stop()


def test_soak_every_delivery_accounted_for(soak_stack):
    from tests.factories import make_account, make_subscription

    workers, receiver = soak_stack
    started = time.monotonic()
    refused_url = f"http://127.0.0.1:{_closed_port()}/refused"
    # Each account: 5 subscriptions of 3 event types each, so every event
    # reaches exactly one subscription of its account.
    groups = [EVENT_TYPE_NAMES[i::SUBSCRIPTIONS_PER_ACCOUNT] for i in range(SUBSCRIPTIONS_PER_ACCOUNT)]
    accounts, subscription_of, kinds = [], {}, {}
    for a in range(ACCOUNTS):
        account_id, _ = make_account(f"soak-{a}")
        accounts.append(account_id)
        for s, types in enumerate(groups):
            if (a, s) == (0, 0):
                url, kind = receiver.url("/flaky"), "flaky"
            elif (a, s) == (1, 0):
                url, kind = refused_url, "refused"
            else:
                url, kind = receiver.url(f"/ok/{a}/{s}"), "healthy"
            subscription = make_subscription(account_id, url, types)
            kinds[subscription.id] = kind
            for event_type in types:
                subscription_of[(account_id, event_type)] = subscription.id

    data = {name: sample_data(name) for name in EVENT_TYPE_NAMES}
    emitted = Counter()  # subscription id -> events emitted of its types
    lock = threading.Lock()
    errors = []

    def emit_share(index: int):
        # Like an application emitting inside its own transactions: EMIT_BATCH
        # events per commit (emit_event(session=...)); messages go out after each commit.
        mine = Counter()
        session = None
        try:
            for k, n in enumerate(range(index, EVENTS, EMIT_THREADS)):
                if session is None:
                    session = get_sessionmaker()()
                account_id = accounts[n % ACCOUNTS]
                event_type = EVENT_TYPE_NAMES[(n // ACCOUNTS) % len(EVENT_TYPE_NAMES)]
                emitted_event = emit_event(account_id, event_type, data[event_type], session=session)
                assert len(emitted_event.delivery_ids) == 1
                mine[subscription_of[(account_id, event_type)]] += 1
                if (k + 1) % EMIT_BATCH == 0:
                    session.commit()
                    session.close()
                    session = None
            if session is not None:
                session.commit()
                session.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        with lock:
            emitted.update(mine)

    threads = [threading.Thread(target=emit_share, args=(i,)) for i in range(EMIT_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert outbox.flush(60)
    emit_seconds = time.monotonic() - started
    print(f"emitted {EVENTS} events in {emit_seconds:.1f} s")
    assert sum(emitted.values()) == EVENTS

    def unsettled():
        with _connection() as connection:
            return connection.execute(text(
                "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')")).scalar()

    wait_until(lambda: unsettled() == 0, timeout=300, interval=0.5,
               what="every delivery settled (no pending, no sending)")
    total_seconds = time.monotonic() - started
    print(f"settled in {total_seconds:.1f} s")

    with _connection() as connection:
        rows = connection.execute(text(
            "SELECT subscription_id, status, count(*) FROM deliveries GROUP BY subscription_id, status"
        )).all()
        fates = connection.execute(text(
            "SELECT d.id, d.status FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id "
            "WHERE s.url LIKE '%/flaky'")).all()
        paused_subscriptions = connection.execute(text(
            "SELECT id FROM subscriptions WHERE status = 'paused'")).scalars().all()
    per_subscription = defaultdict(Counter)
    for subscription_id, status, count in rows:
        per_subscription[subscription_id][status] = count
    assert set(per_subscription) == set(kinds)
    for subscription_id, counts in per_subscription.items():
        settled = sum(counts[s] for s in ("done", "failed", "dead", "paused", "pending"))
        assert settled == sum(counts.values()) == emitted[subscription_id], \
            (kinds[subscription_id], counts)
        assert counts["sending"] == 0
        if kinds[subscription_id] == "healthy":
            assert counts == Counter(done=emitted[subscription_id])
        if kinds[subscription_id] == "refused":
            assert counts["paused"] > 0 and counts["done"] == 0
    # The refused endpoint pauses; the flaky one may too, once its last deliveries are
    # only retries of "500 always" (25 failures in a row): then the rest wait paused.
    refused = {s for s, k in kinds.items() if k == "refused"}
    assert refused <= set(paused_subscriptions) <= refused | {s for s, k in kinds.items() if k == "flaky"}
    wrong = [(d, status, _fate(d)) for d, status in fates
             if status != EXPECTED_END[_fate(d)] and status != "paused"]
    assert wrong == []

    arrivals = receiver.arrivals()
    healthy = Counter(a.delivery_id for a in arrivals if a.path.startswith("/ok/"))
    assert len(healthy) == sum(emitted[s] for s, k in kinds.items() if k == "healthy")
    retried_healthy = sum(1 for n in healthy.values() if n > 1)  # a time-out under load, say
    statuses = Counter()
    for counts in per_subscription.values():
        statuses.update(counts)
    result = report(account(
        f"soak: {EVENTS} events, 20 subscriptions, 4 accounts", arrivals,
        allowed=("done", "failed", "dead", "paused"), seconds=total_seconds,
        notes={"emit s": round(emit_seconds, 1), "healthy deliveries retried": retried_healthy,
               "events/s emitted": round(EVENTS / emit_seconds),
               "attempts/s": round(len(arrivals) / total_seconds)},
    ))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert result.duplicates == 0, "an attempt arrived twice although no fault was injected"
    assert result.created == EVENTS


def _connection():
    from webhooks.storage.db import get_engine

    return get_engine().connect()
