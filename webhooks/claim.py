"""The first hot transition of every attempt: claim it, and load what it needs.

One conditional UPDATE takes a pending, due delivery whose attempt count is
the one the broker message expects: a stale or duplicate message claims
nothing. The statement is written once, in SQLAlchemy Core. On PostgreSQL it
also joins the event and the subscription (UPDATE … FROM … RETURNING) and is
prepared once per connection (prepared.py); SQLite cannot return columns of
joined tables, so it loads them with a second statement.

The claim also keeps the limits on attempts in flight (:class:`Caps`, and a
subscription's own ``max_in_flight`` in place of the service's); a
delivery turned away by one waits for a free slot (``states.waiting``)
without a broker message, and a finished attempt or the sweep releases it
(record.py, sweep.py). It loads the secret that signs at the moment of the
claim (rotation.py), and what the rate limit needs (pacing.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import Integer, and_, bindparam, case, false, func, or_, select, update
from sqlalchemy.engine import Connection

from .config import Settings
from .models import Delivery, Event, Subscription, UTCDateTime
from .prepared import PreparedStatement, execute_together
from .rotation import signing_secret
from .states import UNPAUSABLE_TYPE, DeliveryStatus, SubscriptionStatus, held_by_pause

__all__ = ["Claim", "Caps", "claim", "wait_for_slot", "EARLY_SLACK"]

PENDING, SENDING = DeliveryStatus.PENDING.value, DeliveryStatus.SENDING.value
# A countdown message may arrive a little before next_attempt_at (clock rounding).
EARLY_SLACK = dt.timedelta(seconds=1)

deliveries, events, subscriptions = Delivery.__table__, Event.__table__, Subscription.__table__


@dataclass(frozen=True)
class Claim:
    """Everything one attempt needs, loaded when the attempt is claimed."""

    delivery_id: str
    attempt_number: int
    event_id: str
    event_type: str
    subscription_id: str
    url: str
    secret: str  # the one that signs at the moment of the claim
    body: bytes
    version: str
    headers: dict = field(default_factory=dict)  # the subscription's custom headers
    rate_limit: float | None = None  # attempts per second, None: no limit
    paced: bool = False  # holds a slot of the rate limit already (pacing.py)


@dataclass(frozen=True)
class Caps:
    """Attempts that may be in flight at once (0: no limit): per subscription (unless the
    subscription sets its own ``max_in_flight``), for test.ping per subscription (apart
    from the others), and per account across its subscriptions."""

    subscription: int = 0
    test: int = 0
    account: int = 0

    @classmethod
    def of(cls, settings: Settings) -> "Caps":
        return cls(settings.max_in_flight, settings.test_max_in_flight,
                   settings.account_max_in_flight)


def _in_flight(scope: str, *, test_pings_only: bool = False):
    """How many attempts are in flight in the claimed delivery's ``scope`` ("subscription_id"
    or "account_id"), counting only test.ping ones if ``test_pings_only``."""
    flying = deliveries.alias("flying")
    conditions = [flying.c.status == SENDING, flying.c[scope] == deliveries.c[scope]]
    if test_pings_only:
        conditions.append(flying.c.event_type == UNPAUSABLE_TYPE)
    return select(func.count()).select_from(flying).where(*conditions).scalar_subquery()


def _under(limit, count) -> object:
    """``count`` is under ``limit`` (0: no limit)."""
    return or_(limit == 0, count < limit)


def _cap(name: str):
    return bindparam(name, type_=Integer)


# The subscription's own max_in_flight, else the service's (WEBHOOKS_MAX_IN_FLIGHT).
_own = subscriptions.alias("own")
_SUBSCRIPTION_CAP = func.coalesce(
    select(_own.c.max_in_flight)
    .where(_own.c.id == deliveries.c.subscription_id).scalar_subquery(),
    _cap("cap"),
)
# test.ping is held to its own cap; every other type to the subscription's.
# Both are held to the account's, which counts test pings too.
_UNDER_CAPS = and_(
    case(
        (deliveries.c.event_type == UNPAUSABLE_TYPE,
         _under(_cap("test_cap"), _in_flight("subscription_id", test_pings_only=True))),
        else_=_under(_SUBSCRIPTION_CAP, _in_flight("subscription_id")),
    ),
    _under(_cap("account_cap"), _in_flight("account_id")),
)
_CLAIMABLE = (
    deliveries.c.status == PENDING,
    deliveries.c.attempt_count == bindparam("count"),
    or_(deliveries.c.next_attempt_at.is_(None), deliveries.c.next_attempt_at <= bindparam("due")),
)
_TAKE = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("d_id"), *_CLAIMABLE, _UNDER_CAPS)
    .values(status=SENDING, attempt_count=deliveries.c.attempt_count + 1,
            claimed_at=bindparam("now"), parked=false(), updated_at=bindparam("now"))
)
_NOW = bindparam("now", type_=UTCDateTime)
_LOADED = (events.c.body, events.c.version, subscriptions.c.url,
           signing_secret(subscriptions, _NOW).label("secret"), subscriptions.c.status,
           subscriptions.c.deleted_at, subscriptions.c.headers, subscriptions.c.rate_limit)
_TAKEN = (deliveries.c.subscription_id, deliveries.c.event_id, deliveries.c.event_type,
          deliveries.c.paced)

_CLAIM_PG = PreparedStatement.from_core("claim", _TAKE.where(
    events.c.id == deliveries.c.event_id, subscriptions.c.id == deliveries.c.subscription_id,
).returning(*_TAKEN, *_LOADED))
_CLAIM_PORTABLE = _TAKE.returning(*_TAKEN)
_LOAD_PORTABLE = (select(*_LOADED)
                  .select_from(events.join(subscriptions, subscriptions.c.id == bindparam("sub")))
                  .where(events.c.id == bindparam("event")))

# Claims of one account take turns, always (a subscription may have a cap of its
# own even when the service's are 0): under READ COMMITTED two concurrent claims
# would each count the attempts in flight without the other's, so N threads
# could overshoot a cap by N - 1. The lock is held until
# the claim commits and taken in its own statement, so that the claim's
# snapshot, taken after it, sees every claim committed before. (SQLite's
# BEGIN IMMEDIATE already serialises writers.)
_TURN_PG = PreparedStatement.from_core("claim_turn", select(
    func.pg_advisory_xact_lock(func.hashtextextended(deliveries.c.account_id, 7403))
).where(deliveries.c.id == bindparam("d_id")))


def claim(connection: Connection, delivery_id: str, attempt_count: int, now: dt.datetime,
          caps: Caps = Caps()) -> Claim | None:
    """Claim the next attempt of a pending, due delivery; None if it is not ours to send.

    A claim for a paused (or deleted) subscription is given back at once and
    the delivery held as ``paused`` (or ended ``failed``). A delivery over one
    of ``caps`` waits for a free slot instead (:func:`wait_for_slot`).
    """
    params = {"d_id": delivery_id, "count": attempt_count, "now": now, "due": now + EARLY_SLACK,
              "cap": caps.subscription, "test_cap": caps.test, "account_cap": caps.account}
    if connection.dialect.name == "postgresql":
        # Always: even with the service's caps at 0, a subscription may have its own.
        # One round trip: [BEGIN;] the turn; the claim (each with its own snapshot).
        rows = execute_together(
            connection, [(_TURN_PG, {"d_id": delivery_id}), (_CLAIM_PG, params)], begin=True)
        row = rows[0] if rows else None
    else:
        row = _claim_portable(connection, params)
    if row is None:
        # Claimable but not claimed: a cap turned it away.
        wait_for_slot(connection, delivery_id, attempt_count, now)
        return None
    (subscription_id, event_id, event_type, paced, body, version, url, secret, status, deleted_at,
     headers, rate_limit) = row
    if deleted_at is not None:
        _give_back(connection, delivery_id, DeliveryStatus.FAILED.value, now)
        return None
    if status == SubscriptionStatus.PAUSED.value and held_by_pause(event_type):
        _give_back(connection, delivery_id, DeliveryStatus.PAUSED.value, now)
        return None
    return Claim(delivery_id, attempt_count + 1, event_id, event_type, subscription_id, url,
                 secret, bytes(body), version, headers or {}, rate_limit, bool(paced))


def _claim_portable(connection: Connection, params: dict):
    taken = connection.execute(_CLAIM_PORTABLE, params).first()
    if taken is None:
        return None
    loaded = connection.execute(
        _LOAD_PORTABLE,
        {"sub": taken.subscription_id, "event": taken.event_id, "now": params["now"]}).one()
    return (*taken, *loaded)


def _give_back(connection: Connection, delivery_id: str, status: str, now: dt.datetime) -> None:
    """Give back a claim without an attempt: the attempt count is restored, nothing recorded
    (and a slot of the rate limit it held is given up)."""
    connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id, deliveries.c.status == SENDING)
        .values(status=status, attempt_count=deliveries.c.attempt_count - 1, claimed_at=None,
                paced=False, updated_at=now)
    )


def wait_for_slot(connection: Connection, delivery_id: str, attempt_count: int,
                  now: dt.datetime) -> bool:
    """Make a delivery the caps turned away wait for a free slot; False if it was not
    claimable (a stale or duplicate message changes nothing)."""
    moved = connection.execute(
        update(deliveries).where(deliveries.c.id == delivery_id, *_CLAIMABLE)
        .values(parked=True, next_attempt_at=None, paced=False, updated_at=now),
        {"count": attempt_count, "due": now + EARLY_SLACK},
    )
    return moved.rowcount == 1
