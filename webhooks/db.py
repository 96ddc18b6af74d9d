"""Engines and sessions for PostgreSQL and the embedded SQLite default.

One engine per process: prefork workers fork after import, and a pooled
connection must never cross a fork, so the cache is keyed by process id.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from .config import get_settings
from .datadir import create_private_file, private_dir

__all__ = ["make_engine", "get_engine", "get_sessionmaker", "session_scope", "dispose_engine"]

SQLITE_BUSY_TIMEOUT_S = 30

_lock = threading.Lock()
_cache: dict[tuple[int, str, bool], tuple[Engine, sessionmaker]] = {}


def _configure_sqlite(engine: Engine) -> None:
    """WAL, a busy time-out, foreign keys, and transactions that take the write lock at BEGIN.

    pysqlite begins transactions lazily and never for SELECTs, which breaks
    SAVEPOINT and lets two writers deadlock on the read-to-write upgrade
    (SQLITE_BUSY that the busy time-out cannot wait out). ``BEGIN IMMEDIATE``
    serialises writers at the start instead (SQLAlchemy's pysqlite recipe).
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _prepare_sqlite_file(database: str) -> None:
    """The database file, mode 0600, in a folder of mode 0700 (see webhooks/datadir.py).

    A folder that exists and is not the data folder is left as it is: the
    operator chose it (it may be /tmp).
    """
    path = Path(database).absolute()
    if path.parent == get_settings().data_dir or not path.parent.exists():
        private_dir(path.parent)
    create_private_file(path)


def make_engine(url: str, *, pre_ping: bool = True) -> Engine:
    """A new engine for ``url`` with the settings this service needs.

    ``pre_ping=False`` is for callers that handle a dropped connection
    themselves (the delivery hot path retries once): it saves a round trip
    each time a connection is taken from the pool.
    """
    parsed = make_url(url)
    settings = get_settings()
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            _prepare_sqlite_file(parsed.database)
        engine = create_engine(
            url,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            hide_parameters=True,
        )
        _configure_sqlite(engine)
        return engine
    # pre_ping: a connection killed under us (restart, pg_terminate_backend)
    # is replaced before use instead of failing the next request.
    # hide_parameters: bound values (signing secrets among them) never appear
    # in the text of a database error, which is logged.
    return create_engine(
        url,
        pool_pre_ping=pre_ping,
        hide_parameters=True,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
    )


def _entry(url: str | None = None, pre_ping: bool = True) -> tuple[Engine, sessionmaker]:
    url = url or get_settings().database_url
    key = (os.getpid(), url, pre_ping)
    entry = _cache.get(key)
    if entry is None:
        with _lock:
            entry = _cache.get(key)
            if entry is None:
                engine = make_engine(url, pre_ping=pre_ping)
                entry = (engine, sessionmaker(engine, expire_on_commit=False))
                _cache[key] = entry
    return entry


def get_engine(url: str | None = None, *, pre_ping: bool = True) -> Engine:
    """This process's engine for ``url`` (default: the configured database).

    ``pre_ping=False`` gives a second engine whose connections are not checked
    when taken; see make_engine.
    """
    return _entry(url, pre_ping)[0]


def get_sessionmaker(url: str | None = None, *, pre_ping: bool = True) -> sessionmaker:
    """This process's session factory for ``url`` (default: the configured database).

    ``pre_ping=False``: sessions on the engine without pre-ping (see get_engine).
    """
    return _entry(url, pre_ping)[1]


@contextlib.contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session whose transaction commits when the block ends and rolls back on error."""
    session = get_sessionmaker(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def dispose_engine() -> None:
    """Close every pooled connection of this process (tests, shutdown)."""
    with _lock:
        for key in [k for k in _cache if k[0] == os.getpid()]:
            _cache.pop(key)[0].dispose()
