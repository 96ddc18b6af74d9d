"""emit_events at its edges (issue 36, item 10), on both backends (``any_db``): no events,
more than WEBHOOKS_EMIT_BATCH_MAX, and a batch sent again with the same idempotency keys."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import event, func, select

from tests.factories import make_account, make_subscription
from webhooks.config import reset_settings_cache
from webhooks.emit import emit_events
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_engine, get_sessionmaker, session_scope
from webhooks.storage.models import Account, Event

DATA = sample_data("email.sent")


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    return account_id


def events_stored() -> int:
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(Event))


def test_no_events_store_nothing_and_return_nothing(account):
    assert emit_events(account, []) == []
    assert emit_events(account, iter(())) == []
    assert events_stored() == 0


def test_no_events_leave_the_caller_s_transaction_as_it_was(account):
    """Before: an INSERT of an event without values (NULL id), whose IntegrityError aborted
    the caller's transaction (on PostgreSQL every later statement in it failed)."""
    session = get_sessionmaker()()
    try:
        session.add(Account(id="0d1f6f0e-54a2-4a3e-8a55-7b8f3f3b6e21", name="joined",
                            api_key_hash="x" * 64))
        session.flush()
        assert emit_events(account, [], session=session) == []
        assert emit_events(account, [{"type": "email.sent", "data": DATA}], session=session)
        session.commit()
    finally:
        session.close()
    assert events_stored() == 1
    with session_scope() as session:
        assert session.get(Account, "0d1f6f0e-54a2-4a3e-8a55-7b8f3f3b6e21") is not None


def test_more_events_than_the_bound_raise_a_value_error_and_store_nothing(account, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_EMIT_BATCH_MAX", "3")
    reset_settings_cache()
    one = {"type": "email.sent", "data": DATA}
    assert len(emit_events(account, [one] * 3)) == 3  # the bound itself is taken
    with pytest.raises(ValueError, match=r"at most 3 events .*WEBHOOKS_EMIT_BATCH_MAX.*got 4"):
        emit_events(account, [one] * 4)
    # An endless iterator is read one past the bound, then refused.
    with pytest.raises(ValueError, match=r"at most 3 events .*got more than 3"):
        emit_events(account, itertools.repeat(one))
    assert events_stored() == 3


def test_the_bound_is_10000_by_default():
    from webhooks.config.settings import load_settings

    assert load_settings({}).emit_batch_max == 10_000


def test_a_batch_sent_again_looks_its_first_events_up_together(account):
    """A keyed batch sent a second time (a client's retry) answers the first call's ids with
    a few statements, not two per event (each repeated event was looked up on its own)."""
    batch = [{"type": "email.sent", "data": DATA, "idempotency_key": f"k{i}"} for i in range(50)]
    first = emit_events(account, batch)
    statements = []
    engine = get_engine()

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        again = emit_events(account, batch)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert again == first
    assert len(statements) <= 6, statements
    assert events_stored() == 50
