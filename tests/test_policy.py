"""Every row of the delivery table (docs/api.md, "Statuses") through policy.next_step, the
pure function that decides what follows an attempt, and the ladder's end."""

import pytest

from webhooks.lifecycle.policy import Counter, Outcome, Rules, Wait, classify, next_step, pauses, retry_delay

LADDER = (60, 300, 1800, 7200, 43200)
RULES = Rules(LADDER, countdown_limit=300, pause_after=25)


def step(attempt, status, event_type="email.sent", rules=RULES, room=True):
    return next_step(attempt, status, event_type, rules, countdown_room=lambda: room)


@pytest.mark.parametrize(
    "status, outcome, delivery_status",
    [
        (200, Outcome.SUCCESS, "done"),
        (201, Outcome.SUCCESS, "done"),
        (204, Outcome.SUCCESS, "done"),
        (299, Outcome.SUCCESS, "done"),
        (301, Outcome.RETRY, "pending"),  # redirects are not followed: "any other outcome"
        (302, Outcome.RETRY, "pending"),
        (400, Outcome.PERMANENT_FAILURE, "failed"),
        (401, Outcome.PERMANENT_FAILURE, "failed"),
        (404, Outcome.PERMANENT_FAILURE, "failed"),
        (410, Outcome.PERMANENT_FAILURE, "failed"),
        (499, Outcome.PERMANENT_FAILURE, "failed"),
        (429, Outcome.RETRY, "pending"),
        (500, Outcome.RETRY, "pending"),
        (503, Outcome.RETRY, "pending"),
        (100, Outcome.RETRY, "pending"),
        (None, Outcome.RETRY, "pending"),  # time-out or refused connection: no response at all
    ],
)
def test_first_attempt_by_response(status, outcome, delivery_status):
    first = step(1, status)
    assert (first.outcome, first.status) == (outcome, delivery_status)
    assert first.retry_after == (60 if outcome is Outcome.RETRY else None)


@pytest.mark.parametrize("attempt, wait", [(1, 60), (2, 300), (3, 1800), (4, 7200), (5, 43200)])
def test_ladder_waits_after_each_failed_attempt(attempt, wait):
    assert (step(attempt, 503).outcome, step(attempt, 503).retry_after) == (Outcome.RETRY, wait)


@pytest.mark.parametrize("status", [None, 429, 500, 302])
def test_attempt_six_failing_is_dead(status):
    dead = step(6, status)
    assert (dead.outcome, dead.status, dead.retry_after, dead.wait) == (
        Outcome.DEAD, "dead", None, Wait.NONE)


def test_attempt_six_with_a_permanent_4xx_is_failed_not_dead():
    assert step(6, 410).status == "failed"


def test_attempt_six_success_is_done():
    assert step(6, 200).status == "done"


def test_ladder_length_sets_the_attempt_limit():
    short = Rules((1, 1), 300, 25)
    assert step(2, 500, rules=short).retry_after == 1
    assert step(3, 500, rules=short).outcome is Outcome.DEAD
    assert step(1, 500, rules=Rules((), 300, 25)).outcome is Outcome.DEAD


def test_every_failure_adds_one_and_a_success_resets_the_counter():
    assert step(1, 200).counter is Counter.RESET and not step(1, 200).is_failure
    for status in (None, 302, 400, 410, 429, 500):
        assert step(1, status).counter is Counter.ADD_ONE
    assert step(6, 500).counter is Counter.ADD_ONE  # the dead attempt counts too


def test_a_short_wait_rides_a_countdown_a_long_one_is_parked():
    assert step(1, 500).wait is Wait.COUNTDOWN  # 60 s
    assert step(2, 500).wait is Wait.COUNTDOWN  # 300 s, the limit itself
    assert step(3, 500).wait is Wait.PARKED  # 30 min


def test_no_countdown_room_parks_even_a_short_wait_and_room_is_asked_only_when_needed():
    asked = []
    assert step(1, 500, room=False).wait is Wait.PARKED
    next_step(3, 500, "email.sent", RULES, countdown_room=lambda: asked.append(1) or True)
    next_step(1, 200, "email.sent", RULES, countdown_room=lambda: asked.append(1) or True)
    assert asked == []


def test_a_retry_is_held_if_its_failure_pauses_the_subscription_but_test_ping_never_is():
    assert step(1, 500).status_if_paused == "paused"
    assert step(1, 500, "test.ping").status_if_paused == "pending"
    assert step(6, 500).status_if_paused == "dead"  # a finished delivery stays finished
    assert step(1, 410).status_if_paused == "failed"


def test_classify_is_total_over_status_codes():
    for code in range(100, 600):
        classify(code)  # never raises


def test_retry_delay_rejects_attempt_zero():
    with pytest.raises(ValueError):
        retry_delay(0, LADDER)


def test_pause_threshold():
    assert not pauses(24, RULES, "email.sent")
    assert pauses(25, RULES, "email.sent")
    assert pauses(26, RULES, "email.sent")


def test_a_test_ping_failure_counts_but_never_pauses_by_itself():
    """CONTRACT 9.1: the counter moves, the pause waits for another type's failure."""
    assert not pauses(25, RULES, "test.ping")
    assert not pauses(1000, RULES, "test.ping")


def test_the_failure_kind_reaches_the_policy(monkeypatch):
    """Without a response the kind decides: every kind is retried today, and a kind made
    permanent (policy.PERMANENT_KINDS) ends the delivery failed at once, as a 4xx does."""
    from webhooks.lifecycle import policy

    assert step(1, None, "email.sent").status == "pending"
    assert policy.next_step(1, None, "email.sent", RULES, error_kind="dns").status == "pending"
    monkeypatch.setattr(policy, "PERMANENT_KINDS", frozenset({"dns"}))
    failed = policy.next_step(1, None, "email.sent", RULES, error_kind="dns")
    assert failed.status == "failed" and failed.outcome is Outcome.PERMANENT_FAILURE
    assert policy.next_step(1, None, "email.sent", RULES, error_kind="timeout").status == "pending"


# --- a subscription's own retry schedule (CONTRACT 10.4) ------------------------------------
def scheduled(attempt, schedule, status=500, room=True):
    return next_step(attempt, status, "email.sent", RULES, countdown_room=lambda: room,
                     schedule=schedule)


def test_a_schedule_of_two_delays_is_dead_at_the_third_attempt():
    assert [scheduled(n, [1, 1]).retry_after for n in (1, 2)] == [1, 1]
    assert [scheduled(n, [1, 1]).outcome for n in (1, 2, 3)] == [
        Outcome.RETRY, Outcome.RETRY, Outcome.DEAD]


def test_a_schedule_replaces_the_ladder_and_its_carriers_follow_it():
    week = [604800] * 20
    assert scheduled(20, week).retry_after == 604800
    assert scheduled(20, week).wait is Wait.PARKED  # longer than the countdown limit
    assert scheduled(21, week).outcome is Outcome.DEAD
    assert scheduled(1, [5, 3600]).wait is Wait.COUNTDOWN
    assert scheduled(2, [5, 3600]).wait is Wait.PARKED


def test_no_schedule_keeps_the_ladder():
    assert [scheduled(n, None).retry_after for n in range(1, 6)] == list(LADDER)
    assert scheduled(6, None).outcome is Outcome.DEAD


def test_a_schedule_changes_no_final_answer():
    assert scheduled(1, [1, 1], status=200).outcome is Outcome.SUCCESS
    assert scheduled(1, [1, 1], status=404).outcome is Outcome.PERMANENT_FAILURE
