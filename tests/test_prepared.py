"""Server-side prepared statements (webhooks/storage/prepared.py) on the real PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text

from webhooks.storage.prepared import PreparedStatement

pytestmark = pytest.mark.integration

ECHO = PreparedStatement(
    "test_echo_v1",
    "SELECT :word AS word, :n + 1 AS next, :at AS at",
    [("n", "integer"), ("word", "text"), ("at", "timestamp")],
    timestamp_columns=["at"],
)
MOMENT = dt.datetime(2026, 11, 21, 12, 30, tzinfo=dt.timezone.utc)


def prepared_names(connection) -> set[str]:
    return set(connection.execute(text("SELECT name FROM pg_prepared_statements")).scalars())


def test_binds_by_name_and_returns_aware_timestamps(db):
    from webhooks.storage.db import get_engine

    with get_engine().begin() as connection:
        (row,) = ECHO.execute(connection, {"word": "hi", "n": 41, "at": MOMENT})
    assert row == ("hi", 42, MOMENT)
    assert row[2].tzinfo is not None


def test_prepares_once_per_connection_and_survives_a_rollback(db):
    from webhooks.storage.db import get_engine

    engine = get_engine()
    with engine.connect() as connection:
        with connection.begin() as transaction:
            ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT})
            transaction.rollback()
        # PREPARE is not undone by ROLLBACK: the second run must not prepare again
        # (a second PREPARE of the same name would fail).
        with connection.begin():
            assert ECHO.execute(connection, {"word": "b", "n": 2, "at": MOMENT})[0][:2] == ("b", 3)
            assert "test_echo_v1" in prepared_names(connection)


def test_a_new_connection_prepares_again(db):
    from webhooks.storage.db import get_engine

    engine = get_engine()
    with engine.begin() as connection:
        ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT})
    engine.dispose()  # every pooled connection closed: the next one is new
    with engine.begin() as connection:
        assert "test_echo_v1" not in prepared_names(connection)
        assert ECHO.execute(connection, {"word": "c", "n": 5, "at": MOMENT})[0][:2] == ("c", 6)


def test_naive_timestamps_are_refused(db):
    from webhooks.storage.db import get_engine

    with get_engine().begin() as connection, pytest.raises(ValueError, match="naive"):
        ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT.replace(tzinfo=None)})


@pytest.mark.parametrize("declared", [
    [("a", "integer")],                       # b used but not declared
    [("a", "integer"), ("b", "integer"), ("c", "integer")],  # c declared, never used
])
def test_declared_parameters_must_match_the_statement(declared):
    with pytest.raises(ValueError, match="declared"):
        PreparedStatement("bad", "SELECT :a + :b", declared)


def test_casts_are_not_taken_for_parameters():
    statement = PreparedStatement("casts", "SELECT :a::text, 'x'::varchar", [("a", "integer")])
    assert statement._text == "SELECT $1::text, 'x'::varchar"


def test_a_killed_connection_is_replaced_and_prepares_again(db):
    """After pg_terminate_backend the pool invalidates the connection, and with it what
    was prepared on it: the replacement must prepare again, not EXECUTE blindly."""
    from sqlalchemy.exc import OperationalError

    from tests.support.services import PG_URL, kill_idle_pooled_connection
    from webhooks.storage.db import make_engine

    engine = make_engine(PG_URL, pre_ping=False)
    try:
        with engine.begin() as connection:
            ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT})
        kill_idle_pooled_connection(engine)
        with pytest.raises(OperationalError):
            with engine.begin() as connection:
                ECHO.execute(connection, {"word": "b", "n": 2, "at": MOMENT})
        with engine.begin() as connection:
            assert ECHO.execute(connection, {"word": "c", "n": 3, "at": MOMENT})[0][:2] == ("c", 4)
    finally:
        engine.dispose()


def test_on_an_autocommit_connection_a_killed_one_is_invalidated_as_sqlalchemy_would(db):
    """The attempt engine's statements run on psycopg2's cursor (prepared._on_cursor): a
    lost connection must still come out as SQLAlchemy's OperationalError with
    ``connection_invalidated``, which the hot path's one retry relies on, and the
    replacement must prepare again."""
    from sqlalchemy.exc import OperationalError

    from tests.support.services import PG_URL, kill_idle_pooled_connection
    from webhooks.storage.db import make_engine

    engine = make_engine(PG_URL, pre_ping=False, attempts=True)
    try:
        with engine.connect() as connection:
            ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT})
        kill_idle_pooled_connection(engine)
        with pytest.raises(OperationalError) as raised:
            with engine.connect() as connection:
                ECHO.execute(connection, {"word": "b", "n": 2, "at": MOMENT})
        assert raised.value.connection_invalidated
        with engine.connect() as connection:
            assert ECHO.execute(connection, {"word": "c", "n": 3, "at": MOMENT}) == [
                ("c", 4, MOMENT)]
    finally:
        engine.dispose()


def test_after_every_pooled_connection_was_killed_one_retry_gets_a_live_one(db):
    """A restarted server kills every connection a pool keeps. A lost connection on the
    cursor path recycles all of them at their next checkout (as SQLAlchemy's own handler
    does), so the callers' one retry (emit, claim, record) gets a new connection, not the
    pool's next dead one."""
    import sqlalchemy
    from sqlalchemy.exc import OperationalError

    from tests.support.services import PG_ADMIN_URL, PG_TEST_DB, PG_URL
    from webhooks.storage.db import make_engine

    engine = make_engine(PG_URL, pre_ping=False, attempts=True)
    admin = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        held = [engine.connect() for _ in range(3)]  # three connections in the pool
        pids = [c.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() for c in held]
        for connection in held:
            connection.close()
        with admin.connect() as connection:
            connection.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{PG_TEST_DB}' AND pid IN ({', '.join(map(str, pids))})")
        with pytest.raises(OperationalError) as raised:
            with engine.connect() as connection:
                ECHO.execute(connection, {"word": "a", "n": 1, "at": MOMENT})
        assert raised.value.connection_invalidated
        with engine.connect() as connection:  # the retry: a live connection
            assert ECHO.execute(connection, {"word": "b", "n": 2, "at": MOMENT})[0][:2] == ("b", 3)
    finally:
        engine.dispose()
        admin.dispose()


def test_on_an_autocommit_connection_errors_are_sqlalchemys_and_hide_the_values(db):
    from sqlalchemy.exc import DataError

    from tests.support.services import PG_URL
    from webhooks.storage.db import make_engine

    divide = PreparedStatement("test_divide_v1", "SELECT 1 / :n AS q", [("n", "integer")])
    engine = make_engine(PG_URL, pre_ping=False, attempts=True)
    try:
        with engine.connect() as connection:
            with pytest.raises(DataError) as raised:
                divide.execute(connection, {"n": 0})
            assert not raised.value.connection_invalidated
            assert "hidden due to hide_parameters" in str(raised.value)
            assert divide.execute(connection, {"n": 1}) == [(1,)]  # the connection still works
    finally:
        engine.dispose()
