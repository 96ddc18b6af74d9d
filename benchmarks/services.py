"""The PostgreSQL database and the Redis db the benchmark runs against.

The harness only ever empties what it was pointed at: the tables of the
service's own schema in its database (``TRUNCATE``), and its one Redis db
(``FLUSHDB``). To keep a mistyped URL from wiping real data, the database's
name must contain ``bench`` or ``test`` and the Redis db must not be 0,
unless ``--force`` is given.
"""

from __future__ import annotations

import contextlib
import os

import redis
import sqlalchemy
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

__all__ = [
    "exclusive_run", "check_targets", "ensure_database", "create_database", "drop_database",
    "truncate_tables", "analyse",
    "flush_broker", "broker_memory", "broker_queue_lengths", "server_versions",
]


def check_targets(database_url: str, broker_url: str) -> None:
    """Refuse URLs that look like somebody's real data (see the module docstring)."""
    name = make_url(database_url).database or ""
    if make_url(database_url).get_backend_name() != "postgresql":
        raise SystemExit(f"the benchmark needs PostgreSQL; WEBHOOKS_DATABASE_URL is {database_url!r}")
    if "bench" not in name and "test" not in name:
        raise SystemExit(
            f"refusing to empty database {name!r}: its name contains neither 'bench' nor 'test' "
            "(use --force if you mean it)")
    if not broker_url.startswith("redis://"):
        raise SystemExit(f"the benchmark needs Redis; WEBHOOKS_BROKER_URL is {broker_url!r}")
    if _redis_db(broker_url) == 0:
        raise SystemExit("refusing to flush Redis db 0 (use --force if you mean it)")


# pg_advisory_lock key held for a whole run ("webhooks-bench" as a number).
RUN_LOCK_KEY = 0x77686B62656E6368


@contextlib.contextmanager
def exclusive_run(database_url: str):
    """Hold a PostgreSQL advisory lock for the run: two runs on one database would wipe each other."""
    engine = sqlalchemy.create_engine(database_url, poolclass=NullPool,
                                      isolation_level="AUTOCOMMIT")
    connection = engine.connect()
    try:
        taken = connection.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:key)"),
                                   {"key": RUN_LOCK_KEY}).scalar()
        if not taken:
            raise SystemExit("another benchmark is running against this database; "
                             "wait for it or point WEBHOOKS_DATABASE_URL elsewhere")
        yield
    finally:
        connection.close()
        engine.dispose()


def _redis_db(broker_url: str) -> int:
    return redis.Redis.from_url(broker_url).connection_pool.connection_kwargs.get("db", 0)


def fresh_bench_database(default_url: str) -> str:
    """WEBHOOKS_DATABASE_URL (set to ``default_url`` if unset), dropped and created empty;
    refused unless the database's name contains ``bench`` (it is emptied). Its URL."""
    os.environ.setdefault("WEBHOOKS_DATABASE_URL", default_url)
    url = os.environ["WEBHOOKS_DATABASE_URL"]
    if "bench" not in url.rsplit("/", 1)[-1]:
        raise SystemExit("the database's name must contain 'bench': it is emptied")
    drop_database(url)
    create_database(url)
    return url


def ensure_database(database_url: str) -> None:
    """Create the database if it is missing, then migrate it to head."""
    create_database(database_url)
    from webhooks.storage.migrate import upgrade

    upgrade(database_url)


def create_database(database_url: str) -> None:
    """Create the database if it is missing (empty; nothing is migrated)."""
    url = make_url(database_url)
    admin = sqlalchemy.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            exists = connection.execute(
                sqlalchemy.text("SELECT 1 FROM pg_database WHERE datname = :name"),
                {"name": url.database},
            ).first()
            if not exists:
                connection.exec_driver_sql(f'CREATE DATABASE "{url.database}"')
    finally:
        admin.dispose()


def drop_database(database_url: str) -> None:
    """Drop a database the benchmark made for itself (its connections are closed first)."""
    from webhooks.storage.db import dispose_engine

    dispose_engine()
    url = make_url(database_url)
    admin = sqlalchemy.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')
    finally:
        admin.dispose()


def truncate_tables(database_url: str) -> None:
    """Empty every table of the service's schema (not alembic_version) in this database."""
    from webhooks.storage.backends import backend_of
    from webhooks.storage.db import get_engine
    from webhooks.storage.models import Base

    names = ", ".join(table.name for table in Base.metadata.sorted_tables)
    with get_engine(database_url).begin() as connection:
        with backend_of(connection).audit_purge(connection):  # the audit log's guard
            connection.exec_driver_sql(f"TRUNCATE {names} CASCADE")


def analyse(database_url: str) -> None:
    """Refresh planner statistics after a bulk load (so the partial indexes get used)."""
    from webhooks.storage.db import get_engine

    with get_engine(database_url).connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def flush_broker(broker_url: str) -> None:
    """FLUSHDB on the broker's own Redis db only."""
    redis.Redis.from_url(broker_url).flushdb()


def broker_memory(broker_url: str) -> dict:
    """Redis ``used_memory`` (MB, the whole server) and the keys of the broker's db."""
    client = redis.Redis.from_url(broker_url)
    info = client.info("memory")
    return {"used_memory_mb": round(info["used_memory"] / 2**20, 1), "keys": client.dbsize()}


def broker_queue_lengths(broker_url: str,
                         queues: tuple[str, ...] = ("webhooks", "webhooks.countdown")) -> dict:
    """Messages ready in ``queues`` (the deliveries' and the countdowns') and messages a
    worker holds unacknowledged (countdowns too)."""
    client = redis.Redis.from_url(broker_url)
    return {"ready": sum(client.llen(queue) for queue in queues),
            "unacked": client.hlen("unacked")}


def server_versions(database_url: str, broker_url: str) -> dict:
    from webhooks.storage.db import get_engine

    with get_engine(database_url).connect() as connection:
        pg = connection.exec_driver_sql("SHOW server_version").scalar()
    info = redis.Redis.from_url(broker_url).info("server")
    return {"postgresql": pg, "redis": info.get("redis_version")}
