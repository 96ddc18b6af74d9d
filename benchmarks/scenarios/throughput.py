"""Scenarios 1 and 2: the ceiling and the service's sustained throughput.

For each pool configuration and each repeat, in this order:

1. ceiling: N bare ceiling messages are published, then a ceiling worker
   starts and drains them (``benchmarks/ceiling_app.py``);
2. throughput: N deliveries to one fast subscription are inserted in bulk and
   their messages published, then a service worker starts and drains them.

Timing runs from the first arrival at the receiver to the last, so worker
start-up is not counted; rates are deliveries per second. The ratio of each
repeat is taken against the ceiling of the same repeat.
"""

from __future__ import annotations

import time

from sqlalchemy import text

from ..context import Context, PoolConfig
from ..stats import summarise
from . import Row
from .drain import drain_figures, drain_timeout, wait_for_unique

CEILING_PATH = "/ceiling"
FAST_PATH = "/fast"


def measure_ceiling(ctx: Context, config: PoolConfig, n: int) -> dict:
    """One drain of ``n`` bare signed-POST tasks; deliveries/s and duplicates."""
    from ..ceiling_app import send_many

    ctx.reset()
    publish_rate = send_many(n)
    worker = ctx.start_ceiling_worker(config, CEILING_PATH)
    try:
        arrivals = wait_for_unique(ctx.receiver, CEILING_PATH, n, drain_timeout(n))
    finally:
        ctx.stop(worker)
    return {**drain_figures(arrivals, n), "publish_per_s": publish_rate}


def measure_service(ctx: Context, config: PoolConfig, n: int) -> dict:
    """One drain of ``n`` real deliveries through the service worker."""
    ctx.reset()
    publish_rate = ctx.queue_deliveries(FAST_PATH, n)
    worker = ctx.start_worker(config, f"throughput-{config.label}")
    try:
        arrivals = wait_for_unique(ctx.receiver, FAST_PATH, n, drain_timeout(n))
        done = _wait_done(n, timeout=15)
    finally:
        ctx.stop(worker)
    return {**drain_figures(arrivals, n), "publish_per_s": publish_rate, "done": done}


def _wait_done(n: int, timeout: float) -> int:
    """Deliveries in status done, waiting up to ``timeout`` s for all ``n`` to be recorded."""
    from webhooks.storage.db import session_scope

    deadline = time.monotonic() + timeout
    while True:
        with session_scope() as session:
            done = session.execute(
                text("SELECT count(*) FROM deliveries WHERE status = 'done'")).scalar()
        if done >= n or time.monotonic() >= deadline:
            return done
        time.sleep(0.2)


def run(ctx: Context) -> dict:
    """Run the selected ones of ceiling and throughput; stores both in ``ctx.results``.

    The results are rebuilt after every run, so an interrupted run keeps
    the repeats it finished.
    """
    wanted = set(ctx.options.scenarios)
    n = ctx.sizes.throughput_deliveries
    runs: dict[str, tuple[list, list]] = {}
    for config in ctx.options.pools:
        ceiling_runs, service_runs = runs.setdefault(config.label, ([], []))
        for repeat in range(ctx.options.repeats):
            if "ceiling" in wanted:
                ceiling_runs.append(measure_ceiling(ctx, config, n))
                _progress("ceiling", config, repeat, ceiling_runs[-1])
                _store(ctx, wanted, n, runs)
            if "throughput" in wanted:
                service_runs.append(measure_service(ctx, config, n))
                _progress("throughput", config, repeat, service_runs[-1])
                _store(ctx, wanted, n, runs)
    return ctx.results.get("throughput") or ctx.results.get("ceiling")


def _store(ctx: Context, wanted: set, n: int, runs: dict) -> None:
    """Summarise the runs so far into ``ctx.results["ceiling"]`` and ``["throughput"]``."""
    ceiling: dict = {"n": n, "configs": {}}
    throughput: dict = {"n": n, "configs": {}}
    for label, (ceiling_runs, service_runs) in runs.items():
        if ceiling_runs:
            ceiling["configs"][label] = _summary(ceiling_runs)
        if service_runs:
            entry = _summary(service_runs)
            entry["done"] = summarise(r["done"] for r in service_runs)
            if ceiling_runs:
                entry["ratio_to_ceiling"] = summarise(
                    _ratio(s["rate_per_s"], c["rate_per_s"])
                    for s, c in zip(service_runs, ceiling_runs))
            throughput["configs"][label] = entry
    if throughput["configs"]:
        throughput["best"] = max(
            throughput["configs"],
            key=lambda label: throughput["configs"][label]["rate_per_s"]["median"] or 0)
    if "ceiling" in wanted:
        ctx.results["ceiling"] = ceiling
    if "throughput" in wanted:
        ctx.results["throughput"] = throughput


def _summary(runs: list[dict]) -> dict:
    return {
        "rate_per_s": summarise(r["rate_per_s"] for r in runs),
        "duplicates": summarise(r["duplicates"] for r in runs),
        "delivered": summarise(r["delivered"] for r in runs),
        "publish_per_s": summarise(r["publish_per_s"] for r in runs),
    }


def _ratio(value, reference):
    if value is None or not reference:
        return None
    return value / reference


def _progress(name: str, config: PoolConfig, repeat: int, figures: dict) -> None:
    rate = figures["rate_per_s"]
    shown = f"{rate:.1f}/s" if rate else "no rate"
    print(f"  {name} {config.label} run {repeat + 1}: {shown} ({figures['delivered']}/"
          f"{figures['n']} delivered, {figures['duplicates']} duplicates)", flush=True)


def rows(results: dict) -> list[Row]:
    out = []
    for label, entry in results.get("ceiling", {}).get("configs", {}).items():
        out.append(Row("ceiling", f"{label} deliveries/s", entry["rate_per_s"], "/s"))
    throughput = results.get("throughput", {})
    for label, entry in throughput.get("configs", {}).items():
        out.append(Row("throughput", f"{label} deliveries/s", entry["rate_per_s"], "/s"))
        if "ratio_to_ceiling" in entry:
            out.append(Row("throughput", f"{label} ratio to ceiling", entry["ratio_to_ceiling"],
                           "x", ">= 0.8"))
        out.append(Row("throughput", f"{label} duplicates", entry["duplicates"], "", "0"))
    if "best" in throughput:
        out.append(Row("throughput", "best pool", throughput["best"]))
    return out
