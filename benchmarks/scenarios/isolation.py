"""Scenario 5: what one hanging endpoint does to a healthy one.

Per repeat one service worker runs (the scenario pool) with
``WEBHOOKS_TIMEOUT`` = ``isolation_timeout`` and the pause rule switched off
(``WEBHOOKS_PAUSE_AFTER`` very high: a hang that pauses its endpoint after 25
time-outs would hide the effect being measured). Two phases, each emitting
for ``isolation_seconds``:

- baseline: events for the healthy subscription only, at half the paced rate;
- hanging: the same healthy events plus as many for a subscription whose
  endpoint never answers, alternating (so the hanging one takes half).

For the healthy subscription: throughput = deliveries that arrived divided by
the time from the first emit to the last arrival (or to the end of the wait,
``isolation_drain_cap`` s after the last emit, if some never arrived), and
emit -> arrival latency; a delivery that never arrived counts with the time
waited for it, so its percentile is then a lower bound.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from .. import seed
from ..context import Context
from ..pacing import paced
from ..stats import percentile, summarise_all
from . import Row
from .common import fmt, warm_up
from .drain import first_arrivals

HEALTHY_PATH = "/iso-healthy"
BASELINE_PATH = "/iso-baseline"
HANG_PATH = "/iso-hang"
NO_PAUSE = 1_000_000


def _phase(ctx: Context, healthy: seed.Target, hanging: seed.Target | None, rate: float) -> dict:
    """Emit for the phase, wait for the healthy deliveries, return the healthy figures."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    data = sample_data(seed.EVENT_TYPE)
    targets = [healthy] if hanging is None else [healthy, hanging]
    total_rate = rate * len(targets)

    def emit(i):
        target = targets[i % len(targets)]
        return target is healthy, emit_event(target.account_id, seed.EVENT_TYPE, data).id

    path = urlsplit(healthy.url).path
    warm_up(ctx.receiver, healthy, path)
    run = paced(emit, total_rate, ctx.sizes.isolation_seconds)
    sent = {event_id: at for (is_healthy, event_id), at in zip(
        [r or (False, None) for r in run.results], run.started) if is_healthy and at}
    first = first_arrivals(ctx.receiver, path, sent, "event_id",
                           timeout=ctx.sizes.isolation_drain_cap)
    waited_until = time.time()
    delivered = len(first)
    complete = delivered == len(sent)
    window_end = max(first.values()) if complete and first else waited_until
    latencies = [first.get(i, waited_until) - at for i, at in sent.items()]
    return {
        "healthy_sent": len(sent),
        "healthy_delivered": delivered,
        "healthy_rate_per_s": delivered / max(window_end - run.first_start, 1e-9),
        "healthy_p50_ms": percentile(latencies, 50) * 1000 if latencies else None,
        "healthy_p99_ms": percentile(latencies, 99) * 1000 if latencies else None,
        "hanging_attempts": ctx.receiver.count(HANG_PATH) if hanging else 0,
        "achieved_rate_per_s": run.rate,
    }


def measure(ctx: Context, rate: float) -> dict:
    ctx.reset()
    ctx.receiver.set_mode(HANG_PATH, "hang")
    worker = ctx.start_worker(ctx.options.scenario_pool, "isolation",
                              WEBHOOKS_TIMEOUT=ctx.sizes.isolation_timeout,
                              WEBHOOKS_PAUSE_AFTER=NO_PAUSE)
    try:
        baseline = _phase(ctx, seed.make_target(ctx.receiver.url(BASELINE_PATH), "baseline"),
                          None, rate)
        hanging = _phase(ctx, seed.make_target(ctx.receiver.url(HEALTHY_PATH), "healthy"),
                         seed.make_target(ctx.receiver.url(HANG_PATH), "hanging"), rate)
    finally:
        ctx.stop(worker)
    out = {f"baseline_{k}": v for k, v in baseline.items() if k != "hanging_attempts"}
    out.update({f"hanging_{k}": v for k, v in hanging.items()})
    out["throughput_kept"] = (hanging["healthy_rate_per_s"] / baseline["healthy_rate_per_s"]
                              if baseline["healthy_rate_per_s"] else None)
    return out


def run(ctx: Context) -> dict:
    total_rate, source = ctx.paced_rate()
    healthy_rate = total_rate / 2
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx, healthy_rate))
        r = runs[-1]
        print(f"  isolation run {repeat + 1}: healthy {fmt(r['baseline_healthy_rate_per_s'])}/s -> "
              f"{fmt(r['hanging_healthy_rate_per_s'])}/s with a hanging endpoint, p99 "
              f"{fmt(r['baseline_healthy_p99_ms'], '.0f')} -> "
              f"{fmt(r['hanging_healthy_p99_ms'], '.0f')} ms "
              f"({r['hanging_healthy_delivered']}/{r['hanging_healthy_sent']} delivered)", flush=True)
    keys = sorted(runs[0]) if runs else []
    result = {
        "healthy_rate_offered_per_s": healthy_rate,
        "rate_source": source,
        "timeout_s": ctx.sizes.isolation_timeout,
        "seconds": ctx.sizes.isolation_seconds,
        "pool": ctx.options.scenario_pool.label,
        **summarise_all(runs, keys),
    }
    ctx.results["isolation"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("isolation")
    if not r:
        return []
    return [
        Row("isolation", "healthy deliveries/s alone", r["baseline_healthy_rate_per_s"], "/s"),
        Row("isolation", "healthy deliveries/s beside a hang", r["hanging_healthy_rate_per_s"], "/s"),
        Row("isolation", "healthy throughput kept", r["throughput_kept"], "x", ">= 0.9"),
        Row("isolation", "healthy p99 alone", r["baseline_healthy_p99_ms"], "ms"),
        Row("isolation", "healthy p99 beside a hang", r["hanging_healthy_p99_ms"], "ms", "< 100"),
    ]
