"""Server-side prepared statements on PostgreSQL, for the statements run once per delivery.

PostgreSQL plans a statement each time it receives its text; for the claim
that planning costs far more than executing it (docs/performance.md has
the figures). psycopg2
has no prepared statements of its own, so a ``PreparedStatement`` sends
``PREPARE`` once per database connection (remembered in the pooled
connection's ``info``, which lives as long as that connection) and
``EXECUTE`` after that.

Statements are SQLAlchemy Core statements (:meth:`PreparedStatement.from_core`),
the same objects that run as they are on SQLite, so each transition is
written once. The PostgreSQL text, each parameter's SQL type (PostgreSQL
cannot infer the type of a parameter in a SELECT list) and the name, which
carries a hash of the text so that a changed statement is never confused
with an older one prepared on a pooled connection, all come from compiling
it. Timestamps go in and come out as aware UTC datetimes, as with
``models.UTCDateTime``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import re
from typing import Any, Mapping, Sequence

from sqlalchemy.dialects.postgresql import psycopg2
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

from webhooks.storage.db import in_autocommit, in_transaction_block

__all__ = ["PreparedStatement", "execute_together", "compile_core", "numbered", "parameter_names",
           "run_text", "bind_value", "aware"]

_PARAMETER = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_INFO_KEY = "webhooks_prepared"
_POSTGRESQL = psycopg2.dialect(paramstyle="named")


class PreparedStatement:
    """One statement, prepared on each PostgreSQL connection the first time it runs there."""

    def __init__(self, name: str, sql: str, parameters: Sequence[tuple[str, str]],
                 timestamp_columns: Sequence[str] = ()):
        """``parameters``: (name, SQL type) in any order; ``timestamp_columns``: result
        columns to return as aware UTC datetimes."""
        self.name = name
        self._types = dict(parameters)
        self._order = list(self._types)
        used = set(_PARAMETER.findall(sql))
        if used != set(self._order):
            raise ValueError(f"{name}: parameters {sorted(used ^ set(self._order))} "
                             "are declared but not used, or used but not declared")
        self._text = numbered(sql, self._order)
        self._timestamps = frozenset(timestamp_columns)
        self._execute = f"EXECUTE {name}({', '.join(['%s'] * len(self._order))})"

    @classmethod
    def from_core(cls, label: str, statement: ClauseElement,
                  timestamp_columns: Sequence[str] = ()) -> "PreparedStatement":
        """Prepare a Core statement as PostgreSQL compiles it.

        Values the statement holds itself (``status == 'pending'``) are written
        into the text as literals, as a hand-written statement would have them,
        so that the planner can match partial indexes; ``bindparam``s without a
        value are the parameters of each EXECUTE.
        """
        sql, types = compile_core(statement)
        digest = hashlib.sha1(sql.encode()).hexdigest()[:10]
        return cls(f"webhooks_{label}_{digest}", sql, list(types.items()), timestamp_columns)

    def execute(self, connection: Connection, values: Mapping[str, Any]) -> list[Sequence[Any]]:
        """Run the statement on ``connection`` (in its transaction) and return every row."""
        return execute_together(connection, [(self, values)])

    def _bound(self, values: Mapping[str, Any]) -> tuple:
        return tuple(bind_value(values[name]) for name in self._order)

    def _rows(self, names: Sequence[str], rows: list) -> list:
        """``rows`` (of result columns ``names``) with the timestamp columns made aware."""
        if not self._timestamps:
            return rows
        convert = [name in self._timestamps for name in names]
        return [tuple(aware(v) if c else v for v, c in zip(row, convert)) for row in rows]

    def _prepare_on(self, connection: Connection) -> None:
        prepared = connection.connection.info.setdefault(_INFO_KEY, set())
        if self.name in prepared:
            return
        types = ", ".join(self._types[name] for name in self._order)
        connection.exec_driver_sql(f"PREPARE {self.name}({types}) AS {self._text}")
        # PREPARE outlives the transaction it ran in (rolled back or not), so
        # remembering it now is right even if this transaction later fails.
        prepared.add(self.name)


def compile_core(statement: ClauseElement) -> tuple[str, dict[str, str]]:
    """``statement`` as PostgreSQL compiles it: its text, with ``:name`` for each parameter
    and the values the statement holds itself written in as literals, and each
    parameter's SQL type by name."""
    compiled = statement.compile(dialect=_POSTGRESQL)
    fixed = {k: v for k, v in compiled.params.items() if v is not None}
    sql = _PARAMETER.sub(
        lambda m: _literal(fixed[m.group(1)]) if m.group(1) in fixed else m.group(0),
        compiled.string)
    types = {name: bind.type.compile(dialect=_POSTGRESQL)
             for bind, name in compiled.bind_names.items() if name not in fixed}
    return sql, types


def parameter_names(sql: str) -> list[str]:
    """The ``:name`` parameters of a compiled text, each once, in order of appearance."""
    return list(dict.fromkeys(_PARAMETER.findall(sql)))


def numbered(sql: str, order: Sequence[str]) -> str:
    """``sql`` with each ``:name`` replaced by ``$k``, k its place (from 1) in ``order``."""
    return _PARAMETER.sub(lambda m: f"${list(order).index(m.group(1)) + 1}", sql)


def execute_together(connection: Connection,
                     steps: Sequence[tuple[PreparedStatement, Mapping[str, Any]]],
                     *, begin: bool = False) -> list[Sequence[Any]]:
    """Run prepared statements in one round trip, in order; the rows of the last.

    Each statement still takes its own snapshot (READ COMMITTED). With
    ``begin`` on an autocommit connection (db.get_attempt_engine) that is in
    no transaction, a BEGIN goes first in the same round trip: the statements,
    and whatever the caller runs after them, are one transaction that
    db.attempt_transaction commits. Without it there, the statements are one
    transaction of their own, committed when they return.
    """
    for statement, _ in steps:
        statement._prepare_on(connection)
    commands = ["BEGIN"] if begin and _idle_in_autocommit(connection) else []
    commands.extend(statement._execute for statement, _ in steps)
    parameters = tuple(value for statement, values in steps for value in statement._bound(values))
    names, rows = run_text(connection, "; ".join(commands), parameters)
    return steps[-1][0]._rows(names, rows)


def run_text(connection: Connection, sql: str, parameters: tuple) -> tuple[list[str], list]:
    """Run ``sql`` (``%s`` placeholders; several statements are one round trip, and one
    implicit transaction on an autocommit connection that is in none); the last
    statement's column names and rows."""
    if in_autocommit(connection):
        return _on_cursor(connection, sql, parameters)
    result = connection.exec_driver_sql(sql, parameters)
    return (list(result.keys()), result.fetchall()) if result.returns_rows else ([], [])


def _on_cursor(connection: Connection, sql: str, parameters: tuple) -> tuple[list[str], list]:
    """Run ``sql`` on the connection's psycopg2 cursor; the result's column names and rows.

    Only on an autocommit connection, where SQLAlchemy has no transaction to
    track: its execution path (events, result metadata) cost about as much
    Python as psycopg2's own execute (0.13 ms per attempt in the profile).
    Errors come out as SQLAlchemy's do, with a lost connection invalidated
    (``connection_invalidated``), which the callers' retries rely on; bound
    values never appear in them, as with ``hide_parameters``.
    """
    dbapi_connection = connection.connection.dbapi_connection
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql, parameters)
        if cursor.description is None:
            return [], []
        return [column.name for column in cursor.description], cursor.fetchall()
    except connection.dialect.loaded_dbapi.Error as exc:
        lost = connection.dialect.is_disconnect(exc, dbapi_connection, cursor)
        if lost:
            # As SQLAlchemy's own handler does (engine/base.py, _handle_dbapi_exception): every
            # pooled connection as old as this one is recycled at its next checkout too. A
            # restarted server killed them all; invalidating only this one handed the caller's
            # one retry the next dead connection of the pool. Private, so SQLAlchemy is pinned
            # below 2.2 and tests/test_prepared.py checks it.
            connection.engine.pool._invalidate(connection.connection, exc)
            connection.invalidate(exc)
        raise DBAPIError.instance(
            sql, parameters, exc, connection.dialect.loaded_dbapi.Error, hide_parameters=True,
            connection_invalidated=lost, dialect=connection.dialect) from exc
    finally:
        with contextlib.suppress(connection.dialect.loaded_dbapi.Error):  # keep the first error
            cursor.close()


def _idle_in_autocommit(connection: Connection) -> bool:
    return in_autocommit(connection) and not in_transaction_block(connection)


def _literal(value: Any) -> str:
    """A constant of a statement as SQL text (only the service's own constants reach here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for {value!r}")


def bind_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def aware(value: Any) -> Any:
    return value.replace(tzinfo=dt.timezone.utc) if isinstance(value, dt.datetime) else value
