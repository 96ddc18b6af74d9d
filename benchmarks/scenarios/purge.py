"""Scenario 9: retention deletes a million old rows; does delivery keep its pace?

1. One account's history older than the retention (40 days ago, 72 hours
   of it) is seeded: about ``purge_rows`` rows of events, deliveries and
   attempts, almost all finished (benchmarks/history_seed.py).
2. Without purge: ``purge_deliveries`` fresh deliveries are published and
   drained by a service worker with beat (WEBHOOKS_RETENTION_DAYS=0).
3. During purge: the same again, with retention on and the scheduled purge
   running back to back (WEBHOOKS_PURGE_INTERVAL=2, WEBHOOKS_PURGE_SECONDS=60:
   a harder load than the default 10 s per minute), in the worker's own pool.
   The old rows deleted while the drain ran give the paced purge's rate.
4. What is left is purged at full speed in this process, as
   ``webhooks db purge`` does, with no worker running: its rate.

Deliveries/s count from the first arrival to the last; rows are events +
deliveries + attempts.
"""

from __future__ import annotations

import math
import os
import time

from sqlalchemy import text

from .. import history_seed, seed
from ..context import Context
from ..stats import summarise
from . import Row
from .drain import drain_figures, drain_timeout, wait_for_unique

OLD_DAYS = 40  # the seeded history ends this many days ago: all of it past 30 days
RETENTION_DAYS = 30
ROWS_PER_EVENT = 3.2  # an event, its delivery and 1.2 attempts on average (the seeded mix)
TARGET_RATIO = 0.9


def _old_rows(account_id: str) -> dict:
    """The history's rows retention deletes: finished deliveries past the cut-off, theirs."""
    from webhooks.db import get_engine

    old = ("FROM deliveries d WHERE d.account_id = :a AND d.status IN ('done', 'failed', 'dead') "
           "AND d.created_at < now() AT TIME ZONE 'UTC' - make_interval(days => :days)")
    with get_engine().connect() as connection:
        deliveries, attempts = connection.execute(text(
            f"SELECT count(*), coalesce(sum(d.attempt_count), 0) {old}"),
            {"a": account_id, "days": RETENTION_DAYS}).one()
    # Each old finished delivery is its event's only one, so the event goes with it.
    return {"deliveries": deliveries, "attempts": int(attempts), "events": deliveries,
            "rows": 2 * deliveries + int(attempts)}


def _drain(ctx: Context, label: str, history, purging: bool) -> dict:
    """Publish and drain fresh deliveries with worker and beat; the old rows purged meanwhile."""
    n = ctx.sizes.purge_deliveries
    path = f"/purge-{label}"
    target = seed.make_target(ctx.receiver.url(path), name=f"purge-{label}")
    seed.publish_deliveries(seed.bulk_deliveries(target, n))
    before = _old_rows(history.account_id)
    env = {"WEBHOOKS_RETENTION_DAYS": RETENTION_DAYS if purging else 0,
           "WEBHOOKS_PURGE_INTERVAL": 2, "WEBHOOKS_PURGE_SECONDS": 60}
    started = time.time()
    worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool, f"purge-{label}", **env)
    try:
        arrivals = wait_for_unique(ctx.receiver, path, n, drain_timeout(n))
        ended = time.time()
        after = _old_rows(history.account_id)
    finally:
        ctx.stop(worker, beat)
    figures = drain_figures(arrivals, n)
    deleted = before["rows"] - after["rows"]
    figures.update(old_rows_deleted=deleted, old_rows_left=after["rows"],
                   purge_rows_per_s=deleted / (ended - started) if purging else None)
    return figures


def _full_speed(history) -> dict:
    """Purge what is left in this process, unpaced (``webhooks db purge``): rows and rows/s."""
    from webhooks.config import get_settings
    from webhooks.db import get_engine
    from webhooks.retention import purge

    started = time.perf_counter()
    purged = purge(get_engine(), retention_days=RETENTION_DAYS, batch=get_settings().purge_batch)
    seconds = time.perf_counter() - started
    return {"rows": purged.rows, "seconds": round(seconds, 2),
            "rows_per_s": purged.rows / seconds if purged.rows else None}


def run(ctx: Context) -> dict:
    sizes = ctx.sizes
    ctx.reset()
    history = history_seed.make_history(ctx.receiver.url("/old"))
    events = math.ceil(sizes.purge_rows / ROWS_PER_EVENT)
    seeded = history_seed.seed_events(history, events, days_ago=OLD_DAYS)
    result: dict = {"seed_s": round(seeded, 2), **history_seed.finish(ctx.options.database_url),
                    "old": _old_rows(history.account_id), "load_at_start": list(os.getloadavg())}
    print(f"  seeded {result['old']['rows']} old rows in {seeded:.1f} s", flush=True)
    result["without"] = _drain(ctx, "without", history, purging=False)
    result["during"] = _drain(ctx, "during", history, purging=True)
    without, during = result["without"]["rate_per_s"], result["during"]["rate_per_s"]
    result["ratio"] = during / without if without and during else None
    result["purge_outlived_drain"] = result["during"]["old_rows_left"] > 0
    result["full_speed"] = _full_speed(history)
    result["load_at_end"] = list(os.getloadavg())
    print(f"  deliveries/s without {without}, during {during}; paced purge "
          f"{result['during']['purge_rows_per_s']} rows/s; full speed "
          f"{result['full_speed']['rows_per_s']} rows/s", flush=True)
    ctx.results["purge"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("purge")
    if not r:
        return []
    return [
        Row("purge", f"old rows seeded ({r['old']['rows']:,})", r["seed_s"], "s"),
        Row("purge", "deliveries/s without purge", summarise([r["without"]["rate_per_s"]]), "/s"),
        Row("purge", "deliveries/s during purge", summarise([r["during"]["rate_per_s"]]), "/s"),
        Row("purge", "ratio during / without", r["ratio"], "x", f">= {TARGET_RATIO}"),
        Row("purge", "paced purge (scheduler) rows/s", r["during"]["purge_rows_per_s"], "/s"),
        Row("purge", "full-speed purge rows/s", r["full_speed"]["rows_per_s"], "/s"),
    ]
