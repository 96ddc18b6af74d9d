"""The SQLite backend (the embedded default): the same statements, step by step.

SQLite cannot return columns of joined tables nor chain data-modifying CTEs,
so the claim loads what it needs with a second statement and the record runs
its steps one by one. It has one writer at a time (transactions begin
IMMEDIATE, storage/db.py), which stands in for row and advisory locks, and
its transactions already read one moment.
"""

from __future__ import annotations

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from webhooks.storage.backends import Backend, always_alone, claim_row_with

__all__ = ["SQLiteBackend"]


def _successor(connection, params: dict) -> list[tuple[str, int]]:
    """The next delivery of a keyed one that finished, released behind it (ordering.py)."""
    from webhooks.lifecycle import ordering
    from webhooks.lifecycle.states import FINISHED

    if params["okey"] is None or params["new_status"] not in FINISHED:
        return []
    return ordering.release_successor(connection, params["sub_id"], params["okey"],
                                      params["kseq"], params["now"])


class SQLiteBackend(Backend):
    name = "sqlite"
    emits_in_one_statement = False

    def __init__(self):
        from webhooks.lifecycle import claim, record
        from webhooks.storage.models import Event

        self._take = claim._TAKE.returning(*claim._TAKEN)
        self._load = (select(*claim._LOADED)
                      .select_from(claim.events.join(claim.subscriptions,
                                                     claim.subscriptions.c.id == bindparam("sub")))
                      .where(claim.events.c.id == bindparam("event")))
        self._insert_attempt = insert(record.attempts).values(
            delivery_id=bindparam("d_id"), **record._ATTEMPT)
        self._release = record._release(locking=False)  # BEGIN IMMEDIATE serialises
        events = Event.__table__
        self._insert_event_once = (
            sqlite_insert(events)
            .on_conflict_do_nothing(index_elements=["account_id", "idempotency_key"])
            .returning(events.c.id))

    def claim(self, connection, params: dict):
        taken = connection.execute(self._take, params).first()
        if taken is None:
            return None
        loaded = connection.execute(
            self._load,
            {"sub": taken.subscription_id, "event": taken.event_id, "now": params["now"]}).one()
        return (*taken, *loaded)

    def record(self, connection, params: dict, is_failure: bool):
        from webhooks.broker.outbox import Dispatch
        from webhooks.lifecycle import record
        from webhooks.storage import rollup

        if connection.execute(record._MOVE, params).rowcount != 1:
            return None
        connection.execute(self._insert_attempt, params)
        rollup.count_attempt(connection, delivery_id=params["d_id"],
                             subscription_id=params["sub_id"], started_at=params["t_started"],
                             outcome=params["result"], duration_ms=params["t_duration"])
        if is_failure:
            failures = connection.execute(
                record._COUNT_FAILURE.returning(record.subscriptions.c.consecutive_failures),
                params).scalar_one()
        else:
            connection.execute(record._COUNT_SUCCESS, params)
            failures = None
        released = connection.execute(self._release, params).all()
        return failures, [Dispatch(delivery_id, count)
                          for delivery_id, count in [*released, *_successor(connection, params)]]

    def claim_many(self, connection, items: list[dict]) -> list:
        # One by one, in the caller's transaction (BEGIN IMMEDIATE: one writer at a time).
        from webhooks.lifecycle import claim

        rows = []
        for params in items:
            row = self.claim(connection, params)
            if row is None:
                connection.execute(claim._TURN_AWAY, params)
            rows.append(row)
        return rows

    def record_many(self, connection, items: list[dict]) -> list:
        moved = [self.record(connection, params, False) for params in items]
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

    def fold_waiting_counts(self, connection) -> int:
        return 0  # the triggers add into row 0 directly: nothing to fold

    def lock_replays_of(self, session, subscription_id: str, seed: int) -> None:
        return None  # one writer at a time

    def allow_audit_purge(self, connection) -> None:
        return None  # its trigger refuses UPDATE only (migration 0025)

    def skip_locked(self, statement):
        return statement  # one writer at a time

    def alone(self, engine, key: int):
        return always_alone()

    def begin_snapshot(self, session) -> None:
        return None  # its transactions (BEGIN IMMEDIATE) already read one moment

    def limit_statement_time(self, connection, milliseconds: int) -> None:
        return None  # no statement time-out on SQLite

    def in_autocommit(self, connection) -> bool:
        return False
