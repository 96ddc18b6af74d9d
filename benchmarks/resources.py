"""Where the resources of a run go: CPU of processes, PostgreSQL's commits and WAL, Redis commands.

Used (through ``meter.Meter``) by the cost, realistic and shared scenarios
to turn a window of a run into figures per delivery.
PostgreSQL's server is shared (other databases write WAL too), so WAL is
counted from the records themselves (``pg_waldump``) that touch this
database's relations, plus the commit records of their transactions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import text

__all__ = ["group_cpu_s", "process_cpu_s", "machine_cpu", "parse_proc_stat", "SampledCpu",
           "BackendCpu", "database_counters", "wal_bytes_of", "RedisCommands"]

_TICKS = os.sysconf("SC_CLK_TCK")
_RECORD = re.compile(r"len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+)")
_REL = re.compile(r"rel \d+/(\d+)/(\d+)")
_KIND = re.compile(r"^rmgr: (\w+)\s.*desc: (\w+)")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def group_cpu_s(pgid: int) -> float:
    """CPU seconds of every live process in the process group ``pgid`` (a worker and its pool)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def parse_proc_stat(text: str) -> tuple[float, float]:
    """(busy, all) CPU seconds of every core since boot, from the text of ``/proc/stat``.

    Its first line adds up the cores, in clock ticks: user nice system idle
    iowait irq softirq steal (guest time is counted in user already). Busy is
    what every process and the kernel ran: user, nice, system, irq and
    softirq. Not steal: a virtual machine's host ran something else then.
    """
    first = text.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError(f"not /proc/stat: {first[:1]}")
    ticks = [int(value) for value in first[1:9]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]
    return busy / _TICKS, sum(ticks) / _TICKS


def machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine so far (``parse_proc_stat``)."""
    return parse_proc_stat(Path("/proc/stat").read_text())


class SampledCpu:
    """CPU of a changing set of processes between two samples (seconds of user + system).

    Processes come and go (a pool's connections, a server's backends), so each
    is read when first seen and on every sample after; the sum of the
    differences is the CPU spent in that time by processes that were sampled at
    least twice. Subclasses say which processes count (:meth:`pids`).
    """

    def __init__(self):
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def pids(self) -> list[int]:
        raise NotImplementedError

    def sample(self) -> None:
        for pid in self.pids():
            cpu = process_cpu_s(pid)
            self.first.setdefault(pid, cpu)
            self.last[pid] = cpu

    def spent_s(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last)


class BackendCpu(SampledCpu):
    """CPU of the PostgreSQL backends connected to one database, between two samples."""

    def __init__(self, connection, database: str):
        super().__init__()
        self.connection, self.database = connection, database

    def pids(self) -> list[int]:
        return self.connection.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()"),
            {"d": self.database}).scalars().all()


def database_counters(connection, database: str) -> dict:
    """Commits and sessions (connections opened; None before PostgreSQL 14) of this
    database so far, the WAL position, and the database's oid."""
    commits, oid, sessions = connection.execute(text(
        "SELECT xact_commit, datid, (to_jsonb(d) ->> 'sessions')::bigint"
        " FROM pg_stat_database AS d WHERE datname = :d"), {"d": database}).one()
    lsn = connection.execute(text("SELECT pg_current_wal_lsn()::text")).scalar()
    return {"commits": commits, "sessions": sessions, "lsn": lsn, "oid": oid}


def wal_bytes_of(connection, oid: int, start_lsn: str, end_lsn: str) -> dict | None:
    """WAL bytes between two positions: all of it, and the records of database ``oid``.

    ``this_database`` is None when pg_waldump or the WAL directory is out of reach
    (another machine), or when pg_waldump cannot read the whole range (``error`` says why).
    """
    total = connection.execute(text("SELECT pg_wal_lsn_diff(:e, :s)"),
                               {"e": end_lsn, "s": start_lsn}).scalar()
    waldump = shutil.which("pg_waldump") or _server_binary(connection, "pg_waldump")
    wal_dir = Path(connection.execute(text("SHOW data_directory")).scalar()) / "pg_wal"
    if waldump is None or not wal_dir.is_dir():
        return {"all_databases": int(total), "this_database": None}
    done = subprocess.run([waldump, "-p", str(wal_dir), "-s", start_lsn, "-e", end_lsn],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        # Typically: the server recycled the first segments already (more than max_wal_size
        # written meanwhile, by other databases too). A partial count would be wrong.
        error = (done.stderr.strip().splitlines() or ["pg_waldump failed"])[-1]
        return {"all_databases": int(total), "this_database": None, "error": error}
    out = done.stdout
    ours, transactions, commits = 0, set(), []
    kinds: Counter = Counter()  # bytes by (relfilenode, record kind), this database's
    for line in out.splitlines():
        record = _RECORD.search(line)
        if record is None:
            continue
        size, tx = int(record.group(1)), int(record.group(2))
        relation = _REL.search(line)
        if relation is not None and int(relation.group(1)) == oid:
            ours += size
            transactions.add(tx)
            kinds[(int(relation.group(2)), _kind_of(line))] += size
        elif line.startswith("rmgr: Transaction"):
            commits.append((tx, size))
    committed = sum(size for tx, size in commits if tx in transactions)
    ours += committed
    kinds[(0, "commit records")] += committed
    return {"all_databases": int(total), "this_database": ours, "kinds": kinds}


def _kind_of(line: str) -> str:
    """A WAL record's kind, as pg_waldump names it: its resource manager and operation
    (``Heap HOT_UPDATE``, ``Btree INSERT_LEAF``), with ``+FPW`` when it carries a full
    page image (the first change of a page after a checkpoint)."""
    kind = _KIND.search(line)
    name = f"{kind.group(1)} {kind.group(2)}" if kind else "?"
    return name + ("+FPW" if " FPW" in line else "")


def relation_names(connection, kinds: Counter, per: float, top: int = 60) -> dict[str, float]:
    """``kinds`` (wal_bytes_of's) as bytes per delivery by "relation: kind", the ``top``
    largest, relations named from ``connection``'s database (a number if not found)."""
    names = dict(connection.execute(text(
        "SELECT pg_relation_filenode(oid), relname FROM pg_class"
        " WHERE pg_relation_filenode(oid) IS NOT NULL")).all())
    named = {f"{names.get(node, node) if node else ''}: {kind}": round(size * per, 1)
             for (node, kind), size in kinds.most_common(top)}
    return named


def _server_binary(connection, name: str) -> str | None:
    version = connection.execute(text("SHOW server_version_num")).scalar()
    path = Path(f"/usr/lib/postgresql/{int(version) // 10000}/bin/{name}")
    return str(path) if path.exists() else None


class RedisCommands:
    """Commands sent to one Redis db, by name, counted with ``MONITOR`` inside a ``with`` block.

    MONITOR slows Redis down, so a window counted this way is never the one
    timed. ``begin()`` and ``end()`` mark the window inside the block (the
    caller counts the deliveries between them); without them, the whole block.
    """

    def __init__(self, broker_url: str):
        import redis

        self.client = redis.Redis.from_url(broker_url)
        self.db = self.client.connection_pool.connection_kwargs.get("db", 0)
        self.counts: Counter = Counter()
        self.frozen: Counter | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with self.client.monitor() as monitor:
            for command in monitor.listen():
                if self._stop.is_set():
                    return
                if command.get("db") == self.db:
                    self.counts[command["command"].split(" ", 1)[0].upper()] += 1

    def __enter__(self) -> "RedisCommands":
        self._thread.start()
        time.sleep(0.5)  # MONITOR is on before the first command that counts
        self.begin()
        return self

    def begin(self) -> None:
        self.counts.clear()

    def end(self) -> None:
        self.frozen = Counter(self.counts)

    def __exit__(self, *exc) -> None:
        if self.frozen is None:
            self.end()
        self._stop.set()
        self.client.ping()  # one more command, so the watcher sees the stop
        self._thread.join(timeout=5)

    def per_delivery(self, deliveries: int) -> dict:
        """Commands per delivery in the window, in all and for the 12 most sent."""
        counts = self.frozen if self.frozen is not None else self.counts
        n = max(deliveries, 1)
        return {"redis_commands_per_delivery": round(sum(counts.values()) / n, 2),
                "redis_commands_by_name": {k: round(v / n, 2) for k, v in counts.most_common(12)}}
