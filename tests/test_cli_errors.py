"""Every refusal of the `webhooks` command says why, in process (click's CliRunner) on SQLite.

Each refusal: exit status 2, nothing on stdout, one ``error: …`` line per
problem on stderr with the reason (as the HTTP API gives it), no traceback.
"""

from __future__ import annotations

import importlib.metadata
import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from webhooks.cli import main
from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.samples import sample_data

UNKNOWN_ACCOUNT = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def cli(sqlite_db):
    runner = CliRunner()
    return lambda *args, env=None: runner.invoke(main, list(args), env=env)


@pytest.fixture
def account(cli) -> str:
    created = cli("accounts", "create", "Acme")
    assert created.exit_code == 0, created.output
    return json.loads(created.stdout)["id"]


def refused(result) -> list[str]:
    """The error lines of a refused command (after checking it was refused properly)."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == "" and "Traceback" not in result.stderr, result.output
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), result.stderr
    return [line.removeprefix("error: ") for line in lines]


def bad_email_sent() -> str:
    data = sample_data("email.sent")
    del data["sent_at"]
    data["to_email"] = "not an address"
    data["colour"] = "blue"
    return json.dumps(data)


# ---------------------------------------------------------------- emit


def test_invalid_data_names_each_field_with_its_reason(cli, account):
    [line] = refused(cli("emit", account, "email.sent", "--data", bad_email_sent()))
    assert line == (
        "invalid 'email.sent' event: colour: Unknown field.; "
        "sent_at: Missing data for required field.; to_email: Not a valid email address."
    )


def test_a_nested_field_is_named_by_its_path(cli, account):
    data = sample_data("domain.failed")
    data["records"][0].pop("type")
    [line] = refused(cli("emit", account, "domain.failed", "--data", json.dumps(data)))
    assert "records.0.type: Missing data for required field." in line


def test_an_unknown_event_type_lists_the_valid_ones(cli, account):
    [line] = refused(cli("emit", account, "email.exploded", "--data", "{}"))
    assert line == ("unknown event type 'email.exploded'; the valid types are: "
                    + ", ".join(EVENT_TYPE_NAMES))


def test_an_unknown_account_is_reported_even_when_the_data_is_invalid_too(cli):
    lines = refused(cli("emit", UNKNOWN_ACCOUNT, "email.sent", "--data", bad_email_sent()))
    assert lines[0] == (f"account {UNKNOWN_ACCOUNT} does not exist: "
                        "give the id that `webhooks accounts create` printed")
    assert lines[1].startswith("invalid 'email.sent' event: colour: Unknown field.")
    assert len(lines) == 2


def test_an_unknown_account_with_valid_data(cli):
    data = json.dumps(sample_data("email.sent"))
    assert refused(cli("emit", UNKNOWN_ACCOUNT, "email.sent", "--data", data)) == [
        f"account {UNKNOWN_ACCOUNT} does not exist: "
        "give the id that `webhooks accounts create` printed"
    ]


@pytest.mark.parametrize("account_id, reason", [
    ("acme", "account id 'acme' is not a UUID"),
    ("", "account id '' is not a UUID"),
    ("ABCDEF00-0000-4000-8000-000000000000",
     "is not written as ids are (abcdef00-0000-4000-8000-000000000000)"),
])
def test_an_account_id_that_is_no_id_says_so(cli, account_id, reason):
    data = json.dumps(sample_data("email.sent"))
    [line] = refused(cli("emit", account_id, "email.sent", "--data", data))
    assert reason in line and "`webhooks accounts create`" in line


def test_an_api_key_given_as_the_account_says_it_looks_like_an_api_key_and_hides_it(cli):
    api_key = "whk_" + "k" * 43
    data = json.dumps(sample_data("email.sent"))
    [line] = refused(cli("emit", api_key, "email.sent", "--data", data))
    assert "looks like an API key, not an account id" in line
    assert '"id", not its "api_key"' in line and api_key not in line


def test_data_that_is_not_json_gives_the_parser_reason_and_the_account_too(cli):
    lines = refused(cli("emit", UNKNOWN_ACCOUNT, "email.sent", "--data", "{not json"))
    assert lines[1] == ("--data is not valid JSON: Expecting property name enclosed in "
                        "double quotes: line 1 column 2 (char 1)")
    assert "does not exist" in lines[0]


def test_data_that_is_not_an_object(cli, account):
    assert refused(cli("emit", account, "email.sent", "--data", "[1, 2]")) == [
        "invalid 'email.sent' event: data: Must be a JSON object."
    ]


def test_an_idempotency_key_too_long(cli, account):
    data = json.dumps(sample_data("email.sent"))
    [line] = refused(cli("emit", account, "email.sent", "--data", data,
                         "--idempotency-key", "k" * 256))
    assert line.startswith("idempotency_key must be a string of 1 to 255 characters")


def test_valid_input_still_emits(cli, account, published):
    result = cli("emit", account, "email.sent", "--data", json.dumps(sample_data("email.sent")))
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["event_id"]) == 36


# ---------------------------------------------------------------- the other commands


def test_accounts_create_with_a_blank_name(cli):
    assert refused(cli("accounts", "create", "   ")) == [
        "account name must be 1 to 200 characters (without the spaces around it), not 0"
    ]


@pytest.mark.parametrize("secret, reason", [
    ("", "--secret is empty (an unset variable?)"),
    ("whk_0123456789abcdef", "--secret is an API key (whk_…), not a signing secret"),
])
def test_listen_refuses_a_secret_that_cannot_verify_anything(cli, secret, reason):
    [line] = refused(cli("listen", "--secret", secret, "--port", "0"))
    assert line.startswith(reason) and "whsec_" in line


def test_dev_on_a_port_in_use_says_so_and_starts_nothing(cli, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("dev", "--port", str(port), env={"WEBHOOKS_DATA_DIR": str(tmp_path / "d")})
    [line] = refused(result)
    assert line.startswith(f"cannot listen on 127.0.0.1:{port}: Address already in use")
    assert "give --port or PORT" in line
    assert not (tmp_path / "d" / "webhooks.db").exists()  # nothing migrated, nothing started


def test_version_comes_from_the_package_metadata(cli):
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"webhooks, version {importlib.metadata.version('webhooks')}\n"


# ---------------------------------------------------------------- db upgrade and purge


@pytest.fixture
def fresh_database(tmp_path, monkeypatch):
    """A SQLite file with no schema; settings point at it."""
    from webhooks.config import reset_settings_cache
    from webhooks.storage.db import dispose_engine

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", url)
    reset_settings_cache()
    yield url
    dispose_engine()


def _head(url: str) -> str:
    from alembic.script import ScriptDirectory

    from webhooks.storage.migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def test_db_upgrade_says_what_it_did(fresh_database):
    runner, head = CliRunner(), _head(fresh_database)
    first = runner.invoke(main, ["db", "upgrade"])
    assert first.exit_code == 0, first.output
    assert first.stdout == f"created the schema at revision {head} ({fresh_database})\n"
    again = runner.invoke(main, ["db", "upgrade"])
    assert again.stdout == (f"the schema is already at revision {head}, the newest this "
                            f"version knows ({fresh_database})\n")


def test_db_upgrade_from_an_older_revision_names_both(fresh_database):
    from webhooks.storage.migrate import upgrade

    upgrade(fresh_database, "0002")
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.stdout.startswith(
        f"upgraded the schema from revision 0002 to {_head(fresh_database)} (sqlite:///")


def test_db_purge_on_a_database_without_schema_says_to_upgrade(fresh_database):
    Path(fresh_database.removeprefix("sqlite:///")).touch()  # an empty file: a database, no schema
    [line] = refused(CliRunner().invoke(main, ["db", "purge"]))
    assert line == (f"the database {fresh_database} has no schema yet: run `webhooks db upgrade` "
                    "first")


# ------------------------------------------------------- database URLs (issue 36, items 12, 13)


def _with_database_url(monkeypatch, url: str) -> None:
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATABASE_URL", url)
    reset_settings_cache()


@pytest.mark.parametrize("args", [("db", "upgrade"), ("accounts", "create", "Acme"),
                                  ("db", "purge")], ids=" ".join)
@pytest.mark.parametrize("url", ["mysql://app:s3cret@db/webhooks", "junk"])
def test_an_unsupported_database_url_is_one_line_naming_the_supported_ones(monkeypatch, url, args):
    _with_database_url(monkeypatch, url)
    [line] = refused(CliRunner().invoke(main, list(args)))
    assert line.startswith("WEBHOOKS_DATABASE_URL must be a PostgreSQL URL (postgresql://, "
                           "postgres:// or postgresql+psycopg2://"), line
    assert "sqlite:///" in line and "s3cret" not in line


@pytest.mark.parametrize("args", [("db", "upgrade"), ("accounts", "create", "Acme")], ids=" ".join)
def test_a_sqlite_file_in_a_folder_that_does_not_exist_is_refused_and_nothing_made(
        tmp_path, monkeypatch, args):
    """It used to make the folders (as root, under /nonexistent) and an empty database."""
    missing = tmp_path / "nonexistent" / "dir"
    _with_database_url(monkeypatch, f"sqlite:///{missing / 'x.db'}")
    [line] = refused(CliRunner().invoke(main, list(args)))
    assert line.startswith(f"WEBHOOKS_DATABASE_URL names the SQLite file {missing / 'x.db'}, "
                           f"whose folder {missing} does not exist"), line
    assert not (tmp_path / "nonexistent").exists()


def test_a_sqlite_file_that_does_not_exist_yet_is_not_made_by_a_command_that_needs_a_schema(
        tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _with_database_url(monkeypatch, url)
    [line] = refused(CliRunner().invoke(main, ["accounts", "create", "Acme"]))
    assert line == (f"the database {url} does not exist yet: run `webhooks db upgrade` first to "
                    "create it")
    assert list(tmp_path.iterdir()) == []
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0  # upgrade makes it
    assert (tmp_path / "x.db").exists()
