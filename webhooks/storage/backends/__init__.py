"""The storage boundary: one interface, a PostgreSQL and a SQLite backend behind it.

Everything the service does differently on the two engines is a method of
:class:`Backend` (backends/base.py); :func:`backend_of` picks the engine's
backend (once per dialect, then a dictionary look-up), so no module outside
this package branches on the dialect. The statements both engines share (the
transitions, the claim's and the record's conditions) stay where they are
written once, in the lifecycle, which hands them down with each call
(:class:`ClaimStatements`, :class:`RecordStatements`); a backend only says how
its engine runs them: in one prepared round trip on PostgreSQL, step by step
on SQLite.

tests/test_backend_contract.py runs every transition through both backends
(SQLite in the fast tier, PostgreSQL in the full suite).
"""

from __future__ import annotations

from webhooks.storage.backends.base import Backend, ClaimStatements, RecordStatements
from webhooks.storage.backends.postgresql import PostgreSQLBackend
from webhooks.storage.backends.sqlite import SQLiteBackend

__all__ = ["Backend", "ClaimStatements", "RecordStatements", "backend_of"]

_KINDS: dict[str, type[Backend]] = {"postgresql": PostgreSQLBackend, "sqlite": SQLiteBackend}
_BACKENDS: dict[str, Backend] = {}


def backend_of(bind) -> Backend:
    """The backend of an engine, connection or session (the engine's dialect picks it)."""
    dialect = bind.get_bind().dialect if hasattr(bind, "get_bind") else bind.dialect
    backend = _BACKENDS.get(dialect.name)
    if backend is None:
        backend = _BACKENDS[dialect.name] = _make(dialect.name)
    return backend


def _make(name: str) -> Backend:
    kind = _KINDS.get(name)
    if kind is None:
        raise NotImplementedError(f"no storage backend for {name!r}: PostgreSQL and SQLite only")
    return kind()
