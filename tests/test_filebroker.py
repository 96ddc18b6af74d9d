"""The embedded broker's message files appear whole (webhooks/broker/filebroker.py).

kombu's filesystem transport opens a message under its final name and then
writes it, so a worker listing the queue folder in between can take a file
that is still empty (it stopped a worker in CI). Ours writes each message
under a name the reader skips and renames it into the queue once complete.
"""

from __future__ import annotations

import builtins
import json
import os

import pytest

from kombu import Connection

from tests.support.celeryconf import transport_for
from webhooks.broker.filebroker import PARTIAL_SUFFIX

TRANSPORT = "webhooks.broker.filebroker:Transport"


def channel_on(folder, transport=TRANSPORT):
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    return Connection("filesystem://", transport=transport, transport_options=options)


def test_a_message_gets_its_queue_name_only_once_it_is_complete(tmp_path, monkeypatch):
    real_open, real_replace = builtins.open, os.replace
    opened_for_writing, renamed = [], []

    def spy_open(path, mode="r", *args, **kwargs):
        if "w" in mode:
            opened_for_writing.append(os.path.basename(path))
        return real_open(path, mode, *args, **kwargs)

    def spy_replace(source, target):
        with real_open(source, "rb") as file:
            json.loads(file.read())  # complete before it takes the name a reader looks for
        assert not os.path.exists(target)
        renamed.append(os.path.basename(target))
        real_replace(source, target)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    with channel_on(tmp_path) as connection:
        for n in range(3):
            connection.default_channel._put("q", {"n": n})
    monkeypatch.undo()

    # kombu's own _put opens "<…>.q.msg" itself for writing: this is what fails for it.
    assert len(opened_for_writing) == 3
    assert all(name.endswith(".q.msg" + PARTIAL_SUFFIX) for name in opened_for_writing)
    assert len(renamed) == 3 and all(name.endswith(".q.msg") for name in renamed)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(PARTIAL_SUFFIX)]


def test_messages_come_back_intact(tmp_path):
    with channel_on(tmp_path) as connection:
        channel = connection.default_channel
        for n in range(5):
            channel._put("q", {"n": n, "body": "é" * 1000})
        got = [channel._get("q") for _ in range(5)]
    # (Messages of one millisecond come back in random order, as with kombu's own.)
    assert sorted(m["n"] for m in got) == list(range(5))
    assert all(m["body"] == "é" * 1000 for m in got)


def test_a_partial_file_is_never_read(tmp_path):
    (tmp_path / f"0_x.q.msg{PARTIAL_SUFFIX}").write_text("{\"half\": ")
    with channel_on(tmp_path) as connection:
        channel = connection.default_channel
        channel._put("q", {"n": 1})
        assert channel._get("q") == {"n": 1}


def test_a_file_that_is_not_a_message_is_skipped_not_fatal(tmp_path, caplog):
    (tmp_path / "0_garbage.q.msg").write_bytes(b"")  # names that sort before any real one: read first
    (tmp_path / "00_garbage.q.msg").write_bytes(b"\xff\xfe not json")
    with channel_on(tmp_path) as connection:
        channel = connection.default_channel
        channel._put("q", {"n": 1})
        assert channel._get("q") == {"n": 1}
    assert caplog.text.count("skipped a message file") == 2
    assert not [n for n in os.listdir(tmp_path) if "garbage" in n]


@pytest.mark.process
def test_celery_uses_it_for_the_embedded_broker_only(tmp_path):
    """Read in a fresh interpreter, as each process of webhooks dev reads celeryconfig."""
    assert transport_for("filesystem://", tmp_path) == TRANSPORT
    assert transport_for("redis://127.0.0.1:6379/0", tmp_path) != TRANSPORT  # its own
