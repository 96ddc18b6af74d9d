"""The budget of pause and resume notices: one account's flood holds back no other's.

An operator endpoint takes one attempt at a time (WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT),
so every notice queued before another delays it. A tenant that paused and resumed
its own subscription in a loop raised two notices per pair without limit: after
200 pairs another tenant's subscription.paused reached a 0.2 s/notice endpoint
54.7 s late (issue 36).

Each subscription.paused and subscription.resumed notice spends from two budgets,
each a generic cell rate algorithm (GCRA: per subject a theoretical arrival time,
``notice_budgets.due_after``) over WEBHOOKS_NOTICE_WINDOW seconds (60):

- its subscription's: two notices per window, a pause and its resume;
- its account's: WEBHOOKS_NOTICE_BUDGET notices per window (10).

A notice both allow goes out at once. One they do not waits, stored with its
deliveries parked until the moment both allow (the sweep sends it then). While it
waits, a newer notice of the same subscription replaces it: the waiting one is
deleted unsent, and the newer one takes its moment and counts it in ``suppressed``
(an added ``data`` field: how many notices of that subscription were dropped since
the last that went out). So a flapping subscription sends its latest state at
most twice per window, and an account's notices reach an operator endpoint at
most WEBHOOKS_NOTICE_BUDGET per window after a burst of as many: another account's
notice waits behind that many of one account's at most.

delivery.dead and delivery.failed are not budgeted: each is about a delivery of
its own. WEBHOOKS_NOTICE_WINDOW=0 turns the budget off.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from webhooks.config import Settings
from webhooks.lifecycle import transitions
from webhooks.states import DeliveryStatus
from webhooks.storage.backends import backend_of
from webhooks.storage.models import Delivery, Event, NoticeBudget

__all__ = ["Budget", "Moment", "earliest", "spent", "reserve", "remember"]

budgets, events, deliveries = NoticeBudget.__table__, Event.__table__, Delivery.__table__
PER_SUBSCRIPTION = 2  # notices per window: a pause and its resume


@dataclass(frozen=True)
class Budget:
    """The window (s) and how many notices one account may send in it; window 0: no budget."""

    window: float
    per_account: int

    @classmethod
    def of(cls, settings: Settings) -> "Budget":
        return cls(settings.notice_window, settings.notice_budget)

    @property
    def off(self) -> bool:
        return self.window <= 0


def earliest(due_after: dt.datetime, now: dt.datetime, interval: float, burst: int) -> dt.datetime:
    """GCRA: the earliest moment a notice may go out, for a subject whose theoretical
    arrival time is ``due_after``, one notice per ``interval`` seconds with a burst of
    ``burst``: now while the burst lasts, else when the budget has refilled."""
    return max(now, due_after - dt.timedelta(seconds=interval * (burst - 1)))


def spent(due_after: dt.datetime, at: dt.datetime, interval: float) -> dt.datetime:
    """GCRA: the theoretical arrival time after a notice goes out at ``at``."""
    return max(due_after, at) + dt.timedelta(seconds=interval)


@dataclass(frozen=True)
class Moment:
    """When a new notice goes out (``at``), how many notices it counts as dropped
    (``suppressed``), and the waiting notice it replaces (an event id), if any."""

    at: dt.datetime
    suppressed: int = 0
    replaces: str | None = None


def _row(connection: Connection, subject_id: str, now: dt.datetime):
    """The subject's budget row, made full if it had none, locked until the transaction ends."""
    statement = backend_of(connection).upsert_adding(
        budgets, {"subject_id": subject_id, "due_after": now, "deferred_event_id": None,
                  "suppressed": 0}, ("subject_id",), ("suppressed",))
    return connection.execute(statement.returning(
        budgets.c.due_after, budgets.c.deferred_event_id, budgets.c.suppressed)).one()


def reserve(connection: Connection, account_id: str, subscription_id: str, now: dt.datetime,
            budget: Budget) -> Moment:
    """When a new pause or resume notice of ``subscription_id`` may go out, in the caller's
    transaction; the budgets are spent, unless it replaces the notice that waits (which
    keeps its moment). Locks the account's budget row, then the subscription's."""
    account = _row(connection, account_id, now)
    subscription = _row(connection, subscription_id, now)
    waiting = subscription.deferred_event_id
    if waiting is not None:
        moment = _moment_of(connection, waiting)
        if transitions.drop_unsent(connection, waiting):  # replaced before it went out
            connection.execute(delete(events).where(events.c.id == waiting))
            return Moment(max(now, moment or now), subscription.suppressed + 1, replaces=waiting)
    account_interval = budget.window / budget.per_account
    subscription_interval = budget.window / PER_SUBSCRIPTION
    at = max(earliest(account.due_after, now, account_interval, budget.per_account),
             earliest(subscription.due_after, now, subscription_interval, PER_SUBSCRIPTION))
    _set(connection, account_id, due_after=spent(account.due_after, at, account_interval))
    _set(connection, subscription_id,
         due_after=spent(subscription.due_after, at, subscription_interval))
    return Moment(at)


def _moment_of(connection: Connection, event_id: str) -> dt.datetime | None:
    """When the waiting notice ``event_id`` is to go out (None: its deliveries are held, a
    paused endpoint's, and go out when it resumes)."""
    return connection.execute(
        select(func.min(deliveries.c.next_attempt_at))
        .where(deliveries.c.event_id == event_id,
               deliveries.c.status == DeliveryStatus.PENDING.value)
    ).scalar()


def remember(connection: Connection, subscription_id: str, moment: Moment,
             waiting_event_id: str | None) -> None:
    """After the new notice is stored: the subscription's waiting notice is now
    ``waiting_event_id`` (None: it went out at once), with its ``suppressed`` count."""
    _set(connection, subscription_id, deferred_event_id=waiting_event_id,
         suppressed=moment.suppressed if waiting_event_id else 0)


def _set(connection: Connection, subject_id: str, **values) -> None:
    connection.execute(update(budgets).where(budgets.c.subject_id == subject_id).values(**values))
