"""Call a function at a steady rate from a few threads, recording when each call started."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

__all__ = ["PacedRun", "paced"]


@dataclass
class PacedRun:
    """What a paced run did.

    ``started`` holds each call's start as ``time.time()`` seconds (None if it
    raised), ``results`` what each call returned, ``lag`` how late each call
    started against its schedule (seconds), ``rate`` the calls/s achieved.
    """

    started: list
    results: list
    lag: list
    errors: list
    rate: float
    first_start: float
    last_end: float


def paced(fn, rate: float, duration: float, *, threads: int = 4) -> PacedRun:
    """Call ``fn(i)`` for ``i`` in ``range(rate * duration)``, call ``i`` due at ``i / rate`` s.

    Several threads share the schedule so one slow call does not hold back
    the next ones; if every thread is busy, calls start late (see ``lag``).
    """
    count = max(1, int(round(rate * duration)))
    started: list = [None] * count
    results: list = [None] * count
    lag: list = [0.0] * count
    errors: list = []
    indexes = itertools.count()
    lock = threading.Lock()
    origin = time.perf_counter() + 0.05
    ends = []

    def run() -> None:
        while True:
            with lock:
                i = next(indexes)
            if i >= count:
                return
            due = origin + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            lag[i] = max(0.0, time.perf_counter() - due)
            at = time.time()
            try:
                results[i] = fn(i)
                started[i] = at
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                errors.append(f"{type(exc).__name__}: {exc}")
            ends.append(time.time())

    wall_origin = time.time() + (origin - time.perf_counter())
    workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    last_end = max(ends) if ends else time.time()
    elapsed = max(last_end - wall_origin, 1e-9)
    return PacedRun(started, results, lag, errors, count / elapsed, wall_origin, last_end)
