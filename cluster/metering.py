"""What a window of the cluster's run costs the PostgreSQL primary and its replica, per delivery.

The orchestrator reaches both servers through their unix sockets (under the
run's folder: a unix socket is a file, not an address of a namespace) and
reads their processes from ``/proc`` (one process table for every namespace).
It reuses the benchmarks' meter (``benchmarks/meter.py``) for the primary's
database backends, commits and WAL, and adds:

- the primary's whole server: its postmaster and every child (backends,
  WAL writer, checkpointer, the replica's walsender, autovacuum), CPU from
  ``/proc``; this is what the primary's cores carry, and the ceiling's input;
- the replica: WAL received and replayed (``pg_last_wal_receive_lsn`` and
  ``pg_last_wal_replay_lsn`` deltas) and the CPU of its ``startup`` (the
  replay) and ``walreceiver`` processes. Those are read from ``/proc`` only
  while the window runs, so a stopped replica (the ``replica-stop`` fault)
  cannot hang the sampler; at the end the window waits (``replay_wait_s``
  at most) until the replica has replayed up to the primary's last position.

Deliveries are the rows of ``deliveries`` made in the window (each one a
fan-out of an event to a subscription, whatever its attempts), so a window
that ends after the drain counts every attempt of each. The machine is
shared: the PostgreSQL figures are the servers' own processes, not the
machine's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import sqlalchemy
from sqlalchemy.pool import NullPool

from benchmarks.meter import Meter
from benchmarks.resources import SampledCpu

from .processes import _descendants

__all__ = ["ClusterMeter", "ProcessTreeCpu", "postmaster_pid"]

REPLAY_TITLES = ("postgres: startup", "postgres: walreceiver")


def postmaster_pid(data: Path) -> int:
    """The postmaster's pid, from the first line of ``postmaster.pid`` in its data folder."""
    return int((data / "postmaster.pid").read_text().split("\n", 1)[0])


def _title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


class ProcessTreeCpu(SampledCpu):
    """CPU of a process and its descendants (a PostgreSQL server: the postmaster and its
    children), or only of those whose title starts with one of ``titles``."""

    def __init__(self, root: int, titles: tuple[str, ...] = ()):
        super().__init__()
        self.root, self.titles = root, titles

    def pids(self) -> list[int]:
        tree = [self.root, *_descendants(self.root)]
        if not self.titles:
            return tree
        return [pid for pid in tree if _title(pid).startswith(self.titles)]


def _socket_engine(folder: Path):
    """An engine on the ``webhooks`` database through the unix socket in ``folder``."""
    return sqlalchemy.create_engine(f"postgresql+psycopg2://postgres@/webhooks?host={folder}",
                                    poolclass=NullPool, isolation_level="AUTOCOMMIT")


def _replica_lsns(connection) -> dict:
    received, replayed = connection.execute(sqlalchemy.text(
        "SELECT pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text")).one()
    return {"received": received, "replayed": replayed}


def _lsn_diff(connection, end: str, start: str) -> int:
    return int(connection.execute(sqlalchemy.text("SELECT pg_wal_lsn_diff(:e, :s)"),
                                  {"e": end, "s": start}).scalar())


def _per_s(amount: float, seconds: float) -> float | None:
    return round(amount / seconds, 1) if seconds else None


def _counts(connection) -> tuple[int, int]:
    """Rows of ``deliveries`` and ``attempts`` on the primary so far."""
    return tuple(connection.execute(sqlalchemy.text(
        "SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM attempts)")).one())


class ClusterMeter:
    """``start()``, then ``stop()``, then ``figures()``; samples every ``interval`` s in a
    thread of its own meanwhile. ``pg`` is the run's PostgreSQL folder (``primary/`` and
    ``replica/`` below it); ``groups`` names process groups to add up (worker hosts)."""

    def __init__(self, pg: Path, groups: dict[str, list[int]], *, interval: float = 0.5,
                 replay_wait_s: float = 60.0, wal: bool = True):
        self.pg, self.interval, self.replay_wait_s = pg, interval, replay_wait_s
        self.primary = _socket_engine(pg / "primary").connect()
        self.replica = _socket_engine(pg / "replica").connect()
        self.meter = Meter(self.primary, "webhooks", groups, wal=wal)
        self.server = ProcessTreeCpu(postmaster_pid(pg / "primary" / "data"))
        self.replay = ProcessTreeCpu(postmaster_pid(pg / "replica" / "data"), REPLAY_TITLES)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.started = self.seconds = 0.0
        self.counts_before = self.counts_after = (0, 0)
        self.replica_before: dict = {}
        self.replica_after: dict = {}
        self.replayed_up_to_end = False

    def _sample_once(self) -> None:
        self.meter.sample()
        self.server.sample()
        self.replay.sample()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample_once()

    def start(self) -> None:
        self.replica_before = _replica_lsns(self.replica)
        self.counts_before = _counts(self.primary)
        self.server.sample()
        self.replay.sample()
        self.meter.start()
        self.started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """End the window on the primary, then wait for the replica to replay up to it."""
        self._stop.set()
        self._thread.join()
        self.server.sample()
        self.meter.stop()
        self.seconds = time.monotonic() - self.started
        self.counts_after = _counts(self.primary)
        end = self.meter.after["lsn"]
        deadline = time.monotonic() + self.replay_wait_s
        while time.monotonic() < deadline:
            self.replay.sample()
            replayed = _replica_lsns(self.replica)["replayed"]
            if replayed and _lsn_diff(self.replica, replayed, end) >= 0:
                self.replayed_up_to_end = True
                break
            time.sleep(self.interval)
        self.replay.sample()
        self.replica_after = _replica_lsns(self.replica)

    def close(self) -> None:
        self._stop.set()
        for connection in (self.primary, self.replica):
            connection.close()

    def figures(self) -> dict:
        """The window's figures: totals, and each cost per delivery made in it."""
        deliveries = self.counts_after[0] - self.counts_before[0]
        attempts = self.counts_after[1] - self.counts_before[1]
        per = 1.0 / max(deliveries, 1)
        received = _lsn_diff(self.replica, self.replica_after["received"],
                             self.replica_before["received"])
        replayed = _lsn_diff(self.replica, self.replica_after["replayed"],
                             self.replica_before["replayed"])
        return {
            "window_s": round(self.seconds, 1), "deliveries": deliveries,
            "attempts_per_delivery": round(attempts * per, 3),
            **self.meter.per_delivery(deliveries),
            "pg_server_cpu_ms_per_delivery": round(self.server.spent_s() * 1000 * per, 3),
            "pg_server_cpu_ms_per_s": _per_s(self.server.spent_s() * 1000, self.seconds),
            "wal_bytes_per_s": _per_s(_lsn_diff(self.primary, self.meter.after["lsn"],
                                                self.meter.before["lsn"]), self.seconds),
            "replica_received_bytes_per_delivery": round(received * per),
            "replica_replayed_bytes_per_delivery": round(replayed * per),
            "replica_replay_cpu_ms_per_delivery": round(self.replay.spent_s() * 1000 * per, 3),
            "replica_replay_cpu_ms_per_s": _per_s(self.replay.spent_s() * 1000, self.seconds),
            "replica_replayed_up_to_end": self.replayed_up_to_end,
        }
