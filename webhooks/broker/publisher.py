"""Publish deliver messages from a background thread of the emitting process.

emit_event() commits its rows and hands the messages here; it never waits
for the broker, so a slow or unreachable broker costs the caller nothing.
The thread publishes whatever has accumulated in one pipelined batch, which
is also faster than one publish per call. What the broker refuses is parked
for the sweep; what a crash loses before it is published is still pending in
the database, and the sweep re-sends it after WEBHOOKS_RECOVER_AFTER seconds.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue as queue_module
import threading
import time
from typing import Sequence

from webhooks.broker import outbox

__all__ = ["submit", "flush", "BackgroundPublisher"]

log = logging.getLogger("webhooks.publisher")  # its name from before the move: log searches use it

EXIT_FLUSH_S = 5.0  # how long a finishing process waits for its messages to go out
MAX_BATCH = 5000


def dispatch(batch: Sequence) -> int:
    """Publish a batch now, parking what the broker refuses (outbox.publish_now)."""
    return outbox.publish_now(batch)


class BackgroundPublisher:
    """One daemon thread per process that drains submitted Dispatch items to the broker."""

    def __init__(self):
        self._queue: queue_module.SimpleQueue = queue_module.SimpleQueue()
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._outstanding = 0

    def submit(self, dispatches: Sequence) -> None:
        """Queue messages for publishing; returns at once."""
        if not dispatches:
            return
        self._ensure_thread()
        with self._lock:
            self._outstanding += len(dispatches)
        self._queue.put(list(dispatches))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far was published or parked; False on time-out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._outstanding:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def _ensure_thread(self) -> None:
        # Threads do not survive fork: each process starts its own publisher.
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._queue = queue_module.SimpleQueue()
                self._outstanding = 0
                threading.Thread(target=self._run, name="webhooks-publisher", daemon=True).start()

    def _run(self) -> None:
        while True:
            batch = list(self._queue.get())
            while len(batch) < MAX_BATCH:
                try:
                    batch.extend(self._queue.get_nowait())
                except queue_module.Empty:
                    break
            try:
                dispatch(batch)
            except Exception:  # noqa: BLE001 - the rows are pending; the sweep re-sends them
                log.exception("publishing %d deliveries failed; the sweep will send them", len(batch))
            with self._idle:
                self._outstanding -= len(batch)
                if not self._outstanding:
                    self._idle.notify_all()


_publisher = BackgroundPublisher()
submit = _publisher.submit
flush = _publisher.flush


@atexit.register
def _flush_at_exit() -> None:
    if _publisher._pid == os.getpid() and not _publisher.flush(EXIT_FLUSH_S):
        log.warning("exited with deliveries not yet published; the sweep will send them")
