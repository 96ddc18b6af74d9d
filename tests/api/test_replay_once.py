"""CONTRACT 9.2: a delivery is replayed once. A second replay, from the API, the dashboard or
recover, answers 409 ``already_replayed`` naming the earlier replay; two at once make one
(issue 22: three POSTs made three replays of one delivery)."""

from __future__ import annotations

import threading

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from webhooks.lifecycle.recover import _take_turn
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery

from .helpers import emit, make_subscription, set_delivery, settle_publisher

BASE = "/api/webhooks/deliveries"


def _dead_delivery(account_id: str) -> tuple[str, str]:
    subscription_id = make_subscription(account_id)
    _, (delivery_id,) = emit(account_id, "reply.received")
    set_delivery(delivery_id, status="dead", attempt_count=6, next_attempt_at=None)
    return subscription_id, delivery_id


def _replays_of(delivery_id: str) -> list[str]:
    with session_scope() as session:
        return list(session.scalars(select(Delivery.id).where(Delivery.replay_of == delivery_id)))


def _already_replayed(response, earlier: str) -> None:
    assert response.status_code == 409, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert error["code"] == "already_replayed"
    assert earlier in error["message"]


def test_a_second_and_third_replay_answer_409_naming_the_first(client, alice, broker):
    _, original = _dead_delivery(alice.account_id)
    first = client.post(f"{BASE}/{original}/replay", headers=alice.headers)
    assert first.status_code == 202
    replay_id = first.get_json()["id"]
    for _ in range(2):
        _already_replayed(client.post(f"{BASE}/{original}/replay", headers=alice.headers),
                          replay_id)
    assert _replays_of(original) == [replay_id]
    settle_publisher()


def test_a_replay_can_be_replayed_once_in_turn(client, alice, broker):
    _, original = _dead_delivery(alice.account_id)
    replay_id = client.post(f"{BASE}/{original}/replay", headers=alice.headers).get_json()["id"]
    set_delivery(replay_id, status="failed", attempt_count=1, next_attempt_at=None)
    again = client.post(f"{BASE}/{replay_id}/replay", headers=alice.headers)
    assert again.status_code == 202 and again.get_json()["replay_of"] == replay_id
    settle_publisher()


def test_a_delivery_recover_replayed_answers_409_naming_that_replay(client, alice, broker):
    subscription_id, original = _dead_delivery(alice.account_id)
    recovered = client.post(f"/api/webhooks/subscriptions/{subscription_id}/recover",
                            json={"since": "2026-01-01T00:00:00Z"}, headers=alice.headers)
    assert recovered.status_code == 202 and recovered.get_json()["replayed"] == 1
    (by_recover,) = _replays_of(original)
    _already_replayed(client.post(f"{BASE}/{original}/replay", headers=alice.headers),
                      by_recover)
    # And recover never replays what replay did.
    assert _replays_of(original) == [by_recover]


def _waiting_on_an_advisory_lock() -> int:
    with get_engine().connect() as connection:
        return connection.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' "
            "AND datname = current_database()")).scalar()


def test_two_replays_at_once_make_one(app, alice, broker):
    """Both requests pass every check before either commits: the subscription's turn (held
    here first) makes the second wait for the first's commit, then see its replay."""
    subscription_id, original = _dead_delivery(alice.account_id)
    answers: list = []

    def replay() -> None:
        answers.append(app.test_client().post(f"{BASE}/{original}/replay",
                                              headers=alice.headers))

    with get_engine().connect() as holder:
        holder_session = Session(bind=holder)
        _take_turn(holder_session, subscription_id)
        threads = [threading.Thread(target=replay) for _ in range(2)]
        for thread in threads:
            thread.start()
        # Both wait on the turn (without it, both are done by now, two replays made).
        for _ in range(200):
            if _waiting_on_an_advisory_lock() == 2 or len(answers) == 2:
                break
            threading.Event().wait(0.05)
        holder_session.rollback()  # releases the turn
        for thread in threads:
            thread.join(30)
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [202, 409], [a.get_data(as_text=True) for a in answers]
    (made,) = _replays_of(original)
    refused = next(answer for answer in answers if answer.status_code == 409)
    _already_replayed(refused, made)
    settle_publisher()
