"""Reach the machine's real PostgreSQL and Redis, or skip (locally) / fail (CI) saying why."""

from __future__ import annotations

import atexit
import os
import secrets
import time

import pytest

from tests.support import redis_lease

# Every test run has a name of its own, made by the first pytest process (the xdist
# controller, or the only process) and inherited by its workers through the environment,
# so that two runs on one machine never share a database or a Redis db (issue 36): each
# drops and flushes what it uses. Under pytest-xdist each worker process ("gw0", "gw1",
# ...) also gets its own, so parallel tests never truncate or flush each other's.
RUN = os.environ.setdefault("WEBHOOKS_TEST_RUN", f"r{secrets.token_hex(4)}")
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_INDEX = int(XDIST_WORKER[2:]) if XDIST_WORKER.startswith("gw") else 0

PG_ADMIN_URL = os.environ.get(
    "WEBHOOKS_TEST_PG_ADMIN_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
)


def pg_database_name(environ, run: str, worker: str) -> tuple[str, bool]:
    """This process's PostgreSQL database, and whether it is the run's own.

    WEBHOOKS_TEST_PG_DATABASE names it (kept after the run, for a look); unset, it is
    named after the run and dropped at the run's end (drop_run_database). Either way an
    xdist worker adds its name (``_gw0``)."""
    given = environ.get("WEBHOOKS_TEST_PG_DATABASE")
    return (given or f"webhooks_test_{run}") + (f"_{worker}" if worker else ""), not given


PG_TEST_DB, PER_RUN_DATABASE = pg_database_name(os.environ, RUN, XDIST_WORKER)
PG_URL = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + PG_TEST_DB


def _redis_url(base: str, offset: int) -> str:
    """``base`` with its db number lowered by ``offset`` (13, 12, ... for gw0, gw1, ...)."""
    prefix, _, number = base.rpartition("/")
    return f"{prefix}/{int(number) - offset}"


REDIS_SERVER = "redis://127.0.0.1:6379"
# The Redis dbs a run without WEBHOOKS_TEST_REDIS_URL may lease: 0 holds the leases (and is
# every client's default), 14 is the benchmark's, 15 is left to whoever needs one.
REDIS_DBS = os.environ.get("WEBHOOKS_TEST_REDIS_DBS", "1-13")


def _lease_redis_db() -> tuple[str, redis_lease.Lease | None]:
    """This process's Redis URL, and its lease (tests/support/redis_lease.py): the db of
    WEBHOOKS_TEST_REDIS_URL (minus the worker's index) if set, else a free one of
    REDIS_DBS. No lease without a Redis server (the tests that need one skip)."""
    import redis

    inherited = _inherited_lease()
    if inherited:
        return inherited, None
    explicit = os.environ.get("WEBHOOKS_TEST_REDIS_URL")
    url = _redis_url(explicit or f"{REDIS_SERVER}/13", _WORKER_INDEX)
    registry = redis.Redis.from_url(url.rpartition("/")[0] + f"/{redis_lease.REGISTRY_DB}",
                                    socket_connect_timeout=3, socket_timeout=10)
    holder = f"run={RUN} worker={XDIST_WORKER or 'main'}"
    try:
        registry.ping()
    except redis.RedisError:
        return url, None
    if explicit:
        lease = redis_lease.lease_exactly(registry, int(url.rpartition("/")[2]), holder)
    else:
        lease = redis_lease.lease_one_of(registry, redis_lease.parse_pool(REDIS_DBS), holder)
        url = f"{url.rpartition('/')[0]}/{lease.db}"
    atexit.register(lease.release)
    os.environ[_LEASED_ENV] = f"{_HOLDER_PROCESS} {url}"
    return url, lease.keep()


# A process a test starts (a receiver under multiprocessing's spawn, a fresh interpreter)
# imports this module again: it uses the db its test process leased, named here with the
# xdist worker it belongs to, instead of leasing one more (or finding none free).
_LEASED_ENV = "WEBHOOKS_TEST_REDIS_LEASED"
_HOLDER_PROCESS = XDIST_WORKER or "main"


def _inherited_lease() -> str | None:
    """The Redis URL this process's test process leased, if it is such a child; else None."""
    holder, _, url = os.environ.get(_LEASED_ENV, "").partition(" ")
    return url if holder == _HOLDER_PROCESS and url else None


REDIS_URL, REDIS_LEASE = _lease_redis_db()


def release_redis_db() -> None:
    """Give this process's Redis db back now (at the end of its tests; an xdist controller,
    which runs none, at its start): the next run may take it at once."""
    if REDIS_LEASE is not None:
        REDIS_LEASE.release()


def unavailable(what: str, error: Exception) -> None:
    """Skip with the reason, unless CI is set: then the missing server fails the run."""
    message = f"{what} is not reachable ({type(error).__name__}: {error})"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so this test must not be skipped", pytrace=False)
    pytest.skip(f"{message}; start it or set CI to make this a failure")


def check_postgres() -> None:
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
        engine.dispose()
    except Exception as exc:  # noqa: BLE001
        unavailable(f"PostgreSQL at {PG_ADMIN_URL}", exc)


def check_redis() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        unavailable(f"Redis at {REDIS_URL}", exc)


def kill_idle_pooled_connection(engine) -> int:
    """pg_terminate_backend the connection ``engine``'s pool holds (idle, as a pool keeps
    it) from a separate connection, and wait until it is gone; returns its pid."""
    import time

    import sqlalchemy

    with engine.connect() as connection:
        pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    admin = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
            deadline = time.monotonic() + 10
            while connection.exec_driver_sql(
                f"SELECT 1 FROM pg_stat_activity WHERE pid = {int(pid)}"
            ).first():
                if time.monotonic() > deadline:
                    raise AssertionError(f"backend {pid} still alive 10 s after it was terminated")
                time.sleep(0.02)
    finally:
        admin.dispose()
    return pid


def drop_run_database() -> None:
    """Drop this process's test database if it is the run's own (PER_RUN_DATABASE)."""
    if not PER_RUN_DATABASE:
        return
    import sqlalchemy

    engine = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{PG_TEST_DB}" WITH (FORCE)')
    engine.dispose()


def recreate_database() -> None:
    """Drop and create the test database, then migrate it to head."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{PG_TEST_DB}' AND pid <> pg_backend_pid()"
        )
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{PG_TEST_DB}"')
        connection.exec_driver_sql(f'CREATE DATABASE "{PG_TEST_DB}"')
    engine.dispose()


def empty(engine, tables: str, tries: int = 20) -> None:
    """Delete every row of ``tables`` (a comma-separated list, children before parents);
    again if PostgreSQL made it a deadlock's victim. What the ``db`` and ``sqlite_db``
    fixtures run.

    DELETE, not TRUNCATE: a test leaves a few rows, and deleting them takes a few
    milliseconds, where TRUNCATE gives every table, index and day partition of
    ``attempts`` a new file and syncs them at commit (0.1 s per test on a quiet machine,
    0.8 s under load: minutes of the suite). The cost: tables keep their statistics and
    dead rows until autovacuum; a test that needs tables never analysed uses ``truncate``.
    """
    _reset(engine, [f"DELETE FROM {table}" for table in tables.split(", ")], tries)


def truncate(engine, tables: str, tries: int = 20) -> None:
    """Empty ``tables`` (a comma-separated list) with TRUNCATE, which also forgets their
    statistics (``reltuples`` -1, as a table never analysed); again if PostgreSQL made it
    a deadlock's victim.

    A worker kept running by a module's fixture can be mid-sweep while the next
    test starts, holding tables the TRUNCATE wants in another order (until
    migration 0028, ``deliveries`` then, through its trigger, ``waiting_counts``).
    Its transaction is short, so trying again after it ends succeeds.
    """
    _reset(engine, [f"TRUNCATE {tables} CASCADE"], tries)


def _reset(engine, statements: list[str], tries: int) -> None:
    """Run ``statements`` in one transaction that may purge the audit log; again, up to
    ``tries`` times, while PostgreSQL rolls it back as a conflict's victim (a deadlock:
    storage/conflicts.py, the rule the attempt path runs its transactions again by)."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from webhooks.storage.backends import backend_of
    from webhooks.storage.conflicts import rolled_back_by_conflict

    for attempt in range(1, tries + 1):
        try:
            with engine.begin() as connection:
                if connection.dialect.name == "postgresql":
                    # A lock left behind fails this test's set-up, not the rest of the run.
                    connection.execute(text("SET LOCAL lock_timeout = '60s'"))
                # The audit log refuses TRUNCATE and DELETE but for a purge (migration 0030).
                with backend_of(connection).audit_purge(connection):
                    for statement in statements:
                        connection.execute(text(statement))
            return
        except OperationalError as error:
            if not rolled_back_by_conflict(error) or attempt == tries:
                raise
            time.sleep(0.05 * attempt)
