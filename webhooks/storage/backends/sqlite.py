"""The SQLite backend (the embedded default): the same statements, step by step.

SQLite cannot return columns of joined tables nor chain data-modifying CTEs,
so the claim loads what it needs with a second statement and the record runs
its steps one by one. It has one writer at a time (transactions begin
IMMEDIATE, storage/db.py), which stands in for row and advisory locks, and
its transactions already read one moment.
"""

from __future__ import annotations

import contextlib

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from webhooks.states import FINISHED
from webhooks.storage.backends.base import (Backend, Built, ClaimStatements, RecordStatements,
                                            always_alone, claim_row_with)
from webhooks.storage.models import AuditPurge, Event

__all__ = ["SQLiteBackend"]


class _Claims:
    """The claim's statements as SQLite runs them: the take, then the loads."""

    def __init__(self, statements: ClaimStatements):
        self.take = statements.take.returning(*statements.taken)
        self.load = (select(*statements.loaded)
                     .select_from(statements.events.join(
                         statements.subscriptions,
                         statements.subscriptions.c.id == bindparam("sub")))
                     .where(statements.events.c.id == bindparam("event")))
        self.turn_away = statements.turn_away


class _Records:
    """The record's statements as SQLite runs them, one by one."""

    def __init__(self, statements: RecordStatements):
        self.move = statements.move
        self.insert_attempt = insert(statements.attempts).values(
            delivery_id=bindparam("d_id"), **statements.attempt_values)
        self.count_failure = statements.count_failure.returning(
            statements.subscriptions.c.consecutive_failures)
        self.count_success = statements.count_success
        self.release = statements.release(False)  # BEGIN IMMEDIATE serialises
        self.release_successor = statements.release_successor
        self.count_attempt = statements.count_attempt


def _successor(connection, records: _Records, params: dict) -> list[tuple[str, int]]:
    """The next delivery of a keyed one that finished, released behind it (ordering.py),
    if it is due now (it needs a message)."""
    if params["okey"] is None or params["new_status"] not in FINISHED:
        return []
    return records.release_successor(connection, params["sub_id"], params["okey"],
                                     params["kseq"], params["now"])


class SQLiteBackend(Backend):
    name = "sqlite"
    emits_in_one_statement = False

    def __init__(self):
        self._claims, self._records = Built(_Claims), Built(_Records)
        events = Event.__table__
        self._insert_event_once = (
            sqlite_insert(events)
            .on_conflict_do_nothing(index_elements=["account_id", "idempotency_key"])
            .returning(events.c.id))

    def claim(self, connection, params: dict, statements: ClaimStatements):
        claims = self._claims.of(statements)
        taken = connection.execute(claims.take, params).first()
        if taken is None:
            return None
        loaded = connection.execute(
            claims.load,
            {"sub": taken.subscription_id, "event": taken.event_id, "now": params["now"]}).one()
        return (*taken, *loaded)

    def record(self, connection, params: dict, is_failure: bool,
               statements: RecordStatements):
        records = self._records.of(statements)
        if connection.execute(records.move, params).rowcount != 1:
            return None
        connection.execute(records.insert_attempt, params)
        records.count_attempt(connection, delivery_id=params["d_id"],
                             subscription_id=params["sub_id"], started_at=params["t_started"],
                             outcome=params["result"], duration_ms=params["t_duration"])
        if is_failure:
            failures = connection.execute(records.count_failure, params).scalar_one()
        else:
            connection.execute(records.count_success, params)
            failures = None
        released = connection.execute(records.release, params).all()
        return failures, [(delivery_id, count) for delivery_id, count in
                          [*released, *_successor(connection, records, params)]]

    def claim_many(self, connection, items: list[dict], statements: ClaimStatements) -> list:
        # One by one, in the caller's transaction (BEGIN IMMEDIATE: one writer at a time).
        turn_away = self._claims.of(statements).turn_away
        rows = []
        for params in items:
            row = self.claim(connection, params, statements)
            if row is None:
                connection.execute(turn_away, params)
            rows.append(row)
        return rows

    def record_many(self, connection, items: list[dict], statements: RecordStatements) -> list:
        moved = [self.record(connection, params, False, statements) for params in items]
        return [None if one is None else one[1] for one in moved]

    def insert_event_once(self):
        return self._insert_event_once

    def upsert_adding(self, table, values, key, increments):
        statement = sqlite_insert(table).values(**values)
        return statement.on_conflict_do_update(
            index_elements=list(key),
            set_={name: table.c[name] + statement.excluded[name] for name in increments})

    def claim_row(self, table, values, key, owner, refused):
        return claim_row_with(sqlite_insert, table, values, key, owner, refused)

    def hour_of(self, column):
        # SQLite stores DateTime as 'YYYY-MM-DD HH:MM:SS.ffffff' text; the bound hour matches it.
        return func.strftime("%Y-%m-%d %H:00:00.000000", column)

    def lock_replays_of(self, session, subscription_id: str, seed: int) -> None:
        return None  # one writer at a time

    # A plain attempts table: nothing to create, nothing to drop (retention deletes rows).
    def create_partitions(self, connection, wanted: list) -> list[str]:
        return []

    def day_partitions(self, connection) -> list:
        return []

    def drop_partition(self, connection, partition, keep) -> tuple[int, int]:
        raise NotImplementedError("SQLite's attempts table has no partitions")

    def drop_emptied_partitions(self, connection) -> list[str]:
        return []

    def in_values(self, column, ids):
        return column.in_(ids)  # no estimate to go wrong: SQLite probes the index per value

    @contextlib.contextmanager
    def audit_purge(self, connection):
        # The DELETE trigger of migration 0030 lets a delete through while audit_purges
        # holds a row. Writers take turns on SQLite, and the row goes before the
        # transaction ends, so no other transaction ever sees it.
        connection.execute(insert(AuditPurge).values(id=1))
        yield
        connection.execute(delete(AuditPurge))

    def skip_locked(self, statement):
        return statement  # one writer at a time

    def alone(self, engine, key: int):
        return always_alone()

    def begin_snapshot(self, session) -> None:
        return None  # its transactions (BEGIN IMMEDIATE) already read one moment

    def limit_statement_time(self, connection, milliseconds: int) -> None:
        return None  # no statement time-out on SQLite
