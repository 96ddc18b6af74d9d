"""The `webhooks` command line on the embedded SQLite default, as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from webhooks.events.samples import sample_data

# Every test runs the `webhooks` command as a process of its own (a second each).
pytestmark = pytest.mark.process


def run(*args, cwd, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")}
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "webhooks.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )


@pytest.fixture(scope="module")
def upgraded_data(tmp_path_factory):
    """A data folder that `webhooks db upgrade` made, once per module (2 s a run)."""
    template = tmp_path_factory.mktemp("upgraded")
    assert run("db", "upgrade", cwd=template).returncode == 0
    return template / "webhooks-data"


@pytest.fixture
def folder(tmp_path, upgraded_data):
    """A folder as `webhooks db upgrade` leaves it: a copy of the module's upgraded one."""
    shutil.copytree(upgraded_data, tmp_path / "webhooks-data")
    return tmp_path


def test_db_upgrade_is_idempotent_and_creates_the_embedded_database(folder):
    again = run("db", "upgrade", cwd=folder)
    assert again.returncode == 0, again.stderr
    assert (folder / "webhooks-data" / "webhooks.db").exists()


def test_accounts_create_prints_id_and_key_once(folder):
    result = run("accounts", "create", "Acme", cwd=folder)
    assert result.returncode == 0, result.stderr
    created = json.loads(result.stdout)
    assert set(created) == {"id", "api_key"} and created["api_key"].startswith("whk_")
    database = (folder / "webhooks-data" / "webhooks.db").read_bytes()
    assert created["api_key"].encode() not in database  # only its hash is stored


def test_emit_prints_the_event_id(folder):
    account = json.loads(run("accounts", "create", "Acme", cwd=folder).stdout)
    data = json.dumps(sample_data("email.sent"))
    result = run("emit", account["id"], "email.sent", "--data", data, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["event_id"]) == 36


@pytest.mark.parametrize(
    "event_type, data, message",
    [
        ("email.sent", "{not json", "--data is not valid JSON"),
        ("email.exploded", "{}", "type"),
        ("email.sent", '{"message_id": "x"}', "message_id"),
    ],
)
def test_emit_rejects_bad_input_with_a_clear_message(folder, event_type, data, message):
    account = json.loads(run("accounts", "create", "Acme", cwd=folder).stdout)
    result = run("emit", account["id"], event_type, "--data", data, cwd=folder)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_emit_with_an_ordering_key_stores_it_and_refuses_a_bad_one(folder):
    import sqlite3

    account = json.loads(run("accounts", "create", "Acme", cwd=folder).stdout)
    data = json.dumps(sample_data("email.sent"))

    def emitted_keys():
        good = run("emit", account["id"], "email.sent", "--data", data,
                   "--ordering-key", "order-9", cwd=folder)
        assert good.returncode == 0, good.stderr
        with sqlite3.connect(folder / "webhooks-data" / "webhooks.db") as database:
            return database.execute(
                "SELECT ordering_key, last_sequence FROM ordering_keys").fetchall()

    assert emitted_keys() == []  # no subscription: no delivery to order, no number taken
    # A subscription, made in the folder's own database (the CLI has no command for it).
    subprocess.run(
        [sys.executable, "-c", "import sys; from tests.factories import make_subscription; "
         "make_subscription(sys.argv[1], 'https://example.com/hook')", account["id"]],
        cwd=folder, check=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")},
             "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})
    assert emitted_keys() == [("order-9", 1)]  # the event took the key's first number
    bad = run("emit", account["id"], "email.sent", "--data", data, "--ordering-key", "x" * 201,
              cwd=folder)
    assert bad.returncode == 2 and "--ordering-key" in bad.stderr and "200" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_emit_to_an_unknown_account(folder):
    result = run("emit", "00000000-0000-4000-8000-000000000000", "email.sent",
                 "--data", json.dumps(sample_data("email.sent")), cwd=folder)
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_a_malformed_setting_stops_the_command_naming_it(folder):
    result = run("db", "upgrade", cwd=folder, extra_env={"WEBHOOKS_PAUSE_AFTER": "many"})
    assert result.returncode == 2 and "WEBHOOKS_PAUSE_AFTER" in result.stderr


# ---------------------------------------------------------------- a database not (yet) at this version

DB_COMMANDS = [
    ("accounts", "create", "Acme"),
    ("emit", "00000000-0000-4000-8000-000000000000", "email.sent", "--data", "{}"),
]


def _database(tmp_path):
    return tmp_path / "webhooks-data" / "webhooks.db"


@pytest.mark.parametrize("args", DB_COMMANDS, ids=lambda a: a[0])
def test_every_command_on_a_fresh_data_folder_says_to_upgrade(tmp_path, args):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert f"the database sqlite:///{_database(tmp_path)} does not exist yet" in result.stderr
    assert "webhooks db upgrade" in result.stderr


@pytest.mark.parametrize("args", DB_COMMANDS, ids=lambda a: a[0])
def test_a_command_run_from_another_folder_names_the_database_and_makes_none(folder, tmp_path,
                                                                              args):
    """The data folder follows the current directory: from elsewhere, `accounts create` made
    a second, empty database and said only "run `webhooks db upgrade` first", which split the
    data. Now it names the database it looked for, says why it is not the one with the data,
    and leaves that folder as it was."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run(*args, cwd=elsewhere)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: the database sqlite:///{_database(elsewhere)} does not exist "
                           "yet: run `webhooks db upgrade` first to create it"), line
    assert "defaults to ./webhooks-data in the folder webhooks is run from" in line
    assert "WEBHOOKS_DATA_DIR" in line
    assert list(elsewhere.iterdir()) == []
    with_data_dir = run(*args, cwd=elsewhere,
                        extra_env={"WEBHOOKS_DATA_DIR": str(folder / "webhooks-data")})
    assert "does not exist yet" not in with_data_dir.stderr, with_data_dir.stderr
    assert "no schema" not in with_data_dir.stderr, with_data_dir.stderr


@pytest.mark.parametrize("args", DB_COMMANDS, ids=lambda a: a[0])
def test_every_command_on_an_older_schema_says_to_upgrade_and_works_after(tmp_path, args):
    from webhooks.storage.db import dispose_engine
    from webhooks.storage.migrate import upgrade

    url = f"sqlite:///{_database(tmp_path)}"
    _database(tmp_path).parent.mkdir()  # that folder's data folder (this process's is another)
    upgrade(url, "0002")
    dispose_engine()
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "revision 0002" in result.stderr and "webhooks db upgrade" in result.stderr
    assert run("db", "upgrade", cwd=tmp_path).returncode == 0
    assert "schema" not in run(*args, cwd=tmp_path).stderr


def test_a_schema_newer_than_this_version_says_so(folder):
    import sqlite3

    with sqlite3.connect(_database(folder)) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    result = run(*DB_COMMANDS[0], cwd=folder)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "revision 9999, newer than this version" in result.stderr


@pytest.mark.parametrize("args", [("db", "upgrade"), *DB_COMMANDS], ids=lambda a: a[0])
def test_an_unreachable_database_is_one_line_not_a_traceback(tmp_path, args):
    down = {"WEBHOOKS_DATABASE_URL": "postgresql+psycopg2://app:pa55word@127.0.0.1:1/nothing"}
    result = run(*args, cwd=tmp_path, extra_env=down)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "the database could not be used (OperationalError)" in result.stderr
    assert "pa55word" not in result.stderr


def test_options_lists_every_declared_option_without_a_database(tmp_path):
    from webhooks.tenants.options import OPTIONS

    result = run("options", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    terms = [line for line in result.stdout.splitlines() if line.startswith("`")]
    assert terms == [f"`{option.name}`" for option in OPTIONS]
    assert not (tmp_path / "webhooks-data").exists(), "a listing touches no database"


def test_publishers_create_list_revoke_and_accounts_list(folder):
    made = run("publishers", "create", "product", cwd=folder)
    assert made.returncode == 0, made.stderr
    publisher = json.loads(made.stdout)
    assert set(publisher) == {"id", "name", "key"} and publisher["key"].startswith("whpub_")
    listed = json.loads(run("publishers", "list", cwd=folder).stdout)["data"]
    assert [(p["id"], p["name"], p["last_used_at"]) for p in listed] == [
        (publisher["id"], "product", None)]
    assert publisher["key"] not in run("publishers", "list", cwd=folder).stdout
    revoked = run("publishers", "revoke", publisher["id"], cwd=folder)
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(run("publishers", "list", cwd=folder).stdout) == {"data": []}
    again = run("publishers", "revoke", publisher["id"], cwd=folder)
    assert again.returncode == 2 and "error:" in again.stderr
    account = json.loads(run("accounts", "create", "Acme", cwd=folder).stdout)
    accounts = json.loads(run("accounts", "list", cwd=folder).stdout)["data"]
    assert [(a["id"], a["name"]) for a in accounts] == [(account["id"], "Acme")]
