"""Small helpers shared by the fault cases: rows, emits, statuses, rules that remember."""

from __future__ import annotations

import threading
import time
from collections import Counter

from sqlalchemy import text

from tests.factories import make_account, make_subscription
from webhooks import emit_event
from webhooks.broker import outbox
from webhooks.events.samples import sample_data
from webhooks.storage.db import get_engine

__all__ = [
    "emit_many", "emit_event_to", "statuses", "status_counts", "attempt_rows", "first_time",
    "first_requests", "Clock",
    "make_account", "make_subscription",
]


def emit_many(account_id: str, count: int, event_type: str = "email.sent") -> list[str]:
    """Emit ``count`` events; returns every delivery id they fanned out to."""
    data = sample_data(event_type)
    ids = []
    for _ in range(count):
        ids += emit_event(account_id, event_type, data).delivery_ids
    assert outbox.flush(30), "the background publisher did not drain"
    return ids


def statuses(ids=None) -> dict[str, str]:
    """delivery id -> stored status (all deliveries, or those of ``ids``)."""
    with get_engine().connect() as connection:
        rows = connection.execute(text("SELECT id, status FROM deliveries")).all()
    return {i: s for i, s in rows if ids is None or i in ids}


def status_counts(ids=None) -> Counter:
    return Counter(statuses(ids).values())


def attempt_rows(delivery_id: str):
    """(number, status_code, error, outcome, duration_ms) of each recorded attempt."""
    with get_engine().connect() as connection:
        return connection.execute(
            text("SELECT number, status_code, error, outcome, duration_ms FROM attempts "
                 "WHERE delivery_id = :d ORDER BY number"), {"d": delivery_id}
        ).all()


def first_time(bad, then=200):
    """A receiver rule: the first request of each delivery gets ``bad``, every later one ``then``.

    Unlike fastreceiver.first_attempt it remembers deliveries, so a recovered
    attempt that carries the same attempt number is answered ``then``.
    """
    seen: set[str] = set()
    lock = threading.Lock()

    def rule(arrival):
        with lock:
            if arrival.delivery_id in seen:
                return then
            seen.add(arrival.delivery_id)
            return bad

    return rule


def first_requests(count: int, bad, then=200):
    """A receiver rule: the first ``count`` requests (of any delivery) get ``bad``, later ones ``then``."""
    taken = []
    lock = threading.Lock()

    def rule(arrival):
        with lock:
            if len(taken) < count:
                taken.append(arrival.delivery_id)
                return bad
            return then

    return rule


class Clock:
    """Seconds since the case started."""

    def __init__(self):
        self.started = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self.started



def emit_event_to(url: str, event_type: str = "email.sent") -> str:
    """An account of its own with one subscription to ``url``, and one event; returns the delivery id."""
    account_id, _ = make_account(url[-100:])
    make_subscription(account_id, url)
    (delivery_id,) = emit_event(account_id, event_type, sample_data(event_type)).delivery_ids
    assert outbox.flush(10)
    return delivery_id
