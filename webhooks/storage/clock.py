"""One clock for every due time and recovery rule: the database's.

Claims, records of attempts, the sweep and emit_event compare and write
times (``next_attempt_at``, ``claimed_at``) that other hosts compare again.
Each host's own clock would make those rules depend on how far the hosts
disagree: a worker 90 s ahead claimed retries 90 s early, and its sweep took
back claims still in flight on other hosts (a duplicate attempt each). So
every process reads the time as its host's clock corrected by the offset to
the database server's clock, measured once per WEBHOOKS_CLOCK_REFRESH
seconds with one ``SELECT clock_timestamp()`` (half the round trip is the
error, a millisecond on a LAN); between measurements no query is sent.

On SQLite (one host) the offset is 0 and nothing is measured. A measurement
that fails (the database is unreachable) keeps the last offset and is tried
again after WEBHOOKS_CLOCK_REFRESH / 10 s; the caller is about to fail on the
database anyway.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time

from sqlalchemy import text

from webhooks.config import get_settings
from webhooks.storage.db import get_engine

__all__ = ["now", "offset", "measure_offset", "forget"]

log = logging.getLogger("webhooks.clock")

# A skew worth a warning in the logs (s): NTP keeps hosts within milliseconds.
WARN_SKEW_S = 1.0

_lock = threading.Lock()
# (process id, offset in s, monotonic time of the next measurement)
_state: tuple[int, float, float] = (0, 0.0, 0.0)


def now() -> dt.datetime:
    """The database server's current time as an aware UTC datetime (see the module)."""
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=offset())


def offset() -> float:
    """Seconds to add to this host's clock to read the database's; measured when due.

    One thread measures at a time; the others use the last offset meanwhile,
    so a database that does not answer holds up one thread, not all.
    """
    pid, current, next_at = _state
    if pid == os.getpid() and time.monotonic() < next_at:
        return current
    if not _lock.acquire(blocking=pid != os.getpid()):
        return current
    try:
        return _refresh(current if pid == os.getpid() else 0.0)
    finally:
        _lock.release()


def _refresh(current: float) -> float:
    global _state
    settings = get_settings()
    interval = settings.clock_refresh
    if settings.is_embedded_database:
        _state = (os.getpid(), 0.0, time.monotonic() + interval)
        return 0.0
    try:
        measured = measure_offset()
    except Exception as error:  # noqa: BLE001 - keep the last offset, try again soon
        log.warning("clock: the database's time could not be read (%s); keeping an offset "
                    "of %.3f s", type(error).__name__, current)
        _state = (os.getpid(), current, time.monotonic() + interval / 10)
        return current
    if abs(measured) >= WARN_SKEW_S:
        log.warning("clock: this host's clock is %.3f s %s the database's; using the "
                    "database's", abs(measured), "behind" if measured > 0 else "ahead of")
    _state = (os.getpid(), measured, time.monotonic() + interval)
    return measured


def measure_offset(url: str | None = None) -> float:
    """The database clock minus this host's, in seconds, from one query (its midpoint)."""
    with get_engine(url).connect() as connection:
        before = time.time()
        database_time = connection.execute(text("SELECT clock_timestamp()")).scalar_one()
        after = time.time()
    return database_time.timestamp() - (before + after) / 2


def forget() -> None:
    """Measure again on the next call (tests; after the database moved)."""
    global _state
    with _lock:
        _state = (0, 0.0, 0.0)
