"""Small helpers for tests that run callers on threads (the group-commit tests)."""

from __future__ import annotations

import threading

__all__ = ["started_thread", "wait_for"]


def started_thread(target) -> threading.Thread:
    """A daemon thread running ``target``, started."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def wait_for(condition, what: str) -> None:
    """Poll ``condition`` every 5 ms; fail the test after 10 s, naming ``what``."""
    for _ in range(2000):
        if condition():
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"never: {what}")
