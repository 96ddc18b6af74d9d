"""Engines and sessions for PostgreSQL and the embedded SQLite default.

One engine per process: prefork workers fork after import, and a pooled
connection must never cross a fork, so the cache is keyed by process id.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path
from typing import Iterator

from psycopg2.extensions import TRANSACTION_STATUS_IDLE
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from webhooks.config import Settings, get_settings
from webhooks.config.datadir import create_private_file, private_dir
from webhooks.errors import ConfigError

__all__ = ["make_engine", "get_engine", "get_attempt_engine", "get_autocommit_engine",
           "attempt_transaction", "in_autocommit", "in_transaction_block", "get_sessionmaker",
           "session_scope", "dispose_engine", "sqlite_file", "check_sqlite_folder"]

SQLITE_BUSY_TIMEOUT_S = 30

_lock = threading.Lock()
# (process id, url, kind) -> engine; kind: "checked" (pre-ping), "unchecked", "attempts",
# "autocommit"
_cache: dict[tuple[int, str, str], tuple[Engine, sessionmaker]] = {}


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


def sqlite_file(url: str) -> Path | None:
    """The absolute path of the file a ``sqlite:///<file>`` URL names; None for any other URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).absolute()


def check_sqlite_folder(path: Path) -> None:
    """Raise ConfigError if the SQLite file ``path`` would need a folder that does not exist.

    Only the data folder (WEBHOOKS_DATA_DIR) is the service's to create. A
    file named by WEBHOOKS_DATABASE_URL in a missing folder is a typo more
    often than a wish: creating the folders (as root, once) hid it.
    """
    if path.parent != get_settings().data_dir and not path.parent.is_dir():
        raise ConfigError(
            f"WEBHOOKS_DATABASE_URL names the SQLite file {path}, whose folder {path.parent} does "
            "not exist: create it first, or correct the URL (only the data folder, "
            "WEBHOOKS_DATA_DIR, is created by webhooks)")


def _prepare_sqlite_file(path: Path) -> None:
    """The database file, mode 0600, in a folder of mode 0700 (see webhooks/config/datadir.py).

    The data folder is created if missing; any other folder must exist
    (check_sqlite_folder) and is left as it is: the operator chose it (it may be /tmp).
    """
    check_sqlite_folder(path)
    if path.parent == get_settings().data_dir:
        private_dir(path.parent)
    create_private_file(path)


def make_engine(url: str, *, pre_ping: bool = True, attempts: bool = False,
                autocommit: bool = False) -> Engine:
    """A new engine for ``url`` with the settings this service needs.

    ``pre_ping=False`` is for callers that handle a dropped connection
    themselves (the delivery hot path retries once): it saves a round trip
    each time a connection is taken from the pool. ``attempts=True`` is the
    engine of the claims and records of attempts (see get_attempt_engine);
    ``autocommit=True`` the one of get_autocommit_engine.
    """
    parsed = make_url(url)
    settings = get_settings()
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_file(url)
        if path is not None:
            _prepare_sqlite_file(path)
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
        pool_pre_ping=pre_ping and not attempts,
        hide_parameters=True,
        **_pool_sizes(settings, keep_all=attempts or autocommit),
        **(_autocommit_options(durable=settings.durable_attempts) if attempts else
           _autocommit_options(durable=True) if autocommit else {}),
    )


def _pool_sizes(settings: Settings, *, keep_all: bool) -> dict:
    """WEBHOOKS_DB_POOL_SIZE connections kept, WEBHOOKS_DB_MAX_OVERFLOW more opened at a peak.

    ``keep_all`` (the attempt and emit engines) keeps every connection it
    opens, up to the same limit. Their connections carry the hot path's
    prepared statements (prepared.py), and a pool closes a connection over
    its size as soon as it comes back: under a worker's 128 threads that
    meant several new connections a second, each costing PostgreSQL and the
    worker CPU (docs/performance.md, "Connections that stay open", has the
    figures).
    """
    if keep_all:
        return {"pool_size": settings.db_pool_size + settings.db_max_overflow, "max_overflow": 0}
    return {"pool_size": settings.db_pool_size, "max_overflow": settings.db_max_overflow}


def _autocommit_options(*, durable: bool) -> dict:
    """Autocommit, so that a transaction's BEGIN rides in the same round trip as its first
    statement (prepared.py), or a single statement commits as it returns; commits that do
    not wait for the WAL flush unless ``durable``."""
    options = {"isolation_level": "AUTOCOMMIT"}
    if not durable:
        options["connect_args"] = {"options": "-c synchronous_commit=off"}
    return options


def _entry(url: str | None = None, pre_ping: bool = True, attempts: bool = False,
           autocommit: bool = False) -> tuple[Engine, sessionmaker]:
    url = url or get_settings().database_url
    if _backend_of(url) != "postgresql":
        attempts = autocommit = False  # SQLite: one writer at a time; nothing to gain
    kind = ("attempts" if attempts else "autocommit" if autocommit
            else "checked" if pre_ping else "unchecked")
    key = (os.getpid(), url, kind)
    entry = _cache.get(key)
    if entry is None:
        with _lock:
            entry = _cache.get(key)
            if entry is None:
                engine = make_engine(url, pre_ping=pre_ping, attempts=attempts,
                                     autocommit=autocommit)
                entry = (engine, sessionmaker(engine, expire_on_commit=False))
                _cache[key] = entry
    return entry


@functools.lru_cache(maxsize=16)
def _backend_of(url: str) -> str:
    """The URL's backend name ("postgresql", "sqlite"), parsed once per URL: every emit and
    every attempt asks for its engine, and parsing costs more than the lookup."""
    return make_url(url).get_backend_name()


def get_engine(url: str | None = None, *, pre_ping: bool = True) -> Engine:
    """This process's engine for ``url`` (default: the configured database).

    ``pre_ping=False`` gives a second engine whose connections are not checked
    when taken; see make_engine.
    """
    return _entry(url, pre_ping)[0]


def get_attempt_engine(url: str | None = None) -> Engine:
    """This process's engine for the claims and records of attempts (webhooks/services/attempt.py).

    On PostgreSQL its connections are in autocommit mode: a transaction is
    opened by a ``BEGIN`` sent with its first statement and closed by the
    caller (``delivery._in_transaction``), which saves two round trips per
    transaction. Unless ``WEBHOOKS_DURABLE_ATTEMPTS`` is set their commits do
    not wait for the WAL to reach the disk: a database crash can lose the
    last few hundred milliseconds of claims and records, which costs a
    repeated attempt (the sweep sends the delivery again), never a delivery
    (docs/reliability.md, "Commits of attempts"). No pre-ping: the hot path
    retries a dropped connection once. Elsewhere: the engine without pre-ping.
    """
    return _entry(url, False, attempts=True)[0]


def get_autocommit_engine(url: str | None = None) -> Engine:
    """This process's engine for single statements that commit as they return, durably
    (emit_event's one statement on PostgreSQL, emit_statement.py): its connections stay
    in autocommit mode, so no BEGIN or COMMIT travels, and none is switched back on
    return to the pool (psycopg2 would send a SET for that). No pre-ping: its caller
    retries a dropped connection once. On SQLite: the engine without pre-ping."""
    return _entry(url, False, autocommit=True)[0]


def in_autocommit(connection: Connection) -> bool:
    """True for a connection of the attempt or the autocommit engine on PostgreSQL:
    whoever runs a transaction on it sends BEGIN and COMMIT themselves.

    Asked of the DB-API connection, as the driver holds it: psycopg2's ``autocommit``
    is a bool, which those engines set (``AUTOCOMMIT``); sqlite3 has none before
    Python 3.12, and from 3.12 an int unless a connection opts in, which none of ours
    does (SQLite's engines are never autocommit here, see _entry)."""
    return getattr(connection.connection.dbapi_connection, "autocommit", None) is True


def in_transaction_block(connection: Connection) -> bool:
    """True when a PostgreSQL connection is inside a transaction block (BEGIN sent, not
    yet ended), as the server last reported it."""
    return (connection.connection.dbapi_connection.info.transaction_status
            != TRANSACTION_STATUS_IDLE)


@contextlib.contextmanager
def attempt_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction on ``engine`` (get_attempt_engine): committed when the block ends,
    rolled back if it raises.

    On an autocommit connection the transaction is whatever the block opened
    with a BEGIN (prepared.execute_together sends it with the block's first
    statement); a block that opened none ran single statements that
    committed on their own, and nothing more is sent.
    """
    with engine.connect() as connection:
        if not in_autocommit(connection):
            with connection.begin():
                yield connection
            return
        try:
            yield connection
        except BaseException:
            _end_block(connection, "ROLLBACK", quiet=True)
            raise
        _end_block(connection, "COMMIT", quiet=False)


def _end_block(connection: Connection, command: str, *, quiet: bool) -> None:
    """Send COMMIT or ROLLBACK if a transaction block is open; a connection that cannot
    end it is invalidated (never returned to the pool inside a transaction)."""
    if connection.invalidated:
        return
    if not in_transaction_block(connection):
        return
    try:
        connection.exec_driver_sql(command)
    except Exception:
        if not connection.invalidated:
            connection.invalidate()
        if not quiet:
            raise


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
