"""A statement run once per item of a batch, in one statement and one commit, on PostgreSQL.

Group commit (lifecycle/group_commit.py) hands the backend the claims, or
the records, of concurrent attempts together. Each must still be exactly
the statement one attempt runs alone: in sequence, each seeing what the
ones before it wrote (the limits on attempts in flight count them). A
single statement over many rows cannot give that (its one snapshot sees
none of its own writes), so the per-item statements become the body of a
plpgsql function, and the batch is one ``SELECT`` that calls it once per
item, in order::

    SELECT r.* FROM unnest($1::varchar[], $2::integer[], ...) WITH ORDINALITY AS u(...)
    CROSS JOIN LATERAL pg_temp.webhooks_claims_<hash>(u.p1, u.p2, ...) AS r ORDER BY u.i

The function is ``VOLATILE`` (the default): each statement in it takes a
fresh snapshot, which sees the earlier calls' writes, as consecutive
statements of one transaction do. Its body is compiled from the same
SQLAlchemy Core statements the one-by-one path prepares, so a rule is
still written once; plpgsql keeps each statement's plan for the session as
``PREPARE`` does. The function is temporary (``pg_temp``): created once
per connection, the first time the batch runs there, gone with the
connection, and named with a hash of its text, so a connection never runs
an older body. No migration holds it, and nothing in the schema changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from sqlalchemy import column, select, table
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.expression import CTE, TableClause

from webhooks.storage.db import in_autocommit, in_transaction_block
from webhooks.storage.prepared import (_PARAMETER, _POSTGRESQL, aware, bind_value, compile_core,
                                       numbered, parameter_names, run_text)

__all__ = ["Body", "BatchedStatement"]

_INFO_KEY = "webhooks_batched"


@dataclass(frozen=True)
class Body:
    """The statements of one item, in order: ``main``, whose one row (``RETURNING`` or
    ``SELECT``) is the item's answer, then ``otherwise``, run only if ``main`` found no
    row (the claim's turn-away)."""

    main: ClauseElement
    returns: Sequence[tuple[str, Any]]  # (name, SQLAlchemy type) of main's columns, in order
    otherwise: Sequence[ClauseElement] = ()


class BatchedStatement:
    """``body`` as a temporary function, called once per item of a batch in one statement."""

    def __init__(self, label: str, body: Body, *, prologue: ClauseElement | None = None,
                 after: Callable[[TableClause], Sequence[CTE]] | None = None,
                 timestamp_columns: Sequence[str] = ()):
        """``prologue``: one statement run before the calls, in the same round trip and
        transaction, with the batch's arrays as parameters (``:name`` is the list of
        every item's ``name``): the claims' account turns, taken in one order.
        ``after``: data-modifying CTEs of the batch's statement, run once every call has
        returned, made of ``calls``, a table of one row per item (its parameters by name,
        its answer's columns as ``o_<name>``): the records' counts in the rollups,
        taken together in one order."""
        compiled = [compile_core(s) for s in (body.main, *body.otherwise)]
        self._types: dict[str, str] = {}
        for _, types in compiled:
            self._types.update(types)
        self._order = [name for sql, _ in compiled for name in parameter_names(sql)]
        self._order = list(dict.fromkeys(self._order))
        texts = [numbered(sql, self._order) for sql, _ in compiled]
        main, otherwise = texts[0], texts[1:]
        self._columns = [name for name, _ in body.returns]
        outs = ", ".join(f"OUT o_{name} {kind.compile(dialect=_POSTGRESQL)}"
                         for name, kind in body.returns)
        ins = ", ".join(f"{self._types[name]}" for name in self._order)
        statements = [f"{main} INTO {', '.join(f'o_{n}' for n in self._columns)};"]
        if otherwise:
            statements.append("IF NOT FOUND THEN " + " ".join(s + ";" for s in otherwise)
                              + " END IF;")
        digest = hashlib.sha1("\n".join(statements).encode()).hexdigest()[:10]
        self.function = f"webhooks_{label}_{digest}"
        self._create = (f"CREATE OR REPLACE FUNCTION pg_temp.{self.function}({ins}, {outs}) "
                        f"LANGUAGE plpgsql VOLATILE AS $body$ BEGIN "
                        + " ".join(statements) + " END $body$")
        self._prologue = None
        self._prologue_order: list[str] = []
        if prologue is not None:
            self._prologue, self._prologue_order = _with_arrays(*compile_core(prologue))
        arrays = ", ".join(f"%s::{self._types[name]}[]" for name in self._order)
        inputs = ", ".join(f"p{i}" for i in range(1, len(self._order) + 1))
        calls = (f"unnest({arrays}) WITH ORDINALITY AS u({inputs}, i) "
                 f"CROSS JOIN LATERAL pg_temp.{self.function}({inputs}) AS r")
        self._call = (f"SELECT r.* FROM {calls} ORDER BY u.i" if after is None
                      else self._then(calls, after))
        self._timestamps = frozenset(timestamp_columns)

    def _then(self, calls: str, after: Callable[[TableClause], Sequence[CTE]]) -> str:
        """The batch's statement with ``after``'s CTEs: the calls' rows kept as the CTE
        ``calls`` (MATERIALIZED: every call runs once, and all of them before any CTE
        that reads their rows), then those CTEs, then the calls' rows in order."""
        names = [*self._order, *(f"o_{name}" for name in self._columns)]
        if len(set(names)) < len(names) or "i" in names:
            raise ValueError(f"{self.function}: a parameter and a column share a name")
        table_of_calls = table("calls", column("i"), *(column(name) for name in names))
        answers = [table_of_calls.c[f"o_{name}"] for name in self._columns]
        tail, parameters = compile_core(
            select(*answers).order_by(table_of_calls.c.i).add_cte(*after(table_of_calls)))
        if parameters or not tail.startswith("WITH "):
            raise ValueError(f"{self.function}: after's CTEs read the calls alone")
        inputs = ", ".join(f'u.p{k} AS "{name}"' for k, name in enumerate(self._order, 1))
        return (f"WITH calls AS MATERIALIZED (SELECT u.i, {inputs}, r.* FROM {calls}), "
                + tail[len("WITH "):].replace("%", "%%"))

    def run(self, connection: Connection, items: Sequence[Mapping[str, Any]]) -> list[tuple]:
        """Run the body once per item, in order, in one round trip; each item's row (None
        for every column where ``main`` found no row). On an autocommit connection in no
        transaction the batch is one implicit transaction, committed as it returns."""
        self._create_on(connection)
        parameters = []
        if self._prologue is not None:
            parameters += [[bind_value(item[name]) for item in items]
                           for name in self._prologue_order]
        parameters += [[bind_value(item[name]) for item in items] for name in self._order]
        # Named first, so that pg_stat_activity's cut of a long text still shows the batch.
        sql = f"/* {self.function} */ " + (
            self._call if self._prologue is None else f"{self._prologue}; {self._call}")
        names, rows = run_text(connection, sql, tuple(parameters))
        if not self._timestamps:
            return [tuple(row) for row in rows]
        convert = [name[2:] in self._timestamps for name in names]
        return [tuple(aware(v) if c else v for v, c in zip(row, convert)) for row in rows]

    def _create_on(self, connection: Connection) -> None:
        created = connection.connection.info.setdefault(_INFO_KEY, set())
        if self.function in created:
            return
        connection.exec_driver_sql(self._create)
        # Remembered only where it committed at once (an autocommit connection in no
        # transaction, as the attempt engine's): a caller's transaction that rolls back
        # takes the function with it, and the next batch there creates it again.
        if in_autocommit(connection) and not in_transaction_block(connection):
            created.add(self.function)


def _with_arrays(sql: str, types: Mapping[str, str]) -> tuple[str, list[str]]:
    """``sql`` with each ``:name`` replaced by a ``%s`` cast to an array of its type; and the
    names, one per ``%s``, in order (a name used twice is passed twice)."""
    order: list[str] = []

    def placeholder(match) -> str:
        order.append(match.group(1))
        return f"%s::{types[match.group(1)]}[]"

    return _PARAMETER.sub(placeholder, sql.replace("%", "%%")), order
