"""emit_event and emit_events on a database that `webhooks db upgrade` has not migrated raise
SchemaNotReady naming the database, as the CLI says it, on SQLite and on PostgreSQL (issue 36,
item 14): they raised the raw SQL error (``no such table: accounts``, a ProgrammingError)."""

from __future__ import annotations

import pytest
import sqlalchemy
from sqlalchemy.orm import Session

from tests.support import services
from webhooks import emit_event, emit_events
from webhooks.config import reset_settings_cache
from webhooks.errors import SchemaNotReady
from webhooks.events.samples import sample_data
from webhooks.storage.db import dispose_engine

ACCOUNT = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def unmigrated_postgresql():
    """A PostgreSQL database of its own with no schema; dropped afterwards."""
    services.check_postgres()
    name = f"{services.PG_TEST_DB}_unmigrated"
    admin = sqlalchemy.create_engine(services.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield services.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    dispose_engine()
    with admin.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.database)])
def unmigrated(request, tmp_path, monkeypatch, published):
    """The URL of an existing database without the schema; settings point at it."""
    if request.param == "sqlite":
        (tmp_path / "empty.db").touch()
        url = f"sqlite:///{tmp_path / 'empty.db'}"
    else:
        url = request.getfixturevalue("unmigrated_postgresql")
    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", url)
    reset_settings_cache()
    yield url
    dispose_engine()


def _says_no_schema(error: pytest.ExceptionInfo, url: str) -> None:
    assert str(error.value) == (f"the database {url} has no schema yet: run `webhooks db "
                                "upgrade` first"), str(error.value)


def test_emit_event_says_the_database_needs_its_schema(unmigrated):
    with pytest.raises(SchemaNotReady) as error:
        emit_event(ACCOUNT, "email.sent", sample_data("email.sent"))
    _says_no_schema(error, unmigrated)


def test_emit_events_says_it_too(unmigrated):
    with pytest.raises(SchemaNotReady) as error:
        emit_events(ACCOUNT, [{"type": "email.sent", "data": sample_data("email.sent")}])
    _says_no_schema(error, unmigrated)


def test_in_the_callers_session_it_names_the_sessions_database(unmigrated, monkeypatch):
    """With ``session=``, the database checked is the session's, whatever the settings say."""
    engine = sqlalchemy.create_engine(unmigrated)
    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", "sqlite:////nowhere/else.db")
    reset_settings_cache()
    try:
        with Session(engine) as session, pytest.raises(SchemaNotReady) as error:
            emit_event(ACCOUNT, "email.sent", sample_data("email.sent"), session=session)
    finally:
        engine.dispose()
    _says_no_schema(error, unmigrated)


def test_an_error_the_schema_does_not_explain_is_raised_as_it_was(any_db, monkeypatch, published):
    """On a migrated database, a failing statement is not turned into SchemaNotReady."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    def broken(*_args, **_kwargs):
        raise ProgrammingError("SELECT 1", {}, Exception("a fault of its own"))

    monkeypatch.setattr("webhooks.emit._targets", broken)
    monkeypatch.setattr("webhooks.emit._store_in_one_statement", broken)
    with pytest.raises((ProgrammingError, OperationalError), match="a fault of its own"):
        emit_event(ACCOUNT, "email.sent", sample_data("email.sent"))
