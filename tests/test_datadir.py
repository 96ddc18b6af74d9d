"""The data folder is its owner's alone: folder 0700, files 0600 (webhooks/config/datadir.py).

Each test runs under the common umask 022, with which every one of these
files used to be created world-readable (the SQLite file holds every signing
secret).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from webhooks.config import reset_settings_cache


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A data folder not made yet, with the embedded database in it."""
    folder = tmp_path / "data"
    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(folder))
    monkeypatch.delenv("WEBHOOKS_DATABASE_URL")
    reset_settings_cache()
    yield folder
    from webhooks.storage.db import dispose_engine

    dispose_engine()


def test_the_sqlite_database_and_its_wal_files_are_private(data_dir):
    from webhooks.storage.db import get_engine
    from webhooks.storage.migrate import upgrade

    upgrade()
    with get_engine().connect() as connection:  # -wal and -shm exist while it is open
        connection.execute(text("INSERT INTO accounts (id, name, api_key_hash, created_at) "
                                "VALUES ('a', 'n', 'h', '2026-01-01 00:00:00')"))
        files = sorted(p.name for p in data_dir.iterdir())
        assert {"webhooks.db", "webhooks.db-wal", "webhooks.db-shm"} <= set(files), files
        assert mode(data_dir) == 0o700
        assert {name: mode(data_dir / name) for name in files} == {name: 0o600 for name in files}


def test_an_older_world_readable_data_folder_is_narrowed(data_dir):
    from webhooks.storage.db import get_engine

    data_dir.mkdir(mode=0o755)
    database = data_dir / "webhooks.db"
    database.touch(mode=0o644)
    (data_dir / "webhooks.db-shm").touch(mode=0o644)
    get_engine()
    assert mode(data_dir) == 0o700
    assert mode(database) == 0o600 and mode(data_dir / "webhooks.db-shm") == 0o600


def test_a_sqlite_file_outside_the_data_folder_leaves_its_existing_folder_alone(tmp_path, monkeypatch):
    from webhooks.storage.db import make_engine

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    make_engine(f"sqlite:///{shared / 'other.db'}").dispose()
    assert mode(shared) == 0o755 and mode(shared / "other.db") == 0o600


def test_the_dashboard_session_key_file_is_private(data_dir):
    from web.dashboard.secret_key import FILE_NAME, session_secret_key
    from webhooks.config import get_settings

    session_secret_key(get_settings())
    assert mode(data_dir) == 0o700 and mode(data_dir / FILE_NAME) == 0o600


def test_beats_schedule_is_private(data_dir):
    from webhooks.broker.celery_app import PrivateScheduler, celery_app

    scheduler = PrivateScheduler(app=celery_app, schedule_filename=str(data_dir / "celerybeat-schedule"))
    scheduler.close()
    files = [p for p in data_dir.iterdir() if p.name.startswith("celerybeat-schedule")]
    assert files and mode(data_dir) == 0o700
    assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert os.umask(0o022) == 0o022, "the scheduler left its umask behind"


def test_celery_beat_uses_the_private_scheduler():
    import celeryconfig

    assert celeryconfig.beat_scheduler == "webhooks.broker.celery_app:PrivateScheduler"


def test_embedded_broker_messages_are_private(tmp_path):
    from kombu import Connection

    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path)}
    with Connection("filesystem://", transport="webhooks.broker.filebroker:Transport",
                    transport_options=options) as connection:
        connection.default_channel._put("q", {"n": 1})
    (message,) = tmp_path.glob("*.q.msg")
    assert mode(message) == 0o600


def test_webhooks_dev_lock_file_is_private(tmp_path):
    from webhooks.cli.devserver import _lock_data_dir

    handle = _lock_data_dir(tmp_path)
    try:
        assert mode(tmp_path / "dev.lock") == 0o600
    finally:
        handle.close()


def test_the_embedded_brokers_folders_are_private(data_dir, monkeypatch):
    from webhooks.broker import celery_app

    monkeypatch.setenv("WEBHOOKS_BROKER_URL", "filesystem://")
    reset_settings_cache()
    celery_app._make_app()
    broker = data_dir / "broker"
    assert [mode(f) for f in (data_dir, broker, broker / "control")] == [0o700] * 3
