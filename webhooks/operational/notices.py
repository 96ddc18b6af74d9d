"""Store the operational notices, each in the transaction of the change it reports.

One function per notice; each takes the caller's connection (or session),
inside the transaction that pauses, resumes, or ends the delivery, and
returns the Dispatches to publish once that transaction commits (never if it
rolls back: then the notice is gone with the change). Nothing is stored when
no operational endpoint wants the type, and nothing for a change to the
operator's own endpoints: a notice about a notice would recurse.

A caller with a session (a route, a service) publishes what it gets back::

    publish_after_commit(session, notify_paused(session, sub_id, reason="manual", now=now))

lifecycle/record.py calls notify_delivery_ended and notify_paused through the
listeners the composition root registers (lifecycle/listeners.py,
webhooks/composition.py: the lifecycle is below this package) and returns
what they give in ``Recorded.notices``, which the attempt publishes with its
other messages (services/attempt.py).

subscription.paused and subscription.resumed spend from a budget of their account
and of their subscription (budget.py): beyond it a notice waits, parked, and a
newer one of the same subscription replaces it, counting it in ``suppressed``.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.emit import store_checked
from webhooks.lifecycle import transitions
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.operational import catalogue
from webhooks.operational.budget import Budget, remember, reserve
from webhooks.reserved import OPERATOR_ACCOUNT_ID, is_operator
from webhooks.states import DeliveryStatus
from webhooks.storage.models import Subscription

__all__ = ["notify_paused", "notify_resumed", "notify_delivery_ended"]

log = logging.getLogger(__name__)

subscriptions = Subscription.__table__
_SUBJECT = select(subscriptions.c.account_id, subscriptions.c.consecutive_failures)
_ENDPOINT_TYPES = select(subscriptions.c.event_types).where(
    subscriptions.c.account_id == OPERATOR_ACCOUNT_ID, subscriptions.c.deleted_at.is_(None))
# A delivery that ends with one of these statuses after an attempt raises this notice.
_ENDED = {DeliveryStatus.DEAD.value: catalogue.DELIVERY_DEAD,
          DeliveryStatus.FAILED.value: catalogue.DELIVERY_FAILED}


def notify_paused(connection, subscription_id: str, *, reason: str,
                  now: dt.datetime) -> list[Dispatch]:
    """subscription.paused: ``subscription_id`` paused just now for ``reason`` ("failures",
    "manual" or "gone"); its counter is read in this transaction. Within the notices'
    budget (budget.py) it goes out at once; beyond it, later (nothing to publish now)."""
    subject = _subject(connection, subscription_id, catalogue.SUBSCRIPTION_PAUSED)
    if subject is None:
        return []
    account_id, failures = subject
    return _store_budgeted(connection, catalogue.SUBSCRIPTION_PAUSED, {
        "account_id": account_id, "subscription_id": subscription_id, "reason": reason,
        "consecutive_failures": failures, "paused_at": _timestamp(now)}, now)


def notify_resumed(connection, subscription_id: str, *, now: dt.datetime) -> list[Dispatch]:
    """subscription.resumed: ``subscription_id`` was paused and is active again; budgeted
    as subscription.paused is."""
    subject = _subject(connection, subscription_id, catalogue.SUBSCRIPTION_RESUMED)
    if subject is None:
        return []
    return _store_budgeted(connection, catalogue.SUBSCRIPTION_RESUMED, {
        "account_id": subject[0], "subscription_id": subscription_id,
        "resumed_at": _timestamp(now)}, now)


def notify_delivery_ended(connection, status: str, *, subscription_id: str, delivery_id: str,
                          event_id: str, event_type: str, attempt_count: int,
                          status_code: int | None) -> list[Dispatch]:
    """delivery.dead or delivery.failed for a delivery whose attempt left it ``status``;
    nothing for any other status."""
    notice_type = _ENDED.get(status)
    subject = None if notice_type is None else _subject(connection, subscription_id, notice_type)
    if subject is None:
        return []
    return _store(connection, notice_type, {
        "account_id": subject[0], "subscription_id": subscription_id,
        "delivery_id": delivery_id, "event_id": event_id, "event_type": event_type,
        "attempt_count": attempt_count, "status_code": status_code})[1]


def _connection(connection_or_session):
    if isinstance(connection_or_session, Session):
        return connection_or_session.connection()
    return connection_or_session


def _subject(connection, subscription_id: str, notice_type: str) -> tuple[str, int] | None:
    """(account id, consecutive failures) of a customer's subscription that a notice of
    ``notice_type`` is about; None if no operational endpoint wants that type (one query:
    the cost where no endpoint was added), or for the operator's own subscriptions."""
    wanted = [types for (types,) in _connection(connection).execute(_ENDPOINT_TYPES)
              if types is None or notice_type in types]
    if not wanted:
        return None
    row = _connection(connection).execute(
        _SUBJECT.where(subscriptions.c.id == subscription_id)).first()
    if row is None or is_operator(row.account_id):
        return None
    return row.account_id, row.consecutive_failures


def _timestamp(moment: dt.datetime) -> str:
    """ISO 8601 in UTC with ``+00:00``, as every event's data has it."""
    return moment.astimezone(dt.timezone.utc).isoformat()


def _store_budgeted(connection, notice_type: str, data: dict, now: dt.datetime) -> list[Dispatch]:
    """A pause or resume notice, within the budget of its account and its subscription
    (budget.py): stored to go out at once (its Dispatches returned), or parked until the
    budget allows (nothing to publish now), replacing a notice of the subscription that
    waits; ``data`` gains ``suppressed``, how many notices it replaced."""
    connection = _connection(connection)
    budget = Budget.of(get_settings())
    if budget.off:
        return _store(connection, notice_type, {**data, "suppressed": 0})[1]
    moment = reserve(connection, data["account_id"], data["subscription_id"], now, budget)
    stored, dispatches = _store(connection, notice_type, {**data, "suppressed": moment.suppressed})
    if stored is None:
        return []
    if moment.at <= now:
        remember(connection, data["subscription_id"], moment, None)
        return dispatches
    transitions.defer(connection, list(stored.delivery_ids), moment.at, now)
    remember(connection, data["subscription_id"], moment, stored.id)
    return []


def _store(connection, notice_type: str, data: dict):
    """The notice as an event of the operator account with one delivery per operational
    endpoint that wants it: the stored event (None: not stored) and the Dispatches to
    publish after commit."""
    connection = _connection(connection)
    errors = catalogue.data_errors(notice_type, data)
    if errors:
        # Our bug, never the customer's: logged, and the change it reports goes on
        # (raising here would fail the customer's delivery record with it).
        log.error("%s notice not sent: its data is invalid: %s", notice_type, errors)
        return None, []
    return store_checked(connection, OPERATOR_ACCOUNT_ID, notice_type, data)
