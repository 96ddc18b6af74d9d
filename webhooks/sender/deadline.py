"""A whole-attempt deadline for blocking sockets.

Socket time-outs bound each read, not the attempt: a receiver that trickles
one byte a second never trips a 15 s read time-out. One watchdog thread per
process keeps the deadlines of attempts in flight and shuts down the socket
of any attempt still running at its deadline, which wakes the blocked read.

The socket is shut down by its file descriptor: during a TLS handshake the
socket object that was watched has been detached into an SSLSocket, and
only the descriptor still reaches the connection.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time

__all__ = ["AttemptDeadline", "watchdog"]

# Seconds past a deadline the watchdog may act: it wakes once per span, not once per
# attempt (every attempt's deadline passes, finished or not: one wake-up each cost
# about 0.1 ms of CPU per delivery with fast receivers).
WAKE_SPAN_S = 0.05


class AttemptDeadline:
    """One attempt's deadline (``time.monotonic()`` seconds) and the socket it uses now.

    ``budget`` is the attempt's whole time in seconds (for error texts);
    ``phase`` names what the attempt is doing ("dns", "connect", "tls",
    "response"), and ``failure`` is what a connection seam found wrong
    (connections.py), if anything.
    """

    def __init__(self, deadline: float, budget: float | None = None):
        self.deadline = deadline
        self.budget = budget if budget is not None else max(deadline - time.monotonic(), 0.0)
        self.expired = False
        self.phase = "connect"
        self.failure = None
        self._finished = False
        self._sock: socket.socket | None = None
        self._fd = -1
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left, never below a small positive floor (socket time-outs must be > 0)."""
        return max(self.deadline - time.monotonic(), 0.001)

    def watch(self, sock: socket.socket | None) -> None:
        """Make ``sock`` the socket shut down if the deadline passes."""
        with self._lock:
            self._sock = sock
            self._fd = sock.fileno() if sock is not None else -1
            if self.expired and sock is not None:
                _shutdown(sock, self._handshake_fd())

    def finish(self) -> None:
        """The attempt is over: the watchdog must not touch its socket any more."""
        with self._lock:
            self._finished = True
            self._sock = None
            self._fd = -1

    def expire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.expired = True
            if self._sock is not None:
                _shutdown(self._sock, self._handshake_fd())

    def _handshake_fd(self) -> int:
        # Only during the TLS handshake is a detached socket's descriptor still
        # the connection's (inside the SSLSocket being made); a handshake that
        # fails stops the watch (connections.py) before anything else can take
        # the number. In any other phase the watched socket is the live one.
        return self._fd if self.phase == "tls" else -1


def _shutdown(sock: socket.socket, fd: int) -> None:
    """Shut the connection down, through ``fd`` (-1: none) if ``sock`` was detached into TLS."""
    try:
        if sock.fileno() != -1:
            sock.shutdown(socket.SHUT_RDWR)
        elif fd != -1:
            borrowed = socket.socket(fileno=fd)
            try:
                borrowed.shutdown(socket.SHUT_RDWR)
            finally:
                borrowed.detach()  # the descriptor belongs to the SSLSocket: never close it here
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
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    # A little past the earliest deadline, so that one wake-up serves
                    # every deadline of that span (most are of attempts long finished).
                    self._cond.wait(timeout=delay + WAKE_SPAN_S)
                    continue
                due = self._pop_due(time.monotonic())
            for attempt in due:
                attempt.expire()

    def _pop_due(self, now: float) -> list[AttemptDeadline]:
        due = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due


watchdog = _Watchdog()
