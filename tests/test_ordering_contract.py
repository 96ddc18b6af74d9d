"""Ordering keys and emit_events (CONTRACT 9.4, 9.5) on both backends (``any_db``).

The claim refuses a keyed delivery while the one before it with its key is
unfinished and turns it away to wait behind its key; the record of that one,
once finished, releases it; the sweep does so for a missed release. Other keys
and deliveries without a key are never held back. A replay has no key.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from tests.factories import AUDIT_ACTOR, make_account, make_subscription
from webhooks import states
from webhooks.emit import emit_event, emit_events
from webhooks.errors import InvalidEvent
from webhooks.events.samples import sample_data
from webhooks.lifecycle import changes
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record as record_attempt
from webhooks.lifecycle.sweep import sweep
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, Event, utcnow

RULES = Rules((60, 300, 1800, 7200, 43200), countdown_limit=300, pause_after=25)
DATA = sample_data("email.sent")


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook")


def emit(account_id, key=None):
    return emit_event(account_id, "email.sent", DATA, ordering_key=key).delivery_ids[0]


def claim(delivery_id, count=0):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, count, utcnow())


def record(claimed, status_code):
    now = utcnow()
    step = next_step(claimed.attempt_number, status_code, claimed.event_type, RULES)
    with get_engine().begin() as connection:
        return record_attempt(connection, claimed, step=step, rules=RULES, started_at=now, now=now,
                              duration_ms=5, status_code=status_code, error=None, excerpt=None)


def row(delivery_id) -> Delivery:
    with session_scope() as session:
        return session.get(Delivery, delivery_id)


def is_behind_its_key(delivery_id) -> bool:
    deliveries = Delivery.__table__
    with get_engine().connect() as connection:
        return connection.scalar(select(func.count()).select_from(deliveries).where(
            deliveries.c.id == delivery_id, states.behind_its_key(deliveries))) == 1


def test_a_keyed_delivery_waits_for_the_one_before_it_and_is_released_when_it_is_done(account):
    account_id, _ = account
    first, second, third = (emit(account_id, "order-1") for _ in range(3))
    other_key, no_key = emit(account_id, "order-2"), emit(account_id)
    assert (row(first).key_sequence, row(second).key_sequence, row(third).key_sequence) == (1, 2, 3)
    assert row(other_key).key_sequence == 1 and row(no_key).ordering_key is None

    assert claim(second) is None and is_behind_its_key(second)  # first is unfinished
    assert claim(third) is None and is_behind_its_key(third)
    head = claim(first)
    assert head.ordering_key == "order-1" and head.key_sequence == 1
    assert claim(other_key) is not None and claim(no_key) is not None  # never held back

    retried = record(head, 500)  # a retry is not finished: nothing released
    assert retried.status == "pending" and retried.released == ()
    assert is_behind_its_key(second)
    with session_scope() as session:  # its retry's time comes
        session.execute(update(Delivery).where(Delivery.id == first)
                        .values(next_attempt_at=utcnow()))
    head = claim(first, 1)
    done = record(head, 200)
    assert [d.delivery_id for d in done.released] == [second]  # only the next one
    assert not is_behind_its_key(second) and row(second).parked is False
    assert is_behind_its_key(third)
    assert claim(second) is not None and claim(third) is None


def test_a_failed_or_dead_predecessor_releases_its_successor_too(account):
    account_id, _ = account
    first, second = emit(account_id, "k"), emit(account_id, "k")
    assert claim(second) is None
    assert [d.delivery_id for d in record(claim(first), 400).released] == [second]  # failed
    assert claim(second) is not None


def test_the_sweep_releases_a_delivery_whose_release_was_missed(account):
    account_id, _ = account
    first, second = emit(account_id, "k"), emit(account_id, "k")
    assert claim(second) is None
    with session_scope() as session:  # as if the record's release had been lost
        session.execute(update(Delivery).where(Delivery.id == first).values(status="done"))
    with session_scope() as session:
        found = sweep(session, utcnow(), timeout=5, recover_after=120, batch=100)
    assert second in [d.delivery_id for d in found]
    assert not is_behind_its_key(second) and claim(second) is not None


def test_a_pause_keeps_the_order_and_a_resume_lets_the_claim_check_it_again(account):
    account_id, subscription = account
    first, second = emit(account_id, "k"), emit(account_id, "k")
    assert claim(second) is None
    with session_scope() as session:
        changes.pause_subscription(session.connection(), subscription.id, utcnow())
        from webhooks.lifecycle import transitions

        transitions.hold_pending(session, subscription.id, utcnow())
    assert (row(first).status, row(second).status) == ("paused", "paused")
    with session_scope() as session:
        from webhooks.services import pausing

        pausing.resume(session, session.get(type(subscription), subscription.id),
                       actor=AUDIT_ACTOR)
    assert claim(second) is None  # first is pending again: second still waits
    assert claim(first) is not None


def test_a_replay_has_no_key(account):
    account_id, _ = account
    first = emit(account_id, "k")
    record(claim(first), 400)
    with session_scope() as session:
        replay = changes.replay_delivery(session, session.get(Delivery, first), utcnow())
        replay_id = replay.id
    assert row(replay_id).ordering_key is None and claim(replay_id) is not None


@pytest.mark.parametrize("bad", ["", "x" * 201, "caf\u00e9", "tab\there", "new\nline", 7])
def test_an_ordering_key_is_1_to_200_printable_ascii_characters(account, bad):
    account_id, _ = account
    with pytest.raises(InvalidEvent, match="ordering_key") as raised:
        emit_event(account_id, "email.sent", DATA, ordering_key=bad)
    assert "ordering_key" in raised.value.errors
    emit_event(account_id, "email.sent", DATA, ordering_key="x" * 200)  # the longest
    emit_event(account_id, "email.sent", DATA, ordering_key=" ~!")


def test_emit_events_stores_all_together_and_returns_the_ids_in_order(account):
    account_id, _ = account
    ids = emit_events(account_id, [
        {"type": "email.sent", "data": DATA, "ordering_key": "k"},
        {"type": "email.sent", "data": DATA},
        {"type": "email.sent", "data": DATA, "ordering_key": "k", "idempotency_key": "once"},
        {"type": "email.sent", "data": DATA, "idempotency_key": "once"},
    ])
    assert len(ids) == 4 and ids[3] == ids[2] and len(set(ids)) == 3
    with session_scope() as session:
        keyed = session.execute(select(Delivery.event_id, Delivery.key_sequence)
                                .where(Delivery.ordering_key == "k")
                                .order_by(Delivery.key_sequence)).all()
    assert [event_id for event_id, _ in keyed] == [ids[0], ids[2]]
    with session_scope() as session:  # one delivery per new event, none for the repeat
        stored = session.scalars(select(Delivery.event_id).order_by(Delivery.created_at)).all()
    assert sorted(stored) == sorted(ids[:3])


def test_emit_events_stores_its_events_in_one_statement_and_their_deliveries_in_another(
        account):
    """However many events, and whatever their idempotency keys (a repeat of an earlier
    call's, or of an earlier event of the same call), one INSERT of events and one of
    deliveries (issue 24)."""
    from sqlalchemy import event

    account_id, _ = account
    first = emit_events(account_id, [{"type": "email.sent", "data": DATA, "idempotency_key": "a"}])
    inserts = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO"):
            inserts.append(statement.split()[2])

    engine = get_engine()
    event.listen(engine, "before_cursor_execute", count)
    try:
        ids = emit_events(account_id, [
            {"type": "email.sent", "data": DATA, "idempotency_key": "a"},  # the earlier call's
            {"type": "email.sent", "data": DATA},
            {"type": "email.sent", "data": DATA, "idempotency_key": "b"},
            {"type": "email.sent", "data": DATA, "idempotency_key": "b"},  # this call's own
            {"type": "email.sent", "data": DATA},
        ])
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert ids[0] == first[0] and ids[3] == ids[2] and len(set(ids)) == 4
    assert sorted(inserts) == ["deliveries", "events"]
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Delivery)) == 4


@pytest.mark.parametrize("bad, words", [
    ({"type": "email.sent"}, "missing field 'data'"),
    ({"type": "no.such", "data": {}}, "unknown event type"),
    ({"type": "email.sent", "data": DATA, "ordering_key": "x" * 201}, "ordering_key"),
    ({"type": "email.sent", "data": DATA, "colour": "red"}, "unknown field 'colour'"),
    ("email.sent", "mapping"),
])
def test_emit_events_checks_every_event_first_and_stores_nothing_if_one_is_bad(account, bad, words):
    account_id, _ = account
    good = {"type": "email.sent", "data": DATA}
    with pytest.raises(ValueError, match=r"events\[1\]") as raised:
        emit_events(account_id, [good, bad, good])
    assert words in str(raised.value)
    with session_scope() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


def test_a_successor_released_while_others_wait_for_a_slot_joins_that_queue(account):
    account_id, subscription = account
    first, second = emit(account_id, "k"), emit(account_id, "k")
    assert claim(second) is None and is_behind_its_key(second)
    head = claim(first)
    queued = [emit(account_id), emit(account_id)]
    with session_scope() as session:  # as if the cap had turned them away
        session.execute(update(Delivery).where(Delivery.id.in_(queued))
                        .values(states.waiting_for_slot()))
    done = record(head, 200)
    # The slot the head frees goes to the oldest waiting; second joins the others in the
    # queue instead of being sent only to be turned away by the cap.
    assert [d.delivery_id for d in done.released] == [queued[0]]
    deliveries = Delivery.__table__
    with get_engine().connect() as connection:
        waiting = connection.scalars(select(deliveries.c.id).where(states.waiting(deliveries))).all()
    assert sorted(waiting) == sorted([second, queued[1]]) and not is_behind_its_key(second)
