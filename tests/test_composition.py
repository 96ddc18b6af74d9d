"""The composition root (webhooks/composition.py) and the lifecycle's listeners
(lifecycle/listeners.py): a change that must reach a layer above the lifecycle reaches it
through what the entrance registered, and fails loudly where nothing was registered."""

from __future__ import annotations

import pytest

from tests.factories import make_account, make_subscription
from tests.test_store import emit
from webhooks.broker import outbox
from webhooks.composition import LISTENERS, compose
from webhooks.lifecycle import changes, listeners
from webhooks.lifecycle.listeners import NotComposed
from webhooks.operational import notices
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, utcnow


@pytest.fixture
def uncomposed(monkeypatch):
    """This test's process as one whose entrance forgot compose(); composed again after."""
    monkeypatch.setattr(listeners, "_registered", None)


def test_compose_registers_the_broker_and_operational_webhooks(uncomposed):
    compose()
    heard = listeners.registered()
    assert heard is LISTENERS
    assert heard.publish_after_commit is outbox.publish_after_commit
    assert heard.request_sweep_after_commit is outbox.request_sweep_after_commit
    assert heard.delivery_ended is notices.notify_delivery_ended
    assert heard.subscription_paused is notices.notify_paused


def test_without_compose_a_change_that_must_be_published_raises_not_composed(
        sqlite_db, published, uncomposed):
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    delivery_id = emit(account_id, "email.sent").delivery_ids[0]
    with session_scope() as session:
        delivery = session.get(Delivery, delivery_id)
        delivery.status = "failed"
        session.flush()
        with pytest.raises(NotComposed, match=r"webhooks\.composition\.compose\(\)"):
            changes.replay_delivery(session, delivery, utcnow())
        session.rollback()  # the replay's row goes with the failed change


def test_a_composed_replay_is_published_after_its_commit(sqlite_db, published):
    account_id, _ = make_account()
    make_subscription(account_id, "https://example.com/hook")
    delivery_id = emit(account_id, "email.sent").delivery_ids[0]
    published.settled().clear()  # the event's own message
    with session_scope() as session:
        delivery = session.get(Delivery, delivery_id)
        delivery.status = "failed"
        replay_id = changes.replay_delivery(session, delivery, utcnow()).id
    assert [item.delivery_id for item in published.settled()] == [replay_id]
