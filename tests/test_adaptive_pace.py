"""The adaptive pace (issue 26 part 3) on both backends (``any_db``): the subscription's
current in-flight limit halves on a 429, a 503 or a time-out (once per round, floor 1),
climbs by one per run of successes back to the cap, and is the claim's cap meanwhile.
Waiting for it is not an attempt and does not count toward the pause."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, update

from tests.factories import make_account, make_subscription
from webhooks import states
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import adaptive_pace
from webhooks.lifecycle.adaptive_pace import Pace
from webhooks.lifecycle.claim import Caps
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record as record_attempt
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

RULES = Rules((60, 300, 1800, 7200, 43200), countdown_limit=300, pause_after=25)
CAP = 8
PACE = Pace(enabled=True, service_cap=CAP, success_run=0)


@pytest.fixture
def account(any_db, published):
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook")


def emit(account_id) -> str:
    return emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids[0]


def claim(delivery_id, *, adaptive=True):
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, 0, utcnow(),
                             Caps(subscription=CAP, adaptive=adaptive))


def record(claimed, status_code, error_kind=None, pace=PACE):
    now = utcnow()
    step = next_step(claimed.attempt_number, status_code, claimed.event_type, RULES,
                     error_kind=error_kind)
    with get_engine().begin() as connection:
        return record_attempt(connection, claimed, step=step, rules=RULES, started_at=now, now=now,
                              duration_ms=5, status_code=status_code, error=None, excerpt=None,
                              error_kind=error_kind, pace=pace)


def limit(subscription_id):
    with session_scope() as session:
        row = session.get(Subscription, subscription_id)
        return row.in_flight_limit


def set_limit(subscription_id, value):
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription_id)
                        .values(in_flight_limit=value, pace_successes=0))


def test_the_rule_halves_to_a_floor_of_1_and_climbs_by_one_to_the_cap():
    assert [adaptive_pace.lowered(n) for n in (10, 5, 2, 1)] == [5, 2, 1, 1]
    assert adaptive_pace.raised(3, 8) == 4 and adaptive_pace.raised(7, 8) is None
    assert adaptive_pace.asks_for_less(429, None) and adaptive_pace.asks_for_less(503, None)
    assert adaptive_pace.asks_for_less(None, "timeout")
    assert not adaptive_pace.asks_for_less(500, None)
    assert not adaptive_pace.asks_for_less(None, "connection_refused")
    assert adaptive_pace.current_limit(None, None, 10) == 10
    assert adaptive_pace.current_limit(3, None, 10) == 3
    assert adaptive_pace.current_limit(3, None, 10, adaptive=False) == 10
    assert adaptive_pace.current_limit(None, None, 0) is None


@pytest.mark.parametrize("status_code, error_kind", [(429, None), (503, None), (None, "timeout")])
def test_a_back_off_answer_halves_the_limit_once_per_round(account, status_code, error_kind):
    account_id, subscription = account
    a, b, c = (claim(emit(account_id)) for _ in range(3))  # claimed under the full cap
    record(a, status_code, error_kind)
    assert limit(subscription.id) == CAP // 2
    record(b, status_code, error_kind)  # same round (claimed before the cut): no second cut
    assert limit(subscription.id) == CAP // 2
    d = claim(emit(account_id))
    record(d, status_code, error_kind)  # a claim under the lowered limit: cut again
    assert limit(subscription.id) == CAP // 4
    record(c, 200)


def test_the_limit_never_goes_below_1(account):
    account_id, subscription = account
    set_limit(subscription.id, 1)
    record(claim(emit(account_id)), 429)
    assert limit(subscription.id) == 1


def test_other_failures_leave_the_limit_alone(account):
    account_id, subscription = account
    record(claim(emit(account_id)), 500)
    record(claim(emit(account_id)), None, "connection_refused")
    assert limit(subscription.id) is None


def test_runs_of_successes_climb_back_to_the_cap_by_one(account):
    account_id, subscription = account
    set_limit(subscription.id, 2)
    seen = []
    for _ in range(2 + 3 + 4 + 5 + 6 + 7):  # a run is the current limit's worth
        record(claim(emit(account_id)), 200)
        seen.append(limit(subscription.id))
    assert seen[1] == 3 and seen[4] == 4 and seen[-1] is None  # back at the cap: not lowered
    assert sorted(set(v for v in seen if v is not None)) == [2, 3, 4, 5, 6, 7]


def test_a_configured_run_length(account):
    account_id, subscription = account
    set_limit(subscription.id, 4)
    pace = Pace(enabled=True, service_cap=CAP, success_run=1)
    record(claim(emit(account_id)), 200, pace=pace)
    assert limit(subscription.id) == 5


def test_the_claim_caps_by_the_current_limit_and_waiting_is_no_attempt(account):
    account_id, subscription = account
    set_limit(subscription.id, 1)
    first, second = emit(account_id), emit(account_id)
    head = claim(first)
    assert head is not None and claim(second) is None
    deliveries = Delivery.__table__
    with session_scope() as session:
        waiting = session.scalar(select(func.count()).select_from(deliveries).where(
            deliveries.c.id == second, states.waiting(deliveries)))
        row = session.get(Delivery, second)
        assert (waiting, row.attempt_count) == (1, 0)
        assert session.get(Subscription, subscription.id).consecutive_failures == 0
    released = record(head, 200).released
    assert [d.delivery_id for d in released] == [second]


def test_switched_off_the_claim_ignores_a_stored_limit_and_nothing_moves(account):
    account_id, subscription = account
    set_limit(subscription.id, 1)
    first, second = emit(account_id), emit(account_id)
    assert claim(first, adaptive=False) is not None
    assert claim(second, adaptive=False) is not None
    set_limit(subscription.id, None)
    record(claim(emit(account_id), adaptive=False), 429, pace=Pace(enabled=False, service_cap=CAP))
    assert limit(subscription.id) is None


def test_the_api_shows_the_current_limit(account):
    from webhooks.services.subscriptions import in_flight_limit

    _, subscription = account
    set_limit(subscription.id, 3)
    with session_scope() as session:
        assert in_flight_limit(session.get(Subscription, subscription.id)) == 3


def test_a_new_max_in_flight_starts_the_pace_over(account):
    from webhooks.lifecycle import changes

    _, subscription = account
    set_limit(subscription.id, 2)
    with session_scope() as session:
        changes.change_subscription(session, subscription.id, description="x")
    assert limit(subscription.id) == 2  # other settings leave it
    with session_scope() as session:
        changes.change_subscription(session, subscription.id, max_in_flight=4)
    assert limit(subscription.id) is None
