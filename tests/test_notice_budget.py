"""The budget of pause and resume notices (webhooks/operational/budget.py; issue 36, item 3),
on both backends: a subscription's pause and resume go out at once, repeats within the
window wait and replace each other (``suppressed`` counts them), an account sends at most
WEBHOOKS_NOTICE_BUDGET at once, and one account's flood leaves another's notice first
in line."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import select

from tests.factories import AUDIT_ACTOR, make_account, make_subscription
from webhooks.config import reset_settings_cache
from webhooks.lifecycle.sweep import sweep
from webhooks.operational.budget import earliest, spent
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.services import operational_endpoints as endpoints
from webhooks.services import pausing
from webhooks.storage import clock
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event, Subscription

WINDOW_S = 600  # long enough that no test outlasts a notice's wait, however slow the machine


@pytest.fixture
def operator(any_db, published, monkeypatch):
    """An operational endpoint that takes both notices; an account may send 3 per window.
    No sweep runs: a notice that waits stays parked."""
    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    monkeypatch.setenv("WEBHOOKS_NOTICE_WINDOW", str(WINDOW_S))
    monkeypatch.setenv("WEBHOOKS_NOTICE_BUDGET", "3")
    reset_settings_cache()
    with session_scope() as session:
        endpoints.add(session, "http://127.0.0.1:9/ops",
                      ["subscription.paused", "subscription.resumed"], actor=AUDIT_ACTOR)
    return published


def subscription_of(account_id: str) -> str:
    return make_subscription(account_id, "http://127.0.0.1:9/customer").id


def pause(subscription_id: str) -> None:
    with session_scope() as session:
        assert pausing.pause(session, session.get(Subscription, subscription_id), actor=AUDIT_ACTOR)


def resume(subscription_id: str) -> None:
    with session_scope() as session:
        pausing.resume(session, session.get(Subscription, subscription_id), actor=AUDIT_ACTOR)


def notices() -> list[dict]:
    """Every stored notice, oldest first: its type, data, and whether it went out at once
    (published) or waits (parked, with its moment)."""
    with session_scope() as session:
        rows = session.execute(
            select(Event.type, Event.body, Delivery.parked, Delivery.next_attempt_at)
            .join(Delivery, Delivery.event_id == Event.id)
            .where(Event.account_id == OPERATOR_ACCOUNT_ID)
            .order_by(Event.created_at)).all()
    return [{"type": kind, "data": json.loads(body)["data"], "waits": parked,
             "at": at} for kind, body, parked, at in rows]


def sent_at_once(published) -> list[str]:
    """The subscription ids of the notices published so far (in order)."""
    with session_scope() as session:
        return [json.loads(session.get(Event, session.get(Delivery, item.delivery_id).event_id)
                           .body)["data"]["subscription_id"] for item in published.settled()]


def test_the_rate_algorithm_allows_a_burst_then_one_per_interval():
    now = dt.datetime(2026, 7, 30, 12, tzinfo=dt.timezone.utc)
    due = now
    moments = []
    for _ in range(4):  # a burst of 2, one per 30 s after it
        at = earliest(due, now, 30, 2)
        moments.append((at - now).total_seconds())
        due = spent(due, at, 30)
    assert moments == [0, 0, 30, 60]


def test_a_pause_and_its_resume_go_out_at_once(operator):
    account_id, _ = make_account()
    subscription_id = subscription_of(account_id)
    pause(subscription_id)
    resume(subscription_id)
    assert [(n["type"], n["waits"], n["data"]["suppressed"]) for n in notices()] == [
        ("subscription.paused", False, 0), ("subscription.resumed", False, 0)]
    assert sent_at_once(operator) == [subscription_id] * 2


def test_repeats_within_the_window_wait_and_replace_each_other(operator):
    account_id, _ = make_account()
    subscription_id = subscription_of(account_id)
    pause(subscription_id)
    resume(subscription_id)
    for _ in range(5):  # 10 more changes: one notice waits, the latest, counting the others
        pause(subscription_id)
        resume(subscription_id)
    stored = notices()
    assert [(n["type"], n["waits"]) for n in stored] == [
        ("subscription.paused", False), ("subscription.resumed", False),
        ("subscription.resumed", True)]
    waiting = stored[-1]
    assert waiting["data"]["suppressed"] == 9  # the other nine changes, dropped unsent
    # Every field CONTRACT 9.3 lists is there, as the latest change has it.
    assert set(waiting["data"]) == {"account_id", "subscription_id", "resumed_at", "suppressed"}
    assert waiting["at"] > clock.now() + dt.timedelta(seconds=WINDOW_S / 2 - 5)
    assert sent_at_once(operator) == [subscription_id] * 2

    # Its moment comes: the sweep sends it (and nothing else: the two sent are not taken
    # for lost); the next change counts from zero again.
    with session_scope() as session:
        due = sweep(session, waiting["at"], timeout=15, recover_after=10 * WINDOW_S, batch=100)
    assert len(due) == 1
    pause(subscription_id)
    assert notices()[-1]["data"]["suppressed"] == 0


def test_an_account_sends_its_budget_at_once_and_another_account_is_not_held_back(operator):
    flooding, _ = make_account("flooding")
    theirs = [subscription_of(flooding) for _ in range(5)]
    for subscription_id in theirs:
        pause(subscription_id)
    other, _ = make_account("other")
    mine = subscription_of(other)
    pause(mine)
    waits = {n["data"]["subscription_id"]: n["waits"] for n in notices()}
    assert [waits[s] for s in theirs] == [False, False, False, True, True]  # 3 per window
    assert waits[mine] is False
    assert sent_at_once(operator) == theirs[:3] + [mine]
    moments = [n["at"] for n in notices() if n["waits"]]
    assert moments[1] - moments[0] == dt.timedelta(seconds=WINDOW_S / 3)  # paced after it


def test_a_flood_of_one_account_leaves_another_account_s_notice_first_in_line(operator):
    """50 pause and resume pairs of one subscription of account A, then account B's pause:
    what an operator endpoint taking one notice at a time must send before B's is what
    went out at once before it: A's first pause and resume (at 0.2 s each, 0.4 s).
    tests/test_operational_flood.py does it with 200 pairs, a worker and such an endpoint."""
    flooding, _ = make_account("flooding")
    theirs = subscription_of(flooding)
    for _ in range(50):
        pause(theirs)
        resume(theirs)
    other, _ = make_account("other")
    mine = subscription_of(other)
    pause(mine)
    queue = sent_at_once(operator)
    assert queue.index(mine) <= 2, queue
    assert len([n for n in notices() if n["data"]["subscription_id"] == theirs]) == 3
    assert [n["data"]["suppressed"] for n in notices() if n["waits"]] == [97]


def test_a_window_of_0_turns_the_budget_off(operator, monkeypatch):
    monkeypatch.setenv("WEBHOOKS_NOTICE_WINDOW", "0")
    reset_settings_cache()
    account_id, _ = make_account()
    subscription_id = subscription_of(account_id)
    for _ in range(3):
        pause(subscription_id)
        resume(subscription_id)
    assert [(n["waits"], n["data"]["suppressed"]) for n in notices()] == [(False, 0)] * 6
