"""Group commit: the claims (and the records) of concurrent attempts share one statement.

The unit of work stays one Celery task per delivery. What changes is how a
worker process talks to the database: with 128 threads in flight, many
attempts claim, and record, within the same few milliseconds, and each
paid its own round trip, statement set-up and commit. A :class:`Group`
lets them share: the first caller that finds no batch running runs its
own item at once, alone, as before (no wait at low load); the callers that
arrive while a batch is running wait for it, and the first of them then
runs all that waited (up to ``WEBHOOKS_BATCH_MAX``) as one batch, while
the others wait for their own answers. Batches therefore grow with the
load and by themselves: one round trip's worth of arrivals, and a batch that
formed behind another (the process is busy) lingers up to
``WEBHOOKS_BATCH_WAIT_MS`` for more; an item that finds the group idle never waits.

Each item keeps its own rules: the backend runs a batch as the items'
statements in sequence, each seeing what the ones before it wrote
(storage/batched.py), so a batch gives each exactly what one-by-one would.
If a batch fails, each of its items runs alone (``run_one``), so each caller
gets its own answer or its own error; nothing committed by a batch that
failed (one statement, one transaction), and what a batch committed before
its connection was lost is found by the one-by-one run as any repeated
claim or record is (services/attempt.py), or taken back by the sweep. A process
killed with a batch in flight leaves the same as killed threads would:
claims the sweep takes back, messages redelivered.

One :class:`Group` per kind and process (threads do not survive a fork).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Generic, Sequence, TypeVar

__all__ = ["Group", "group", "STATS_EVERY_S"]

log = logging.getLogger("webhooks.group_commit")

T = TypeVar("T")
R = TypeVar("R")

# How often (seconds) a group logs the batch sizes it ran, when it ran any of two or more.
STATS_EVERY_S = 10.0


class _Waiter:
    """One caller's item, and its answer once its batch ran."""

    __slots__ = ("item", "done", "lead", "answer", "answered", "error")

    def __init__(self, item):
        self.item = item
        self.done = threading.Event()
        self.lead = False  # woken to run the next batch, not with an answer
        self.answer = None
        self.answered = False
        self.error: BaseException | None = None

    def result(self):
        if self.error is not None:
            raise self.error
        return self.answer


class Group(Generic[T, R]):
    """Runs the items its callers hand it, several at a time when they come together.

    ``run_batch(items)`` answers a list of two or more items, in order, in one
    statement; ``run_one(item)`` answers one alone (the path a batch falls back
    to, item by item). ``limit()`` is the most items of one batch (1: every
    item alone). ``linger()``: seconds a batch that formed behind another
    waits at most for more items, until it holds ``limit()`` (0: none)."""

    def __init__(self, name: str, run_batch: Callable[[list[T]], Sequence[R]],
                 run_one: Callable[[T], R], limit: Callable[[], int],
                 linger: Callable[[], float] = lambda: 0.0):
        self.name = name
        self._run_batch, self._run_one, self._limit = run_batch, run_one, limit
        self._linger = linger
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._waiting: list[_Waiter] = []
        self._busy = False
        self._stats = _Stats(name)

    def __call__(self, item: T) -> R:
        """The answer to ``item``; raises what running it raised."""
        waiter = _Waiter(item)
        with self._lock:
            self._waiting.append(waiter)
            leads = not self._busy
            self._busy = True
            self._arrived.notify()
        if not leads:
            waiter.done.wait()
            if not waiter.lead:
                return waiter.result()
        self._lead(handed=not leads)
        return waiter.result()

    def _lead(self, handed: bool) -> None:
        """Run what waits (up to the limit), then hand the lead to the first still waiting.

        A lead that was handed on (a batch ran before it: the process is busy) first
        lingers for more items; one that found the group idle runs at once."""
        size = self._size()
        linger = self._linger() if handed else 0.0
        with self._lock:
            if linger > 0 and len(self._waiting) < size:
                deadline = time.monotonic() + linger
                while len(self._waiting) < size and (left := deadline - time.monotonic()) > 0:
                    self._arrived.wait(left)
            batch, self._waiting = self._waiting[:size], self._waiting[size:]
        try:
            self._run(batch)
        finally:
            with self._lock:
                if self._waiting:
                    successor = self._waiting[0]
                    successor.lead = True
                    successor.done.set()
                else:
                    self._busy = False

    def _size(self) -> int:
        try:
            return max(1, int(self._limit()))
        except Exception:  # noqa: BLE001 - the settings' error is raised where they are read
            return 1

    def _run(self, batch: list[_Waiter]) -> None:
        try:
            if len(batch) > 1 and self._together(batch):
                return
            for waiter in batch:
                try:
                    waiter.answer = self._run_one(waiter.item)
                except BaseException as exc:  # noqa: BLE001 - raised in its caller's thread
                    waiter.error = exc
                waiter.answered = True
                waiter.done.set()
            self._stats.count(1, len(batch))
        finally:  # interrupted (a BaseException): no caller may wait for ever
            for waiter in batch:
                if not waiter.answered:
                    waiter.error, waiter.answered = RuntimeError(f"{self.name}: interrupted"), True
                    waiter.done.set()

    def _together(self, batch: list[_Waiter]) -> bool:
        """Run ``batch`` as one; False if it failed (each item then runs alone)."""
        try:
            answers = self._run_batch([waiter.item for waiter in batch])
        except Exception:  # noqa: BLE001 - each item runs alone and gets its own answer
            log.warning("a batch of %d %s failed; running each alone", len(batch), self.name,
                        exc_info=True)
            return False
        for waiter, answer in zip(batch, answers, strict=True):
            waiter.answer, waiter.answered = answer, True
            waiter.done.set()
        self._stats.count(len(batch))
        return True


class _Stats:
    """Items and batches run, logged every STATS_EVERY_S seconds while batches form."""

    def __init__(self, name: str):
        self._name = name
        self._lock = threading.Lock()
        self._reset(time.monotonic())

    def _reset(self, now: float) -> None:
        self._since, self._items, self._statements, self._grouped, self._largest = now, 0, 0, 0, 0

    def count(self, size: int, statements: int = 1) -> None:
        """``statements`` ran ``size`` items each."""
        now = time.monotonic()
        with self._lock:
            self._items += size * statements
            self._statements += statements
            if size > 1:
                self._grouped += size
            self._largest = max(self._largest, size)
            if now - self._since < STATS_EVERY_S:
                return
            line = (self._items, self._statements, self._grouped, self._largest, now - self._since)
            self._reset(now)
        if line[2]:
            log.info("group commit: %d %s in %d statements (%.2f per statement; %d in batches, "
                     "the largest of %d) in the last %.0f s", line[0], self._name, line[1],
                     line[0] / line[1], line[2], line[3], line[4])


_groups: dict[tuple[int, str], Group] = {}
_groups_lock = threading.Lock()


def group(name: str, make: Callable[[], Group]) -> Group:
    """This process's group ``name``, made by ``make()`` the first time."""
    key = (os.getpid(), name)
    found = _groups.get(key)
    if found is not None:
        return found
    with _groups_lock:  # two first callers may both make one: the first made is kept
        return _groups.setdefault(key, make())
