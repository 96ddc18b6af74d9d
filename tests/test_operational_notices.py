"""notices.py on both databases: a notice is stored in the caller's transaction, for each
operational endpoint that wants its type, never about the operator's own endpoints."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from tests.factories import AUDIT_ACTOR, make_account, make_subscription
from webhooks.operational.notices import notify_delivery_ended, notify_paused, notify_resumed
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.services import operational_endpoints as endpoints
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, Event, utcnow


@pytest.fixture
def stored(any_db, published, monkeypatch):
    """The database, with private targets allowed (the endpoints' URLs are examples)."""
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    reset_settings_cache()
    return any_db


def add(url: str, types: list[str]):
    with session_scope() as session:
        return endpoints.add(session, url, types, actor=AUDIT_ACTOR).id


def notices_stored() -> list[tuple[str, dict, str]]:
    """(type, data, subscription) of each notice's delivery."""
    with session_scope() as session:
        rows = session.execute(
            select(Event.type, Event.body, Delivery.subscription_id)
            .join(Delivery, Delivery.event_id == Event.id)
            .where(Event.account_id == OPERATOR_ACCOUNT_ID).order_by(Event.type)).all()
        return [(t, json.loads(body)["data"], s) for t, body, s in rows]


def ended(connection, subscription_id, status="dead"):
    return notify_delivery_ended(
        connection, status, subscription_id=subscription_id,
        delivery_id="0d1f6f0e-54a2-4a3e-8a55-7b8f3f3b6e21",
        event_id="5f0c8a52-3c1e-4b7e-9a0d-2f7c1b9e4d61", event_type="email.sent",
        attempt_count=6, status_code=None)


def test_each_endpoint_that_wants_the_type_gets_one_delivery(stored):
    everything = add("http://127.0.0.1:9/all", ["delivery.dead", "subscription.paused"])
    add("http://127.0.0.1:9/resumes", ["subscription.resumed"])
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "http://127.0.0.1:9/customer")
    now = utcnow()
    with get_engine().begin() as connection:
        assert len(ended(connection, subscription.id)) == 1
        assert ended(connection, subscription.id, status="done") == []  # not an end to report
        assert len(notify_paused(connection, subscription.id, reason="failures", now=now)) == 1
    assert notices_stored() == [
        ("delivery.dead", {"account_id": account_id, "subscription_id": subscription.id,
                           "delivery_id": "0d1f6f0e-54a2-4a3e-8a55-7b8f3f3b6e21",
                           "event_id": "5f0c8a52-3c1e-4b7e-9a0d-2f7c1b9e4d61",
                           "event_type": "email.sent", "attempt_count": 6, "status_code": None},
         everything),
        ("subscription.paused", {"account_id": account_id, "subscription_id": subscription.id,
                                 "reason": "failures", "consecutive_failures": 0,
                                 "paused_at": now.isoformat(), "suppressed": 0}, everything),
    ]


def test_nothing_without_an_endpoint_or_about_the_operator_s_own(stored):
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "http://127.0.0.1:9/customer")
    with session_scope() as session:
        assert notify_resumed(session, subscription.id, now=utcnow()) == []  # no endpoint yet
    own = add("http://127.0.0.1:9/ops", ["delivery.dead", "subscription.paused",
                                         "subscription.resumed"])
    with get_engine().begin() as connection:
        assert ended(connection, own) == []
        assert notify_paused(connection, own, reason="failures", now=utcnow()) == []
    with session_scope() as session:
        assert notify_resumed(session, own, now=utcnow()) == []
    assert notices_stored() == []


def test_a_notice_goes_with_a_rolled_back_transaction(stored):
    add("http://127.0.0.1:9/ops", ["delivery.failed"])
    account_id, _ = make_account()
    subscription = make_subscription(account_id, "http://127.0.0.1:9/customer")
    with get_engine().connect() as connection:
        transaction = connection.begin()
        assert ended(connection, subscription.id, status="failed")
        transaction.rollback()
    assert notices_stored() == []


@pytest.mark.parametrize("answer", [422, 500])
def test_the_attempt_s_record_and_its_notice_commit_together(stored, monkeypatch, answer):
    """Through run_attempt on the attempt engine (autocommit on PostgreSQL): a record whose
    transaction fails after the notice was stored keeps neither the notice nor its end
    (run_attempt then records the attempt as an internal error, as for any failed record)."""
    import webhooks.operational.notices
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data
    from webhooks.sender.post import AttemptResult
    from webhooks.services.attempt import run_attempt

    monkeypatch.setenv("WEBHOOKS_RETRY_DELAYS", "1")  # a 500 on the second attempt is dead
    add("http://127.0.0.1:9/ops", ["delivery.failed", "delivery.dead"])
    account_id, _ = make_account()
    make_subscription(account_id, "http://127.0.0.1:9/customer")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    answers = lambda url, body, headers: AttemptResult(answer, None, 3)  # noqa: E731

    def due_again() -> int:
        """The delivery pending and due now (as the sweep makes it); its attempt count."""
        with session_scope() as session:
            row = session.get(Delivery, delivery_id)
            row.status, row.next_attempt_at, row.parked = "pending", utcnow(), False
            return row.attempt_count

    if answer == 500:  # the first attempt is a retry; the second one ends it
        assert run_attempt(delivery_id, 0, sender=answers) == "pending"

    stored_then_failed = webhooks.operational.notices.store_checked

    def store_then_fail(*args, **kwargs):
        stored_then_failed(*args, **kwargs)
        raise RuntimeError("the record's transaction fails after the notice was stored")

    monkeypatch.setattr(webhooks.operational.notices, "store_checked", store_then_fail)
    try:
        run_attempt(delivery_id, due_again(), sender=answers)
    except RuntimeError:
        pass  # the internal error's record ended the delivery too, and failed the same way
    assert notices_stored() == []
    with session_scope() as session:
        assert session.get(Delivery, delivery_id).status not in ("failed", "dead")

    monkeypatch.setattr(webhooks.operational.notices, "store_checked", stored_then_failed)
    assert run_attempt(delivery_id, due_again(), sender=answers) in ("failed", "dead")
    assert [notice[0] for notice in notices_stored()] == [
        "delivery.failed" if answer == 422 else "delivery.dead"]


def _paused_reasons() -> list[str]:
    return [data["reason"] for kind, data, _ in notices_stored() if kind == "subscription.paused"]


def test_a_pause_by_hand_is_reported_with_the_reason_manual(stored):
    from webhooks.services import pausing
    from webhooks.storage.models import Subscription

    add("http://127.0.0.1:9/ops", ["subscription.paused"])
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, "http://127.0.0.1:9/customer").id
    with session_scope() as session:
        assert pausing.pause(session, session.get(Subscription, subscription_id), actor=AUDIT_ACTOR)
    with session_scope() as session:  # already paused: nothing changes, nothing is reported
        assert not pausing.pause(session, session.get(Subscription, subscription_id),
                                 actor=AUDIT_ACTOR)
    assert _paused_reasons() == ["manual"]


def test_a_410_pause_is_reported_with_the_reason_gone(stored):
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data
    from webhooks.lifecycle.claim import claim
    from webhooks.lifecycle.policy import Rules, next_step
    from webhooks.lifecycle.record import record

    add("http://127.0.0.1:9/ops", ["subscription.paused"])
    account_id, _ = make_account()
    make_subscription(account_id, "http://127.0.0.1:9/customer")
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    now, rules = utcnow(), Rules((60, 300), 300, 25)
    with get_engine().begin() as connection:
        claimed = claim(connection, delivery_id, 0, now)
    step = next_step(1, 410, "email.sent", rules)
    with get_engine().begin() as connection:
        recorded = record(connection, claimed, step=step, rules=rules, started_at=now, now=now,
                          duration_ms=5, status_code=410, error=None, excerpt="gone")
    assert recorded.paused_subscription
    assert _paused_reasons() == ["gone"]
