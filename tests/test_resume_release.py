"""A resume sends its own subscription's held deliveries, in bounded batches, and nothing
else (issue 36, item 2; webhooks/lifecycle/release.py), on both backends.

Before, every resume (of an active subscription too) asked for a full sweep of every
subscription's deliveries: 400 resumes cost the worker 6.35 s of CPU.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from tests.factories import AUDIT_ACTOR, make_account, make_subscription
from webhooks.config import reset_settings_cache
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import transitions
from webhooks.lifecycle.sweep import sweep
from webhooks.services import pausing
from webhooks.storage import clock
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Subscription

DATA = sample_data("email.sent")


@pytest.fixture
def broker(any_db, published, monkeypatch):
    """Messages captured; a resume sends its held deliveries in batches of 3."""
    monkeypatch.setenv("WEBHOOKS_RELEASE_BATCH", "3")
    reset_settings_cache()
    return published


def held_subscription(account_id: str, deliveries: int) -> tuple[str, list[str]]:
    """A paused subscription holding ``deliveries`` deliveries (oldest first)."""
    subscription_id = make_subscription(account_id, "https://example.com/hook",
                                        event_types=["email.sent"], status="paused").id
    held = [emit_event(account_id, "email.sent", DATA).delivery_ids[0] for _ in range(deliveries)]
    return subscription_id, held


def resume(subscription_id: str) -> int:
    with session_scope() as session:
        return pausing.resume(session, session.get(Subscription, subscription_id), actor=AUDIT_ACTOR)


def pause(subscription_id: str) -> None:
    with session_scope() as session:
        pausing.pause(session, session.get(Subscription, subscription_id), actor=AUDIT_ACTOR)


def sent(broker) -> list[str]:
    """The delivery ids published so far, then forgotten."""
    ids = [item.delivery_id for item in broker.settled()]
    broker.clear()
    return ids


def statuses(ids) -> list[str]:
    with session_scope() as session:
        return [session.get(Delivery, d).status for d in ids]


def releasing_since(subscription_id: str):
    with session_scope() as session:
        return session.get(Subscription, subscription_id).releasing_since


def test_a_resume_of_an_active_subscription_queues_nothing(broker):
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, "https://example.com/hook").id
    (parked,) = emit_event(account_id, "email.sent", DATA).delivery_ids
    with session_scope() as session:  # a parked retry of its own, due: the sweep's to send
        transitions.park(session, [parked], clock.now())
    sent(broker)
    assert resume(subscription_id) == 0
    assert sent(broker) == [] and broker.sweeps == 0 and broker.releases == []
    assert releasing_since(subscription_id) is None


def test_a_resume_sends_only_that_subscription_s_held_deliveries(broker):
    account_id, _ = make_account()
    resumed, held = held_subscription(account_id, 2)
    other_account, _ = make_account("other")
    still_paused, other_held = held_subscription(other_account, 2)
    active = make_subscription(other_account, "https://example.com/other",
                               event_types=["email.bounced"]).id
    (parked,) = emit_event(other_account, "email.bounced",
                           sample_data("email.bounced")).delivery_ids
    with session_scope() as session:  # another subscription's parked retry, due
        transitions.park(session, [parked], clock.now())
    sent(broker)

    assert resume(resumed) == 2
    assert sent(broker) == held  # these two, oldest first, and nothing else
    assert broker.sweeps == 0 and broker.releases == []
    assert statuses(held) == ["pending", "pending"]
    assert statuses(other_held) == ["paused", "paused"]
    with session_scope() as session:
        assert session.get(Delivery, parked).parked  # left to the sweep
        assert session.get(Subscription, active).status == "active"
        assert session.get(Subscription, still_paused).status == "paused"


def test_many_held_deliveries_go_in_batches_by_one_release_task(broker):
    account_id, _ = make_account()
    subscription_id, held = held_subscription(account_id, 8)
    sent(broker)

    assert resume(subscription_id) == 8
    assert sent(broker) == held[:3]  # the first batch, with the resume itself
    assert broker.releases == [subscription_id]  # and one task for the rest
    assert releasing_since(subscription_id) is not None

    # Paused (the three sent are held again: no attempt took them yet) and resumed while
    # the task is on its way: the first batch again, and no second task.
    pause(subscription_id)
    assert resume(subscription_id) == 8
    assert sent(broker) == held[:3]
    assert broker.releases == [subscription_id]

    assert pausing.send_next_batch(subscription_id) == 3  # the task's runs: the rest
    assert sent(broker) == held[3:6] and broker.releases == [subscription_id] * 2
    assert pausing.send_next_batch(subscription_id) == 2
    assert sent(broker) == held[6:]
    assert broker.releases == [subscription_id] * 2  # a batch not full: it does not go on
    assert releasing_since(subscription_id) is None
    assert statuses(held) == ["pending"] * 8


def test_the_release_task_sends_itself_again_while_batches_come_full(broker):
    account_id, _ = make_account()
    subscription_id, held = held_subscription(account_id, 9)
    resume(subscription_id)
    assert sent(broker) == held[:3]
    assert pausing.send_next_batch(subscription_id) == 3
    assert sent(broker) == held[3:6] and broker.releases == [subscription_id] * 2
    assert pausing.send_next_batch(subscription_id) == 3
    assert sent(broker) == held[6:] and broker.releases == [subscription_id] * 3
    assert pausing.send_next_batch(subscription_id) == 0  # nothing left: it ends
    assert broker.releases == [subscription_id] * 3 and releasing_since(subscription_id) is None


def test_a_task_of_a_subscription_paused_again_ends_and_leaves_it_held(broker):
    account_id, _ = make_account()
    subscription_id, held = held_subscription(account_id, 5)
    resume(subscription_id)
    pause(subscription_id)
    sent(broker)
    assert pausing.send_next_batch(subscription_id) == 0
    assert sent(broker) == [] and releasing_since(subscription_id) is None
    assert statuses(held[3:]) == ["paused", "paused"]


def test_nothing_is_lost_when_the_release_task_is(broker):
    """The task's message lost (a flushed broker, a dead worker): what the resume released
    is parked and due, so the sweep sends it; and the next resume, once the mark is older
    than WEBHOOKS_RECOVER_AFTER, sends a task again."""
    account_id, _ = make_account()
    subscription_id, held = held_subscription(account_id, 5)
    resume(subscription_id)
    assert sent(broker) == held[:3] and broker.releases == [subscription_id]
    now = clock.now()
    with session_scope() as session:
        found = sweep(session, now, timeout=15, recover_after=120, batch=100)
    assert sorted(item.delivery_id for item in found) == sorted(held[3:])

    pause(subscription_id)  # holds the five again (no attempt took them)
    assert resume(subscription_id) == 5
    assert broker.releases == [subscription_id]  # the lost task's mark is fresh: none sent
    with session_scope() as session:  # the mark grown old
        session.get(Subscription, subscription_id).releasing_since = now - dt.timedelta(hours=1)
    pause(subscription_id)
    assert resume(subscription_id) == 5
    assert broker.releases == [subscription_id] * 2  # the old mark was taken over
    with session_scope() as session:
        assert session.scalars(select(Delivery.id).where(Delivery.status == "paused")).all() == []
