"""The storage boundary: one interface, a PostgreSQL and a SQLite backend behind it.

Everything the service does differently on the two engines is a method of
:class:`Backend`; :func:`backend_of` picks the engine's backend (once per
dialect, then a dictionary look-up), so no module outside this package
branches on the dialect. The statements both engines share (the transitions,
the claim's and the record's conditions) stay where they are written once;
a backend only says how its engine runs them: in one prepared round trip on
PostgreSQL, step by step on SQLite.

tests/test_backend_contract.py runs every transition through both backends
(SQLite in the fast tier, PostgreSQL in the full suite).
"""

from __future__ import annotations

import abc
import contextlib
from typing import Iterator

from sqlalchemy import case

__all__ = ["Backend", "backend_of"]


class Backend(abc.ABC):
    """What differs between the engines, named by what it does."""

    name: str
    #: emit_event stores the event and its deliveries in one statement (else in a session).
    emits_in_one_statement: bool

    # ---- the two hot transitions
    @abc.abstractmethod
    def claim(self, connection, params: dict):
        """Run the claim (lifecycle/claim.py) with ``params``; the claimed row (the taken
        columns, then the loaded ones) or None. Commits as it returns on an autocommit
        connection."""

    @abc.abstractmethod
    def record(self, connection, params: dict, is_failure: bool):
        """Run the record's steps (lifecycle/record.py), the release of a finished keyed
        delivery's successor among them (ordering.py); None if the claim was taken back,
        else (consecutive failures after a failure or None, [released Dispatch])."""

    # ---- the same, for a batch (lifecycle/group_commit.py)
    @abc.abstractmethod
    def claim_many(self, connection, items: list[dict]) -> list:
        """Run the claim for each item (``claim``'s params), in order, each seeing what the
        ones before it wrote, and turn away (claim.turn_away) each one it does not take;
        each item's claimed row, or None. On PostgreSQL one statement, committed as it
        returns on an autocommit connection."""

    @abc.abstractmethod
    def record_many(self, connection, items: list[dict]) -> list:
        """Run the record's steps for each item (``record``'s params) of a successful
        attempt, in order, each seeing what the ones before it wrote; for each, None if
        its claim was taken back, else its [released Dispatch]. On PostgreSQL one
        statement, committed as it returns on an autocommit connection."""

    # ---- emit
    @abc.abstractmethod
    def insert_event_once(self):
        """The INSERT of an event that does nothing (returns no row) on a repeated
        idempotency key."""

    # ---- counters
    @abc.abstractmethod
    def upsert_adding(self, table, values: dict, key: tuple[str, ...], increments: tuple[str, ...]):
        """INSERT ``values``, or add ``increments`` to the row with the same ``key``."""

    @abc.abstractmethod
    def claim_row(self, table, values: dict, key: tuple[str, ...], owner: str, refused: str):
        """INSERT ``values`` unless a row with the same ``key`` exists; then add one to that
        row's ``refused`` unless its ``owner`` column holds ours. Returns (RETURNING) the
        row's ``owner``: ours when the row is ours, now or from before."""

    @abc.abstractmethod
    def hour_of(self, column):
        """The SQL expression of ``column`` (a time) cut down to its hour, as stored."""

    @abc.abstractmethod
    def fold_waiting_counts(self, connection) -> int:
        """Fold the waiting counts of connections that have gone into row 0; how many rows."""

    # ---- locks and snapshots
    @abc.abstractmethod
    def lock_replays_of(self, session, subscription_id: str, seed: int) -> None:
        """Serialise replays of one subscription until the transaction ends."""

    @abc.abstractmethod
    def skip_locked(self, statement):
        """``statement`` FOR UPDATE SKIP LOCKED where rows can be locked."""

    @abc.abstractmethod
    def alone(self, engine, key: int) -> contextlib.AbstractContextManager:
        """A context whose value says if this process alone holds the run lock ``key``."""

    @abc.abstractmethod
    def begin_snapshot(self, session) -> None:
        """From here on, ``session`` reads as of one moment (read-only requests)."""

    @abc.abstractmethod
    def limit_statement_time(self, connection, milliseconds: int) -> None:
        """Statements of this transaction end after ``milliseconds`` where the engine can."""

    @abc.abstractmethod
    def allow_audit_purge(self, connection) -> None:
        """Let this transaction delete audit entries (retention only): the append-only
        guard of migration 0025 refuses every other DELETE."""

    @abc.abstractmethod
    def in_autocommit(self, connection) -> bool:
        """True for a connection of the attempt or the autocommit engine on which whoever runs
        a transaction sends BEGIN and COMMIT themselves."""


_BACKENDS: dict[str, Backend] = {}


def backend_of(bind) -> Backend:
    """The backend of an engine, connection or session (the engine's dialect picks it)."""
    dialect = bind.get_bind().dialect if hasattr(bind, "get_bind") else bind.dialect
    backend = _BACKENDS.get(dialect.name)
    if backend is None:
        backend = _BACKENDS[dialect.name] = _make(dialect.name)
    return backend


def _make(name: str) -> Backend:
    if name == "postgresql":
        from webhooks.storage.backends.postgresql import PostgreSQLBackend

        return PostgreSQLBackend()
    if name == "sqlite":
        from webhooks.storage.backends.sqlite import SQLiteBackend

        return SQLiteBackend()
    raise NotImplementedError(f"no storage backend for {name!r}: PostgreSQL and SQLite only")


def claim_row_with(insert, table, values: dict, key: tuple[str, ...], owner: str, refused: str):
    """:meth:`Backend.claim_row` with the engine's ``insert`` (each dialect has its own
    ON CONFLICT; both read the statement the same way)."""
    statement = insert(table).values(**values)
    theirs = case((table.c[owner] == statement.excluded[owner], 0), else_=1)
    return (statement
            .on_conflict_do_update(index_elements=list(key),
                                   set_={refused: table.c[refused] + theirs})
            .returning(table.c[owner]))


@contextlib.contextmanager
def always_alone() -> Iterator[bool]:
    """The run lock of an engine with one writer at a time: always held."""
    yield True
