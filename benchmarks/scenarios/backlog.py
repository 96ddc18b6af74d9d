"""Scenario 6: a large backlog of retries waiting, and what it costs meanwhile.

One large endpoint's outage leaves ``backlog_deliveries`` deliveries in the
state a failed first attempt leaves them: ``pending``, ``attempt_count`` 1,
``next_attempt_at`` ahead. A fraction (``backlog_countdown_fraction``) has a
wait within ``WEBHOOKS_COUNTDOWN_LIMIT``, but as the service does
(countdowns.py) at most ``WEBHOOKS_COUNTDOWN_MAX`` of them ride a countdown
message on the broker; the rest are parked (no message; the sweep sends them
when due). All fall due ``backlog_wait`` s
after seeding (600 s rather than the ladder's 60 s: publishing 80,000
messages alone takes minutes on a busy 2-core machine), so the whole
measurement happens inside the wait; a countdown message costs the worker
the same memory whatever its due time.

With a service worker (scenario pool) and beat running, the harness
publishes the countdown messages, waits until the worker has taken them,
then for ``backlog_measure_seconds`` emits fresh events to a healthy
endpoint while sampling the worker's memory (sum over its processes, MB) and
Redis ``used_memory`` (MB). Fresh events go at the latency scenario's rate
(half the sustained maximum measured in this run; ``backlog_fresh_rate``
without one), so their latency compares with the latency scenario's.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from .. import seed, services
from ..context import Context
from ..pacing import paced
from ..processes import memory_of_group
from ..stats import summarise_all
from . import Row
from .common import fmt, warm_up
from .latency import figures, latencies

OUTAGE_PATH = "/outage"
FRESH_PATH = "/fresh"
# Seconds kept free before the backlog falls due: the fresh deliveries' wait and slack.
DUE_MARGIN_S = 30.0


def _sample(ctx: Context, worker) -> dict:
    memory = memory_of_group(worker)
    broker = services.broker_memory(ctx.options.broker_url)
    queues = services.broker_queue_lengths(ctx.options.broker_url)
    return {**memory, "broker_mb": broker["used_memory_mb"], **queues}


def _wait_taken(ctx: Context, expected: int, give_up_at: float) -> float:
    """Seconds until the worker holds the countdown messages (none left ready in the queue).

    Gives up at ``give_up_at`` (``time.time()`` s) so the measurement still
    ends before the backlog falls due; what the worker holds then is reported.
    """
    started = time.monotonic()
    while time.time() < give_up_at:
        queues = services.broker_queue_lengths(ctx.options.broker_url)
        if queues["ready"] == 0 and queues["unacked"] >= expected * 0.99:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def _fresh_latency(ctx: Context, worker, samples: list, rate: float) -> dict:
    """Emit fresh events while sampling memory; latency figures of the fresh deliveries."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    fresh = seed.make_target(ctx.receiver.url(FRESH_PATH), "fresh")
    data = sample_data(seed.EVENT_TYPE)
    warm_up(ctx.receiver, fresh, FRESH_PATH)
    box = {}
    sender = threading.Thread(target=lambda: box.update(run=paced(
        lambda i: emit_event(fresh.account_id, seed.EVENT_TYPE, data).id,
        rate, ctx.sizes.backlog_measure_seconds, threads=2)))
    sender.start()
    while sender.is_alive():
        samples.append(_sample(ctx, worker))
        sender.join(timeout=0.5)
    run = box["run"]
    sent = {event_id: at for event_id, at in zip(run.results, run.started) if at}
    seconds, missing = latencies(ctx.receiver, FRESH_PATH, sent, "event_id", timeout=60)
    return figures(seconds, missing, run)


def _countdown_cap(ctx: Context) -> int:
    """WEBHOOKS_COUNTDOWN_MAX as the workers see it: the service parks what is beyond it."""
    from webhooks.config import load_settings

    return load_settings(ctx.env()).countdown_max


def measure(ctx: Context, fresh_rate: float) -> dict:
    sizes = ctx.sizes
    ctx.reset()
    ctx.receiver.set_mode(OUTAGE_PATH, "fail")
    outage = seed.make_target(ctx.receiver.url(OUTAGE_PATH), "outage")
    worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool, "backlog")
    try:
        idle = _sample(ctx, worker)
        wanted = int(round(sizes.backlog_deliveries * sizes.backlog_countdown_fraction))
        on_countdown = min(wanted, _countdown_cap(ctx))
        parked = sizes.backlog_deliveries - on_countdown
        due = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=sizes.backlog_wait)
        ids = seed.bulk_deliveries(outage, on_countdown, attempt_count=1, next_attempt_at=due)
        seed.bulk_deliveries(outage, parked, attempt_count=1, next_attempt_at=due, parked=True)
        services.analyse(ctx.options.database_url)
        publish_rate = seed.publish_deliveries(ids, 1, eta=due)
        give_up_at = due.timestamp() - sizes.backlog_measure_seconds - DUE_MARGIN_S
        ingest_seconds = _wait_taken(ctx, on_countdown, give_up_at)
        held = services.broker_queue_lengths(ctx.options.broker_url)["unacked"]
        samples: list = []
        fresh = _fresh_latency(ctx, worker, samples, fresh_rate)
        samples.append(_sample(ctx, worker))
        seconds_left = (due - dt.datetime.now(dt.timezone.utc)).total_seconds()
        early = ctx.receiver.count(OUTAGE_PATH)
    finally:
        ctx.stop(worker, beat)
    peak = {key: max(s[key] for s in samples) for key in samples[0]}
    return {
        "countdown_wanted": wanted,
        "countdown_messages": on_countdown,
        "parked": parked,
        "publish_per_s": publish_rate,
        "ingest_seconds": ingest_seconds,
        "held_by_worker": held,  # countdown messages the worker had taken when measuring began
        "worker_idle_rss_mb": idle["rss_mb"],
        "worker_idle_pss_mb": idle["pss_mb"],
        "worker_rss_mb": peak["rss_mb"],
        "worker_pss_mb": peak["pss_mb"],
        "worker_max_process_rss_mb": peak["max_rss_mb"],
        "broker_idle_mb": idle["broker_mb"],
        "broker_used_mb": peak["broker_mb"],
        "broker_unacked": samples[-1]["unacked"],
        "broker_ready": samples[-1]["ready"],
        "fresh_p50_ms": fresh["p50_ms"],
        "fresh_p99_ms": fresh["p99_ms"],
        "fresh_missing": fresh["missing"],
        "fresh_rate_per_s": fresh["achieved_rate_per_s"],
        "early_attempts": early,
        "seconds_left_before_due": seconds_left,
    }


def run(ctx: Context) -> dict:
    fresh_rate, source = ctx.paced_rate(fallback=ctx.sizes.backlog_fresh_rate)
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx, fresh_rate))
        r = runs[-1]
        print(f"  backlog run {repeat + 1}: {r['countdown_messages']} on countdown "
              f"({r['held_by_worker']} held by the worker after {r['ingest_seconds']:.0f} s) + "
              f"{r['parked']} parked; worker RSS {fmt(r['worker_rss_mb'], '.0f')} MB "
              f"(idle {fmt(r['worker_idle_rss_mb'], '.0f')}), Redis "
              f"{fmt(r['broker_used_mb'], '.0f')} MB; "
              f"fresh p99 {fmt(r['fresh_p99_ms'])} ms", flush=True)
        if r["seconds_left_before_due"] < 0:
            print("  warning: the measurement ran past the backlog's due time; "
                  "raise backlog_wait", flush=True)
    keys = sorted(runs[0]) if runs else []
    result = {
        "deliveries": ctx.sizes.backlog_deliveries,
        "countdown_fraction": ctx.sizes.backlog_countdown_fraction,
        "pool": ctx.options.scenario_pool.label,
        "fresh_rate_offered_per_s": fresh_rate,
        "fresh_rate_source": source,
        **summarise_all(runs, keys),
    }
    ctx.results["backlog"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("backlog")
    if not r:
        return []
    return [
        Row("backlog", "waiting on countdown / parked",
            f"{r['countdown_messages']['median']} / {r['parked']['median']}"),
        Row("backlog", "countdown messages the worker held", r["held_by_worker"]),
        Row("backlog", "seconds until it held them", r["ingest_seconds"], "s"),
        Row("backlog", "worker RSS idle", r["worker_idle_rss_mb"], "MB"),
        Row("backlog", "worker RSS with the backlog (sum)", r["worker_rss_mb"], "MB", "< 200"),
        Row("backlog", "worker PSS idle", r["worker_idle_pss_mb"], "MB"),
        Row("backlog", "worker PSS with the backlog", r["worker_pss_mb"], "MB"),
        Row("backlog", "worker main process RSS", r["worker_max_process_rss_mb"], "MB"),
        Row("backlog", "Redis used_memory", r["broker_used_mb"], "MB"),
        Row("backlog", f"fresh delivery p50 at {r['fresh_rate_offered_per_s']:.0f}/s",
            r["fresh_p50_ms"], "ms"),
        Row("backlog", f"fresh delivery p99 at {r['fresh_rate_offered_per_s']:.0f}/s",
            r["fresh_p99_ms"], "ms", "< 100"),
        Row("backlog", "attempts before due", r["early_attempts"], "", "0"),
    ]
