"""The cluster's ceiling, from what one delivery costs the PostgreSQL primary (pure).

Workers, web hosts and emitters scale out; the primary does not. So the
whole cluster's rate is bounded by the primary's cores:

    deliveries/s = cores x utilisation x 1000 / primary CPU ms per delivery

and every replica must then receive and replay, on its own, the WAL the
primary writes at that rate:

    replica MB/s = deliveries/s x WAL bytes per delivery / 1,000,000

A replica replays in one process (``startup``), so it has a ceiling of its
own: one core's 1000 ms a second over the replay's CPU per delivery
(``startup`` and ``walreceiver`` together). ``cluster/metering.py`` measures
the inputs; docs/scaling.md, "The cluster's ceiling", explains the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Ceiling", "ceiling", "ceiling_table", "from_figures", "lines", "replay_ceiling_per_s",
           "TABLE_CORES"]

TABLE_CORES = (2, 4, 8, 16)


@dataclass(frozen=True)
class Ceiling:
    """What one primary of ``cores`` carries at ``utilisation`` (0 to 1)."""

    cores: int
    utilisation: float
    deliveries_per_s: float      # the primary's CPU spent on deliveries, divided
    replica_wal_mb_per_s: float  # WAL a replica receives and replays at that rate (MB = 10^6 B)
    replica_replay_cores: float | None  # cores the replica's startup + walreceiver keep busy

    @property
    def replay_bound(self) -> bool:
        """True when the replica's single replay process could not keep up at this rate
        (it would need more than one core): replicas then lag without bound."""
        return self.replica_replay_cores is not None and self.replica_replay_cores > 1.0


def ceiling(*, cores: int, utilisation: float, primary_cpu_ms: float, wal_bytes: float,
            replay_cpu_ms: float | None = None) -> Ceiling:
    """The ceiling of one primary of ``cores`` kept busy at ``utilisation``, from the
    primary's CPU (ms) and WAL (bytes) per delivery and, when known, the replica's
    replay CPU (ms) per delivery."""
    if primary_cpu_ms <= 0:
        raise ValueError(f"the primary's CPU per delivery must be positive, not {primary_cpu_ms}")
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation is a fraction of the cores (0 to 1], not {utilisation}")
    rate = cores * utilisation * 1000.0 / primary_cpu_ms
    replay = None if replay_cpu_ms is None else rate * replay_cpu_ms / 1000.0
    return Ceiling(cores, utilisation, rate, rate * wal_bytes / 1e6, replay)


def ceiling_table(cores: tuple[int, ...] = TABLE_CORES, **inputs) -> list[Ceiling]:
    """:func:`ceiling` for each number of ``cores`` (same utilisation and inputs)."""
    return [ceiling(cores=n, **inputs) for n in cores]


def replay_ceiling_per_s(replay_cpu_ms: float) -> float | None:
    """Deliveries/s whose WAL one replica's replay (one process, one core) can keep up with;
    None when the replay's CPU per delivery was not measured (0)."""
    return 1000.0 / replay_cpu_ms if replay_cpu_ms > 0 else None


def from_figures(figures: dict, *, cores: tuple[int, ...], utilisation: float) -> list[Ceiling]:
    """:func:`ceiling_table` from a window's figures (``cluster/metering.py``): the primary
    server's CPU, the WAL it wrote (its LSN's advance) and the replica's replay CPU."""
    return ceiling_table(cores, utilisation=utilisation,
                         primary_cpu_ms=figures["pg_server_cpu_ms_per_delivery"],
                         wal_bytes=figures["wal_bytes_all_databases_per_delivery"],
                         replay_cpu_ms=figures["replica_replay_cpu_ms_per_delivery"])


def lines(figures: dict, rows: list[Ceiling], idle: dict | None = None) -> list[str]:
    """The run's report of the primary's and the replica's costs and of the ceiling: ``rows``
    are the primary of the cores asked for, then the table's (each in one line)."""
    f = figures
    out = [
        f"cluster: PostgreSQL per delivery ({f['deliveries']} deliveries over {f['window_s']} s, "
        f"{f['attempts_per_delivery']} attempts each): primary server CPU "
        f"{f['pg_server_cpu_ms_per_delivery']} ms (backends {f['pg_cpu_ms_per_delivery']} ms), "
        f"commits {f['pg_commits_per_delivery']}, WAL {f['wal_bytes_all_databases_per_delivery']} "
        f"bytes; replica received {f['replica_received_bytes_per_delivery']} bytes, replayed "
        f"{f['replica_replayed_bytes_per_delivery']} bytes, startup + walreceiver CPU "
        f"{f['replica_replay_cpu_ms_per_delivery']} ms"
        + ("" if f["replica_replayed_up_to_end"] else " (the replica had not caught up)"),
    ]
    if idle is not None:
        out.append(f"cluster: PostgreSQL idle before the load ({idle['window_s']} s): primary "
                   f"server CPU {idle['pg_server_cpu_ms_per_s']} ms/s, WAL "
                   f"{idle['wal_bytes_per_s']} bytes/s; replica startup + walreceiver CPU "
                   f"{idle['replica_replay_cpu_ms_per_s']} ms/s (such costs of the time are "
                   f"counted in the figures above)")
    row = rows[0]
    replay = ("" if row.replica_replay_cores is None else
              f", its replay busy {row.replica_replay_cores:.2f} cores"
              + (" (more than its one replay process has: it falls behind)"
                 if row.replay_bound else ""))
    out.append(f"cluster: ceiling: one primary of {row.cores} cores at {row.utilisation:.0%} "
               f"carries {row.deliveries_per_s:,.0f} deliveries/s; a replica replays "
               f"{row.replica_wal_mb_per_s:.1f} MB/s of WAL{replay}")
    if len(rows) > 1:
        out.append("cluster: ceiling by cores: " + ", ".join(
            f"{r.cores}: {r.deliveries_per_s:,.0f}/s, {r.replica_wal_mb_per_s:.1f} MB/s"
            for r in rows[1:]))
    replay_limit = replay_ceiling_per_s(f["replica_replay_cpu_ms_per_delivery"])
    if replay_limit is not None:
        out.append(f"cluster: ceiling: one replica's replay (one process) keeps up with "
                   f"{replay_limit:,.0f} deliveries/s at most")
    return out
