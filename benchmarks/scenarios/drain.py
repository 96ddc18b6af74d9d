"""Measure how fast a worker drains a queue that was filled before it started."""

from __future__ import annotations

import time

from ..receiver import Arrival, ReceiverClient

__all__ = ["wait_for_unique", "first_arrivals", "drain_figures", "drain_timeout"]


def wait_for_unique(receiver: ReceiverClient, path: str, n: int, timeout: float) -> list[Arrival]:
    """Wait until ``n`` distinct deliveries reached ``path`` (or ``timeout`` s); return the arrivals.

    Waits on the cheap count first and only then reads the records, so a
    duplicate does not end the wait early.
    """
    deadline = time.monotonic() + timeout
    want = n
    while True:
        receiver.wait_for(want, path, timeout=max(0.0, deadline - time.monotonic()), interval=0.1)
        arrivals = receiver.records(path)
        unique = len({a.delivery_id for a in arrivals})
        if unique >= n or time.monotonic() >= deadline:
            return arrivals
        want = len(arrivals) + (n - unique)


def first_arrivals(receiver: ReceiverClient, path: str, ids, key: str,
                   timeout: float) -> dict[str, float]:
    """When each of ``ids`` first arrived at ``path`` (``time.time()`` s), waiting up to ``timeout`` s.

    ``key`` names the Arrival field the ids are matched on (``event_id`` or
    ``delivery_id``); ids that have not arrived when the time is up are left out.
    """
    wanted = set(ids)
    deadline = time.monotonic() + timeout
    receiver.wait_for(len(wanted), path, timeout=timeout, interval=0.1)
    while True:
        first: dict[str, float] = {}
        for arrival in receiver.records(path):
            ident = getattr(arrival, key)
            if ident in wanted and ident not in first:
                first[ident] = arrival.at
        if len(first) == len(wanted) or time.monotonic() >= deadline:
            return first
        time.sleep(0.25)


def drain_figures(arrivals: list[Arrival], n: int) -> dict:
    """Deliveries/s from the first arrival to the last, and how many arrived twice.

    A duplicate is the same delivery id with the same attempt number arriving again.
    """
    pairs = {(a.delivery_id, a.attempt) for a in arrivals}
    delivered = len({a.delivery_id for a in arrivals})
    figures = {"n": n, "delivered": delivered, "duplicates": len(arrivals) - len(pairs),
               "rate_per_s": None, "seconds": None}
    if len(arrivals) >= 2:
        first = min(a.at for a in arrivals)
        last = max(a.at for a in arrivals)
        if last > first:
            figures["seconds"] = round(last - first, 3)
            figures["rate_per_s"] = (delivered - 1) / (last - first)
    return figures


def drain_timeout(n: int) -> float:
    """Seconds to allow a drain of ``n`` messages: generous, at 20/s plus a minute."""
    return n / 20.0 + 60.0
