"""emit_event(): validation, idempotency, the caller's transaction, and a broker that is down."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from tests.factories import make_account, make_subscription
from webhooks import emit_event
from webhooks.errors import InvalidEvent, NotFound
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_sessionmaker, session_scope
from webhooks.storage.models import Delivery, Event


@pytest.fixture
def account(db, published):
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/all")
    return account_id


def counts():
    with session_scope() as session:
        return (
            session.scalar(select(func.count()).select_from(Event)),
            session.scalar(select(func.count()).select_from(Delivery)),
        )


@pytest.mark.parametrize("event_type", EVENT_TYPE_NAMES)
def test_every_catalogue_type_is_accepted_and_stored_unchanged(account, event_type):
    import json

    data = sample_data(event_type)
    event = emit_event(account, event_type, data)
    with session_scope() as session:
        stored = session.get(Event, event.id)
        envelope = json.loads(stored.body)
    assert envelope["data"] == data and envelope["type"] == event_type
    assert envelope["id"] == event.id and envelope["version"] == "2026-07-30"


def test_unknown_type_raises_and_stores_nothing(account, published):
    with pytest.raises(InvalidEvent, match="type") as caught:
        emit_event(account, "email.exploded", {})
    assert isinstance(caught.value, ValueError)
    assert counts() == (0, 0) and published.settled() == []


def test_bad_data_names_the_fields_and_stores_nothing(account, published):
    data = sample_data("reply.received")
    data["intensity"] = "high"
    del data["contact_id"]
    with pytest.raises(InvalidEvent) as caught:
        emit_event(account, "reply.received", data)
    assert "intensity" in str(caught.value) and "contact_id" in str(caught.value)
    assert set(caught.value.errors) == {"intensity", "contact_id"}
    assert counts() == (0, 0) and published.settled() == []


def test_payload_over_the_limit_is_refused(account, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_MAX_PAYLOAD_BYTES", "300")
    reset_settings_cache()
    with pytest.raises(InvalidEvent, match="WEBHOOKS_MAX_PAYLOAD_BYTES"):
        emit_event(account, "reply.received", sample_data("reply.received"))
    assert counts() == (0, 0)


def test_unknown_account_raises_not_found(db):
    with pytest.raises(NotFound):
        emit_event("00000000-0000-4000-8000-000000000000", "email.sent", sample_data("email.sent"))


def test_filter_by_event_types(db, published):
    account_id, _ = make_account()
    only_bounces = make_subscription(account_id, "https://example.com/b", ["email.bounced"])
    everything = make_subscription(account_id, "https://example.com/all")
    sent = emit_event(account_id, "email.sent", sample_data("email.sent"))
    bounced = emit_event(account_id, "email.bounced", sample_data("email.bounced"))
    with session_scope() as session:
        def targets(event):
            return {d.subscription_id for d in session.scalars(
                select(Delivery).where(Delivery.event_id == event.id))}
        assert targets(sent) == {everything.id}
        assert targets(bounced) == {everything.id, only_bounces.id}


def test_idempotency_key_returns_the_same_event_without_new_deliveries(account, published):
    data = sample_data("email.sent")
    first = emit_event(account, "email.sent", data, idempotency_key="order-1")
    second = emit_event(account, "email.sent", data, idempotency_key="order-1")
    assert second.id == first.id and second.duplicate and not first.duplicate
    assert second.delivery_ids == first.delivery_ids
    assert counts() == (1, 1) and len(published.settled()) == 1


def test_idempotency_key_is_per_account(account, published):
    other, _ = make_account("other")
    data = sample_data("email.sent")
    first = emit_event(account, "email.sent", data, idempotency_key="k")
    second = emit_event(other, "email.sent", data, idempotency_key="k")
    assert first.id != second.id


def test_concurrent_emits_with_one_key_make_one_event(account, published):
    results, barrier = [], threading.Barrier(8)

    def work():
        barrier.wait()
        results.append(emit_event(account, "email.sent", sample_data("email.sent"), idempotency_key="race"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({r.id for r in results}) == 1
    assert counts() == (1, 1) and len(published.settled()) == 1


def test_session_joins_the_callers_transaction_and_publishes_after_commit(account, published):
    session = get_sessionmaker()()
    event = emit_event(account, "email.sent", sample_data("email.sent"), session=session)
    assert published.settled() == []  # nothing leaves before the caller commits
    assert counts() == (0, 0)  # not visible outside the transaction
    session.commit()
    assert [p.delivery_id for p in published.settled()] == list(event.delivery_ids)
    assert counts() == (1, 1)
    session.close()


def test_a_scoped_session_as_flask_sqlalchemy_has_it_hooks_each_request_s_session_only(
        account, published, monkeypatch):
    """db.session of Flask-SQLAlchemy is a scoped_session: one Session per request. A hook
    on the scoped_session itself would go on the Session class: one more listener per
    request, each run at every commit of every session of the process."""
    from sqlalchemy.orm import scoped_session, sessionmaker

    from webhooks.broker import outbox
    from webhooks.storage.db import get_engine

    runs = []
    real = outbox._run_actions
    monkeypatch.setattr(outbox, "_run_actions", lambda session: runs.append(1) or real(session))
    factory = sessionmaker(bind=get_engine())
    scoped = scoped_session(factory)
    for request in range(3):
        event = emit_event(account, "email.sent", sample_data("email.sent"), session=scoped)
        assert event.delivery_ids[0] not in [p.delivery_id for p in published.settled()]
        scoped.commit()
        assert published.settled()[-1].delivery_id == event.delivery_ids[-1]
        scoped.remove()  # the end of the request
    assert counts() == (3, 3)
    runs.clear()
    other = factory()  # a session that never emitted
    other.commit()
    other.close()
    assert runs == []


def test_session_rollback_stores_and_publishes_nothing(account, published):
    session = get_sessionmaker()()
    emit_event(account, "email.sent", sample_data("email.sent"), session=session)
    session.rollback()
    session.commit()
    session.close()
    assert published.settled() == [] and counts() == (0, 0)


def test_broker_down_costs_the_caller_nothing(db, monkeypatch):
    """A broker nobody listens on: emit returns at once, the delivery waits parked."""
    from celery import Celery

    from webhooks.broker import celery_app, outbox

    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    dead = Celery("dead", broker="redis://127.0.0.1:1/0")
    dead.conf.update(
        broker_connection_timeout=1,
        broker_transport_options={"socket_connect_timeout": 1, "socket_timeout": 1},
        task_publish_retry_policy=celery_app.celery_app.conf.task_publish_retry_policy,
    )
    monkeypatch.setattr(celery_app, "celery_app", dead)
    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)
    started = time.monotonic()
    event = emit_event(account_id, "email.sent", sample_data("email.sent"))
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    assert outbox.flush(10)
    assert time.monotonic() - started < 5  # one bounded publish attempt, then parked
    with session_scope() as session:
        row = session.get(Delivery, event.delivery_ids[0])
        assert (row.status, row.parked) == ("pending", True)
    started = time.monotonic()
    emit_event(account_id, "email.sent", sample_data("email.sent"))
    assert outbox.flush(10)
    assert time.monotonic() - started < 0.5  # the known-down broker is skipped for a while


def test_a_publish_that_hangs_is_parked_by_its_caller_and_the_next_at_once(db, monkeypatch):
    """A broker cut off (its packets dropped, behind Sentinels) can hold the publisher
    thread far past any one time-out: the caller gives up after its wait, parks its
    deliveries itself, and while the broker is taken for down the next caller parks at
    once instead of queueing behind the hung publish."""
    import threading

    from webhooks.broker import outbox
    from webhooks.storage.db import session_scope

    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    hung, release = threading.Event(), threading.Event()

    def hang(items):
        hung.set()
        release.wait(30)
        return 0

    monkeypatch.setattr(outbox, "_broker_down_until", 0.0)
    monkeypatch.setattr("webhooks.broker.outbox.publish_batch", hang)
    monkeypatch.setattr(outbox, "publish_wait", lambda: 0.3)
    try:
        started = time.monotonic()
        first = emit_event(account_id, "email.sent", sample_data("email.sent"))
        waited = time.monotonic() - started
        assert hung.is_set() and 0.3 <= waited < 2
        started = time.monotonic()
        second = emit_event(account_id, "email.sent", sample_data("email.sent"))
        assert time.monotonic() - started < 0.25  # parked at once, not behind the hang
        with session_scope() as session:
            rows = [session.get(Delivery, event.delivery_ids[0]) for event in (first, second)]
            assert [(row.status, row.parked) for row in rows] == [("pending", True)] * 2
    finally:
        release.set()
        outbox.flush(10)


def test_the_wait_of_a_publish_follows_the_publish_timeout(monkeypatch):
    from webhooks.broker import outbox
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_PUBLISH_TIMEOUT", "2")
    reset_settings_cache()
    assert outbox.publish_wait() == 7.0  # to connect, then 5 s for a broker that never answers
    monkeypatch.setenv("WEBHOOKS_PUBLISH_TIMEOUT", "8")
    reset_settings_cache()
    assert outbox.publish_wait() == 16.0


def test_a_failing_publish_does_not_stop_the_publisher(db, monkeypatch, published):
    from webhooks.broker import outbox
    from webhooks.broker import outbox

    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    failures = []

    def fail_once(items):
        if not failures:
            failures.append(items)
            raise RuntimeError("database unreachable while parking")
        return outbox.publish_now(items)

    monkeypatch.setattr("webhooks.broker.outbox.publish_batch", fail_once)
    emit_event(account_id, "email.sent", sample_data("email.sent"))
    assert outbox.flush(10) and len(failures) == 1 and published == []
    event = emit_event(account_id, "email.sent", sample_data("email.sent"))
    assert [p.delivery_id for p in published.settled()] == list(event.delivery_ids)


def test_a_pooled_connection_that_died_is_replaced_without_a_duplicate(account, published):
    """emit_event's own transaction skips the pool's pre-ping: a connection killed while
    idle in the pool fails the first statement, and the call runs once more on a new one."""
    from tests.support.services import kill_idle_pooled_connection
    from webhooks.storage.db import get_engine

    # A fresh pool: a test before this one in the process may have left it a connection that
    # a killed server or backend ended, which would be the one killed below.
    get_engine(pre_ping=False).dispose()
    emit_event(account, "email.sent", sample_data("email.sent"))  # a connection now idles in the pool
    kill_idle_pooled_connection(get_engine(pre_ping=False))

    before = counts()
    event = emit_event(account, "email.sent", sample_data("email.sent"))
    assert counts() == (before[0] + 1, before[1] + 1)
    assert [p.delivery_id for p in published.settled()][-1] == event.delivery_ids[0]
