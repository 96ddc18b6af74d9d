"""Every row of SPEC 3.1 and 7 through the pure policy, and the ladder's end."""

import pytest

from webhooks.policy import Decision, Outcome, classify, decide, retry_delay, rides_countdown, should_pause

LADDER = (60, 300, 1800, 7200, 43200)


@pytest.mark.parametrize(
    "status, outcome",
    [
        (200, Outcome.SUCCESS),
        (201, Outcome.SUCCESS),
        (204, Outcome.SUCCESS),
        (299, Outcome.SUCCESS),
        (301, Outcome.RETRY),  # redirects are not followed: "any other outcome"
        (302, Outcome.RETRY),
        (400, Outcome.PERMANENT_FAILURE),
        (401, Outcome.PERMANENT_FAILURE),
        (404, Outcome.PERMANENT_FAILURE),
        (410, Outcome.PERMANENT_FAILURE),
        (499, Outcome.PERMANENT_FAILURE),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (100, Outcome.RETRY),
        (None, Outcome.RETRY),  # time-out or refused connection: no response at all
    ],
)
def test_first_attempt_outcome_by_response(status, outcome):
    decision = decide(1, status, LADDER)
    assert decision.outcome is outcome
    assert decision.retry_after == (60 if outcome is Outcome.RETRY else None)


@pytest.mark.parametrize("attempt, wait", [(1, 60), (2, 300), (3, 1800), (4, 7200), (5, 43200)])
def test_ladder_waits_after_each_failed_attempt(attempt, wait):
    assert decide(attempt, 503, LADDER) == Decision(Outcome.RETRY, wait)


def test_attempt_five_failing_waits_twelve_hours():
    assert decide(5, None, LADDER) == Decision(Outcome.RETRY, 12 * 3600)


@pytest.mark.parametrize("status", [None, 429, 500, 302])
def test_attempt_six_failing_is_dead(status):
    assert decide(6, status, LADDER) == Decision(Outcome.DEAD)


def test_attempt_six_with_a_permanent_4xx_is_failed_not_dead():
    assert decide(6, 410, LADDER).outcome is Outcome.PERMANENT_FAILURE


def test_attempt_six_success_is_done():
    assert decide(6, 200, LADDER).outcome is Outcome.SUCCESS


def test_ladder_length_sets_the_attempt_limit():
    short = (1, 1)
    assert decide(2, 500, short) == Decision(Outcome.RETRY, 1)
    assert decide(3, 500, short) == Decision(Outcome.DEAD)
    assert decide(1, 500, ()) == Decision(Outcome.DEAD)


def test_every_non_success_counts_toward_pause():
    assert not decide(1, 200, LADDER).is_failure
    for status in (None, 302, 400, 410, 429, 500):
        assert decide(1, status, LADDER).is_failure


def test_classify_is_total_over_status_codes():
    for code in range(100, 600):
        classify(code)  # never raises


def test_retry_delay_rejects_attempt_zero():
    with pytest.raises(ValueError):
        retry_delay(0, LADDER)


def test_pause_threshold():
    assert not should_pause(24, 25)
    assert should_pause(25, 25)
    assert should_pause(26, 25)


def test_countdown_limit_separates_countdown_from_parking():
    assert rides_countdown(60, 300)
    assert rides_countdown(300, 300)
    assert not rides_countdown(1800, 300)
