"""The Alembic migrations build exactly the schema the models describe, on both databases,
and move a database that holds rows from an older revision and back."""

import datetime as dt
import uuid

import pytest
import sqlalchemy
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tests.support import services
from webhooks.storage.db import get_engine
from webhooks.storage.migrate import alembic_config
from webhooks.storage.models import Base
from webhooks.storage.partitions import comparison_options


def _differences(connection) -> list:
    """What separates the database from the models (attempts' day partitions aside)."""
    context = MigrationContext.configure(
        connection, opts=comparison_options(connection.dialect.name))
    return compare_metadata(context, Base.metadata)


def test_migrated_schema_matches_the_models(any_db):
    with get_engine(any_db).connect() as connection:
        differences = _differences(connection)
    assert differences == []


def test_upgrade_twice_is_harmless(sqlite_db):
    from webhooks.storage.migrate import upgrade

    def schema():
        with get_engine(sqlite_db).connect() as connection:
            inspector = sqlalchemy.inspect(connection)
            revision = MigrationContext.configure(connection).get_current_revision()
            return revision, {name: [c["name"] for c in inspector.get_columns(name)]
                              for name in inspector.get_table_names()}

    before = schema()
    upgrade(sqlite_db)
    upgrade(sqlite_db)
    assert schema() == before  # still at head, nothing added or lost
    assert before[0] is not None and "attempts" in before[1]


# ---------------------------------------------------------------- 0004..0006 on a table with rows
T0 = dt.datetime(2026, 11, 20, 9, 15)


@pytest.fixture(params=["postgresql", "sqlite"])
def old_schema(request, tmp_path):
    """A database of its own at revision 0003 (before this change), holding rows."""
    name = f"{services.PG_TEST_DB}_migrations"
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        services.check_postgres()
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
        url = services.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0003")
        _old_rows(connection)
    yield engine, url
    engine.dispose()
    if request.param == "postgresql":
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(*statements: str) -> None:
    admin = sqlalchemy.create_engine(services.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)
    admin.dispose()


def run_alembic(connection, url: str, direction: str, revision: str) -> None:
    config = alembic_config(url)
    config.attributes["connection"] = connection
    getattr(command, direction)(config, revision)


def _old_rows(connection) -> None:
    """One account, subscription and event; a done and a dead delivery with 1 + 6 attempts."""
    run = connection.exec_driver_sql
    run("INSERT INTO accounts VALUES ('a1', 'acme', 'hash', '2026-01-01 00:00:00')")
    run("INSERT INTO subscriptions (id, account_id, url, secret, status, consecutive_failures, "
        "created_at) VALUES ('s1', 'a1', 'https://e.example.com/', 'whsec_x', 'active', 0, "
        "'2026-01-01 00:00:00')")
    run("INSERT INTO events (id, account_id, type, version, body, created_at) "
        "VALUES ('e1', 'a1', 'email.sent', '2026-07-30', '{}', '2026-11-20 09:00:00')")
    for delivery_id, status, outcomes in (("d1", "done", ["success"]),
                                          ("d2", "dead", ["retry"] * 5 + ["dead"])):
        run("INSERT INTO deliveries (id, account_id, event_id, subscription_id, event_type, status, "
            f"attempt_count, parked, created_at, updated_at) VALUES ('{delivery_id}', 'a1', 'e1', "
            f"'s1', 'email.sent', '{status}', {len(outcomes)}, false, '2026-11-20 09:00:00', "
            "'2026-11-20 09:00:00')")
        for number, outcome in enumerate(outcomes, start=1):
            started = T0 + dt.timedelta(hours=number)
            run("INSERT INTO attempts (delivery_id, number, started_at, duration_ms, outcome) "
                f"VALUES ('{delivery_id}', {number}, '{started:%Y-%m-%d %H:%M:%S}', {number * 20}, "
                f"'{outcome}')")


def _id_type(connection) -> str:
    if connection.dialect.name == "sqlite":
        return "INTEGER"
    return connection.exec_driver_sql(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'attempts' AND column_name = 'id'").scalar()


def _new_attempt(connection, started_at: str) -> int:
    """Record attempt 2 of d1 by hand; the id the sequence gave it."""
    return connection.exec_driver_sql(
        "INSERT INTO attempts (delivery_id, number, started_at, duration_ms, outcome) "
        f"VALUES ('d1', 2, '{started_at}', 5, 'success') RETURNING id").scalar()


def test_upgrade_from_0003_keeps_the_rows_widens_the_id_and_fills_the_rollups(old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "head")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM attempts").scalar() == 7
        hours = connection.exec_driver_sql(
            "SELECT outcome, sum(attempts) FROM attempt_hours WHERE subscription_id = 's1' "
            "AND account_id = 'a1' GROUP BY outcome ORDER BY outcome").all()
        assert [tuple(row) for row in hours] == [("dead", 1), ("retry", 5), ("success", 1)]
        distinct_hours = connection.exec_driver_sql(
            "SELECT count(DISTINCT hour_start) FROM attempt_hours").scalar()
        assert distinct_hours == 6  # attempts 1..6 each an hour apart (d1's and d2's first share)
        totals = connection.exec_driver_sql(
            "SELECT sum(attempts), sum(duration_ms) FROM attempt_totals").one()
        assert tuple(totals) == (7, 20 + sum(n * 20 for n in range(1, 7)))
        assert _id_type(connection) in ("bigint", "INTEGER")
        if connection.dialect.name == "postgresql":
            assert connection.exec_driver_sql(
                "SELECT data_type FROM pg_sequences WHERE sequencename = 'attempts_id_seq'"
            ).scalar() == "bigint"
            # A new attempt still gets its id from the (now 64-bit) sequence.
            connection.exec_driver_sql("SELECT setval('attempts_id_seq', 3000000000)")
            assert _new_attempt(connection, "2026-11-20 12:00:00") == 3000000001
            connection.rollback()
    with engine.connect() as connection:
        differences = _differences(connection)
    assert differences == []


def test_downgrade_to_0003_keeps_the_rows(old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "head")
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0003")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM attempts").scalar() == 7
        assert connection.exec_driver_sql("SELECT count(*) FROM deliveries").scalar() == 2
        assert _id_type(connection) in ("integer", "INTEGER")
        tables = set(sqlalchemy.inspect(connection).get_table_names())
        assert not {"attempt_hours", "attempt_totals"} & tables
        indexes = {i["name"] for i in sqlalchemy.inspect(connection).get_indexes("deliveries")}
        assert {"ix_deliveries_account_created", "ix_deliveries_subscription_status"} <= indexes


# ---------------------------------------------------------------- 0008 on a table with rows


def _waiting_rows(connection, statuses: list[str], first: int) -> None:
    for number, status in enumerate(statuses, start=first):
        connection.exec_driver_sql(
            "INSERT INTO deliveries (id, account_id, event_id, subscription_id, event_type, "
            f"status, attempt_count, parked, created_at, updated_at) VALUES ('w{number}', 'a1', "
            f"'e1', 's1', 'email.sent', '{status}', 0, false, '2026-11-20 09:00:00', "
            "'2026-11-20 09:00:00')")


def _counts(connection) -> tuple:
    return tuple(connection.exec_driver_sql(
        "SELECT sum(pending), sum(sending), sum(paused) FROM waiting_counts").one())


def test_0008_counts_the_deliveries_already_waiting_then_keeps_counting(old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0007")
        _waiting_rows(connection, ["pending", "pending", "sending", "paused"], first=1)
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0027")  # 0028 drops the triggers
    with engine.begin() as connection:
        assert _counts(connection) == (2, 1, 1)  # d1 done and d2 dead are not counted
        _waiting_rows(connection, ["pending"], first=5)
        connection.exec_driver_sql("UPDATE deliveries SET status = 'done' WHERE id = 'w3'")
    with engine.begin() as connection:
        assert _counts(connection) == (3, 0, 1)
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0007")
    with engine.begin() as connection:  # no trigger is left behind to write a dropped table
        _waiting_rows(connection, ["pending"], first=6)
        assert "waiting_counts" not in sqlalchemy.inspect(connection).get_table_names()


def test_0028_stops_the_counting_and_its_downgrade_counts_again(old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0027")
        _waiting_rows(connection, ["pending", "sending"], first=1)
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0028")
    with engine.begin() as connection:  # the table stays for an old host's /metrics, unwritten
        _waiting_rows(connection, ["pending", "paused"], first=3)
        connection.exec_driver_sql("UPDATE deliveries SET status = 'done' WHERE id = 'w2'")
        assert _counts(connection) == (1, 1, 0)  # w1 and w2, as counted at 0027
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0027")
    with engine.begin() as connection:
        assert _counts(connection) == (2, 0, 1)  # counted afresh: w1, w3; w4
        _waiting_rows(connection, ["pending"], first=5)
        assert _counts(connection) == (3, 0, 1)  # and the triggers count again


# ---------------------------------------------------------------- 0015 and 0016 on rows


def test_0015_gives_paused_subscriptions_the_reason_failures_and_0016_the_service_scheme(
        old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0014")
        connection.exec_driver_sql(
            "INSERT INTO subscriptions (id, account_id, url, secret, status, "
            "consecutive_failures, paused_at, created_at) VALUES ('s2', 'a1', "
            "'https://example.com/', 'whsec_x', 'paused', 25, '2026-11-20 09:00:00', "
            "'2026-11-20 09:00:00')")
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "head")
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT id, status, paused_reason, signature_scheme FROM subscriptions "
            "ORDER BY id").all()
    assert [tuple(row) for row in rows] == [("s1", "active", None, "service"),
                                           ("s2", "paused", "failures", "service")]
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0014")
    with engine.connect() as connection:
        columns = {c["name"] for c in sqlalchemy.inspect(connection).get_columns("subscriptions")}
    assert not {"paused_reason", "signature_scheme"} & columns


# ---------------------------------------------------------------- 0029 on a table with rows


def _relkind(connection) -> str:
    return connection.exec_driver_sql(
        "SELECT relkind FROM pg_class WHERE oid = 'attempts'::regclass").scalar()


def _unique_keys(connection) -> list[list[str]]:
    return sorted(c["column_names"] for c in
                  sqlalchemy.inspect(connection).get_unique_constraints("attempts"))


def test_0029_partitions_attempts_by_day_with_their_rows_and_back(old_schema):
    engine, url = old_schema
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0029")
    if engine.dialect.name == "sqlite":  # its plain table, as it was
        with engine.connect() as connection:
            assert _unique_keys(connection) == [["delivery_id", "number"]]
            assert connection.exec_driver_sql("SELECT count(*) FROM attempts").scalar() == 7
        return
    with engine.connect() as connection:
        assert _relkind(connection) == "p"
        assert _unique_keys(connection) == [["delivery_id", "number", "started_at"]]
        assert connection.exec_driver_sql("SELECT count(*) FROM attempts").scalar() == 7
        where = connection.exec_driver_sql(
            "SELECT tableoid::regclass::text, count(*) FROM attempts GROUP BY 1").all()
        days = {name for name, _ in where}
        # The rows' day (within the migration's 60 days back) or, later, the default one.
        assert days <= {"attempts_p20261120", "attempts_default"} and len(days) == 1
        names = set(sqlalchemy.inspect(connection).get_table_names())
        today = dt.datetime.now(dt.timezone.utc).date()
        assert {f"attempts_p{today + dt.timedelta(days=n):%Y%m%d}" for n in range(4)} <= names
        # A new attempt still gets its id from the sequence, and lands in the default
        # partition when no day holds it.
        assert _new_attempt(connection, "2001-01-01 12:00:00") == 8
        connection.rollback()
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0028")
    with engine.connect() as connection:
        assert _relkind(connection) == "r"
        assert _unique_keys(connection) == [["delivery_id", "number"]]
        assert connection.exec_driver_sql("SELECT count(*) FROM attempts").scalar() == 7
        assert not {n for n in sqlalchemy.inspect(connection).get_table_names()
                    if n.startswith("attempts_")}
        assert connection.exec_driver_sql(
            "SELECT pg_get_serial_sequence('attempts', 'id')").scalar() == "public.attempts_id_seq"
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "head")
    with engine.connect() as connection:
        assert _differences(connection) == []


# ---------------------------------------------------------------- 0030 the audit log's guards
_AUDIT_ROW = ("INSERT INTO audit_log (id, account_id, created_at, actor_kind, action, "
              "target_kind, target_id, changes) VALUES ('{id}', 'a', '2026-11-28 00:00:00', "
              "'service', 'subscription.paused', 'subscription', 's', '{{}}')")


def _empties(engine, statement: str) -> bool:
    """Whether ``statement`` (a DELETE or TRUNCATE of audit_log) went through."""
    with engine.begin() as connection:
        connection.exec_driver_sql(_AUDIT_ROW.format(id=uuid.uuid4()))
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(statement)
    except sqlalchemy.exc.DBAPIError:
        return False
    return True


def test_0030_guards_truncate_or_delete_and_its_downgrade_gives_them_back(old_schema):
    engine, url = old_schema
    emptied = "TRUNCATE audit_log" if engine.dialect.name == "postgresql" else "DELETE FROM audit_log"
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0029")
    assert _empties(engine, emptied)
    with engine.begin() as connection:
        run_alembic(connection, url, "upgrade", "0030")
    assert not _empties(engine, emptied)
    with engine.begin() as connection:
        run_alembic(connection, url, "downgrade", "0029")
    assert _empties(engine, emptied)
    if engine.dialect.name == "postgresql":  # 0024's guard of DELETE stays
        assert not _empties(engine, "DELETE FROM audit_log")
