"""emit_event's store on PostgreSQL: the event and its deliveries in one prepared statement.

``emit.py`` stores an event in three statements and a commit (find the
targets, insert the event, insert the deliveries): four round trips, and
PostgreSQL plans each statement every time. Here, for a call that runs in
its own transaction, the same work is one statement of data-modifying CTEs,
prepared once per connection (prepared.py) and sent on a connection in
autocommit mode, so that it commits in the same round trip (durably: this
is the service's promise to the caller, unlike an attempt's record). For
one subscription, PostgreSQL's CPU per call went from 1.4-1.5 to 0.7-0.8 ms
and the caller's from 3.2-3.5 to 2.4-2.6 ms (docs/performance.md).

The rules are the ones ``emit._store`` applies, in SQL:

- the account must exist (else nothing is stored and the caller raises
  NotFound);
- one delivery per live subscription of the account that wants the type
  (``event_types`` null, or holding the type);
- ``paused`` for a paused subscription unless the type is never held
  (states.held_by_pause); waiting for a slot, without a message, behind
  deliveries already waiting for one (claim.py);
- a subscription with a ``filter`` (events/filters.py) gets a delivery only if the
  caller evaluated that very filter and it accepted the event: the caller passes
  ``considered`` (a JSON object, the filters it evaluated by subscription id) and
  ``accepted`` (a JSON array of the ids whose filter accepted). A filtered subscription
  whose filter is not among those considered (the caller had not seen it, or it changed
  since) stores nothing at all, and the statement answers that subscription's filter
  (``filters``): the caller evaluates it and runs the statement again. A filter is
  Python, evaluated by the caller; the statement only checks that the caller's
  evaluation is of the filters stored now;
- an event whose idempotency key the account used before is not stored
  again. ``ON CONFLICT DO NOTHING`` has no target on purpose: it also covers
  the event's own id, so a call repeated after its connection dropped
  finds the event the first try committed instead of failing (emit.py).
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from sqlalchemy import (Boolean, Integer, String, Text, and_, bindparam, case, cast, false, func,
                        literal, null, select, true, type_coerce)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert
from sqlalchemy.engine import Connection

from webhooks.lifecycle import transitions
from webhooks.states import DeliveryStatus, SubscriptionStatus, waiting
from webhooks.storage.batched import BatchedStatement, Body
from webhooks.storage.models import Account, Delivery, Event, Subscription, UTCDateTime
from webhooks.storage.prepared import PreparedStatement, execute_together

__all__ = ["Stored", "store_in_one_statement", "store_many_in_one_statement"]

_accounts, _events = Account.__table__, Event.__table__
_deliveries, _subscriptions = Delivery.__table__, Subscription.__table__
PENDING, PAUSED = DeliveryStatus.PENDING.value, DeliveryStatus.PAUSED.value

_ACCOUNT_ID = bindparam("account_id", type_=String(36))
_TYPE = bindparam("event_type", type_=String(64))
_CREATED = bindparam("created_at", type_=UTCDateTime)
# False for the one type a pause never holds (states.held_by_pause), given by the caller.
_PAUSABLE = bindparam("pausable", type_=Boolean)
# The traceparent of the event's emit span, stored with each delivery (null: tracing off).
_TRACE_CONTEXT = bindparam("trace_context", type_=String(55))
# The filters the caller evaluated, {subscription id: filter} as JSON text, and the ids of
# those that accepted the event, a JSON array as text (text, not arrays: the batch passes
# one value per event, and unnest flattens an array of arrays). Each is read as JSONB once
# per statement (an uncorrelated scalar subquery is an InitPlan), not once per target row.
_CONSIDERED = type_coerce(
    select(cast(bindparam("considered", type_=Text), JSONB)).scalar_subquery(), JSONB)
_ACCEPTED = type_coerce(
    select(cast(bindparam("accepted", type_=Text), JSONB)).scalar_subquery(), JSONB)


class Stored(NamedTuple):
    """What the statement did: whether the account exists, whether the event was stored
    (False: its id or idempotency key was there already), and (delivery id, status, parked)
    for each delivery it stored."""

    account_found: bool
    event_stored: bool
    deliveries: list[tuple[str, str, bool]]
    # {subscription id: filter} of the filtered subscriptions the caller had not evaluated
    # (nothing was stored then); None when there were none.
    filters: dict | None = None


def _steps():
    """The statement's CTEs: (the account, the event inserted, the deliveries inserted), and
    the filters the caller has yet to evaluate (a scalar: null when none)."""
    # A deleted account (DELETE /accounts/<id>) takes no event: as an unknown one.
    account = select(_accounts.c.id).where(_accounts.c.id == _ACCOUNT_ID,
                                           _accounts.c.deleted_at.is_(None)).cte("account")
    waiting_one = _deliveries.alias("w")
    targets = (
        select(_subscriptions.c.id, _subscriptions.c.status,
               select(waiting_one.c.id)
               .where(waiting_one.c.subscription_id == _subscriptions.c.id, waiting(waiting_one))
               .exists().label("has_waiting"),
               _subscriptions.c.filter.cast(JSONB).label("filter"))
        .where(_subscriptions.c.account_id == _ACCOUNT_ID, _subscriptions.c.deleted_at.is_(None),
               _subscriptions.c.event_types.is_(None)
               | _subscriptions.c.event_types.cast(JSONB).has_key(_TYPE))
        .cte("targets"))
    # A filtered target whose filter the caller did not evaluate as it is stored now.
    unseen = and_(targets.c.filter.is_not(None),
                  _CONSIDERED.op("->")(targets.c.id).is_distinct_from(targets.c.filter))
    unseen_filters = (select(func.jsonb_object_agg(targets.c.id, targets.c.filter))
                      .where(unseen).scalar_subquery())
    event = (
        insert(_events)
        .from_select(["id", "account_id", "type", "version", "idempotency_key", "body", "created_at"],
                     select(bindparam("event_id", type_=String(36)), account.c.id, _TYPE,
                            bindparam("version", type_=String(10)),
                            bindparam("idempotency_key", type_=String(255)),
                            bindparam("body", type_=_events.c.body.type), _CREATED)
                     .where(~select(targets.c.id).where(unseen).exists()))
        .on_conflict_do_nothing()
        .returning(_events.c.id)
        .cte("event"))
    paused = targets.c.status == SubscriptionStatus.PAUSED.value
    # As emit._store: queued behind deliveries already waiting for a slot, unless held or never held.
    queued = and_(targets.c.has_waiting, _PAUSABLE, ~paused)
    delivered = transitions.new_deliveries_from(
        select(func.gen_random_uuid().cast(String(36)), _ACCOUNT_ID, event.c.id, targets.c.id,
               _TYPE, case((and_(paused, _PAUSABLE), PAUSED), else_=PENDING),
               literal(0), case((queued, null()), else_=_CREATED), queued, null(), null(),
               false(), _TRACE_CONTEXT, _CREATED, _CREATED)
        .select_from(event.join(targets, true()))
        .where(targets.c.filter.is_(None) | _ACCEPTED.has_key(targets.c.id)),
        ["id", "account_id", "event_id", "subscription_id", "event_type", "status",
         "attempt_count", "next_attempt_at", "parked", "claimed_at", "replay_of", "paced",
         "trace_context", "created_at", "updated_at"],
    ).cte("delivered")
    return account, event, delivered, unseen_filters


def _found(account, event, unseen_filters) -> tuple:
    return (select(func.count()).select_from(account).scalar_subquery().label("account_found"),
            select(func.count()).select_from(event).scalar_subquery().label("event_stored"),
            unseen_filters.label("filters"))


def _statement() -> PreparedStatement:
    """One row per delivery stored (one row of nulls if none), each with the two answers."""
    account, event, delivered, unseen_filters = _steps()
    one = select(literal(1).label("one")).subquery("one")
    return PreparedStatement.from_core("emit", select(
        *_found(account, event, unseen_filters), delivered.c.id, delivered.c.status, delivered.c.parked,
    ).select_from(one.outerjoin(delivered, true())))


def _batched() -> BatchedStatement:
    """The same statement for each event of a batch (group commit, emit.py), in order, in
    one statement and one commit (storage/batched.py). A function's statement answers
    one row: the deliveries come as three arrays, aggregated in one scan, so their
    orders agree (null arrays: no delivery)."""
    account, event, delivered, unseen_filters = _steps()
    id_type, status_type = _deliveries.c.id.type, _deliveries.c.status.type
    main = select(*_found(account, event, unseen_filters), func.array_agg(delivered.c.id).label("ids"),
                  func.array_agg(delivered.c.status).label("statuses"),
                  func.array_agg(delivered.c.parked).label("parked")).select_from(delivered)
    return BatchedStatement("emits", Body(main=main, returns=[
        ("account_found", Integer()), ("event_stored", Integer()), ("filters", JSONB()),
        ("ids", ARRAY(id_type)),
        ("statuses", ARRAY(status_type)), ("parked", ARRAY(Boolean()))]))


_EMIT = _statement()
_EMIT_MANY = _batched()


def store_in_one_statement(connection: Connection, *, event_id: str, account_id: str,
                           event_type: str, pausable: bool, version: str,
                           idempotency_key: str | None, body: bytes,
                           created_at: dt.datetime, trace_context: str | None = None,
                           considered: str = "{}", accepted: str = "[]") -> Stored:
    """Run the statement on ``connection`` (autocommit: it commits as it returns).
    ``trace_context``: the traceparent stored with each delivery (tracing.py), or None;
    ``considered`` and ``accepted``: JSON texts, as the module's docstring says."""
    rows = execute_together(connection, [(_EMIT, dict(
        event_id=event_id, account_id=account_id, event_type=event_type, pausable=pausable,
        version=version, idempotency_key=idempotency_key, body=body, created_at=created_at,
        trace_context=trace_context, considered=considered, accepted=accepted))])
    account_found, event_stored, filters = rows[0][0], rows[0][1], rows[0][2]
    return Stored(bool(account_found), bool(event_stored),
                  [(d_id, status, parked) for _, _, _, d_id, status, parked in rows
                   if d_id is not None], filters)


def store_many_in_one_statement(connection: Connection, items: list[dict]) -> list[Stored]:
    """Store each event of ``items`` (each ``store_in_one_statement``'s keyword arguments)
    as that would, in order, each seeing what the ones before it stored (a repeated
    idempotency key within the batch is a duplicate, as alone), in one statement: on an
    autocommit connection one transaction, committed (durably) as it returns."""
    rows = _EMIT_MANY.run(connection, items)
    return [Stored(bool(found), bool(stored),
                   list(zip(ids, statuses, parked)) if ids is not None else [], filters)
            for found, stored, filters, ids, statuses, parked in rows]
