"""The adaptive pace's rate (webhooks/lifecycle/pace_rate.py, issue 26 part 3): a 429 sets the
subscription's paced rate just under what the receiver accepted lately, once per round; the
rate climbs while it is read and stops applying once it has doubled; the claims take its
slots as they take a rate limit's; the sweep sends a paced delivery a countdown to its slot.
The rule alone, then on both backends (``any_db``)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import update

from tests.factories import make_account, make_subscription
from webhooks.emit import emit_event
from webhooks.events.samples import sample_data
from webhooks.lifecycle import pace_rate, pacing
from webhooks.lifecycle.adaptive_pace import Pace
from webhooks.lifecycle.claim import Caps, Claim
from webhooks.lifecycle.claim import claim as claim_attempt
from webhooks.lifecycle.policy import Rules, next_step
from webhooks.lifecycle.record import record as record_attempt
from webhooks.lifecycle.sweep import sweep
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, Subscription, utcnow

RULES = Rules((60, 300), countdown_limit=300, pause_after=25)
PACE = Pace(enabled=True, service_cap=8, rate_climb=0.002)


# ---------------------------------------------------------------- the rule

def test_the_paced_rate_climbs_while_read_and_stops_applying_once_doubled():
    assert pace_rate.current(None, None, 100.0, 0.002) is None
    assert pace_rate.current(10.0, 100.0, 100.0, 0.002) == 10.0
    assert pace_rate.current(10.0, 100.0, 150.0, 0.002) == pytest.approx(11.0)  # +0.2 %/s
    assert pace_rate.current(10.0, 100.0, 99.0, 0.002) == 10.0  # a clock behind: no climb
    assert pace_rate.current(10.0, 100.0, 600.0, 0.002) is None  # doubled: released


def test_the_rate_in_force_is_the_lower_of_the_limit_and_the_pace():
    assert pace_rate.allowed(None, None) is None
    assert pace_rate.allowed(5.0, None) == 5.0
    assert pace_rate.allowed(None, 3.0) == 3.0
    assert pace_rate.allowed(5.0, 3.0) == 3.0 and pace_rate.allowed(2.0, 3.0) == 2.0


def test_a_back_off_sets_just_under_the_accepted_rate_over_at_least_a_second():
    assert pace_rate.lowered_to(successes=40, attempts=90, span_s=2.0) == pytest.approx(19.0)
    # 20 accepted within 0.05 s of a receiver's one-second window: 20/s, not 400/s.
    assert pace_rate.lowered_to(successes=20, attempts=30, span_s=0.05) == pytest.approx(19.0)
    # Nothing accepted: half the rate the attempts went at, never under the floor.
    assert pace_rate.lowered_to(successes=0, attempts=10, span_s=2.0) == pytest.approx(2.5)
    assert pace_rate.lowered_to(successes=0, attempts=0, span_s=2.0) == pace_rate.FLOOR_PER_S


# ---------------------------------------------------------------- on both backends

@pytest.fixture
def subscription(any_db, published):
    account_id, _ = make_account()
    return make_subscription(account_id, "https://example.com/hook")


def _emit(subscription) -> str:
    return emit_event(subscription.account_id, "email.sent",
                      sample_data("email.sent")).delivery_ids[0]


def _claim(delivery_id, now) -> Claim:
    with get_engine().begin() as connection:
        return claim_attempt(connection, delivery_id, 0, now, Caps(subscription=8))


def _record(claimed: Claim, status_code: int, now: dt.datetime, pace=PACE):
    step = next_step(claimed.attempt_number, status_code, claimed.event_type, RULES)
    with get_engine().begin() as connection:
        return record_attempt(connection, claimed, step=step, rules=RULES, started_at=now,
                              now=now, duration_ms=2, status_code=status_code, error=None,
                              excerpt=None, pace=pace)


def _row(subscription_id) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _attempts(subscription, at, answers: list[int]) -> None:
    """One delivery per answer, each claimed now and its attempt recorded as made at ``at``."""
    for status_code in answers:
        _record(_claim(_emit(subscription), utcnow()), status_code, at)


def test_a_429_sets_the_rate_from_what_the_receiver_accepted(subscription):
    now = utcnow()
    _attempts(subscription, now - dt.timedelta(seconds=1.5), [200] * 30)
    _attempts(subscription, now - dt.timedelta(seconds=0.5), [200] * 10)
    _attempts(subscription, now, [429])
    row = _row(subscription.id)
    # 40 accepted over the 1.5 s since the first of the window: 26.7/s, less 5 %.
    assert row.pace_rate == pytest.approx(0.95 * 40 / 1.5, rel=0.01)
    assert row.pace_rate_at == pytest.approx(now.timestamp())


def test_attempts_still_in_flight_count_as_accepted(subscription):
    now = utcnow()
    _attempts(subscription, now - dt.timedelta(seconds=0.5), [200] * 15)
    for _ in range(3):  # claimed, their records not in yet
        _claim(_emit(subscription), utcnow())
    _attempts(subscription, now, [429])
    assert _row(subscription.id).pace_rate == pytest.approx(0.95 * 18)


def test_under_a_rate_claims_not_recorded_are_not_counted(subscription):
    """A claim held for its slot (pacing.py) is `sending` and not sent: counted as
    accepted, a worker's held claims kept the rate at C (seen: a steady 4 % refused at
    C = 20), so under a rate only recorded successes count."""
    now = utcnow()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(pace_rate=20.0, pace_rate_at=now.timestamp() - 5))
    _attempts(subscription, now - dt.timedelta(seconds=0.5), [200] * 15)
    for _ in range(5):  # claimed and held, not sent (the test's cap is 8 in flight)
        _claim(_emit(subscription), utcnow())
    _attempts(subscription, now, [429])
    assert _row(subscription.id).pace_rate == pytest.approx(0.95 * 15)


def test_the_429s_of_one_round_set_it_once_and_a_later_one_measures_again(subscription):
    now = utcnow()
    _attempts(subscription, now - dt.timedelta(seconds=0.5), [200] * 20)
    _attempts(subscription, now, [429, 429])
    # 20 accepted within half a second of a one-second window: 20/s, less 5 %.
    assert _row(subscription.id).pace_rate == pytest.approx(19.0)
    _attempts(subscription, now + dt.timedelta(seconds=0.5), [429])  # within the round
    assert _row(subscription.id).pace_rate == pytest.approx(19.0)
    later = now + dt.timedelta(seconds=1.1)
    _attempts(subscription, later, [429])  # a new round: measured again (20 over 1.6 s)
    assert _row(subscription.id).pace_rate == pytest.approx(0.95 * 20 / 1.6, rel=0.01)


def test_a_back_off_never_raises_the_rate_in_force(subscription):
    now = utcnow()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(pace_rate=10.0, pace_rate_at=now.timestamp() - 5))
    # A burst across the receiver's window edge: 40 accepted within one second.
    _attempts(subscription, now - dt.timedelta(seconds=0.5), [200] * 40)
    _attempts(subscription, now, [429])
    assert _row(subscription.id).pace_rate == pytest.approx(10.0 * (1 + 0.002 * 5))


@pytest.mark.parametrize("status_code", [503, 500])
def test_other_failures_leave_the_rate_alone(subscription, status_code):
    _attempts(subscription, utcnow(), [200, status_code])
    assert _row(subscription.id).pace_rate is None


def test_switched_off_nothing_is_written_and_a_stored_rate_is_ignored(subscription):
    now = utcnow()
    _record(_claim(_emit(subscription), now), 429, now, pace=Pace(enabled=False))
    assert _row(subscription.id).pace_rate is None
    claimed = dataclasses.replace(_claim(_emit(subscription), now), pace_rate=2.0,
                                  pace_rate_at=now.timestamp())
    assert not pacing.limited(claimed, now, Pace(enabled=False))
    assert pacing.limited(claimed, now, PACE)


def test_claims_take_the_paced_rate_s_slots_and_waiting_is_no_attempt(subscription):
    now = utcnow()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(pace_rate=4.0, pace_rate_at=now.timestamp()))
    admitted = []
    for delivery_id in [_emit(subscription) for _ in range(3)]:
        with get_engine().begin() as connection:
            claimed = claim_attempt(connection, delivery_id, 0, now, Caps(subscription=8))
            admitted.append(pacing.admit(connection, claimed, now, RULES, pace=PACE))
    first, second, third = admitted
    assert isinstance(first, Claim)
    assert [round(paced.wait, 2) for paced in (second, third)] == [0.25, 0.5]  # 4 per second
    with session_scope() as session:
        waiting = session.get(Delivery, third.delivery_id)
        assert (waiting.status, waiting.attempt_count, waiting.paced) == ("pending", 0, True)
    assert _row(subscription.id).consecutive_failures == 0


def test_the_api_shows_the_rate_now(subscription):
    from webhooks.services.subscriptions import option_values
    from webhooks.storage import clock

    now = clock.now().timestamp()
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == subscription.id)
                        .values(rate_limit=50.0, pace_rate=4.0, pace_rate_at=now - 50))
        values = option_values(session.get(Subscription, subscription.id))
    assert values["current_rate_limit"] == pytest.approx(4.4, rel=0.01)  # climbed 50 s
    assert values["rate_limit"] == 50.0


def test_the_sweep_sends_a_parked_paced_delivery_a_countdown_to_its_slot(subscription):
    now = utcnow()
    near, far = _emit(subscription), _emit(subscription)
    with session_scope() as session:
        for delivery_id, wait in ((near, 0.6), (far, 30)):
            session.execute(update(Delivery).where(Delivery.id == delivery_id).values(
                parked=True, paced=True, next_attempt_at=now + dt.timedelta(seconds=wait)))
    with session_scope() as session:
        found = sweep(session, now, timeout=15, recover_after=120, batch=100, lookahead=1.0)
    mine = {d.delivery_id: d.countdown for d in found if d.delivery_id in (near, far)}
    assert list(mine) == [near] and mine[near] == pytest.approx(0.6, abs=0.01)
    with session_scope() as session:
        assert session.get(Delivery, near).parked is False  # riding its countdown
        assert session.get(Delivery, far).parked is True  # the next sweeps' business
