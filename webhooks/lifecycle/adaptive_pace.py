"""The adaptive pace: the attempts a subscription may have in flight follow its receiver.

A receiver that answers 429 or 503, or does not answer in time
(``failure_kinds.ErrorKind.TIMEOUT``), is asking for less: the subscription's
current limit (``subscriptions.in_flight_limit``) is halved, down to 1. Each
run of successes raises it by one (the run is WEBHOOKS_PACE_SUCCESS_RUN
successes, or with 0 the current limit's worth: about one round of attempts),
back up to the cap (the subscription's ``max_in_flight``, else
WEBHOOKS_MAX_IN_FLIGHT), where it is stored as null again. This is AIMD, as
TCP's congestion window: it finds the rate the receiver serves without
hammering it, and climbs back when it recovers.

The claim (claim.py) counts the attempts in flight against this limit in
place of the cap; a delivery over it waits for a free slot (states.waiting),
which is not an attempt and does not count toward the pause. A limit is
lowered at most once per round: only if it is still the one the attempt was
claimed under (a burst of 429s from one round halves it once, not once per
answer). Without a cap (0: no limit) the pace does nothing. The limit moves in
the transaction that records the attempt (record.py); WEBHOOKS_ADAPTIVE_PACE=false
turns it off (the claim then ignores a stored limit, and nothing is written).

A 429 also sets the subscription's paced *rate* (pace_rate.py), in
the same transaction: fewer attempts in flight do not slow attempts to a
receiver that answers at once. :meth:`Pace.rate_now` is the rate in force.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Integer, String, and_, bindparam, case, func, null, select, update
from sqlalchemy.engine import Connection

from webhooks.lifecycle import pace_rate
from webhooks.lifecycle.failure_kinds import ErrorKind
from webhooks.storage import clock
from webhooks.storage.db import in_autocommit, in_transaction_block
from webhooks.storage.models import Subscription

__all__ = ["Pace", "asks_for_less", "lowered", "raised", "current_limit", "after_attempt",
           "needs_transaction", "open_transaction", "BACK_OFF_CODES"]

BACK_OFF_CODES = frozenset({429, 503})
subscriptions = Subscription.__table__


@dataclass(frozen=True)
class Pace:
    """The pace's settings: on (WEBHOOKS_ADAPTIVE_PACE), the service's cap
    (WEBHOOKS_MAX_IN_FLIGHT, for subscriptions without their own), the success run
    (WEBHOOKS_PACE_SUCCESS_RUN; 0: the current limit's worth), and the paced rate's
    climb (WEBHOOKS_PACE_RATE_CLIMB, here a fraction of itself per second: pace_rate.py)."""

    enabled: bool = True
    service_cap: int = 0
    success_run: int = 0
    rate_climb: float = 0.002

    @classmethod
    def of(cls, settings) -> "Pace":
        return cls(settings.adaptive_pace, settings.max_in_flight, settings.pace_success_run,
                   settings.pace_rate_climb / 100.0)

    def rate_now(self, claim, now) -> float | None:
        """The rate in force for ``claim``'s subscription at ``now`` (attempts/s; None: no
        limit): its rate limit, or the paced rate if the pace is on and that is lower."""
        paced = (pace_rate.current(claim.pace_rate, claim.pace_rate_at, now.timestamp(),
                                   self.rate_climb) if self.enabled else None)
        return pace_rate.allowed(claim.rate_limit, paced)


# ---------------------------------------------------------------- the pure rule

def asks_for_less(status_code: int | None, error_kind) -> bool:
    """True when an attempt's answer asks the service to slow down: 429, 503, or a time-out."""
    if status_code is not None:
        return status_code in BACK_OFF_CODES
    return error_kind is not None and str(getattr(error_kind, "value", error_kind)) == ErrorKind.TIMEOUT.value


def lowered(limit: int) -> int:
    """The limit after a back-off: halved, at least 1."""
    return max(1, limit // 2)


def raised(limit: int, cap: int) -> int | None:
    """The limit after a run of successes: one more, None once it is back at ``cap``."""
    return None if limit + 1 >= cap else limit + 1


def current_limit(in_flight_limit: int | None, max_in_flight: int | None, service_cap: int,
                  *, adaptive: bool = True) -> int | None:
    """The limit on attempts in flight a subscription has now (None: no limit), as the API
    and the dashboard show it (``in_flight_limit``)."""
    cap = max_in_flight if max_in_flight is not None else service_cap
    if adaptive and in_flight_limit is not None and cap:
        return min(in_flight_limit, cap)
    return cap or None


def in_flight_now(subscription, settings) -> int | None:
    """The limit on attempts in flight that applies to ``subscription`` (a row) now: its
    cap, or the adaptive pace's limit if lower (shown as ``in_flight_limit``)."""
    return current_limit(subscription.in_flight_limit, subscription.max_in_flight,
                         settings.max_in_flight, adaptive=settings.adaptive_pace)


def rate_now(subscription, settings) -> float | None:
    """The attempts per second that apply to ``subscription`` (a row) now, by the
    database's clock (which set the paced rate): its rate limit, or the adaptive pace's
    rate if lower (shown as ``current_rate_limit``)."""
    return Pace.of(settings).rate_now(subscription, clock.now())


# The options shown but never set (tenants/options.py, ``Option.reading``), by name: the
# options are declared below the lifecycle, so the services hand these to value_of.
READINGS = {"in_flight_now": in_flight_now, "rate_now": rate_now}


# ---------------------------------------------------------------- the statements

_SUB = bindparam("pace_sub", type_=String(36))
_CAP = func.coalesce(subscriptions.c.max_in_flight, bindparam("pace_cap", type_=Integer))
_NOW_LIMIT = func.coalesce(subscriptions.c.in_flight_limit, _CAP)
_HALF = _NOW_LIMIT // 2
# Lower only if the limit is still the one the attempt was claimed under (-1: none stored).
_LOWER = (update(subscriptions)
          .where(subscriptions.c.id == _SUB, _CAP > 0,
                 func.coalesce(subscriptions.c.in_flight_limit, -1)
                 == bindparam("pace_seen", type_=Integer))
          .values(in_flight_limit=case((_HALF < 1, 1), else_=_HALF), pace_successes=0))
_RUN = case((bindparam("pace_run", type_=Integer) > 0, bindparam("pace_run", type_=Integer)),
            else_=subscriptions.c.in_flight_limit)
_RUN_ENDS = subscriptions.c.pace_successes + 1 >= _RUN
_RAISE = (update(subscriptions)
          .where(subscriptions.c.id == _SUB, subscriptions.c.in_flight_limit.is_not(None))
          .values(in_flight_limit=case(
                      (and_(_RUN_ENDS, subscriptions.c.in_flight_limit + 1 >= _CAP), null()),
                      (_RUN_ENDS, subscriptions.c.in_flight_limit + 1),
                      else_=subscriptions.c.in_flight_limit),
                  pace_successes=case((_RUN_ENDS, 0), else_=subscriptions.c.pace_successes + 1)))


# FOR NO KEY UPDATE, the lock the limit's UPDATE takes (SQLite, one writer, has no such
# clause: SQLAlchemy leaves it out there).
_LOCK = select(subscriptions.c.id).where(subscriptions.c.id == _SUB).with_for_update(key_share=True)


def needs_transaction(claim, success: bool, enabled: bool) -> bool:
    """True when recording a successful attempt will also move the limit (it was lowered):
    the record then runs in a transaction, which a success alone does not open."""
    return enabled and success and claim.in_flight_limit is not None


def open_transaction(connection: Connection, subscription_id: str) -> None:
    """BEGIN on an autocommit connection that is in none (the attempt engine, PostgreSQL),
    so that the record and the limit's move commit together (db.attempt_transaction ends it);
    then lock the subscription's row, before the record's statement.

    The limit's move writes that row after the record's statement, which has locked its
    rollups' rows, the last every record takes (storage/rollup.py); another record of
    the subscription that resets its failure counter holds the row before its own
    rollups' rows. Locked only after, the row closed a cycle between the two when both
    count in one shard: each waited for the other's row. Locked first, it is taken
    before the rollups' rows, as that record takes it."""
    if in_autocommit(connection) and not in_transaction_block(connection):
        connection.exec_driver_sql("BEGIN")
    connection.execute(_LOCK, {"pace_sub": subscription_id})


def after_attempt(connection: Connection, claim, *, status_code: int | None, error_kind,
                  success: bool, pace: Pace, now: dt.datetime) -> None:
    """Move the subscription's limit after this attempt, in the caller's transaction:
    down on a back-off answer, toward the cap on a success (only if it was lowered). A
    429 also sets the paced rate (pace_rate.py) from what the receiver accepted up to
    ``now``, never above the rate the attempt went under (``pace.rate_now``)."""
    params = {"pace_sub": claim.subscription_id, "pace_cap": pace.service_cap}
    if asks_for_less(status_code, error_kind):
        seen = -1 if claim.in_flight_limit is None else claim.in_flight_limit
        connection.execute(_LOWER, dict(params, pace_seen=seen))
        if status_code in pace_rate.RATE_CODES:
            pace_rate.lower(connection, claim.subscription_id, now, pace.rate_now(claim, now))
    elif success and claim.in_flight_limit is not None:
        connection.execute(_RAISE, dict(params, pace_run=pace.success_run))
