"""The adaptive pace's rate: the attempts per second a subscription gets follow its receiver.

The in-flight half of the pace (adaptive_pace.py) bounds how many attempts
are open at once; against a receiver that answers at once, even one attempt
in flight can send hundreds a second, so a receiver that serves C requests
a second and answers 429 beyond would still refuse most of them. This half
bounds the rate:

- A 429 sets the subscription's paced rate (``subscriptions.pace_rate``,
  attempts/s) to ``1 - CUT`` of the rate the receiver *accepted* over the last
  ``WINDOW_S`` seconds (its successful attempts over at least one second,
  and, while no rate is in force, those claimed in that time and still in
  flight: the first 429 is recorded while the successes that came just
  before it may still be recording; under a rate the slots leave few in
  flight, and a claim may be held for its slot, pacing.py, sent later or
  not at all, so none is counted), at least ``FLOOR_PER_S``; with no success in the window, to half the rate
  the attempts went at. At most once per ``ROUND_S`` (the 429s of one burst
  set it once), and it is measured, not compounded: a repeat sets it to what
  the receiver takes, not lower each time. A back-off never raises the rate
  in force, though: around the edge of a receiver's counting window a burst
  is accepted at up to twice its rate, and a rate measured over that burst
  would overshoot.
- It climbs back ``WEBHOOKS_PACE_RATE_CLIMB`` percent of itself per second
  since it was set (``pace_rate_at``), computed when read: a success writes
  nothing. Once it has doubled, the paced rate no longer applies
  (:func:`current`): no 429 came back while it doubled, so the receiver has
  stopped asking.
- The rate in force is the lower of the subscription's own ``rate_limit`` and
  the paced rate (:func:`allowed`); the rate limit's slots (pacing.py) keep it,
  so a delivery that waits for the pace waits as one over a rate limit: not an
  attempt, nothing recorded, no failure counted.

Against a receiver that serves C per second, the rate settles just under C
and probes above it once per climb: the share of attempts refused is about
one per ``CUT / climb`` seconds of sending.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Float, String, bindparam, case, func, or_, select, update
from sqlalchemy.engine import Connection

from webhooks.lifecycle.policy import Outcome
from webhooks.states import DeliveryStatus
from webhooks.storage.models import Attempt, Delivery, Subscription

__all__ = ["current", "allowed", "lowered_to", "lower", "CUT", "WINDOW_S", "ROUND_S",
           "FLOOR_PER_S", "RELEASED_AT", "RATE_CODES"]

# The answer that asks for a lower rate: 429 Too Many Requests. A 503 or a time-out asks
# for fewer attempts in flight (adaptive_pace.py), not this: a receiver that is down
# answers 503 to any rate, and slowing its deliveries would only delay the pause.
RATE_CODES = frozenset({429})
CUT = 0.05  # the share below the accepted rate that a back-off sets
WINDOW_S = 2.0  # seconds of recent attempts that measure the accepted rate
ROUND_S = 1.0  # seconds after a back-off during which another does not move the rate
FLOOR_PER_S = 0.1  # attempts/s: the lowest paced rate
RELEASED_AT = 2.0  # the climb's factor at which the paced rate stops applying

_subscriptions, _deliveries, _attempts = (Subscription.__table__, Delivery.__table__,
                                          Attempt.__table__)


# ---------------------------------------------------------------- the pure rule

def current(pace_rate: float | None, pace_rate_at: float | None, now_s: float,
            climb_per_s: float) -> float | None:
    """The paced rate (attempts/s) at ``now_s`` (unix seconds): the stored one climbed by
    ``climb_per_s`` (a fraction of itself per second) since ``pace_rate_at``; None when
    none is stored or it has climbed to ``RELEASED_AT`` times itself."""
    if pace_rate is None or pace_rate_at is None:
        return None
    factor = 1.0 + climb_per_s * max(0.0, now_s - pace_rate_at)
    return None if factor >= RELEASED_AT else pace_rate * factor


def allowed(rate_limit: float | None, paced: float | None) -> float | None:
    """The rate in force: the lower of the subscription's rate limit and the paced rate
    (None: no limit)."""
    given = [rate for rate in (rate_limit, paced) if rate is not None]
    return min(given) if given else None


def lowered_to(successes: int, attempts: int, span_s: float) -> float:
    """The paced rate a back-off sets, from the last window's ``successes`` and
    ``attempts`` over ``span_s`` seconds (counted from the first of them, at least one
    second): ``1 - CUT`` of the accepted rate; half the sent one if nothing was accepted."""
    span = max(span_s, 1.0)
    rate = (1.0 - CUT) * successes / span if successes else 0.5 * attempts / span
    return max(FLOOR_PER_S, rate)


# ---------------------------------------------------------------- the statements

_SUB = bindparam("pace_sub", type_=String(36))
_NOW_S = bindparam("pace_now_s", type_=Float)
# Take the round: only one back-off per ROUND_S moves the rate (the row lock orders them).
_TAKE_ROUND = (update(_subscriptions)
               .where(_subscriptions.c.id == _SUB,
                      or_(_subscriptions.c.pace_rate_at.is_(None),
                          _subscriptions.c.pace_rate_at <= _NOW_S - ROUND_S))
               .values(pace_rate_at=_NOW_S)
               .returning(_subscriptions.c.id))
_SINCE = bindparam("pace_since")
_RECENT = (select(func.count(),
                  func.sum(case((_attempts.c.outcome == Outcome.SUCCESS.value, 1), else_=0)),
                  func.min(_attempts.c.started_at))
           .select_from(_attempts.join(_deliveries, _deliveries.c.id == _attempts.c.delivery_id))
           .where(_deliveries.c.subscription_id == _SUB, _attempts.c.started_at >= _SINCE))
# Attempts of the subscription claimed in the window and not recorded yet (in flight).
_IN_FLIGHT = (select(func.count()).select_from(_deliveries)
              .where(_deliveries.c.subscription_id == _SUB,
                     _deliveries.c.status == DeliveryStatus.SENDING.value,
                     _deliveries.c.claimed_at >= _SINCE))
_SET = (update(_subscriptions).where(_subscriptions.c.id == _SUB)
        .values(pace_rate=bindparam("pace_rate_new", type_=Float)))


def lower(connection: Connection, subscription_id: str, now: dt.datetime,
          in_force: float | None = None) -> float | None:
    """After a 429, in the record's transaction: set the subscription's paced rate
    from what the receiver accepted lately (:func:`lowered_to`; attempts still in
    flight count only while no rate is in force), at most ``in_force`` (the rate the
    attempt went under, if any), unless another back-off set it less than ``ROUND_S``
    ago. The rate set, or None if this one did not move it."""
    params = {"pace_sub": subscription_id, "pace_now_s": now.timestamp()}
    if connection.execute(_TAKE_ROUND, params).first() is None:
        return None
    since = now - dt.timedelta(seconds=WINDOW_S)
    attempts, successes, first = connection.execute(
        _RECENT, dict(params, pace_since=since)).one()
    # Under a rate, a claim in flight may be one held for its slot (pacing.py), not sent:
    # counted, a worker's held claims would keep the rate from coming down.
    flying = (0 if in_force is not None
              else connection.execute(_IN_FLIGHT, dict(params, pace_since=since)).scalar_one())
    span = (now - first).total_seconds() if first is not None else WINDOW_S
    rate = lowered_to((successes or 0) + flying, (attempts or 0) + flying, span)
    if in_force is not None:
        rate = min(rate, in_force)
    connection.execute(_SET, dict(params, pace_rate_new=rate))
    return rate
