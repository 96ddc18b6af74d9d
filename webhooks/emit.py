"""emit_event(): validate, persist the event and its deliveries, publish after commit.

One transaction stores the event and one delivery per matching
subscription; the deliver messages are handed to the process's publisher
(webhooks/broker/outbox.py) only after that transaction commits (a worker must never look
for a row it cannot see yet), and emit_event returns once the broker took
them. If publishing fails, the deliveries are parked and the sweep sends them.
A subscription with a ``filter`` (events/filters.py) gets a delivery only for an
event its filter accepts, decided here before any row is written (``_accepting``,
and on PostgreSQL's one statement ``_filter_values``).
On PostgreSQL, calls of one process's threads that come together (no session,
no ordering key) share that transaction: group commit (``_emits``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import itertools
import json
import logging
import threading
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from webhooks.broker import outbox
from webhooks.broker.outbox import publish_after_commit
from webhooks.config import Settings, get_settings, tracing
from webhooks.errors import InvalidEvent, NotFound
from webhooks.events.filters import Filter, parse_stored
from webhooks.events.inputs import envelope_bytes, validate_input, validate_ordering_key
from webhooks.events.samples import sample_data
from webhooks.lifecycle import group_commit, ordering, transitions
from webhooks.lifecycle.dispatch import Dispatch
from webhooks.lifecycle.emit_statement import store_in_one_statement, store_many_in_one_statement
from webhooks.states import DeliveryStatus, held_by_pause, held_while, waiting
from webhooks.storage import clock
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_autocommit_engine, get_engine, get_sessionmaker
from webhooks.storage.migrate import schema_errors
from webhooks.storage.models import Account, Delivery, Event, Subscription, new_id

__all__ = ["emit_event", "emit_events", "send_test", "EmittedEvent", "store_checked"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmittedEvent:
    """The stored event: ``id`` (UUID string), and the deliveries it fanned out to."""

    id: str
    type: str
    created_at: dt.datetime
    delivery_ids: tuple[str, ...]
    duplicate: bool = False


accounts_table = Account.__table__
events_table = Event.__table__
deliveries_table = Delivery.__table__
subscriptions_table = Subscription.__table__

# Prebuilt once: building statements per call cost more than running them.
# Whether deliveries already wait for a free slot of the subscription (states.waiting).
_HAS_WAITING = (
    select(1)
    .select_from(deliveries_table)
    .where(deliveries_table.c.subscription_id == subscriptions_table.c.id,
           waiting(deliveries_table))
    .exists()
)
_TARGETS = (
    select(
        accounts_table.c.id,
        subscriptions_table.c.id,
        subscriptions_table.c.status,
        subscriptions_table.c.event_types,
        _HAS_WAITING,
        subscriptions_table.c.filter,
    )
    .select_from(
        accounts_table.outerjoin(
            subscriptions_table,
            (subscriptions_table.c.account_id == accounts_table.c.id)
            & subscriptions_table.c.deleted_at.is_(None),
        )
    )
    .where(accounts_table.c.id == bindparam("account_id"),
           accounts_table.c.deleted_at.is_(None))  # a deleted account takes no event
)
_INSERT_EVENT = insert(events_table)
_INSERT_DELIVERIES = transitions.insert_deliveries



def _insert_event(connection: Connection, values: dict) -> bool:
    """Insert the event; False if the account already has an event with this idempotency key."""
    if values["idempotency_key"] is None:
        connection.execute(_INSERT_EVENT, values)
        return True
    statement = backend_of(connection).insert_event_once()
    return connection.execute(statement, values).first() is not None


def _event_values(account_id, event_type, body, event_id, created_at, idempotency_key,
                  settings) -> dict:
    return dict(id=event_id, account_id=account_id, type=event_type, version=settings.version,
                idempotency_key=idempotency_key, body=body, created_at=created_at)


def _sent_now(status: str, parked: bool) -> bool:
    """Whether a new delivery gets its message now: pending and not parked (a held one
    waits for resume, a queued one for a free slot)."""
    return status == DeliveryStatus.PENDING.value and not parked


def _existing(connection: Connection, account_id: str, key: str) -> EmittedEvent:
    """The account's event with this idempotency key, as a duplicate (nothing to publish)."""
    emitted, _ = _stored_event(connection, (events_table.c.account_id == account_id)
                               & (events_table.c.idempotency_key == key))
    return dataclasses.replace(emitted, duplicate=True)


def _stored_event(connection: Connection, which) -> tuple[EmittedEvent | None, list[Dispatch]]:
    """The stored event ``which`` selects, and a Dispatch for each of its deliveries still
    waiting for their first message (pending, attempt count 0, not parked)."""
    event = connection.execute(
        select(events_table.c.id, events_table.c.type, events_table.c.created_at).where(which)
    ).first()
    if event is None:
        return None, []
    rows = connection.execute(
        select(deliveries_table.c.id, deliveries_table.c.status, deliveries_table.c.attempt_count,
               deliveries_table.c.parked)
        .where(deliveries_table.c.event_id == event.id)
    ).all()
    first_message = [Dispatch(row.id, 0) for row in rows
                     if row.attempt_count == 0 and _sent_now(row.status, row.parked)]
    return EmittedEvent(event.id, event.type, event.created_at,
                        tuple(row.id for row in rows)), first_message


class Target(NamedTuple):
    """A subscription an event of its type may go to: its id, status, whether deliveries
    already wait for a free slot of it, and its filter (None: it takes every event)."""

    subscription_id: str
    status: str
    has_waiting: bool
    filter: Filter | None = None


def _targets(connection: Connection, account_id: str, event_type: str) -> list[Target]:
    """The account's live subscriptions that want this type, each with its filter.

    One query answers both "does the account exist" and "who subscribed".
    """
    rows = connection.execute(_TARGETS, {"account_id": account_id}).all()
    if not rows:
        raise NotFound(f"account {account_id} does not exist")
    return [
        Target(sub_id, status, bool(waiting), None if chosen is None else parse_stored(chosen))
        for _, sub_id, status, types, waiting, chosen in rows
        if sub_id is not None and (types is None or event_type in types)
    ]


def _accepting(targets: list[Target], body: bytes) -> list[Target]:
    """The targets whose filter accepts the event whose envelope is ``body`` (its JSON,
    read only when some target has a filter: what the receiver would get)."""
    if all(target.filter is None for target in targets):
        return targets
    envelope = json.loads(body)
    return [target for target in targets
            if target.filter is None or target.filter.accepts(envelope)]


def _store(
    connection: Connection,
    account_id: str,
    event_type: str,
    body: bytes,
    event_id: str,
    created_at: dt.datetime,
    idempotency_key: str | None,
    targets: list[Target],
    settings: Settings,
    ordering_key: str | None = None,
    rows_to_insert: list | None = None,
    inserted: bool | None = None,
    trace_context: str | None = None,
) -> tuple[EmittedEvent, list[Dispatch]]:
    """Store the event, then its deliveries (or, given ``rows_to_insert``, add their rows
    to it for the caller to insert with others in one statement: emit_events; given
    ``inserted``, the caller inserted the event already, and says if it was new).
    ``trace_context``: the traceparent of the event's emit span, stored with each delivery
    (None: tracing is off)."""
    if inserted is None:
        inserted = _insert_event(connection, _event_values(
            account_id, event_type, body, event_id, created_at, idempotency_key, settings))
    if not inserted:
        return _existing(connection, account_id, idempotency_key), []
    targets = _accepting(targets, body)  # a refused event costs that subscription no row
    # The event's place among the account's events with its key (ordering.py): taken
    # after the event is known to be new, and locked until this transaction ends. An
    # event that no subscription takes has nothing to order: it takes no number, and
    # leaves no key row that retention (which finds keys through deliveries) would keep.
    key_sequence = (None if ordering_key is None or not targets
                    else ordering.next_sequence(connection, account_id, ordering_key))
    rows = []
    for subscription_id, status, has_waiting, _ in targets:
        held = held_while(status, event_type)
        # Deliveries already wait for a free slot of this subscription (its
        # endpoint is slow or hanging, claim.py): this one queues behind
        # them without a broker message, instead of being turned away by a claim.
        queued = has_waiting and not held and held_by_pause(event_type)
        rows.append(dict(
            id=new_id(), account_id=account_id, event_id=event_id,
            subscription_id=subscription_id, event_type=event_type,
            status=DeliveryStatus.PAUSED.value if held else DeliveryStatus.PENDING.value,
            attempt_count=0, next_attempt_at=None if queued else created_at, parked=queued,
            claimed_at=None, replay_of=None, created_at=created_at, updated_at=created_at,
            ordering_key=ordering_key, key_sequence=key_sequence, trace_context=trace_context,
        ))
    if rows_to_insert is not None:
        rows_to_insert.extend(rows)
    elif rows:
        connection.execute(_INSERT_DELIVERIES, rows)
    dispatches = [
        Dispatch(row["id"], 0) for row in rows
        if _sent_now(row["status"], row["parked"])
    ]
    emitted = EmittedEvent(event_id, event_type, created_at, tuple(row["id"] for row in rows))
    return emitted, dispatches


@dataclass(frozen=True)
class _Checked:
    """One event, checked and serialised, not stored yet."""

    event_type: str
    idempotency_key: str | None
    ordering_key: str | None
    event_id: str
    created_at: dt.datetime
    body: bytes
    trace_context: str | None = None  # its emit span's traceparent (tracing.py), if tracing


def _checked(account_id, event_type, data, idempotency_key, ordering_key, settings) -> _Checked:
    """Check every input (InvalidEvent naming the field) and build the envelope's bytes."""
    data = validate_input(account_id, event_type, data, idempotency_key)
    validate_ordering_key(ordering_key)
    event_id, created_at = new_id(), clock.now()
    body = envelope_bytes(event_id, event_type, data, created_at, settings)
    return _Checked(event_type, idempotency_key, ordering_key, event_id, created_at, body)


def _store_checked(connection, account_id, checked: _Checked, targets, settings,
                   rows_to_insert=None, inserted=None):
    return _store(connection, account_id, checked.event_type, checked.body, checked.event_id,
                  checked.created_at, checked.idempotency_key, targets, settings,
                  checked.ordering_key, rows_to_insert, inserted, checked.trace_context)


def _emit(session, account_id, event_type, data, idempotency_key, settings, only_subscription=None,
          ordering_key=None):
    """Validate and store in ``session``'s transaction; returns the event and what to publish."""
    checked = _checked(account_id, event_type, data, idempotency_key, ordering_key, settings)
    trace_context = tracing.current_trace_context()  # the emit span's (None: tracing off)
    if trace_context is not None:
        checked = dataclasses.replace(checked, trace_context=trace_context)
    connection = session.connection()
    if only_subscription is None:
        targets = _targets(connection, account_id, event_type)
    else:
        targets = [only_subscription]
    return _store_checked(connection, account_id, checked, targets, settings)


# --- operational notices (issue 25, webhooks/operational/notices.py) ---------------
def store_checked(connection: Connection, account_id: str, event_type: str, data: dict,
                  settings: Settings | None = None) -> tuple[EmittedEvent, list[Dispatch]]:
    """Store an event whose type and data the caller has checked itself, in the caller's
    transaction: the operational notices, whose types are outside the customer catalogue.
    Returns the event and what to publish once that transaction commits."""
    settings = settings or get_settings()
    event_id, created_at = new_id(), clock.now()
    body = envelope_bytes(event_id, event_type, data, created_at, settings)
    targets = _targets(connection, account_id, event_type)
    # Stored under the span current now (the attempt whose outcome the notice reports).
    return _store(connection, account_id, event_type, body, event_id, created_at, None,
                  targets, settings, trace_context=tracing.current_trace_context())
# --- end of operational notices ----------------------------------------------------


def _names_a_missing_schema(emit):
    """``emit`` (emit_event, emit_events), raising SchemaNotReady naming the database when
    it fails for want of a migrated schema, as the CLI does, instead of the raw SQL error
    (``no such table: accounts``). Nothing is checked before: the check runs only once a
    statement failed (webhooks/storage/migrate.py, ``schema_errors``)."""

    @functools.wraps(emit)
    def emit_on_a_migrated_database(*args, **kwargs):
        session = kwargs.get("session")
        with schema_errors(session.get_bind().engine if session is not None else None):
            return emit(*args, **kwargs)

    return emit_on_a_migrated_database


@_names_a_missing_schema
def emit_event(account_id, event_type, data, *, idempotency_key=None, session=None,
               ordering_key=None) -> EmittedEvent:
    """Emit one event to every subscription of the account that wants its type.

    Raises InvalidEvent (a ValueError) for an unknown type or bad data, and
    NotFound for an unknown account; nothing is stored then. On a database
    that ``webhooks db upgrade`` has not migrated to this version, it raises
    SchemaNotReady naming the database. The same
    ``idempotency_key`` returns the first event again (``duplicate=True``) and
    creates no deliveries.

    Without ``session`` the event and its deliveries are committed in a
    transaction of their own before this returns. ``session`` is a SQLAlchemy
    ``Session`` (or a ``scoped_session``, such as Flask-SQLAlchemy's
    ``db.session``) connected to the service's database
    (WEBHOOKS_DATABASE_URL): the rows join its transaction, nothing is
    committed here, and the messages are published once the caller commits
    (never if it rolls back). docs/integrate.md shows both, from Flask,
    Django, a script and a cron job.

    ``ordering_key`` (1 to 200 printable ASCII characters, else InvalidEvent):
    each subscription receives the account's events with this key one at a
    time, in the order they were emitted (lifecycle/ordering.py).

    With tracing on (README, "Tracing"), a ``webhooks.emit`` span, a child of the
    caller's current span, covers the call.
    """
    if not tracing.on():
        return _emit_event(account_id, event_type, data, idempotency_key, session, ordering_key)
    with tracing.emit_span(account_id, event_type) as span:
        emitted = _emit_event(account_id, event_type, data, idempotency_key, session,
                              ordering_key)
        tracing.emitted(span, emitted.id, len(emitted.delivery_ids))
        return emitted


def _emit_event(account_id, event_type, data, idempotency_key, session, ordering_key):
    settings = get_settings()
    if session is not None:
        emitted, dispatches = _emit(session, account_id, event_type, data, idempotency_key, settings,
                                    ordering_key=ordering_key)
        session.flush()
        publish_after_commit(session, dispatches)
        return emitted
    emitted, dispatches, submitted = _emit_in_own_transaction(
        account_id, event_type, data, idempotency_key, settings, ordering_key)
    if submitted is None:
        outbox.publish(dispatches)
    else:  # submitted with the rest of its batch (_emit_batch)
        outbox.wait_published(submitted, dispatches)
    return emitted


@_names_a_missing_schema
def emit_events(account_id, events, *, session=None) -> list[str]:
    """Emit many events together (CONTRACT 9.5); their ids, in the order given.

    Each of ``events`` is a mapping with ``type`` and ``data``, and optionally
    ``idempotency_key`` and ``ordering_key``, as emit_event's arguments. All
    are checked before anything is stored: a bad one raises InvalidEvent (a
    ValueError) whose message begins with its index (``events[3]: ...``), and
    nothing is stored. They are stored in one transaction (the caller's, with
    ``session``, published once it commits), their deliveries inserted in one
    statement. A repeated idempotency key gives the first event's id.

    No events: ``[]``, and nothing is done (a ``session`` is not touched). More than
    WEBHOOKS_EMIT_BATCH_MAX events (10,000 by default) raise InvalidEvent (a
    ValueError) and store nothing: one transaction of 100,000 took minutes and
    hundreds of MB (issue 36), so a larger load is split into several calls.
    """
    settings = get_settings()
    given = _at_most(events, settings.emit_batch_max)
    if not given:
        return []
    checked = [_checked_at(index, account_id, event, settings)
               for index, event in enumerate(given)]
    if not tracing.on():
        return _emit_checked(account_id, checked, session, settings)[0]
    spans = [tracing.start_emit_span(account_id, one.event_type) for one in checked]
    try:
        ids, counts = _emit_checked(
            account_id, [dataclasses.replace(one, trace_context=trace_context)
                         for one, (_, trace_context) in zip(checked, spans)], session, settings)
    except BaseException as exc:
        for span, _ in spans:
            tracing.end_failed(span, exc)
        raise
    for (span, _), event_id, count in zip(spans, ids, counts):
        tracing.emitted(span, event_id, count, end=True)
    return ids


def _emit_checked(account_id, checked: list[_Checked], session, settings):
    """emit_events' store and publish: the ids, and how many deliveries each event made."""
    if session is not None:
        ids, dispatches, counts = _store_all(session, account_id, checked, settings)
        session.flush()
        publish_after_commit(session, dispatches)
        return ids, counts
    own = get_sessionmaker(pre_ping=True)()
    try:
        ids, dispatches, counts = _store_all(own, account_id, checked, settings)
        own.commit()
    except BaseException:
        own.rollback()
        raise
    finally:
        own.close()
    outbox.publish(dispatches)
    return ids, counts


_EVENT_FIELDS = {"type", "data", "idempotency_key", "ordering_key"}


def _at_most(events, bound: int) -> list:
    """``events`` as a list, if there are at most ``bound`` of them (an iterator is read no
    further than one past the bound); else InvalidEvent saying the bound and its variable."""
    given = list(itertools.islice(events, bound + 1))
    if len(given) <= bound:
        return given
    count = len(events) if isinstance(events, Sized) else f"more than {bound}"
    raise InvalidEvent(
        f"emit_events takes at most {bound} events per call (WEBHOOKS_EMIT_BATCH_MAX), "
        f"got {count}: split them into several calls",
        {"events": [f"more than {bound} events"]},
    )


def _checked_at(index: int, account_id, event, settings) -> _Checked:
    """``event`` (the ``index``-th given to emit_events) checked; InvalidEvent naming the index."""
    if not isinstance(event, Mapping):
        raise InvalidEvent(f"events[{index}]: must be a mapping with type and data",
                           {f"events.{index}": ["invalid"]})
    unknown = sorted(set(event) - _EVENT_FIELDS, key=str)
    missing = sorted({"type", "data"} - set(event))
    if unknown or missing:
        problems = ([f"unknown field {name!r}" for name in unknown]
                    + [f"missing field {name!r}" for name in missing])
        raise InvalidEvent(f"events[{index}]: {', '.join(problems)}",
                           {f"events.{index}": problems})
    try:
        return _checked(account_id, event["type"], event["data"], event.get("idempotency_key"),
                        event.get("ordering_key"), settings)
    except InvalidEvent as exc:
        raise InvalidEvent(f"events[{index}]: {exc}",
                           {f"events.{index}.{field}": reasons
                            for field, reasons in exc.errors.items()}) from exc


def _store_all(session, account_id, checked: list[_Checked], settings):
    """Store checked events in ``session``'s transaction; (their ids, what to publish, how many
    deliveries each made)."""
    connection = session.connection()
    targets_of: dict[str, list] = {}
    for one in checked:  # first: an unknown account stores nothing (NotFound)
        if one.event_type not in targets_of:
            targets_of[one.event_type] = _targets(connection, account_id, one.event_type)
    new = _insert_events(connection, account_id, checked, settings)
    first_of = _first_events(connection, account_id,
                             {one.idempotency_key for one in checked if one.event_id not in new})
    ids, dispatches, rows, counts = [], [], [], []
    for one in checked:
        if one.event_id not in new:  # its idempotency key was used before: the first event's id
            ids.append(first_of[one.idempotency_key])
            counts.append(0)
            continue
        emitted, published = _store_checked(connection, account_id, one,
                                            targets_of[one.event_type], settings, rows,
                                            inserted=True)
        ids.append(emitted.id)
        counts.append(len(emitted.delivery_ids))
        dispatches += published
    if rows:  # every event's deliveries in one statement
        connection.execute(_INSERT_DELIVERIES, rows)
    return ids, dispatches, counts


def _insert_events(connection, account_id, checked: list[_Checked], settings) -> set[str]:
    """Insert every event in one statement (SQLAlchemy's insertmanyvalues); the ids of those
    that were new (an event whose idempotency key the account used before, or an
    earlier event of the same call used, is not inserted)."""
    values = [_event_values(account_id, one.event_type, one.body, one.event_id, one.created_at,
                            one.idempotency_key, settings) for one in checked]
    statement = backend_of(connection).insert_event_once()
    return {event_id for (event_id,) in connection.execute(statement, values)}


_KEYS_PER_QUERY = 1000  # idempotency keys looked up in one statement (SQLite binds 32,766 at most)


def _first_events(connection, account_id: str, keys: set[str]) -> dict[str, str]:
    """The ids of the account's events with these idempotency keys, by key: a batch sent
    again (a retry) looks its events up a thousand at a time, not one by one."""
    ordered, found = sorted(keys), {}
    for start in range(0, len(ordered), _KEYS_PER_QUERY):
        found.update(connection.execute(
            select(events_table.c.idempotency_key, events_table.c.id)
            .where(events_table.c.account_id == account_id,
                   events_table.c.idempotency_key.in_(ordered[start:start + _KEYS_PER_QUERY]))
        ).all())
    return found


def _emit_in_own_transaction(account_id, event_type, data, idempotency_key, settings,
                             ordering_key=None):
    """Store the event and its deliveries, committed; returns them, what to publish, and
    None, or, when the event was stored in a batch, the publisher's event that is set
    once the batch's messages were published (they were submitted together).
    A keyed event takes the session's path: its sequence number is one more statement."""
    if ordering_key is None and backend_of(get_engine(pre_ping=False)).emits_in_one_statement:
        values = _statement_values(account_id, event_type, data, idempotency_key, settings)
        answer = _emits()(values)
        if isinstance(answer, _FiltersUnseen):  # nothing stored: again, alone, with them
            values.update(_filter_values(account_id, event_type, values["body"]))
            return (*_store_in_one_statement(values), None)
        if isinstance(answer, Exception):  # this caller's own error, from its batch
            raise answer
        return answer
    return (*_emit_in_a_session(account_id, event_type, data, idempotency_key, settings,
                                ordering_key), None)


def _statement_values(account_id, event_type, data, idempotency_key, settings) -> dict:
    """The one statement's parameters (emit_statement.py), once every input was checked
    (InvalidEvent here, in the caller's thread, before the event joins a batch)."""
    data = validate_input(account_id, event_type, data, idempotency_key)
    event_id, created_at = new_id(), clock.now()
    body = envelope_bytes(event_id, event_type, data, created_at, settings)
    values = dict(event_id=event_id, account_id=account_id, event_type=event_type,
                  pausable=held_by_pause(event_type), version=settings.version,
                  idempotency_key=idempotency_key, body=body, created_at=created_at,
                  trace_context=tracing.current_trace_context())
    values.update(_filter_values(account_id, event_type, body))
    return values


# --- filters on the one statement (emit_statement.py) ----------------------------------
# The filters this process last saw of each (account, event type)'s subscriptions, as
# stored: {subscription id: filter}, and that as JSON text. The statement refuses to store
# an event while a filtered subscription's filter is not among those the caller evaluated,
# and answers it: so an account without filters costs nothing more, and one with filters
# costs a second statement only when they changed since this process last emitted.
_KNOWN_FILTERS: dict[tuple[str, str], tuple[dict, str, tuple]] = {}  # (+ (id, tree) pairs)
_KNOWN_MAX = 10_000  # (account, type) pairs remembered; past it the memory starts over
_NO_FILTERS = {"considered": "{}", "accepted": "[]"}


class _FiltersUnseen(Exception):
    """The statement stored nothing: these filters ({subscription id: filter}) were not
    among those evaluated. An Exception so that the batch publishes nothing for it."""

    def __init__(self, filters: dict):
        super().__init__("filters changed")
        self.filters = filters


def _filter_values(account_id: str, event_type: str, body: bytes) -> dict:
    """The statement's ``considered`` and ``accepted``: the known filters of the type's
    subscriptions, evaluated against the envelope ``body``."""
    known = _KNOWN_FILTERS.get((account_id, event_type))
    if known is None:
        return _NO_FILTERS
    _, text, trees = known
    envelope = json.loads(body)
    accepted = [subscription_id for subscription_id, tree in trees if tree.accepts(envelope)]
    return {"considered": text, "accepted": json.dumps(accepted)}


def _learn(account_id: str, event_type: str, filters: dict) -> None:
    """Remember the filters the statement answered ({subscription id: filter})."""
    if len(_KNOWN_FILTERS) >= _KNOWN_MAX:
        _KNOWN_FILTERS.clear()
    key = (account_id, event_type)
    known = dict(_KNOWN_FILTERS.get(key, ({}, "", ()))[0])
    known.update(filters)
    trees = tuple((subscription_id, parse_stored(chosen)) for subscription_id, chosen in known.items())
    _KNOWN_FILTERS[key] = (known, json.dumps(known), trees)
# --- end of filters on the one statement ------------------------------------------------


# --- group commit of emit_event's own transactions (group_commit.py) ------------------
def _emits() -> group_commit.Group:
    """This process's emit_event calls that store in one statement, grouped: a call that
    finds no batch running runs alone at once (as before: no wait at low load); the
    calls that come while one runs are stored together, in one statement and one
    commit, up to WEBHOOKS_BATCH_MAX (lingering up to WEBHOOKS_BATCH_WAIT_MS).
    Each item is _statement_values' dict; each answer (emitted, dispatches, submitted
    or None), or the NotFound its caller raises."""
    return group_commit.group("emits", lambda: group_commit.Group(
        "emits", _emit_batch, _emit_alone, lambda: get_settings().batch_max,
        lambda: get_settings().batch_wait))


def _emit_alone(values: dict):
    return (*_store_in_one_statement(values), None)


# What a batch's callers wait on when the broker was taken for down and the batch's
# messages were parked at once (outbox.submit_unless_down): nothing.
_PARKED_ALREADY = threading.Event()
_PARKED_ALREADY.set()


def _emit_batch(items: list[dict]) -> list:
    """Store the events of a batch in one statement, each as it would be alone; then
    submit every message of the batch to the publisher at once (one pipelined round
    trip to the broker), after the commit. Each caller waits for them itself.

    The events with an idempotency key go first, by account and key (arrival order
    among equal keys: the first is stored, the next is its duplicate, as alone), so
    that two batches that share keys take their index entries in one order. A
    duplicate's first event is read after the commit, as alone. If the batch
    fails (its connection lost, say), nothing of it committed, or what did is found
    again by event id: the group runs each item alone, with its own retry."""
    order = sorted(range(len(items)), key=lambda i: (
        items[i]["idempotency_key"] is None, items[i]["account_id"],
        items[i]["idempotency_key"] or ""))
    answers: list = [None] * len(items)
    with get_autocommit_engine().connect() as connection:
        stored = store_many_in_one_statement(connection, [items[i] for i in order])
        for i, one in zip(order, stored):
            answers[i] = _answer(connection, items[i], one)
    submitted = outbox.submit_unless_down(
        [dispatch for answer in answers if not isinstance(answer, Exception)
         for dispatch in answer[1]]) or _PARKED_ALREADY
    return [answer if isinstance(answer, Exception) else (*answer, submitted)
            for answer in answers]
# --- end of group commit ---------------------------------------------------------------


def _store_in_one_statement(values: dict):
    """Store one event (``values``: _statement_values) in one statement, committed; once
    more if the connection was lost. Returns the event and what to publish.

    Unlike the session's path, the second try is safe even if the first one's
    commit was lost with the connection: it stores the same event id, finds it
    stored, and publishes the deliveries that first try stored.
    """
    event_id = values["event_id"]
    for try_number in (1, 2):
        try:
            with get_autocommit_engine().connect() as connection:
                return _stored_with_filters_seen(connection, values)
        except OperationalError as exc:
            if try_number == 2 or not exc.connection_invalidated:
                raise
            log.warning("database connection lost while emitting event %s; trying once more",
                        event_id)
    raise AssertionError("unreachable")


_FILTER_ROUNDS = 5  # statements at most while filters change under an emit (one, nearly always)


def _stored_with_filters_seen(connection, values: dict):
    """The statement, run again with the filters it answered until it stored the event
    (filters that keep changing under it: the last round's answer is an error)."""
    for _ in range(_FILTER_ROUNDS):
        stored = store_in_one_statement(connection, **values)
        answer = _answer(connection, values, stored)
        if not isinstance(answer, _FiltersUnseen):
            break
        values.update(_filter_values(values["account_id"], values["event_type"], values["body"]))
    if isinstance(answer, Exception):
        raise answer
    return answer


def _answer(connection, values: dict, stored):
    """The event and what to publish, from what the statement did (``stored``, for the
    event of ``values``); NotFound, returned, for an unknown account."""
    if not stored.account_found:
        return NotFound(f"account {values['account_id']} does not exist")
    if stored.filters is not None:  # nothing stored: the caller runs it again with them
        _learn(values["account_id"], values["event_type"], stored.filters)
        return _FiltersUnseen(stored.filters)
    if stored.event_stored:
        return _stored(values["event_id"], values["event_type"], values["created_at"], stored)
    return _stored_before(connection, values["event_id"], values["account_id"],
                          values["idempotency_key"])


def _stored(event_id, event_type, created_at, stored) -> tuple[EmittedEvent, list[Dispatch]]:
    emitted = EmittedEvent(event_id, event_type, created_at,
                           tuple(d_id for d_id, _, _ in stored.deliveries))
    first_messages = [Dispatch(d_id, 0) for d_id, status, parked in stored.deliveries
                      if _sent_now(status, parked)]
    return emitted, first_messages


def _stored_before(connection, event_id, account_id, idempotency_key):
    """The event was there already: stored by this call's first try (publish its
    deliveries), or an earlier event with the same idempotency key (a duplicate)."""
    emitted, first_messages = _stored_event(connection, events_table.c.id == event_id)
    if emitted is not None:
        return emitted, first_messages
    return _existing(connection, account_id, idempotency_key), []


def _emit_in_a_session(account_id, event_type, data, idempotency_key, settings,
                       ordering_key=None):
    """_emit in a transaction of its own, committed; once more if the connection was dead.

    The session comes from the engine without pre-ping (its round trip was a
    third of the cost of emitting to one subscription). A pooled connection
    that died meanwhile (a database restart) fails the first statement
    instead; nothing was written then, so the call runs again on a fresh
    connection. A failure in the commit itself is never retried: the event
    might be stored already.
    """
    args = (account_id, event_type, data, idempotency_key, settings, ordering_key)
    try:
        return _emit_and_commit(*args, retry_safe=True)
    except _DeadBeforeCommit:
        return _emit_and_commit(*args, retry_safe=False)


class _DeadBeforeCommit(Exception):
    """The connection was found dead before anything was committed."""


def _emit_and_commit(account_id, event_type, data, idempotency_key, settings, ordering_key,
                     *, retry_safe):
    own = get_sessionmaker(pre_ping=False)()
    try:
        try:
            result = _emit(own, account_id, event_type, data, idempotency_key, settings,
                           ordering_key=ordering_key)
        except OperationalError as exc:
            if retry_safe and exc.connection_invalidated:
                raise _DeadBeforeCommit() from exc
            raise
        own.commit()
        return result
    except BaseException:
        own.rollback()
        raise
    finally:
        own.close()


def send_test(session: Session, subscription: Subscription) -> EmittedEvent:
    """A ``test.ping`` event to this one subscription, sent even while it is paused.

    Runs in the caller's transaction; the message is published after it commits.
    """
    data = sample_data("test.ping")
    if "subscription_id" in data:
        data["subscription_id"] = subscription.id
    emitted, dispatches = _emit(
        session, subscription.account_id, "test.ping", data, None, get_settings(),
        # test.ping ignores the subscription's filter (CONTRACT 10.4): none is passed
        only_subscription=Target(subscription.id, subscription.status, False),
    )
    session.flush()
    publish_after_commit(session, dispatches)
    return emitted
