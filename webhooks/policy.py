"""What happens after an attempt: pure functions, no I/O, no clock.

The ladder is a tuple of seconds (``Settings.retry_delays``): after failed
attempt *n* the next attempt waits ``ladder[n-1]`` seconds; a failure of the
attempt after the ladder's last step makes the delivery dead (SPEC 3.1, 7, 8).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "Outcome",
    "Decision",
    "classify",
    "decide",
    "retry_delay",
    "should_pause",
    "rides_countdown",
]


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


@dataclass(frozen=True)
class Decision:
    """The outcome of an attempt, and for RETRY the wait before the next one (seconds)."""

    outcome: Outcome
    retry_after: int | None = None

    @property
    def is_failure(self) -> bool:
        """True for every outcome that counts toward the pause rule (CONTRACT 7)."""
        return self.outcome is not Outcome.SUCCESS


def classify(status_code: int | None) -> ResponseClass:
    """Classify a response by SPEC 7; ``None`` means no response (network error, time-out)."""
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


def decide(attempt_number: int, status_code: int | None, ladder: tuple[int, ...]) -> Decision:
    """The decision after attempt ``attempt_number`` got ``status_code`` (None: no response)."""
    response_class = classify(status_code)
    if response_class is ResponseClass.SUCCESS:
        return Decision(Outcome.SUCCESS)
    if response_class is ResponseClass.PERMANENT:
        return Decision(Outcome.PERMANENT_FAILURE)
    delay = retry_delay(attempt_number, ladder)
    if delay is None:
        return Decision(Outcome.DEAD)
    return Decision(Outcome.RETRY, delay)


def should_pause(consecutive_failures: int, pause_after: int) -> bool:
    """True once the subscription's consecutive failed attempts reach the threshold."""
    return consecutive_failures >= pause_after


def rides_countdown(wait_seconds: float, countdown_limit: int) -> bool:
    """True when a wait is short enough to ride on the broker's countdown.

    Longer waits are parked in the database and sent by the sweep: a worker
    holds every countdown message in memory until it is due, and Redis
    redelivers messages left unacknowledged past the visibility timeout.
    """
    return wait_seconds <= countdown_limit
