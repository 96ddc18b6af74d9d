"""The session signing key: from WEBHOOKS_SECRET_KEY, else made once and kept in the data folder."""

from __future__ import annotations

import stat
import threading

import pytest

from webhooks.config import load_settings
from webhooks.errors import ConfigError
from web.dashboard.secret_key import ENV_VAR, FILE_NAME, session_secret_key


def settings_for(folder, env=None):
    return load_settings({"WEBHOOKS_DATA_DIR": str(folder), **(env or {})})


def test_the_environment_wins(tmp_path):
    key = "k" * 40
    assert session_secret_key(settings_for(tmp_path, {ENV_VAR: key})) == key
    assert not (tmp_path / FILE_NAME).exists()


def test_a_short_configured_key_stops_the_process(tmp_path):
    with pytest.raises(ConfigError, match=ENV_VAR):
        settings_for(tmp_path, {ENV_VAR: "short"})


def test_made_once_kept_private_and_reused(tmp_path):
    folder = tmp_path / "data"
    first = session_secret_key(settings_for(folder))
    assert len(first) >= 32
    path = folder / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert session_secret_key(settings_for(folder)) == first  # a restart keeps sessions
    assert session_secret_key(settings_for(tmp_path / "other")) != first
    assert [p.name for p in folder.iterdir()] == [FILE_NAME]  # no temporary file left


def test_workers_starting_together_agree_on_one_key(tmp_path):
    keys, barrier = [], threading.Barrier(8)

    def start():
        barrier.wait()
        keys.append(session_secret_key(settings_for(tmp_path)))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys) == 8


def test_an_unwritable_folder_falls_back_to_a_process_key(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    key = session_secret_key(settings_for(blocker / "data"))
    assert len(key) >= 32
    assert ENV_VAR in caplog.text and key not in caplog.text


def test_the_app_signs_sessions_with_the_kept_key(tmp_path, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv(ENV_VAR, raising=False)
    reset_settings_cache()
    from web import create_app

    first, second = create_app({"TESTING": True}), create_app({"TESTING": True})
    assert first.secret_key == second.secret_key == (tmp_path / FILE_NAME).read_text().strip()
