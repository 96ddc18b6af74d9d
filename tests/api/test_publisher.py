"""The publisher API (CONTRACT 10.7, issue 38): publisher keys, events and accounts over
HTTP, on the real PostgreSQL and Redis (the broker, and the rate-limit storage that holds
the revocation epoch)."""

from __future__ import annotations

import collections
import json
import threading
import time

import pytest
from sqlalchemy import func, select

from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.services import publishers
from webhooks.storage.db import session_scope
from webhooks.storage.models import (Account, AuditEntry, Delivery, Event, Publisher,
                                     Subscription)

from .helpers import make_subscription, settle_publisher

EVENTS = "/api/webhooks/accounts/{}/events"


@pytest.fixture(autouse=True)
def _no_cached_keys():
    publishers.forget_verified()
    yield
    publishers.forget_verified()


@pytest.fixture
def publisher(db):
    with session_scope() as session:
        row, key = publishers.create(session, "product")
        return row.id, {"Authorization": f"Bearer {key}"}


def _rows(event_id: str):
    """What an event left in the database, without its ids and times."""
    with session_scope() as session:
        event = session.get(Event, event_id)
        deliveries = session.scalars(select(Delivery).where(Delivery.event_id == event_id)
                                     .order_by(Delivery.subscription_id)).all()
        body = json.loads(event.body)
        shape = {key: value for key, value in body.items() if key not in ("id", "created_at")}
        return (event.type, event.version, event.idempotency_key, shape,
                [(d.subscription_id, d.status, d.attempt_count, d.event_type, d.ordering_key)
                 for d in deliveries])


def test_an_event_over_http_is_stored_as_emit_event_stores_it(client, publisher, alice, published):
    _, headers = publisher
    make_subscription(alice.account_id)
    make_subscription(alice.account_id, event_types=["email.sent"])
    make_subscription(alice.account_id, event_types=["reply.received"])
    data = sample_data("email.sent")
    answer = client.post(EVENTS.format(alice.account_id), headers=headers,
                         json={"type": "email.sent", "data": data, "ordering_key": "k1"})
    assert answer.status_code == 202, answer.json
    assert answer.json["deliveries"] == 2
    from_python = emit_event(alice.account_id, "email.sent", data, ordering_key="k1")
    settle_publisher()
    over_http = _rows(answer.json["event_id"])
    assert over_http == _rows(from_python.id)
    # A message for each delivery of each event, as emit_event publishes them.
    sent = {item.delivery_id for item in published.settled()}
    assert len(over_http[4]) == 2
    with session_scope() as session:
        ids = set(session.scalars(select(Delivery.id)))
    assert sent == ids


def test_every_refusal_is_a_400_with_emit_events_message(client, publisher, alice):
    _, headers = publisher
    for body in ({"type": "no.such", "data": {}},
                 {"type": "email.sent", "data": {"nonsense": 1}},
                 {"type": "email.sent", "data": sample_data("email.sent"), "ordering_key": "é"},
                 {"type": "email.sent", "data": sample_data("email.sent"),
                  "idempotency_key": ""}):
        with pytest.raises(ValueError) as raised:
            emit_event(alice.account_id, body["type"], body["data"],
                       idempotency_key=body.get("idempotency_key"),
                       ordering_key=body.get("ordering_key"))
        answer = client.post(EVENTS.format(alice.account_id), headers=headers, json=body)
        assert answer.status_code == 400, answer.json
        assert answer.json["error"]["message"] == str(raised.value)
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


def test_a_batch_refused_names_its_index_and_stores_nothing(client, publisher, alice):
    _, headers = publisher
    good = {"type": "email.sent", "data": sample_data("email.sent")}
    answer = client.post(EVENTS.format(alice.account_id) + "/batch", headers=headers,
                         json={"events": [good, good, {"type": "email.sent", "data": {}}]})
    assert answer.status_code == 400
    assert answer.json["error"]["message"].startswith("events[2]: ")
    too_many = client.post(EVENTS.format(alice.account_id) + "/batch", headers=headers,
                           json={"events": [good] * 101})
    assert too_many.status_code == 400
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0
    stored = client.post(EVENTS.format(alice.account_id) + "/batch", headers=headers,
                         json={"events": [good] * 100})
    assert stored.status_code == 202 and len(set(stored.json["event_ids"])) == 100


def test_256_kib_is_accepted_and_a_larger_body_is_413(client, publisher, alice):
    _, headers = publisher
    data = sample_data("email.sent")
    data["subject"] = ""
    base = len(json.dumps({"type": "email.sent", "data": data}).encode())
    data["subject"] = "x" * (256 * 1024 - base)
    body = json.dumps({"type": "email.sent", "data": data}).encode()
    assert len(body) == 256 * 1024
    headers = {**headers, "Content-Type": "application/json"}
    url = EVENTS.format(alice.account_id)
    answer = client.post(url, headers=headers, data=body)
    assert answer.status_code != 413, answer.json
    over = client.post(url, headers=headers, data=body[:-1] + b" }")
    assert over.status_code == 413
    assert over.json["error"]["code"] == "payload_too_large"
    # The API's other routes keep their 64 KiB.
    elsewhere = client.post("/api/webhooks/accounts", headers=headers,
                            data=json.dumps({"name": "x" * (70 * 1024)}))
    assert elsewhere.status_code == 413


def test_a_retried_request_creates_nothing_twice(client, publisher, alice):
    _, headers = publisher
    make_subscription(alice.account_id)
    body = {"type": "email.sent", "data": sample_data("email.sent"), "idempotency_key": "o-1"}
    first = client.post(EVENTS.format(alice.account_id), headers=headers, json=body)
    again = client.post(EVENTS.format(alice.account_id), headers=headers, json=body)
    assert (first.status_code, first.json["deliveries"]) == (202, 1)
    assert again.status_code == 200
    assert again.json == {"event_id": first.json["event_id"], "deliveries": 0}


def test_two_racing_requests_with_one_key_create_one_event(app, publisher, alice):
    _, headers = publisher
    make_subscription(alice.account_id)
    body = {"type": "email.sent", "data": sample_data("email.sent")}
    rounds, racers = 10, 4
    for round_number in range(rounds):
        keyed = {**body, "idempotency_key": f"race-{round_number}"}
        barrier, answers = threading.Barrier(racers), []

        def post():
            client = app.test_client()
            barrier.wait()
            answers.append(client.post(EVENTS.format(alice.account_id), headers=headers,
                                       json=keyed))

        threads = [threading.Thread(target=post) for _ in range(racers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(a.status_code for a in answers) == [200] * (racers - 1) + [202]
        assert len({a.json["event_id"] for a in answers}) == 1
    settle_publisher()
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == rounds
        assert session.scalar(select(func.count()).select_from(Delivery)) == rounds


def test_keys_stay_in_their_lane(client, publisher, alice):
    _, headers = publisher
    as_account = client.post(EVENTS.format(alice.account_id), headers=alice.headers,
                             json={"type": "email.sent", "data": sample_data("email.sent")})
    assert as_account.status_code == 403
    assert as_account.json["error"]["code"] == "publisher_key_required"
    for path in ("/api/webhooks/subscriptions", "/api/webhooks/deliveries"):
        answer = client.get(path, headers=headers)
        assert answer.status_code == 403, path
    nobody = client.get("/api/webhooks/accounts",
                        headers={"Authorization": "Bearer whpub_nothing"})
    assert nobody.status_code == 401


def _listening() -> None:
    """Wait until this process listens for revocations (started on first use)."""
    deadline = time.monotonic() + 5.0
    while publishers._listener.generation() is None:
        assert time.monotonic() < deadline, "the revocation listener did not subscribe"
        time.sleep(0.01)


def test_a_revoked_key_answers_401_at_once_on_every_process(client, publisher):
    publisher_id, headers = publisher
    _listening()
    assert client.get("/api/webhooks/accounts", headers=headers).status_code == 200
    # Another web process verified the key too: its cache, as this process's listener left it.
    cached = dict(publishers._verified)
    assert cached, "the verified key is cached"
    with session_scope() as session:
        publishers.revoke(session, publisher_id)
    generation = publishers._listener.generation()
    publishers._verified.update(cached)  # the other process has not heard yet
    publishers.tell_web_processes()
    publishers._verified.update(cached)
    # Told through Redis: the listener thread hears it within milliseconds, not a request later.
    deadline = time.monotonic() + 1.0
    while publishers._listener.generation() == generation and time.monotonic() < deadline:
        time.sleep(0.001)
    assert publishers._listener.generation() != generation
    answer = client.get("/api/webhooks/accounts", headers=headers)
    assert answer.status_code == 401


def test_without_a_listener_nothing_is_cached(client, publisher, monkeypatch):
    _, headers = publisher
    monkeypatch.setattr(publishers._listener, "generation", lambda: None)
    for _ in range(2):
        assert client.get("/api/webhooks/accounts", headers=headers).status_code == 200
    assert publishers._verified == {}


def test_last_used_at_is_written_at_most_once_a_minute(client, publisher):
    publisher_id, headers = publisher
    _listening()
    writes = []
    original = publishers.keys.touch
    publishers.keys.touch = lambda *args: writes.append(args) or original(*args)
    try:
        for _ in range(5):
            assert client.get("/api/webhooks/accounts", headers=headers).status_code == 200
    finally:
        publishers.keys.touch = original
    assert len(writes) == 1
    with session_scope() as session:
        assert session.get(Publisher, publisher_id).last_used_at is not None


def test_accounts_create_list_get_rotate_delete(client, publisher, published):
    _, headers = publisher
    made = client.post("/api/webhooks/accounts", headers=headers, json={"name": "Acme"})
    assert made.status_code == 201
    account = made.json
    assert set(account) == {"id", "name", "api_key", "created_at"}
    old_key = {"Authorization": f"Bearer {account['api_key']}"}
    subscribed = client.post("/api/webhooks/subscriptions", headers=old_key,
                             json={"url": "https://hooks.example.com/in"})
    assert subscribed.status_code == 201
    got = client.get(f"/api/webhooks/accounts/{account['id']}", headers=headers)
    assert got.json["subscriptions"] == 1
    listed = client.get("/api/webhooks/accounts?limit=1", headers=headers).json
    assert [a["id"] for a in listed["data"]] == [account["id"]]
    rotated = client.post(f"/api/webhooks/accounts/{account['id']}/rotate-key", headers=headers)
    assert rotated.status_code == 200
    assert client.get("/api/webhooks/subscriptions", headers=old_key).status_code == 401
    new_key = {"Authorization": f"Bearer {rotated.json['api_key']}"}
    assert client.get("/api/webhooks/subscriptions", headers=new_key).status_code == 200
    gone = client.delete(f"/api/webhooks/accounts/{account['id']}", headers=headers)
    assert gone.status_code == 204
    assert client.get(f"/api/webhooks/accounts/{account['id']}", headers=headers).status_code == 404
    assert client.get("/api/webhooks/subscriptions", headers=new_key).status_code == 401
    emitted = client.post(EVENTS.format(account["id"]), headers=headers,
                          json={"type": "email.sent", "data": sample_data("email.sent")})
    assert emitted.status_code == 404
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Subscription)
                              .where(Subscription.deleted_at.is_(None))) == 0
        assert session.get(Account, account["id"]).deleted_at is not None


def test_the_account_routes_write_audit_entries_by_the_publisher(client, publisher):
    """Creating an account, rotating its key and deleting it are entries of the account's
    audit log, the actor the publisher key (by id), the keys themselves never in them."""
    publisher_id, headers = publisher
    account = client.post("/api/webhooks/accounts", headers=headers, json={"name": "Acme"}).json
    rotated = client.post(f"/api/webhooks/accounts/{account['id']}/rotate-key", headers=headers)
    assert client.delete(f"/api/webhooks/accounts/{account['id']}",
                         headers=headers).status_code == 204
    with session_scope() as session:
        entries = session.scalars(select(AuditEntry).where(AuditEntry.account_id == account["id"])
                                  .order_by(AuditEntry.created_at, AuditEntry.id)).all()
        assert [(e.action, e.actor_kind, e.actor_id, e.target_id) for e in entries] == [
            (action, "publisher", publisher_id, account["id"])
            for action in ("account.created", "account.key_rotated", "account.deleted")]
        written = json.dumps([e.changes for e in entries])
    assert account["api_key"] not in written and rotated.json["api_key"] not in written
    assert entries[1].changes == {"api_key": {"from": "[redacted]", "to": "[redacted]"}}


def test_rotating_the_key_ends_the_dashboard_sessions_signed_in_with_it(client, publisher, alice):
    import datetime as dt

    from web.dashboard.sessions import live_session, open_session
    from webhooks.storage.models import utcnow

    _, headers = publisher
    with session_scope() as session:
        token = open_session(session, alice.account_id, utcnow(), dt.timedelta(hours=1))
    with session_scope() as session:
        assert live_session(session, token, utcnow()) is not None
    rotated = client.post(f"/api/webhooks/accounts/{alice.account_id}/rotate-key", headers=headers)
    assert rotated.status_code == 200
    with session_scope() as session:
        assert live_session(session, token, utcnow()) is None


def test_a_deleted_accounts_rows_go_in_batches_at_the_next_retention_run(client, publisher, alice,
                                                                          published):
    from webhooks.storage.db import get_engine
    from webhooks.lifecycle.retention import purge

    _, headers = publisher
    make_subscription(alice.account_id)
    for _ in range(5):
        assert client.post(EVENTS.format(alice.account_id), headers=headers, json={
            "type": "email.sent", "data": sample_data("email.sent")}).status_code == 202
    settle_publisher()
    assert client.delete(f"/api/webhooks/accounts/{alice.account_id}",
                         headers=headers).status_code == 204
    with session_scope() as session:  # stopped at once: nothing waits for an attempt
        statuses = set(session.scalars(select(Delivery.status)))
    assert statuses == {"failed"}
    # Retention off for everyone else (0 days) still removes the deleted account.
    purged = purge(get_engine(), retention_days=0, batch=2)
    assert (purged.deliveries, purged.events, purged.accounts) == (5, 5, 1)
    with session_scope() as session:
        for table in (Account, Event, Delivery, Subscription):
            assert session.scalar(select(func.count()).select_from(table)) == 0, table


def test_the_publisher_rate_limit_grants_no_more_than_the_limit_per_second(redis_broker):
    from limits.storage import storage_from_string

    from tests.support.services import REDIS_URL
    from web.ratelimit import LeasedWindows

    storage = storage_from_string(REDIS_URL)
    # Two web processes sharing one counter, each leasing 10 at a time.
    first, second = LeasedWindows(lambda: storage, 100), LeasedWindows(lambda: storage, 100)
    now = 1_000_000.25
    granted = sum(windows.hit("p1", now) is None for _ in range(80)
                  for windows in (first, second))
    assert granted == 100
    assert first.hit("p1", now) == 1_000_001.0
    assert first.hit("p1", now + 1) is None  # the next window
    small = LeasedWindows(lambda: storage, 3)  # leases of one: exact
    assert [small.hit("p2", now) is None for _ in range(4)] == [True, True, True, False]


def test_threads_that_lease_at_once_lose_no_lease(redis_broker):
    """Four threads find the lease spent and each take one from the shared counter before
    any has stored its own: every hit they were granted is still spent, up to the limit."""
    from limits.storage import storage_from_string

    from tests.support.services import REDIS_URL
    from web.ratelimit import LeasedWindows

    storage = storage_from_string(REDIS_URL)
    all_asking = threading.Barrier(4)

    class AllAskAtOnce:
        def incr(self, *args, **kwargs):
            counted = storage.incr(*args, **kwargs)
            all_asking.wait(timeout=10)  # nobody stores a lease before all four took one
            return counted

    windows = LeasedWindows(lambda: AllAskAtOnce(), 40)  # leases of 4
    now = 2_000_000.5
    firsts = []
    threads = [threading.Thread(target=lambda: firsts.append(windows.hit("p", now)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert firsts == [None] * 4
    windows.storage = lambda: storage  # the rest one at a time
    granted = sum(windows.hit("p", now) is None for _ in range(60))
    assert granted == 40 - 4  # the whole limit: the four leases' 12 other hits were kept


def test_over_the_publisher_rate_limit_a_429_with_retry_after(db, redis_broker, monkeypatch):
    from web import create_app
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_PUBLISHER_RATE_LIMIT", "3")
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    with session_scope() as session:
        _, key = publishers.create(session, "product")
    time.sleep(1 - time.time() % 1)  # start at a second's beginning: the limit's window
    answers = []  # (the second it was asked in, or None if it straddled one's end; answer)
    for _ in range(8):
        before = int(time.time())
        answer = client.get("/api/webhooks/accounts", headers={"Authorization": f"Bearer {key}"})
        answers.append((before if int(time.time()) == before else None, answer))
    refused = [answer for _, answer in answers if answer.status_code == 429]
    granted = collections.Counter(second for second, answer in answers
                                  if second is not None and answer.status_code == 200)
    # 3 a second, never more, whatever seconds a slow host spread the requests over; in
    # one second (the usual case) exactly the 5 past the 3 are refused.
    assert all(count <= 3 for count in granted.values()), granted
    if len({second for second, _ in answers}) == 1:
        assert len(refused) == 5
    assert refused and refused[0].headers["Retry-After"] == "1"
    assert refused[0].json["error"]["code"] == "rate_limited"
