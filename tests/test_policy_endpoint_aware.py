"""Where the policy departs from the plain ladder (CONTRACT 9.4, docs/endpoint-aware.md):
a 429's or 503's Retry-After, and a 410 Gone. Pure: policy.next_step, no I/O."""

import pytest

from webhooks.lifecycle.policy import Outcome, Rules, Wait, next_step, with_retry_after
from webhooks.states import PauseReason

LADDER = (60, 300, 1800, 7200, 43200)
RULES = Rules(LADDER, countdown_limit=300, pause_after=25, retry_after_max=43200)


def step(attempt, status, requested=None, rules=RULES, event_type="email.sent", room=True):
    return next_step(attempt, status, event_type, rules, countdown_room=lambda: room,
                     requested_wait=requested)


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("requested, wait", [
    (120, 120),  # longer than the ladder's 60: the receiver's
    (10, 60),  # shorter: the ladder's
    (0, 60),  # a date in the past asks for nothing
    (90.2, 91),  # whole seconds, rounded up: never earlier than asked
    (10 ** 9, 43200),  # capped by WEBHOOKS_RETRY_AFTER_MAX
    (None, 60),  # no header, or one that did not parse
])
def test_retry_after_waits_the_longer_of_the_two_up_to_the_cap(status, requested, wait):
    assert step(1, status, requested).retry_after == wait


@pytest.mark.parametrize("status", [500, 502, 504, None, 302])
def test_retry_after_of_other_answers_is_not_followed(status):
    assert step(1, status, 3600).retry_after == 60


def test_a_zero_cap_keeps_the_plain_ladder():
    plain = Rules(LADDER, countdown_limit=300, pause_after=25, retry_after_max=0)
    assert step(1, 503, 3600, rules=plain).retry_after == 60


def test_a_long_retry_after_is_parked_and_a_short_one_rides_a_countdown():
    assert (step(1, 503, 3600).wait, step(1, 503, 3600).retry_after) == (Wait.PARKED, 3600)
    assert (step(1, 503, 200).wait, step(1, 503, 200).retry_after) == (Wait.COUNTDOWN, 200)


def test_retry_after_never_adds_an_attempt_past_the_ladder():
    last = step(6, 503, 120)
    assert (last.outcome, last.status, last.retry_after) == (Outcome.DEAD, "dead", None)


def test_with_retry_after_is_the_max_then_the_cap():
    assert with_retry_after(60, 120, 100) == 100
    assert with_retry_after(300, 120, 100) == 300  # the cap never shortens the ladder
    assert with_retry_after(60, -5, 100) == 60


@pytest.mark.parametrize("attempt", [1, 6])
def test_410_fails_the_delivery_and_pauses_at_once(attempt):
    gone = step(attempt, 410)
    assert (gone.outcome, gone.status, gone.retry_after) == (
        Outcome.PERMANENT_FAILURE, "failed", None)
    assert gone.pause_reason is PauseReason.GONE


@pytest.mark.parametrize("status", [400, 404, 409, 200, 503, None])
def test_no_other_answer_pauses_at_once(status):
    assert step(1, status).pause_reason is None


def test_a_test_ping_answered_410_never_pauses_by_itself():
    ping = step(1, 410, event_type="test.ping")
    assert (ping.status, ping.pause_reason) == ("failed", None)
