"""A subscription's own retry schedule (CONTRACT 10.4): the delays its deliveries wait
between attempts, instead of the service's ladder (WEBHOOKS_RETRY_DELAYS).

A schedule is 1 to :data:`MAX_STEPS` whole seconds, each 1 to :data:`MAX_DELAY`
(a week). After failed attempt *n* the next waits the *n*-th delay; a delivery
is ``dead`` after ``len + 1`` attempts (C1's rule, lifecycle/policy.py). A
receiver down every night for maintenance sets long gaps; a trading desk,
seconds. ``None``: the service's ladder. Pure rules: the API's schema checks the
same bounds (web/schemas/subscriptions.py), the claim loads the column and
policy applies it from the delivery's next attempt on.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_STEPS", "MAX_DELAY", "in_force"]

MAX_STEPS = 20  # delays in one schedule
MAX_DELAY = 604_800  # seconds: one week


def in_force(schedule: Sequence[int] | None, ladder: tuple[int, ...]) -> tuple[int, ...]:
    """The delays (seconds) that apply: ``schedule``, or the service's ``ladder`` when it
    is None."""
    return ladder if schedule is None else tuple(schedule)
