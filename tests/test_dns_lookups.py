"""DNS look-ups of the sender (connections.py): one look-up per name in flight, so a name
that hangs holds one pool thread, however many attempts ask for it, and other names still
resolve (issue 22: 32 threads shared by 128 worker threads, each hung look-up keeping one)."""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time

import pytest

from webhooks.sender import connections
from webhooks.sender.deadline import AttemptDeadline

ANSWER = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))]


@pytest.fixture
def small_pool(monkeypatch):
    """A fresh look-up pool of two threads for this test."""
    monkeypatch.setattr(connections, "_thread_count", lambda: 2)
    pool = connections._LookupPool()
    monkeypatch.setattr(connections, "_lookups", pool)
    return pool


@pytest.fixture
def hanging_resolver():
    """A resolver that hangs on ``hangs.test`` until the test ends; it counts its calls."""
    released, calls = threading.Event(), []

    def resolve(host: str, port: int) -> list:
        calls.append(host)
        if host == "hangs.test":
            released.wait(30)
        return ANSWER

    resolve.calls = calls
    yield resolve
    released.set()


def _resolve_within(resolver, host: str, seconds: float):
    attempt = AttemptDeadline(time.monotonic() + seconds, seconds)
    try:
        return connections._resolve(resolver, attempt, host, 80)
    except concurrent.futures.TimeoutError:
        return "timed out"


def test_attempts_that_look_up_a_hanging_name_share_one_thread(small_pool, hanging_resolver):
    with concurrent.futures.ThreadPoolExecutor(10) as attempts:
        results = list(attempts.map(
            lambda _: _resolve_within(hanging_resolver, "hangs.test", 0.3), range(10)))
    assert results == ["timed out"] * 10
    assert hanging_resolver.calls == ["hangs.test"]  # one look-up for ten attempts
    # The pool's other thread is free: another tenant's name resolves at once.
    assert _resolve_within(hanging_resolver, "fine.test", 2.0) == ANSWER


def test_a_finished_look_up_is_not_reused(small_pool, hanging_resolver):
    """Sharing is for look-ups in flight only: the next attempt asks the resolver again."""
    assert _resolve_within(hanging_resolver, "fine.test", 2.0) == ANSWER
    assert _resolve_within(hanging_resolver, "fine.test", 2.0) == ANSWER
    assert hanging_resolver.calls == ["fine.test", "fine.test"]
