"""The disk's flush time beside a run: how long an 8 KB write + fdatasync takes.

A durable emit commits before it returns, so its latency includes PostgreSQL's
WAL flush; when the disk stalls, every emit waits with it, whatever the code
does. Issue 43 asks for the latency target (p99 < 50 ms at 40 % load) in runs
whose flushes stay under 10 ms, so the latency scenario runs this probe beside
each of its runs and reports it with the run.

The probe writes to a scratch file on the same file system as PostgreSQL's data
directory when this process may write there (the benchmark runs as root on the
database's host), else in the working directory (and says so), and removes it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field

import sqlalchemy
import sqlalchemy.exc

from .stats import percentile

#: The page a probe writes each time (bytes): one WAL page.
PAGE_BYTES = 8192
#: How often the probe flushes (s): often enough to see a stall of tens of ms.
INTERVAL_S = 0.010
#: The flush time above which a run does not count for the latency target (ms).
STALL_MS = 10.0


@dataclass
class FlushProbe:
    """Flush durations (s) sampled every ``INTERVAL_S`` in a thread of its own."""

    directory: str
    durations: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Write and flush one page every interval until stopped (in the probe's thread)."""
        page = os.urandom(PAGE_BYTES)
        with tempfile.NamedTemporaryFile(dir=self.directory, prefix=".flush-probe-") as scratch:
            fd = scratch.fileno()
            while not self._stop.wait(INTERVAL_S):
                os.pwrite(fd, page, 0)
                started = time.perf_counter()
                os.fdatasync(fd)
                self.durations.append(time.perf_counter() - started)

    def stop(self) -> None:
        self._stop.set()

    def figures(self) -> dict:
        """p50, p99 and the longest flush (ms), how many, and whether the run counts."""
        ms = [d * 1000 for d in self.durations]
        longest = max(ms) if ms else None
        return {
            "flush_p50_ms": percentile(ms, 50),
            "flush_p99_ms": percentile(ms, 99),
            "flush_max_ms": longest,
            "flushes": len(ms),
            "flush_directory": self.directory,
            "flushes_under_10_ms": longest is not None and longest < STALL_MS,
        }


def probe_directory(database_url: str) -> str:
    """The folder holding PostgreSQL's data directory if writable, else the working one."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as conn:
            data_directory = conn.exec_driver_sql("SHOW data_directory").scalar()
    except sqlalchemy.exc.SQLAlchemyError:  # not PostgreSQL, or not allowed to ask
        return os.getcwd()
    finally:
        engine.dispose()
    parent = os.path.dirname(data_directory.rstrip("/"))
    return parent if os.access(parent, os.W_OK) else os.getcwd()


@contextlib.contextmanager
def flush_probe(directory: str):
    """Probe the disk's flushes in ``directory`` for the duration of the ``with`` block."""
    probe = FlushProbe(directory)
    thread = threading.Thread(target=probe.run, name="flush-probe", daemon=True)
    thread.start()
    try:
        yield probe
    finally:
        probe.stop()
        thread.join()
