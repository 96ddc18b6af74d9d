"""Scenario "realistic": receivers that take 50 ms to 1 s to answer, as real ones do.

100 subscriptions, spread over ``tenants`` accounts (10 by default, 10
subscriptions each, so that the per-account cap, ``WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT``
= 20, does not bind before the pool does, as with many tenants in
production), each to its own receiver path. Each repeat drains
``realistic_deliveries`` deliveries (spread evenly over the subscriptions,
queued round robin) three times with the scenario pool (the Procfile's
worker line unless ``--scenario-pool``):

1. ``fast``: every endpoint answers at once (the reference);
2. ``slow``: every endpoint answers after 200 ms (``--slow-delay-ms``);
3. ``mix``: the fixed mix of ``mix.py``, 50 to 1,000 ms (``--delay-mix``).

Deliveries/s run from the first arrival to the last, as in throughput; the
ratio of a slow phase is taken against the fast phase of the same repeat
(target 0.8: the CPU, not the pool's concurrency, is the limit). The worker's
CPU per delivery is read from ``/proc`` over the same window. Beside them,
the bound the concurrency alone sets: concurrency / mean delay.
"""

from __future__ import annotations

import time

from sqlalchemy.engine import make_url

from .. import mix, seed, services
from ..context import Context, Sizes
from ..meter import Meter
from ..stats import summarise, summarise_all
from . import Row
from .drain import drain_figures, drain_timeout

PREFIX = "/realistic/"
PHASES = ("fast", "slow", "mix")
KEYS = ["rate_per_s", "worker_cpu_ms_per_delivery", "pg_cpu_ms_per_delivery", "duplicates",
        "delivered"]


def phase_delays(sizes: Sizes, phase: str) -> list[float]:
    """Each subscription's answer time (s) in ``phase``, in subscription order."""
    n = sizes.realistic_subscriptions
    if phase == "fast":
        return [0.0] * n
    if phase == "slow":
        return [sizes.realistic_slow_ms / 1000.0] * n
    return mix.dealt(mix.log_spread(n, *sizes.realistic_mix_ms))


def _subscriptions(ctx: Context, count: int) -> list[seed.Target]:
    """``count`` subscriptions over ``tenants`` accounts, subscription i at ``PREFIX + i``."""
    tenants = max(1, min(ctx.sizes.tenants, count))
    targets: list[seed.Target] = []
    for i in range(count):
        url = ctx.receiver.url(f"{PREFIX}{i}")
        if i < tenants:
            targets.append(seed.make_target(url, name=f"realistic-{i}"))
        else:
            targets.append(seed.add_subscription(targets[i % tenants].account_id, url))
    return targets


def _prepare(ctx: Context, delays: list[float]) -> int:
    """Empty everything, set the delays, seed and publish the deliveries; how many."""
    ctx.reset()
    ctx.receiver.set_delays({f"{PREFIX}{i}": d for i, d in enumerate(delays)})
    targets = _subscriptions(ctx, len(delays))
    each = max(1, ctx.sizes.realistic_deliveries // len(targets))
    ids = mix.interleave([seed.bulk_deliveries(target, each) for target in targets])
    services.analyse(ctx.options.database_url)
    seed.publish_deliveries(ids)
    return len(ids)


def measure(ctx: Context, phase: str) -> dict:
    """One drain of ``phase``: deliveries/s, worker CPU per delivery, duplicates."""
    from webhooks.storage.db import get_engine

    n = _prepare(ctx, phase_delays(ctx.sizes, phase))
    database = make_url(ctx.options.database_url).database
    with get_engine().connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        worker = ctx.start_worker(ctx.options.scenario_pool, f"realistic-{phase}")
        meter = Meter(connection, database, {"worker": [worker.pid]}, wal=False)
        try:
            ctx.receiver.wait_for(1, timeout=60, interval=0.01)
            meter.start()
            deadline = time.monotonic() + drain_timeout(n)
            while ctx.receiver.count() < n and time.monotonic() < deadline:
                meter.sample()
                time.sleep(0.2)
            meter.stop()
        finally:
            ctx.stop(worker)
        figures = drain_figures(ctx.receiver.records(), n)
        figures.update(meter.per_delivery(max(figures["delivered"] - 1, 1)))
    return figures


def run(ctx: Context) -> dict:
    runs: dict[str, list[dict]] = {phase: [] for phase in PHASES}
    for repeat in range(ctx.options.repeats):
        for phase in PHASES:
            runs[phase].append(measure(ctx, phase))
            r = runs[phase][-1]
            rate = f"{r['rate_per_s']:.1f}/s" if r["rate_per_s"] else "no rate"
            print(f"  realistic {phase} run {repeat + 1}: {rate}, worker "
                  f"{r['worker_cpu_ms_per_delivery']:.2f} ms/delivery ({r['delivered']}/{r['n']} "
                  f"delivered)", flush=True)
            ctx.results["realistic"] = _summary(ctx, runs)
    return ctx.results["realistic"]


def _summary(ctx: Context, runs: dict[str, list[dict]]) -> dict:
    sizes, pool = ctx.sizes, ctx.options.scenario_pool
    out = {
        "pool": pool.label, "subscriptions": sizes.realistic_subscriptions,
        "tenants": min(sizes.tenants, sizes.realistic_subscriptions),
        "deliveries": sizes.realistic_deliveries, "slow_ms": sizes.realistic_slow_ms,
        "mix_ms": list(sizes.realistic_mix_ms),
    }
    for phase in PHASES:
        delays = phase_delays(sizes, phase)
        out[phase] = {**summarise_all(runs[phase], KEYS),
                      "mean_delay_ms": round(sum(delays) / len(delays) * 1000, 1),
                      "concurrency_bound_per_s": mix.concurrency_bound(pool.concurrency, delays)}
        if phase != "fast":
            out[phase]["ratio_to_fast"] = summarise(
                _ratio(r["rate_per_s"], f["rate_per_s"]) for r, f in zip(runs[phase], runs["fast"]))
    return out


def _ratio(value, reference):
    return value / reference if value and reference else None


def rows(results: dict) -> list[Row]:
    r = results.get("realistic")
    if not r:
        return []
    names = {"fast": "at once", "slow": f"{r['slow_ms']:.0f} ms",
             "mix": f"{r['mix_ms'][0]:.0f}-{r['mix_ms'][1]:.0f} ms"}
    out = []
    for phase in PHASES:
        entry = r.get(phase) or {}
        if not entry.get("rate_per_s"):
            continue
        label = f"{r['pool']}, {names[phase]}"
        out.append(Row("realistic", f"{label}: deliveries/s", entry["rate_per_s"], "/s"))
        if "ratio_to_fast" in entry:
            out.append(Row("realistic", f"{label}: ratio to at once", entry["ratio_to_fast"], "x",
                           ">= 0.8"))
        if entry["concurrency_bound_per_s"]:
            out.append(Row("realistic", f"{label}: concurrency / mean delay",
                           round(entry["concurrency_bound_per_s"], 1), "/s"))
        out.append(Row("realistic", f"{label}: worker CPU per delivery",
                       entry["worker_cpu_ms_per_delivery"], "ms"))
    return out
