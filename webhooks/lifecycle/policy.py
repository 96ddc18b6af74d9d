"""What happens after an attempt: pure functions, no I/O, no clock.

:func:`next_step` is the one place a delivery's next step is decided: from
the attempt's number and response (its status code, or the kind of failure
when there was none: lifecycle/failure_kinds.py), it gives the attempt's outcome, the
delivery's next status, the wait before a retry and whether a countdown
message or the database (the sweep) carries it, how the subscription's
counter moves, and what the delivery becomes if this attempt pauses the
subscription. :func:`pauses` is the pause rule, applied to the counter after
it moved (atomically, in the database: record.py).

The ladder is a tuple of seconds (``Rules.ladder``): after failed attempt *n*
the next attempt waits ``ladder[n-1]`` seconds; a failure of the attempt after
the ladder's last step makes the delivery dead (docs/api.md, "Statuses"). A
subscription's own ``retry_schedule`` (CONTRACT 10.4, tenants/retry_schedules.py)
replaces the service's ladder for its deliveries: :func:`next_step` takes it, as
claimed with the attempt, so a schedule changed meanwhile applies from the next
attempt on.

Two answers depart from the plain ladder (CONTRACT 9.4, docs/endpoint-aware.md):
a 429 or 503 whose ``Retry-After`` asks for a longer wait gets it (capped by
``Rules.retry_after_max``), and a ``410 Gone`` fails the delivery as any 4xx
and pauses the subscription at once (``Step.pause_reason``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from webhooks.lifecycle.retry_after import HONOURED_STATUSES
from webhooks.states import DeliveryStatus, PauseReason, held_by_pause

__all__ = [
    "Outcome", "Wait", "Counter", "Rules", "Step", "classify", "retry_delay", "next_step",
    "pauses", "carrier", "PERMANENT_KINDS", "RETRY_AFTER_STATUSES", "GONE", "with_retry_after",
]

RETRY_AFTER_STATUSES = HONOURED_STATUSES  # 429 and 503: the answers whose Retry-After is followed
GONE = 410  # the endpoint is gone for good: pause the subscription at once


class Outcome(str, enum.Enum):
    """The outcome of one attempt, as recorded on the attempt row."""

    SUCCESS = "success"
    RETRY = "retry"
    PERMANENT_FAILURE = "permanent_failure"
    DEAD = "dead"


class ResponseClass(str, enum.Enum):
    SUCCESS = "success"
    PERMANENT = "permanent"
    RETRYABLE = "retryable"


class Wait(str, enum.Enum):
    """What carries a retry to its time: nothing (no retry), a countdown message, the sweep."""

    NONE = "none"
    COUNTDOWN = "countdown"
    PARKED = "parked"


class Counter(str, enum.Enum):
    """How the subscription's consecutive-failure counter moves."""

    RESET = "reset"  # a 2xx sets it to 0
    ADD_ONE = "add_one"  # every failed attempt counts (4xx, 429, 5xx, 3xx, no response)


@dataclass(frozen=True)
class Rules:
    """The policy's settings: the ladder (seconds), the longest wait that rides a countdown
    (seconds), the consecutive failures that pause a subscription, and the longest wait
    (seconds) a receiver's Retry-After may ask for (0: Retry-After is not followed)."""

    ladder: tuple[int, ...]
    countdown_limit: int
    pause_after: int
    retry_after_max: int = 43200


@dataclass(frozen=True)
class Step:
    """Everything that follows one attempt.

    ``status``: the delivery's status after it; ``retry_after``: seconds to the
    next attempt (a retry only); ``wait``: what carries that retry; ``counter``:
    how the subscription's counter moves; ``status_if_paused``: the delivery's
    status when this attempt's failure pauses the subscription (a retry is
    held ``paused``, except test.ping); ``pause_reason``: set when this attempt
    pauses the subscription at once, whatever its counter (a 410), with why.
    """

    outcome: Outcome
    status: str
    retry_after: int | None
    wait: Wait
    counter: Counter
    status_if_paused: str
    pause_reason: PauseReason | None = None

    @property
    def is_failure(self) -> bool:
        return self.counter is Counter.ADD_ONE


# Kinds of failure (failure_kinds.ErrorKind values) after which a retry is pointless: none
# today, every attempt without a response is retried. A kind added here ends the delivery
# ``failed`` at once, as a 4xx does.
PERMANENT_KINDS: frozenset[str] = frozenset()


def classify(status_code: int | None, error_kind: str | None = None) -> ResponseClass:
    """Classify a response: 2xx success, 4xx but 429 permanent, anything else retryable;
    no response (``None``) is retryable unless its ``error_kind`` is in PERMANENT_KINDS."""
    if status_code is None and error_kind is not None and error_kind in PERMANENT_KINDS:
        return ResponseClass.PERMANENT
    if status_code is not None and 200 <= status_code < 300:
        return ResponseClass.SUCCESS
    if status_code is not None and 400 <= status_code < 500 and status_code != 429:
        return ResponseClass.PERMANENT
    return ResponseClass.RETRYABLE


def retry_delay(attempt_number: int, ladder: tuple[int, ...]) -> int | None:
    """Seconds to wait after failed attempt ``attempt_number``; None when it was the last."""
    if attempt_number < 1:
        raise ValueError("attempt numbers start at 1")
    if attempt_number > len(ladder):
        return None
    return ladder[attempt_number - 1]


_FINAL = {
    ResponseClass.SUCCESS: (Outcome.SUCCESS, DeliveryStatus.DONE, Counter.RESET),
    ResponseClass.PERMANENT: (Outcome.PERMANENT_FAILURE, DeliveryStatus.FAILED, Counter.ADD_ONE),
}


def next_step(attempt_number: int, status_code: int | None, event_type: str, rules: Rules,
              countdown_room: Callable[[], bool] = lambda: True,
              error_kind: str | None = None, requested_wait: float | None = None,
              schedule: Sequence[int] | None = None) -> Step:
    """The step after attempt ``attempt_number`` got ``status_code`` (None: no response, for
    the reason ``error_kind``).

    ``schedule``: the subscription's own retry delays (seconds), which replace
    ``rules.ladder``; None: the ladder.

    ``requested_wait`` is the wait in seconds the receiver's ``Retry-After``
    asked for (lifecycle/retry_after.py), followed on a 429 or 503 only: a retry
    then waits the longer of the ladder's delay and that, capped by
    ``Rules.retry_after_max``. It never adds an attempt past the ladder.
    ``countdown_room`` is asked only for a retry whose wait is short enough to
    ride a countdown (``Rules.countdown_limit``); False (the deployment's
    countdown budget is spent) parks it for the sweep instead, as is any
    longer wait.
    """
    response_class = classify(status_code, error_kind)
    if response_class in _FINAL:
        outcome, status, counter = _FINAL[response_class]
        gone = status_code == GONE and held_by_pause(event_type)  # test.ping never pauses
        return Step(outcome, status.value, None, Wait.NONE, counter, status.value,
                    PauseReason.GONE if gone else None)
    delay = retry_delay(attempt_number, rules.ladder if schedule is None else tuple(schedule))
    if delay is not None and status_code in RETRY_AFTER_STATUSES:
        delay = with_retry_after(delay, requested_wait, rules.retry_after_max)
    if delay is None:
        dead = DeliveryStatus.DEAD.value
        return Step(Outcome.DEAD, dead, None, Wait.NONE, Counter.ADD_ONE, dead)
    pending = DeliveryStatus.PENDING.value
    held = DeliveryStatus.PAUSED.value if held_by_pause(event_type) else pending
    return Step(Outcome.RETRY, pending, delay, carrier(delay, rules, countdown_room),
                Counter.ADD_ONE, held)


def with_retry_after(delay: int, requested_wait: float | None, maximum: int) -> int:
    """The ladder's ``delay`` (seconds), or the receiver's ``requested_wait`` (seconds,
    rounded up) when it is longer, but never more than ``maximum`` (0: ``delay``)."""
    if requested_wait is None or maximum <= 0:
        return delay
    requested = min(math.ceil(max(requested_wait, 0)), maximum)
    return max(delay, requested)


def carrier(wait: float, rules: Rules, countdown_room: Callable[[], bool] = lambda: True) -> Wait:
    """What carries a delivery through a wait of ``wait`` seconds (a retry's, or a rate
    limit's, pacing.py): a countdown message if the wait is within the countdown limit and
    ``countdown_room()`` (asked only then) says the budget has room; the sweep otherwise."""
    rides = wait <= rules.countdown_limit and countdown_room()
    return Wait.COUNTDOWN if rides else Wait.PARKED


def pauses(consecutive_failures: int, rules: Rules, event_type: str) -> bool:
    """True when a failed attempt of ``event_type`` leaves the subscription's counter at
    ``consecutive_failures`` and that pauses it: the counter has reached the threshold and
    the type is one a pause holds. A test.ping's failure counts, but never pauses by itself
    (README, "Send test"): the next failure of another type does, once the counter is there."""
    return consecutive_failures >= rules.pause_after and held_by_pause(event_type)
