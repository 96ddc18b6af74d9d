"""A subscription's rate: at most so many attempts per second, across all workers.

The rate in force is the subscription's ``rate_limit``, or the adaptive pace's
rate when that is lower (pace_rate.py, ``Pace.rate_now``); slots are spaced by
the rate in force when each is taken.

The subscription's row holds the limit's next free slot (``rate_next_slot``,
unix seconds). Each claimed attempt of a limited subscription takes the next
slot and moves it ``1 / rate_limit`` seconds on, in one conditional UPDATE …
RETURNING: the row lock orders concurrent claims of every worker, so no two
take the same slot. A slot that has come lets the attempt go; a later one
*reserves* it: the claim is given back and the delivery waits pending until
its slot, marked ``paced`` so that its next claim takes no second slot. A
backlog of N deliveries therefore costs N claims plus N, not N².

A slot that comes within ``hold_max`` seconds (``WEBHOOKS_SLOT_HOLD_MS``)
is *held* instead: the attempt keeps its claim, its thread waits for the
slot and then sends. Giving the claim back would cost a second claim, a
transaction and a countdown message for a wait shorter than their own
latency, and at a rate of hundreds a second those cost more than the wait
(docs/performance.md, "The pace's rate"). A held claim counts as in flight
(it is), and its thread is busy for at most ``hold_max``. While a worker's
threads' worth of slots lies within the hold (a rate above threads /
hold_max), every attempt holds: slots are reserved only as far ahead as the
threads reach, and the rest of a backlog waits on its messages, unclaimed.

Waiting longer is not an attempt: the attempt count is restored, nothing is
recorded, the subscription's failure counter does not move, and no worker
thread is held (a countdown message carries a short wait, the sweep a long
one: ``policy.carrier``; the sweep sends a parked one a countdown to its slot
once it is near). With no rate in force this costs nothing beyond reading
the subscription's ``rate_limit`` and paced rate in the claim.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import Float, bindparam, case, literal, update
from sqlalchemy.engine import Connection

from webhooks.lifecycle import policy, transitions
from webhooks.lifecycle.adaptive_pace import Pace
from webhooks.lifecycle.claim import Claim
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.states import DeliveryStatus
from webhooks.storage.models import Delivery, Subscription

__all__ = ["Paced", "Held", "admit", "limited", "SLOT_TOLERANCE_S"]

# A slot this close (seconds) counts as come: not worth a message for the wait.
SLOT_TOLERANCE_S = 0.005

_subscriptions, _deliveries = Subscription.__table__, Delivery.__table__
_NOW_S = bindparam("now_s", type_=Float)
_RATE = bindparam("rate", type_=Float)
_TAKE_SLOT = (
    update(_subscriptions)
    .where(_subscriptions.c.id == bindparam("sub_id"))
    .values(rate_next_slot=case((_subscriptions.c.rate_next_slot > _NOW_S,
                                 _subscriptions.c.rate_next_slot), else_=_NOW_S)
            + literal(1.0) / _RATE)
    .returning(_subscriptions.c.rate_next_slot)
)
_SENDING = DeliveryStatus.SENDING.value


@dataclass(frozen=True)
class Paced:
    """A claim the rate limit gave back: the delivery waits ``wait`` seconds for its slot,
    on ``dispatch`` (a countdown message to publish after commit), or parked if None."""

    delivery_id: str
    wait: float
    dispatch: Dispatch | None


@dataclass(frozen=True)
class Held:
    """A claim whose slot comes within the hold: the attempt keeps ``claim`` and sends
    at ``slot`` (the database clock's time, storage/clock.py)."""

    claim: Claim
    slot: dt.datetime


def limited(claim: Claim, now: dt.datetime, pace: Pace = Pace()) -> bool:
    """True if the claim's attempt must take a slot of a rate (it has one in force at
    ``now``: its rate limit, or the adaptive pace's rate, ``Pace.rate_now``), and the
    claim holds no slot yet."""
    return not claim.paced and pace.rate_now(claim, now) is not None


def admit(connection: Connection, claim: Claim, now: dt.datetime, rules: policy.Rules,
          countdown_room: Callable[[], bool] = lambda: True, pace: Pace = Pace(),
          hold_max: float = 0.0) -> Claim | Held | Paced:
    """``claim`` if its attempt may go now; :class:`Held` if its slot comes within
    ``hold_max`` seconds (the caller waits for it, keeping the claim); otherwise give the
    claim back until its slot (in the claim's transaction) and return what carries it
    there. The slots are spaced by the rate in force when each is taken (``pace.rate_now``)."""
    rate = None if claim.paced else pace.rate_now(claim, now)
    if rate is None:
        return claim
    taken = connection.execute(
        _TAKE_SLOT, {"sub_id": claim.subscription_id, "now_s": now.timestamp(), "rate": rate}
    ).first()
    if taken is None:  # the subscription is gone
        return claim
    next_slot = taken[0]
    wait = next_slot - 1.0 / rate - now.timestamp()
    if wait <= SLOT_TOLERANCE_S:
        return claim
    if wait <= hold_max:
        return Held(claim, now + dt.timedelta(seconds=wait))
    carried = policy.carrier(wait, rules, countdown_room)
    _wait_for_slot(connection, claim, now + dt.timedelta(seconds=wait),
                   parked=carried is policy.Wait.PARKED, now=now)
    count = claim.attempt_number - 1  # the count the delivery is back at
    dispatch = Dispatch(claim.delivery_id, count, wait) if carried is policy.Wait.COUNTDOWN else None
    return Paced(claim.delivery_id, wait, dispatch)


def _wait_for_slot(connection: Connection, claim: Claim, slot: dt.datetime, *, parked: bool,
                   now: dt.datetime) -> None:
    """Give the claim back: pending until ``slot``, its attempt count restored, holding the slot."""
    transitions.wait_for_slot(connection, claim.delivery_id, slot, parked=parked, now=now)
