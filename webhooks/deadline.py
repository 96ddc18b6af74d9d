"""A whole-attempt deadline for blocking sockets.

Socket time-outs bound each read, not the attempt: a receiver that trickles
one byte a second never trips a 15 s read time-out. One watchdog thread per
process keeps the deadlines of attempts in flight and shuts down the socket
of any attempt still running at its deadline, which wakes the blocked read.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time

__all__ = ["AttemptDeadline", "watchdog"]


class AttemptDeadline:
    """One attempt's deadline (``time.monotonic()`` seconds) and the socket it uses now."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self.expired = False
        self._finished = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left, never below a small positive floor (socket time-outs must be > 0)."""
        return max(self.deadline - time.monotonic(), 0.001)

    def watch(self, sock: socket.socket | None) -> None:
        """Make ``sock`` the socket shut down if the deadline passes."""
        with self._lock:
            self._sock = sock
            if self.expired and sock is not None:
                _shutdown(sock)

    def finish(self) -> None:
        """The attempt is over: the watchdog must not touch its socket any more."""
        with self._lock:
            self._finished = True
            self._sock = None

    def expire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.expired = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected: nothing left to wake


class _Watchdog:
    """A heap of deadlines served by one daemon thread, started lazily in each process."""

    def __init__(self):
        self._heap: list[tuple[float, int, AttemptDeadline]] = []
        self._cond = threading.Condition()
        self._pid: int | None = None
        self._ids = itertools.count()

    def add(self, attempt: AttemptDeadline) -> None:
        with self._cond:
            self._ensure_thread()
            heapq.heappush(self._heap, (attempt.deadline, next(self._ids), attempt))
            # Wake the thread only if it now has an earlier deadline to wait for:
            # with one time-out for all attempts that is rare, and a wake-up per
            # attempt costs CPU the deliveries need.
            if self._heap[0][2] is attempt:
                self._cond.notify()

    def _ensure_thread(self) -> None:
        # Threads do not survive fork: a prefork child starts its own.
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._heap.clear()
            threading.Thread(target=self._run, name="webhooks-deadline", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, attempt = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._cond.wait(timeout=delay)
                    continue
                heapq.heappop(self._heap)
            attempt.expire()


watchdog = _Watchdog()
