"""One leg of the shared scenario: a worker kept busy by emitting processes, measured in a window.

The worker is started first and is ready; the emitters (``emitter.py``,
or django-webhook2's) then start, say when their imports are done, and emit
at full speed held to a bounded backlog (``backpressure.py``). From the first arrival, ``shared_warmup`` seconds
pass (connections open, caches fill), then for ``shared_seconds``: the
deliveries that reached the receiver, and what the window cost (``Meter``:
CPU of the worker's and the emitters' process groups, the database's
commits, WAL and backend CPU). Then, for ``shared_monitor_seconds`` more,
the Redis commands of the broker's db per delivery (MONITOR slows Redis,
so that window is not the timed one). Everything is stopped at the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..context import Context
from ..emitter import READY_MARK, argv_for
from ..meter import Meter
from ..processes import ManagedProcess
from ..resources import RedisCommands

__all__ = ["Leg", "run_leg", "KEYS"]

SAMPLE_S = 0.2
FIRST_ARRIVAL_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 60.0
KEYS = ["rate_per_s", "deliveries", "worker_cpu_ms_per_delivery", "emitters_cpu_ms_per_delivery",
        "pg_commits_per_delivery", "pg_cpu_ms_per_delivery", "pg_sessions_per_delivery",
        "wal_bytes_per_delivery",
        "wal_bytes_all_databases_per_delivery", "redis_commands_per_delivery",
        "machine_cpu_ms_per_delivery", "machine_busy_cores"]


@dataclass(frozen=True)
class Leg:
    """What one leg runs: its receiver path, its emitter, and where its state lives."""

    name: str
    path: str
    python: str  # the emitters' interpreter
    module: str  # the emitters' module (``-m``)
    extra: tuple[str, ...]  # the emitters' own arguments
    env: dict  # the emitters' environment
    database: str  # the PostgreSQL database whose commits and WAL count
    broker_url: str  # the Redis db whose commands count


def start_emitters(ctx: Context, leg: Leg) -> list[ManagedProcess]:
    """``shared_emitters`` emitting processes sharing the backlog, registered for clean-up."""
    sizes = ctx.sizes
    # Each stops by itself after the longest the window could take (a hang of the harness).
    seconds = sizes.shared_warmup + sizes.shared_seconds + sizes.shared_monitor_seconds + 300
    emitters = []
    for index in range(sizes.shared_emitters):
        argv = argv_for(leg.python, leg.module, port=ctx.receiver.port, path=leg.path,
                        backlog=sizes.shared_backlog, share=sizes.shared_emitters,
                        seconds=seconds, extra=list(leg.extra))
        name = f"{leg.name}-emitter-{index}"
        emitters.append(ctx.registry.add(ManagedProcess.spawn(
            name, argv, env=leg.env, log_path=ctx.log_dir / f"{name}.log")))
    for emitter in emitters:  # their start-up CPU must not count
        emitter.wait_for_log(READY_MARK, STARTUP_TIMEOUT_S)
    return emitters


def run_leg(ctx: Context, leg: Leg, workers: list[ManagedProcess]) -> dict:
    """Start the emitters against the running ``workers``, measure, stop all; the figures
    (a worker's CPU per delivery is that of all the workers' process groups together)."""
    emitters = start_emitters(ctx, leg)
    try:
        _wait_first_arrival(ctx, leg, emitters)
        time.sleep(ctx.sizes.shared_warmup)
        figures = _timed_window(ctx, leg, workers, emitters)
        if ctx.sizes.shared_monitor_seconds > 0:
            figures.update(_redis_window(ctx, leg, emitters))
    finally:
        ctx.stop(*emitters, *workers)
    return figures


def _check_alive(processes: list[ManagedProcess]) -> None:
    for process in processes:
        if not process.alive():
            raise RuntimeError(f"{process.name} exited early:\n{process.log_tail()}")


def _wait_first_arrival(ctx: Context, leg: Leg, emitters: list[ManagedProcess]) -> None:
    deadline = time.monotonic() + FIRST_ARRIVAL_TIMEOUT_S
    while ctx.receiver.count(leg.path) == 0:
        _check_alive(emitters)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{leg.name}: nothing arrived in {FIRST_ARRIVAL_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def _timed_window(ctx: Context, leg: Leg, workers: list[ManagedProcess],
                  emitters: list[ManagedProcess]) -> dict:
    """Deliveries/s over ``shared_seconds``, and the Meter's figures per delivery."""
    from webhooks.storage.db import get_engine

    groups = {"worker": [w.pid for w in workers], "emitters": [e.pid for e in emitters]}
    with get_engine().connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        meter = Meter(connection, leg.database, groups)
        before = ctx.receiver.count(leg.path)
        started = time.monotonic()
        meter.start()
        while time.monotonic() - started < ctx.sizes.shared_seconds:
            time.sleep(SAMPLE_S)
            meter.sample()
            _check_alive(emitters + workers)
        meter.stop()
        seconds = time.monotonic() - started
        delivered = ctx.receiver.count(leg.path) - before
        figures = meter.per_delivery(delivered)
    return {"deliveries": delivered, "seconds": round(seconds, 2),
            "rate_per_s": delivered / seconds, **figures}


def _redis_window(ctx: Context, leg: Leg, emitters: list[ManagedProcess]) -> dict:
    with RedisCommands(leg.broker_url) as commands:
        before = ctx.receiver.count(leg.path)
        time.sleep(ctx.sizes.shared_monitor_seconds)
        commands.end()
        delivered = ctx.receiver.count(leg.path) - before
    _check_alive(emitters)
    return commands.per_delivery(delivered)
