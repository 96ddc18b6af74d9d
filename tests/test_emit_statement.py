"""emit_event's one statement on PostgreSQL (webhooks/lifecycle/emit_statement.py) against the
session's three statements (emit._emit_in_a_session), which SQLite and ``session=``
callers still use: the same rows, the same messages; and a lost commit is tried
again without a second event.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import OperationalError

from tests.factories import make_account, make_subscription
from webhooks import emit as emit_module
from webhooks.config import get_settings
from webhooks.events.samples import sample_data
from webhooks.lifecycle import emit_statement
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event, Subscription, new_id, utcnow

pytestmark = pytest.mark.database


def _account_with_every_kind_of_subscription() -> tuple[str, dict[str, str]]:
    """An account whose subscriptions cover each rule of emit: by name, their ids."""
    account_id, _ = make_account("every-kind")
    url = "https://example.com/"
    subscriptions = {
        "all types": make_subscription(account_id, url + "a").id,
        "wants email.sent and test.ping": make_subscription(
            account_id, url + "b", event_types=["email.sent", "test.ping"]).id,
        "wants another type": make_subscription(account_id, url + "c",
                                                event_types=["email.bounced"]).id,
        "paused": make_subscription(account_id, url + "d", status="paused").id,
        "deleted": make_subscription(account_id, url + "e").id,
        "has a delivery waiting for a slot": make_subscription(account_id, url + "f").id,
    }
    now = utcnow()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscriptions["deleted"])
                        .values(deleted_at=now))
        event_id = new_id()
        session.add(Event(id=event_id, account_id=account_id, type="email.sent", version="1",
                          body=b"{}", created_at=now))
        session.flush()
        session.add(Delivery(id=new_id(), account_id=account_id, event_id=event_id,
                             subscription_id=subscriptions["has a delivery waiting for a slot"],
                             event_type="email.sent", status="pending", attempt_count=0,
                             next_attempt_at=None, parked=True, created_at=now, updated_at=now))
    return account_id, subscriptions


def _deliveries_of(event_id: str, names: dict[str, str]) -> list[tuple]:
    by_id = {v: k for k, v in names.items()}
    with session_scope() as session:
        rows = session.execute(select(Delivery).where(Delivery.event_id == event_id)).scalars()
        return sorted((by_id[d.subscription_id], d.status, d.attempt_count, d.parked,
                       d.next_attempt_at is None, d.claimed_at, d.replay_of, d.paced,
                       d.event_type, d.account_id) for d in rows)


def _emit_in_one_statement(account_id, event_type, data, idempotency_key, settings):
    """One call alone on the one-statement path, as emit_event takes it on PostgreSQL."""
    return emit_module._store_in_one_statement(emit_module._statement_values(
        account_id, event_type, data, idempotency_key, settings))


@pytest.mark.parametrize("event_type", ["email.sent", "test.ping"])
def test_the_statement_stores_what_the_session_stores(db, event_type):
    account_id, names = _account_with_every_kind_of_subscription()
    settings = get_settings()
    data = sample_data(event_type)
    results = {}
    for path in (_emit_in_one_statement, emit_module._emit_in_a_session):
        emitted, dispatches = path(account_id, event_type, data, None, settings)
        rows = _deliveries_of(emitted.id, names)
        published = _messages(dispatches, names)
        with session_scope() as session:
            event = session.get(Event, emitted.id)
            stored_event = (event.type, event.version, event.account_id, bytes(event.body) != b"")
        results[path.__name__] = (rows, published, stored_event, len(emitted.delivery_ids))
    one, session_path = results["_emit_in_one_statement"], results["_emit_in_a_session"]
    assert one == session_path
    subscribed = {row[0] for row in one[0]}
    assert "deleted" not in subscribed and "wants another type" not in subscribed
    assert len(subscribed) == 4  # the rules were exercised, not an empty result compared


def _messages(dispatches, names: dict[str, str]) -> list[tuple]:
    """(subscription name, attempt count, countdown) of each message to publish."""
    by_id = {v: k for k, v in names.items()}
    with session_scope() as session:
        subscription_of = dict(session.execute(
            select(Delivery.id, Delivery.subscription_id)
            .where(Delivery.id.in_([d.delivery_id for d in dispatches]))).all())
    return sorted((by_id[subscription_of[d.delivery_id]], d.attempt_count, d.countdown)
                  for d in dispatches)


def test_a_lost_commit_is_tried_again_without_a_second_event(db, monkeypatch):
    """The first try commits but its connection is lost before the answer: the second try
    finds the event it stored and publishes its delivery, and stores nothing more."""
    account_id, _ = make_account("lost-commit")
    subscription = make_subscription(account_id, "https://example.com/hook")
    real = emit_statement.store_in_one_statement
    tries = []

    def commits_then_loses_the_connection(connection, **values):
        tries.append(values["event_id"])
        stored = real(connection, **values)
        if len(tries) == 1:
            connection.invalidate()
            raise OperationalError("EXECUTE webhooks_emit", {}, Exception("connection lost"),
                                   connection_invalidated=True)
        return stored

    monkeypatch.setattr(emit_module, "store_in_one_statement", commits_then_loses_the_connection)
    emitted, dispatches = _emit_in_one_statement(
        account_id, "email.sent", sample_data("email.sent"), None, get_settings())
    assert tries == [emitted.id, emitted.id]  # the same event both times
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 1
        (delivery,) = session.execute(select(Delivery)).scalars()
    assert delivery.subscription_id == subscription.id and emitted.duplicate is False
    assert emitted.delivery_ids == (delivery.id,)
    assert [(d.delivery_id, d.attempt_count) for d in dispatches] == [(delivery.id, 0)]


def test_an_idempotency_key_used_before_returns_the_first_event(db):
    account_id, _ = make_account("idempotent")
    make_subscription(account_id, "https://example.com/hook")
    settings = get_settings()
    first, _ = _emit_in_one_statement(
        account_id, "email.sent", sample_data("email.sent"), "key-1", settings)
    again, dispatches = _emit_in_one_statement(
        account_id, "email.sent", sample_data("email.sent"), "key-1", settings)
    assert (again.id, again.delivery_ids, again.duplicate) == (first.id, first.delivery_ids, True)
    assert dispatches == []
    assert isinstance(first.created_at, dt.datetime) and first.created_at.tzinfo is not None
