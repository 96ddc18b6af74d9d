"""Scenario "cost" (run on request: ``--scenarios cost``): what one delivery costs each part.

Two drains of ``cost_deliveries`` deliveries to one fast subscription with
the scenario pool (the Procfile's):

1. With nothing watching: PostgreSQL commits of the benchmark database
   (``pg_stat_database``), WAL bytes (``pg_waldump``, the records of this
   database and their commits), CPU of its backends and of the worker's
   process group, sampled every 0.2 s from the first arrival to the last.
2. With Redis ``MONITOR`` (which slows Redis, so apart): the commands sent
   to the broker's db, by name.

Everything is divided by the deliveries drained; docs/scaling.md builds
the capacity model on these figures.
"""

from __future__ import annotations

import time

from sqlalchemy.engine import make_url

from ..context import Context
from ..meter import Meter
from ..resources import RedisCommands
from . import Row
from .drain import drain_timeout

PATH = "/cost"


def _prepare(ctx: Context, n: int) -> None:
    ctx.reset()
    ctx.queue_deliveries(PATH, n, name="cost")


def _resources(ctx: Context, n: int) -> dict:
    """Drain ``n`` deliveries, sampling CPU; commits, WAL and CPU per delivery."""
    from webhooks.storage.db import get_engine

    database = make_url(ctx.options.database_url).database
    _prepare(ctx, n)
    with get_engine().connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        worker = ctx.start_worker(ctx.options.scenario_pool, "cost")
        meter = Meter(connection, database, {"worker": [worker.pid]})
        try:
            ctx.receiver.wait_for(1, PATH, timeout=60, interval=0.01)
            meter.start()
            started = time.monotonic()
            deadline = started + drain_timeout(n)
            while ctx.receiver.count(PATH) < n and time.monotonic() < deadline:
                meter.sample()
                time.sleep(0.2)
            seconds = time.monotonic() - started
            meter.stop()
        finally:
            ctx.stop(worker)
        drained = ctx.receiver.count(PATH) - 1  # counted from the first arrival on
        figures = meter.per_delivery(drained)
    return {
        "deliveries": drained,
        "seconds": round(seconds, 2),
        "rate_per_s": round(drained / seconds, 1) if seconds else None,
        **figures,
    }


def _redis_commands(ctx: Context, n: int) -> dict:
    """Drain ``n`` deliveries under MONITOR; the broker db's commands per delivery, by name."""
    _prepare(ctx, n)
    with RedisCommands(ctx.options.broker_url) as commands:
        worker = ctx.start_worker(ctx.options.scenario_pool, "cost-redis")
        try:
            ctx.receiver.wait_for(n, PATH, timeout=drain_timeout(n), interval=0.1)
            time.sleep(1.0)  # the last acknowledgements
        finally:
            ctx.stop(worker)
    return commands.per_delivery(n)


def run(ctx: Context) -> dict:
    n = ctx.sizes.cost_deliveries
    result = {"pool": ctx.options.scenario_pool.label, **_resources(ctx, n),
              **_redis_commands(ctx, n)}
    print(f"  {result}", flush=True)
    ctx.results["cost"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("cost")
    if not r:
        return []
    return [
        Row("cost", f"deliveries/s ({r['pool']})", r["rate_per_s"], "/s"),
        Row("cost", "PostgreSQL commits per delivery", r["pg_commits_per_delivery"]),
        Row("cost", "WAL bytes per delivery", r["wal_bytes_per_delivery"], "B"),
        Row("cost", "PostgreSQL CPU per delivery", r["pg_cpu_ms_per_delivery"], "ms"),
        Row("cost", "PostgreSQL connections opened per delivery", r.get("pg_sessions_per_delivery")),
        Row("cost", "worker CPU per delivery", r["worker_cpu_ms_per_delivery"], "ms"),
        Row("cost", "Redis commands per delivery", r["redis_commands_per_delivery"]),
    ]
