"""The first hot transition of every attempt: claim it, and load what it needs.

One conditional UPDATE takes a pending, due delivery whose attempt count is
the one the broker message expects: a stale or duplicate message claims
nothing. The statement is written once, in SQLAlchemy Core; how the engine
runs it is its backend's (storage/backends): on PostgreSQL it also joins the
event and the subscription (UPDATE … FROM … RETURNING), prepared once per
connection; SQLite cannot return columns of joined tables, so it loads them
with a second statement.

The claim takes only a delivery of a live subscription that a pause does
not hold, and keeps the limits on attempts in flight (:class:`Caps`, and a
subscription's own ``max_in_flight`` in place of the service's). A
delivery it does not take is turned away in one more statement: ended
``failed`` (deleted subscription), held ``paused``, or waiting for a free
slot (``states.waiting``) without a broker message, which a finished
attempt or the sweep releases (record.py, sweep.py). As nothing is ever
claimed and then given back (but by the rate limit), the claim commits as
it returns, in its one round trip. It loads the secret that signs at the
moment of the claim (rotation.py) with a staged one and the signature scheme,
and what the rate limit and the paced rate need (pacing.py, pace_rate.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Sequence

from sqlalchemy import Boolean, Integer, and_, bindparam, case, func, or_, select
from sqlalchemy.engine import Connection

from webhooks.config import Settings
from webhooks.lifecycle import transitions
from webhooks.lifecycle.ordering import clear_of_predecessors
from webhooks.states import UNPAUSABLE_TYPE, DeliveryStatus, SubscriptionStatus, held_by_pause
from webhooks.storage.backends import ClaimStatements, backend_of
from webhooks.storage.models import Delivery, Event, Subscription, UTCDateTime
from webhooks.tenants.options import CLAIMED
from webhooks.tenants.rotation import signing_secret, staged_secret

__all__ = ["Claim", "Caps", "claim", "claim_many", "turn_away", "EARLY_SLACK"]

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
    ordering_key: str | None = None  # its ordering key (ordering.py), and its place in it
    key_sequence: int | None = None
    in_flight_limit: int | None = None  # the adaptive pace's current limit, if lowered
    pace_rate: float | None = None  # the adaptive pace's rate as set (pace_rate.py), attempts/s
    pace_rate_at: float | None = None  # when it was set, unix seconds (it climbs from then)
    signature_scheme: str = "service"  # tenants/schemes.py
    staged_secret: str | None = None  # a staged rotation's next secret (signs too: standard)
    # The credentials its receiver requires (tenants/credentials.py), as stored; None: none.
    client_certificate: Mapping[str, str] | None = None
    oauth2: Mapping[str, str] | None = None
    # Its own retry delays in seconds (tenants/retry_schedules.py), as stored when claimed;
    # None: the service's ladder. policy.next_step reads it.
    retry_schedule: Sequence[int] | None = None
    # The subscription's stored values (None: null) of the options declared ``claimed``
    # (tenants/options.py), by name: what an attempt uses beside the fields above.
    options: Mapping[str, object] = field(default_factory=dict)
    # The traceparent its attempt's span is a child of (config/tracing.py); None: none stored.
    trace_context: str | None = None


@dataclass(frozen=True)
class Caps:
    """Attempts that may be in flight at once (0: no limit): per subscription (unless the
    subscription sets its own ``max_in_flight``), for test.ping per subscription (apart
    from the others), and per account across its subscriptions."""

    subscription: int = 0
    test: int = 0
    account: int = 0
    adaptive: bool = True  # the subscription's current limit (adaptive_pace.py) applies

    @classmethod
    def of(cls, settings: Settings) -> "Caps":
        return cls(settings.max_in_flight, settings.test_max_in_flight,
                   settings.account_max_in_flight, settings.adaptive_pace)


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


# The adaptive pace's current limit if it lowered one (and is on, WEBHOOKS_ADAPTIVE_PACE),
# else the subscription's own max_in_flight, else the service's (WEBHOOKS_MAX_IN_FLIGHT).
_own = subscriptions.alias("own")
_SUBSCRIPTION_CAP = func.coalesce(
    select(func.coalesce(case((bindparam("adaptive", type_=Boolean), _own.c.in_flight_limit)),
                         _own.c.max_in_flight))
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
    *transitions.one_row(bindparam("d_id"), PENDING),
    deliveries.c.attempt_count == bindparam("count"),
    or_(deliveries.c.next_attempt_at.is_(None), deliveries.c.next_attempt_at <= bindparam("due")),
)
# Why a claimable delivery may not be sent: its subscription was deleted, or is paused and
# the pause holds this type (states.held_by_pause). Neither: it may go (caps permitting).
_sub = subscriptions.alias("sub")
_GONE = (select(_sub.c.deleted_at).where(_sub.c.id == deliveries.c.subscription_id)
         .scalar_subquery().is_not(None))
_HELD = and_(select(_sub.c.status).where(_sub.c.id == deliveries.c.subscription_id)
             .scalar_subquery() == SubscriptionStatus.PAUSED.value,
             held_by_pause(deliveries.c.event_type))
_SENDABLE = ~or_(_GONE, _HELD)
# A keyed delivery goes only once the one before it with its key has finished (ordering.py).
_CLEAR = clear_of_predecessors(deliveries)
_TAKE = transitions.take_for_attempt(*_CLAIMABLE, _SENDABLE, _CLEAR, _UNDER_CAPS)
_NOW = bindparam("now", type_=UTCDateTime)
_LOADED = (events.c.body, events.c.version, subscriptions.c.url,
           signing_secret(subscriptions, _NOW).label("secret"), subscriptions.c.headers,
           subscriptions.c.rate_limit, subscriptions.c.pace_rate, subscriptions.c.pace_rate_at,
           subscriptions.c.in_flight_limit,
           subscriptions.c.signature_scheme,
           staged_secret(subscriptions, _NOW).label("staged_secret"),
           subscriptions.c.client_certificate, subscriptions.c.oauth2,
           subscriptions.c.retry_schedule,
           *(subscriptions.c[name] for name in CLAIMED))
_TAKEN = (deliveries.c.subscription_id, deliveries.c.event_id, deliveries.c.event_type,
          deliveries.c.paced, deliveries.c.ordering_key, deliveries.c.key_sequence,
          deliveries.c.trace_context)
# The names of a claimed row's columns, in the order the backends return them.
_COLUMNS = tuple(column.name for column in (*_TAKEN, *_LOADED))

def claim(connection: Connection, delivery_id: str, attempt_count: int, now: dt.datetime,
          caps: Caps = Caps()) -> Claim | None:
    """Claim the next attempt of a pending, due delivery; None if it is not ours to send.

    Only a delivery of a live subscription that a pause does not hold is
    claimed; one that is not, or is over one of ``caps``, is turned away
    (:func:`turn_away`) instead.

    On the attempt engine (autocommit) the claim commits as it returns, in its
    one round trip: nothing that follows it needs to be in its transaction,
    as a claim is never given back but by the rate limit (pacing.py), whose
    give-back is conditional on the claim and which the sweep stands in for.
    """
    # PostgreSQL: the account's turn, then the claim with its loads, in one round trip;
    # SQLite: the claim, then the loads (storage/backends).
    row = backend_of(connection).claim(connection, _params(delivery_id, attempt_count, now, caps),
                                       STATEMENTS)
    if row is None:
        turn_away(connection, delivery_id, attempt_count, now)
        return None
    return _claimed(delivery_id, attempt_count, row)


def claim_many(connection: Connection, wanted: Sequence[tuple[str, int, Caps]],
               now: dt.datetime) -> list[Claim | None]:
    """:func:`claim` for each (delivery id, attempt count, caps) of ``wanted``, in order,
    each exactly as it would run alone (it sees what the ones before it wrote, and one
    not taken is turned away); in one statement and one commit on PostgreSQL
    (group_commit.py). Each one's Claim, or None."""
    rows = backend_of(connection).claim_many(
        connection, [_params(d_id, count, now, caps) for d_id, count, caps in wanted], STATEMENTS)
    return [None if row is None else _claimed(d_id, count, row)
            for (d_id, count, _), row in zip(wanted, rows)]


def _params(delivery_id: str, attempt_count: int, now: dt.datetime, caps: Caps) -> dict:
    return {"d_id": delivery_id, "count": attempt_count, "now": now, "due": now + EARLY_SLACK,
            "cap": caps.subscription, "test_cap": caps.test, "account_cap": caps.account,
            "adaptive": caps.adaptive}


def _claimed(delivery_id: str, attempt_count: int, row) -> Claim:
    """The Claim of a claimed row (the taken columns, then the loaded ones)."""
    # By name, not by position: a column added to _TAKEN or _LOADED is one more field of Claim.
    loaded = dict(zip(_COLUMNS, row))
    return Claim(delivery_id=delivery_id, attempt_number=attempt_count + 1,
                 event_id=loaded["event_id"], event_type=loaded["event_type"],
                 subscription_id=loaded["subscription_id"], url=loaded["url"],
                 secret=loaded["secret"], body=bytes(loaded["body"]), version=loaded["version"],
                 headers=loaded["headers"] or {}, rate_limit=loaded["rate_limit"],
                 pace_rate=loaded["pace_rate"], pace_rate_at=loaded["pace_rate_at"],
                 paced=bool(loaded["paced"]), ordering_key=loaded["ordering_key"],
                 key_sequence=loaded["key_sequence"], in_flight_limit=loaded["in_flight_limit"],
                 signature_scheme=loaded["signature_scheme"] or "service",
                 staged_secret=loaded["staged_secret"],
                 client_certificate=loaded["client_certificate"], oauth2=loaded["oauth2"],
                 retry_schedule=loaded["retry_schedule"],
                 options={name: loaded[name] for name in CLAIMED},
                 trace_context=loaded["trace_context"])


# One statement, so it needs no transaction: a claimable delivery that was not claimed
# ends failed (its subscription was deleted), is held paused, or (sendable) waits for its
# key's predecessor (ordering.py) or, a cap turned it away, for a free slot.
_TURN_AWAY = transitions.turn_away(*_CLAIMABLE, gone=_GONE, held=_HELD, sendable=_SENDABLE,
                                   behind=~_CLEAR)
# What the backends run, handed to them with each claim (storage knows tables, not rules).
STATEMENTS = ClaimStatements(take=_TAKE, taken=_TAKEN, loaded=_LOADED, turn_away=_TURN_AWAY,
                             deliveries=deliveries, events=events, subscriptions=subscriptions)


def turn_away(connection: Connection, delivery_id: str, attempt_count: int,
              now: dt.datetime) -> bool:
    """What happens to a delivery the claim did not take: ``failed`` if its subscription
    was deleted, ``paused`` if a pause holds it, else it waits for a free slot of the
    caps (``states.waiting``: no message, no time; a finished attempt or the sweep
    releases it). False if it was not claimable: a stale or duplicate message changes
    nothing."""
    moved = connection.execute(
        _TURN_AWAY, {"d_id": delivery_id, "count": attempt_count, "due": now + EARLY_SLACK,
                     "now": now})
    return moved.rowcount == 1
