"""Publish deliver messages from one thread of the emitting process, in shared batches.

emit_event() commits its rows, hands the messages here and waits until they
were accepted by the broker or parked for the sweep (CONTRACT 9.1): a script
that emits and exits at once must not leave its publish to the interpreter's
shutdown, when kombu's lazy imports fail and every message would be parked.
A broker that is down costs the caller at most about WEBHOOKS_PUBLISH_TIMEOUT
seconds once (queue.py). The thread publishes whatever the process's callers
submitted meanwhile in one pipelined batch, faster than one publish per call.
What a crash loses before it is published is still pending in the database,
and the sweep re-sends it after WEBHOOKS_RECOVER_AFTER seconds.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue as queue_module
import threading
import time
from typing import Sequence

from . import outbox

__all__ = ["submit", "publish", "flush", "BackgroundPublisher"]

log = logging.getLogger(__name__)

EXIT_FLUSH_S = 5.0  # how long a finishing process waits for its messages to go out
MAX_BATCH = 5000
# Seconds a caller of publish() waits at most: the broker's own time-outs end a publish
# long before this; past it the rows stay pending and the sweep sends them.
PUBLISH_WAIT_S = 30.0


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

    def submit(self, dispatches: Sequence) -> threading.Event:
        """Queue messages for publishing; returns at once, with an event that is set once
        they were published or parked."""
        done = threading.Event()
        if not dispatches:
            done.set()
            return done
        self._ensure_thread()
        with self._lock:
            self._outstanding += len(dispatches)
        self._queue.put((list(dispatches), done))
        return done

    def publish(self, dispatches: Sequence, timeout: float = PUBLISH_WAIT_S) -> bool:
        """Publish with whatever other threads submitted meanwhile; return once these were
        published or parked (True), or after ``timeout`` seconds (False: the sweep sends them)."""
        published = self.submit(dispatches).wait(timeout)
        if not published:
            log.warning("%d deliveries not published within %g s; the sweep will send them",
                        len(dispatches), timeout)
        return published

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
            items, done = self._queue.get()
            batch, waiting = list(items), [done]
            while len(batch) < MAX_BATCH:
                try:
                    items, done = self._queue.get_nowait()
                except queue_module.Empty:
                    break
                batch.extend(items)
                waiting.append(done)
            try:
                dispatch(batch)
            except Exception:  # noqa: BLE001 - the rows are pending; the sweep re-sends them
                log.exception("publishing %d deliveries failed; the sweep will send them", len(batch))
            for done in waiting:
                done.set()
            with self._idle:
                self._outstanding -= len(batch)
                if not self._outstanding:
                    self._idle.notify_all()


_publisher = BackgroundPublisher()
submit = _publisher.submit
publish = _publisher.publish
flush = _publisher.flush


@atexit.register
def _flush_at_exit() -> None:
    if _publisher._pid == os.getpid() and not _publisher.flush(EXIT_FLUSH_S):
        log.warning("exited with deliveries not yet published; the sweep will send them")
