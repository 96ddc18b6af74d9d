"""What a window of a run costs, per delivery: CPU of process groups, PostgreSQL's share.

``start()`` at the beginning of the window, ``sample()`` every fraction of a
second (PostgreSQL backends come and go with connection pools, and a backend
is only counted once it was seen twice), ``stop()`` at the end, then
``per_delivery(n)`` divides by the deliveries that arrived meanwhile.

Figures (ms of CPU, bytes of WAL, commits; each per delivery):

- ``<group>_cpu_ms_per_delivery`` for each named set of process groups
  (``worker``: a Celery worker and its pool; ``emitters``: the emitting
  processes), read from ``/proc``;
- ``pg_commits_per_delivery`` (``pg_stat_database.xact_commit`` of the
  database), ``pg_cpu_ms_per_delivery`` (its backends, from ``/proc``),
  ``pg_sessions_per_delivery`` (connections opened: ``pg_stat_database.sessions``;
  a backend too short-lived to be sampled is missing from the CPU figure,
  and each new one starts a process and prepares the hot statements again);
- ``machine_cpu_ms_per_delivery``: what every process on the machine ran
  (``/proc/stat``: the harness, the receiver, Redis and PostgreSQL's own
  background processes included), and ``machine_busy_cores``: how many
  cores that kept busy on average over the window. Deliveries/s is the
  one over the other, by definition, so two runs that keep as many cores
  busy have rates in the inverse ratio of their CPU per delivery;
- with ``wal=True``: ``wal_bytes_per_delivery`` (the records of this
  database and their commit records, from ``pg_waldump``) and
  ``wal_bytes_all_databases_per_delivery`` (everything the server wrote).
"""

from __future__ import annotations

import os

from . import resources

__all__ = ["Meter"]


class Meter:
    """Counters of one window; ``groups`` maps a name to the process-group ids it adds up."""

    def __init__(self, connection, database: str, groups: dict[str, list[int]], *, wal: bool = True):
        self.connection, self.database, self.wal = connection, database, wal
        self.groups = groups
        self.backends = resources.BackendCpu(connection, database)
        self.cpu_before: dict[str, float] = {}
        self.cpu_spent: dict[str, float] = {}
        self.machine_before: tuple[float, float] = (0.0, 0.0)
        self.machine_spent: tuple[float, float] = (0.0, 0.0)
        self.before: dict = {}
        self.after: dict = {}

    def _group_cpu(self) -> dict[str, float]:
        return {name: sum(resources.group_cpu_s(pgid) for pgid in pgids)
                for name, pgids in self.groups.items()}

    def start(self) -> None:
        self.backends.sample()
        self.before = resources.database_counters(self.connection, self.database)
        self.cpu_before = self._group_cpu()
        self.machine_before = resources.machine_cpu()

    def sample(self) -> None:
        self.backends.sample()

    def stop(self) -> None:
        now = self._group_cpu()
        self.cpu_spent = {name: now[name] - self.cpu_before[name] for name in now}
        busy, total = resources.machine_cpu()
        self.machine_spent = (busy - self.machine_before[0], total - self.machine_before[1])
        self.backends.sample()
        self.after = resources.database_counters(self.connection, self.database)

    def per_delivery(self, deliveries: int) -> dict:
        """Every figure of the window divided by ``deliveries`` (see the module docstring)."""
        per = 1.0 / max(deliveries, 1)
        out = {f"{name}_cpu_ms_per_delivery": round(spent * 1000 * per, 3)
               for name, spent in self.cpu_spent.items()}
        busy, total = self.machine_spent
        out["machine_cpu_ms_per_delivery"] = round(busy * 1000 * per, 3)
        cores = os.cpu_count() or 1
        out["machine_busy_cores"] = round(busy / total * cores, 2) if total else None
        out["pg_commits_per_delivery"] = round(
            (self.after["commits"] - self.before["commits"]) * per, 2)
        out["pg_cpu_ms_per_delivery"] = round(self.backends.spent_s() * 1000 * per, 3)
        sessions = (None if self.before["sessions"] is None
                    else (self.after["sessions"] - self.before["sessions"]) * per)
        out["pg_sessions_per_delivery"] = None if sessions is None else round(sessions, 4)
        if self.wal:
            wal = resources.wal_bytes_of(self.connection, self.before["oid"], self.before["lsn"],
                                         self.after["lsn"])
            ours = wal["this_database"]
            out["wal_bytes_per_delivery"] = round(ours * per) if ours is not None else None
            out["wal_bytes_all_databases_per_delivery"] = round(wal["all_databases"] * per)
            if wal.get("kinds"):
                out["wal_by_relation"] = resources.relation_names(self.connection,
                                                                  wal["kinds"], per)
            if wal.get("error"):
                out["wal_error"] = wal["error"]
        return out
