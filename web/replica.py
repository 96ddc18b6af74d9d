"""Whether the read replica (WEBHOOKS_READ_DATABASE_URL) may be read now.

A replica that is stopped, unreachable or far behind must not hold up the
pages that read it: the cluster's ``replica-stop`` fault showed every read
hanging on a stopped replica (its host still acknowledges the packets, so
no TCP time-out ends the wait), and a web process has only a few threads.
So a daemon thread of each web process asks the replica every
``PROBE_EVERY_S`` seconds how far its replay is behind; a read goes to the
replica only while the last answer is at most ``STALE_AFTER_S`` old and the
lag at most WEBHOOKS_READ_MAX_LAG seconds, and to the primary otherwise.
A probe that hangs simply stops refreshing the answer, so the reads move to
the primary within ``STALE_AFTER_S`` whatever the replica does.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from sqlalchemy import create_engine, text

from webhooks.config import get_settings
from webhooks.config.redaction import redact

__all__ = ["usable", "PROBE_EVERY_S", "STALE_AFTER_S"]

log = logging.getLogger("web.replica")

PROBE_EVERY_S = 1.0
STALE_AFTER_S = 3.0
FIRST_ANSWER_WAIT_S = 2.0  # a process's first read waits this long for the first probe
# The replay lag in seconds: 0 when everything received is replayed (an idle primary
# sends nothing, and the last replayed commit's age would grow for nothing).
LAG_QUERY = text(
    "SELECT CASE WHEN pg_last_wal_receive_lsn() IS NULL "
    "OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
    "ELSE COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0) "
    "END")


class _Probe:
    """The probe thread of one process and one replica URL, and its last answer."""

    def __init__(self, url: str):
        self.url = url
        self.answered_at = float("-inf")  # monotonic time of the last answer
        self.lag = float("inf")
        self.first = threading.Event()
        self.thread = threading.Thread(target=self._run, name="replica-probe", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        """Probe until the process ends. Nothing may end this thread: a probe that died
        (an engine that could not even be built, say) would leave the replica unread,
        silently, for the life of the process; here every failure is logged and tried again."""
        engine = None
        failing = False
        while True:
            try:
                engine = engine or create_engine(self.url, pool_size=1, max_overflow=0,
                                                 pool_pre_ping=False)
                with engine.connect() as connection:
                    self.lag = float(connection.execute(LAG_QUERY).scalar_one())
                self.answered_at = time.monotonic()
                if failing:
                    log.warning("the read replica answers again (lag %.1f s)", self.lag)
                failing = False
            except Exception as error:  # noqa: BLE001 - the answer goes stale: reads move
                if not failing:  # once per outage, not once a second
                    log.warning("the read replica does not answer (%s: %s): reading the primary",
                                type(error).__name__, _first_line(error))
                failing = True
                if engine is not None:
                    engine.dispose()
            self.first.set()
            time.sleep(PROBE_EVERY_S)

    def usable(self, max_lag: float) -> bool:
        fresh = time.monotonic() - self.answered_at <= STALE_AFTER_S
        return fresh and self.lag <= max_lag


def _first_line(error: Exception) -> str:
    """The first line of ``error``'s text, without URL passwords (the JSON log masks them too)."""
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return redact(lines[0]) if lines else ""


_lock = threading.Lock()
_probes: dict[tuple[int, str], _Probe] = {}


def usable() -> bool:
    """True when reads may go to the replica now (see the module); False without one."""
    settings = get_settings()
    url = settings.read_database_url
    if not url:
        return False
    key = (os.getpid(), url)
    probe = _probes.get(key)
    if probe is None:
        with _lock:
            probe = _probes.get(key)
            if probe is None:
                probe = _probes[key] = _Probe(url)
        probe.first.wait(FIRST_ANSWER_WAIT_S)
    return probe.usable(settings.read_max_lag)
