"""Filters at emit time (CONTRACT 10.4): an event a subscription's filter refuses creates
no delivery and no message for it, on every path that stores an event (emit_event alone,
in the caller's session, grouped in one statement, emit_events), on both backends; a
filter changed between two emits applies to the second; test.ping, replay and recover
ignore filters."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select, update

from tests.factories import make_account, make_subscription
from webhooks import emit as emit_module
from webhooks.emit import emit_event, emit_events, send_test
from webhooks.events.samples import sample_data
from webhooks.lifecycle.changes import replay_delivery
from webhooks.lifecycle.recover import recover
from webhooks.storage.db import get_sessionmaker, session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow


def data(to_email: str, **more) -> dict:
    return {**sample_data("email.sent"), "to_email": to_email, **more}


def set_filter(subscription_id: str, chosen) -> None:
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(filter=chosen))


def deliveries_of(subscription_id: str) -> list[Delivery]:
    with session_scope() as session:
        rows = session.scalars(select(Delivery).where(
            Delivery.subscription_id == subscription_id)).all()
        session.expunge_all()
        return list(rows)


@pytest.fixture(autouse=True)
def _forget_known_filters(monkeypatch):
    monkeypatch.setattr(emit_module, "_KNOWN_FILTERS", {})


@pytest.fixture
def three(any_db, published):
    """An account with three subscriptions of email.sent: unfiltered, ann's only, not ann's."""
    account_id, _ = make_account()
    every = make_subscription(account_id, "https://example.com/every").id
    ann = make_subscription(account_id, "https://example.com/ann", ["email.sent"]).id
    others = make_subscription(account_id, "https://example.com/others").id
    set_filter(ann, {"data.to_email": {"$prefix": "ann@"}})
    set_filter(others, {"$not": {"data.to_email": {"$prefix": "ann@"}}})
    return account_id, every, ann, others


def delivered_to(emitted_ids, published) -> dict[str, set[str]]:
    """For each subscription, the events it got a delivery of; and each delivery has a
    message (nothing else was published)."""
    got: dict[str, set[str]] = {}
    with session_scope() as session:
        rows = session.execute(select(Delivery.id, Delivery.subscription_id, Delivery.event_id)
                               .where(Delivery.event_id.in_(emitted_ids))).all()
    for _, subscription_id, event_id in rows:
        got.setdefault(subscription_id, set()).add(event_id)
    assert sorted(dispatch.delivery_id for dispatch in published.settled()) == sorted(
        row[0] for row in rows)
    return got


def test_own_transaction_refused_events_cost_no_row_and_no_message(three, published):
    account_id, every, ann, others = three
    to_ann = emit_event(account_id, "email.sent", data("ann@example.com")).id
    to_bob = emit_event(account_id, "email.sent", data("bob@example.com")).id
    assert delivered_to([to_ann, to_bob], published) == {
        every: {to_ann, to_bob}, ann: {to_ann}, others: {to_bob}}


def test_in_the_caller_s_session(three, published):
    account_id, every, ann, others = three
    session = get_sessionmaker()()
    try:
        to_bob = emit_event(account_id, "email.sent", data("bob@example.com"), session=session).id
        session.commit()
    finally:
        session.close()
    assert delivered_to([to_bob], published) == {every: {to_bob}, others: {to_bob}}


def test_emit_events_filters_each_event(three, published):
    account_id, every, ann, others = three
    ids = emit_events(account_id, [{"type": "email.sent", "data": data("ann@example.com")},
                                   {"type": "email.sent", "data": data("bob@example.com")}])
    assert delivered_to(ids, published) == {
        every: set(ids), ann: {ids[0]}, others: {ids[1]}}


def test_an_event_every_filter_refuses_is_stored_without_deliveries(any_db, published):
    account_id, _ = make_account()
    only = make_subscription(account_id, "https://example.com/only").id
    set_filter(only, {"type": "email.opened"})
    emitted = emit_event(account_id, "email.sent", data("ann@example.com"))
    assert emitted.delivery_ids == () and deliveries_of(only) == []
    assert published.settled() == []


def test_a_filter_changed_between_two_emits_applies_to_the_second(three, published):
    """On PostgreSQL the process remembers the filters it saw: a change, a new filtered
    subscription and a removed filter must all be seen by the next emit."""
    account_id, every, ann, others = three
    first = emit_event(account_id, "email.sent", data("ann@example.com")).id
    set_filter(ann, {"data.to_email": {"$prefix": "bob@"}})  # changed
    set_filter(every, {"data.to_email": "nobody@example.com"})  # newly filtered
    set_filter(others, None)  # no longer filtered
    second = emit_event(account_id, "email.sent", data("ann@example.com")).id
    third = emit_event(account_id, "email.sent", data("bob@example.com")).id
    assert delivered_to([first, second, third], published) == {
        every: {first}, ann: {first, third}, others: {second, third}}


def test_grouped_emits_each_see_the_filters(db, published):
    """The group's one statement (several callers' events together), including a batch
    whose statement meets filters its callers had not evaluated yet."""
    account_id, _ = make_account()
    ann = make_subscription(account_id, "https://example.com/ann").id
    set_filter(ann, {"data.to_email": "ann@example.com"})
    settings = emit_module.get_settings()
    for round_number in range(2):  # first unknown to this process, then known
        items = [emit_module._statement_values(account_id, "email.sent", data(to), None,
                                               settings)
                 for to in ("ann@example.com", "bob@example.com")]
        answers = emit_module._emit_batch(items)
        if round_number == 0:
            assert all(isinstance(answer, emit_module._FiltersUnseen) for answer in answers)
            continue
        (to_ann, _, _), (to_bob, _, _) = answers
        assert len(to_ann.delivery_ids) == 1 and to_bob.delivery_ids == ()
    assert [d.event_id for d in deliveries_of(ann)] == [to_ann.id]


def test_test_ping_replay_and_recover_ignore_the_filter(any_db, published):
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, "https://example.com/hook").id
    emitted = emit_event(account_id, "email.sent", data("ann@example.com"))
    set_filter(subscription_id, {"type": "nothing.at.all"})  # refuses every event now
    with session_scope() as session:
        session.execute(update(Delivery).values(status="dead"))
    with session_scope() as session:
        subscription = session.get(Subscription, subscription_id)
        ping = send_test(session, subscription)
        original = session.get(Delivery, emitted.delivery_ids[0])
        replay = replay_delivery(session, original, utcnow())
        replay_id = replay.id
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == replay_id).values(status="dead"))
    since = utcnow() - dt.timedelta(minutes=1)
    with session_scope() as session:
        recovered = recover(session, subscription_id, since, None, now=utcnow(), batch=10,
                            limit=10)
    assert len(ping.delivery_ids) == 1
    assert recovered.replayed == 1  # the replay, dead in its turn (the original was replayed)
    assert len(deliveries_of(subscription_id)) == 4  # original, ping, replay, its recovery
