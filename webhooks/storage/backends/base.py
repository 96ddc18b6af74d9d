"""The storage interface (:class:`Backend`) and the statements its callers hand it.

A backend knows tables, not rules. The claim's and the record's statements
are written once, in the lifecycle above (lifecycle/claim.py,
lifecycle/record.py, lifecycle/ordering.py), which hands them to each call as
a :class:`ClaimStatements` or :class:`RecordStatements`; a backend only says
how its engine runs them (one prepared round trip on PostgreSQL, step by step
on SQLite), built once per set of statements and kept.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from sqlalchemy import Table, case
from sqlalchemy.sql import ClauseElement, ColumnElement

__all__ = ["Backend", "ClaimStatements", "RecordStatements", "claim_row_with", "always_alone"]


@dataclass(frozen=True, eq=False)
class ClaimStatements:
    """The claim's statements, written by lifecycle/claim.py (compared by identity: a
    backend builds its engine's form of one set once and keeps it)."""

    #: UPDATE of the claimed delivery, every condition of the claim in it (no FROM, no RETURNING)
    take: ClauseElement
    #: the delivery's columns the claim returns, then the event's and subscription's it loads
    taken: tuple[ColumnElement, ...]
    loaded: tuple[ColumnElement, ...]
    #: what a delivery not taken goes through (claim.turn_away), with the claim's parameters
    turn_away: ClauseElement
    deliveries: Table
    events: Table
    subscriptions: Table


@dataclass(frozen=True, eq=False)
class RecordStatements:
    """The record's statements, written by lifecycle/record.py and lifecycle/ordering.py
    (compared by identity, as :class:`ClaimStatements`)."""

    #: UPDATE of the delivery to its next status, only if the claim is still ours
    move: ClauseElement
    attempts: Table
    #: the attempt's columns and the parameters that fill them
    attempt_values: Mapping[str, Any]
    deliveries: Table
    subscriptions: Table
    #: the parameter of the subscription's id
    subscription_id: ColumnElement
    #: the subscription's failure counter after a failure, after a success
    count_failure: ClauseElement
    count_success: ClauseElement
    #: the oldest delivery waiting for the freed slot made due (``locking``: skip locked rows)
    release: Callable[[bool], ClauseElement]
    #: the next delivery of a finished one's ordering key released behind it (returns id,
    #: attempt_count, parked), and the parameter of that key; and the same run on its own
    #: (connection, subscription id, key, key sequence, now) -> [(id, attempt_count)] due now
    successor: ClauseElement
    successor_key: ColumnElement
    release_successor: Callable[..., list]
    #: the attempt counted in the rollups (storage/rollup.py): as CTEs of the record's one
    #: statement (PostgreSQL: count_in_statement), or by statements of their own
    #: (count_attempt)
    count_in_statement: Callable[..., tuple]
    count_attempt: Callable[..., None]


class Built:
    """What a backend builds from one set of statements (its engine's form of them), built
    the first time that set comes and kept. Two threads that come first together both
    build it, harmlessly: prepared statements are named by their text."""

    def __init__(self, build: Callable[[Any], Any]):
        self._build = build
        self._kept: dict[object, Any] = {}  # by the statements' identity (eq=False)

    def of(self, statements) -> Any:
        built = self._kept.get(statements)
        if built is None:
            built = self._kept[statements] = self._build(statements)
        return built


class Backend(abc.ABC):
    """What differs between the engines, named by what it does."""

    name: str
    #: emit_event stores the event and its deliveries in one statement (else in a session).
    emits_in_one_statement: bool

    # ---- the two hot transitions, their statements handed down by the lifecycle
    @abc.abstractmethod
    def claim(self, connection, params: dict, statements: ClaimStatements):
        """Run the claim's ``statements`` with ``params``; the claimed row (the taken
        columns, then the loaded ones) or None. Commits as it returns on an autocommit
        connection."""

    @abc.abstractmethod
    def record(self, connection, params: dict, is_failure: bool,
               statements: RecordStatements):
        """Run the record's steps (``statements``), the release of a finished keyed
        delivery's successor among them; None if the claim was taken back, else
        (consecutive failures after a failure or None, [(released delivery id, its
        attempt_count)])."""

    # ---- the same, for a batch (lifecycle/group_commit.py)
    @abc.abstractmethod
    def claim_many(self, connection, items: list[dict], statements: ClaimStatements) -> list:
        """Run the claim for each item (``claim``'s params), in order, each seeing what the
        ones before it wrote, and turn away each one it does not take; each item's claimed
        row, or None. On PostgreSQL one statement, committed as it returns on an
        autocommit connection."""

    @abc.abstractmethod
    def record_many(self, connection, items: list[dict], statements: RecordStatements) -> list:
        """Run the record's steps for each item (``record``'s params) of a successful
        attempt, in order, each seeing what the ones before it wrote; for each, None if
        its claim was taken back, else its [(released delivery id, attempt_count)]. On
        PostgreSQL one statement, committed as it returns on an autocommit connection."""

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
    def in_values(self, column, ids):
        """``column IN (ids)`` (``ids`` a one-column SELECT of strings), planned as an index
        probe of ``column`` per value whatever the estimate of ``ids``' rows."""

    @abc.abstractmethod
    def hour_of(self, column):
        """The SQL expression of ``column`` (a time) cut down to its hour, as stored."""

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

    # ---- the attempts table's day partitions (storage/partitions.py; none on SQLite)
    @abc.abstractmethod
    def create_partitions(self, connection, wanted: list) -> list[str]:
        """Create those of ``wanted`` (partitions.Partition) not there yet, in the caller's
        transaction, once however many callers run at once; the names created."""

    @abc.abstractmethod
    def day_partitions(self, connection) -> list:
        """The day partitions of ``attempts`` (partitions.Partition), oldest first; none
        where the table is a plain one."""

    @abc.abstractmethod
    def drop_partition(self, connection, partition, keep) -> tuple[int, int]:
        """Drop ``partition`` whole, keeping the rows of the deliveries ``keep`` selects
        (in a partition of kept rows of the same day); (rows dropped, rows kept)."""

    @abc.abstractmethod
    def drop_emptied_partitions(self, connection) -> list[str]:
        """Drop the partitions of kept rows that nothing is left in; their names."""

    @abc.abstractmethod
    def audit_purge(self, connection) -> contextlib.AbstractContextManager[None]:
        """Within the ``with`` block, let this transaction delete audit entries (retention,
        and the tests' and benchmarks' resets only): the append-only guards of migrations
        0024 and 0030 refuse every other DELETE, and TRUNCATE on PostgreSQL."""


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
