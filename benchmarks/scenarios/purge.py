"""Scenario 9: retention deletes a million old rows; does delivery keep its pace?

1. One account's history older than the retention (40 days ago, 72 hours
   of it) is seeded: about ``purge_rows`` rows of events, deliveries and
   attempts, almost all finished (benchmarks/history_seed.py).
2. Without purge: ``purge_deliveries`` fresh deliveries are published and
   drained by a service worker with beat.
3. During purge: the same again while the scheduled purge runs in a thread
   of this process as beat would have it run: ``retention.run_scheduled``
   (batches of WEBHOOKS_PURGE_BATCH, a rest as long as each batch after it)
   for WEBHOOKS_PURGE_SECONDS every WEBHOOKS_PURGE_INTERVAL (the defaults,
   10 s every 60 s, or ``--purge-pace``), from before the worker starts until
   the drain ends. (In service the purge is a task on the workers' queue, so
   a backlog like this one would hold it back until drained; here it must
   run meanwhile to be measured.) The old rows deleted meanwhile give the
   purge's rate, over the whole drain and over the time its runs worked.
4. What is left is purged at full speed in this process, as
   ``webhooks db purge`` does, with no worker running: its rate.

Steps 2 and 3 run in pairs, one pair per repeat while old rows remain.
Deliveries/s count from the first arrival to the last; rows are events +
deliveries + attempts.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time

from sqlalchemy import text

from .. import history_seed, seed
from ..context import Context
from ..stats import summarise
from . import Row
from .drain import drain_figures, drain_timeout, wait_for_unique

OLD_DAYS = 40  # the seeded history ends this many days ago: all of it past 30 days
RETENTION_DAYS = 30
# Rows retention deletes per seeded event: 97 % are finished, each with its event, its
# delivery and 1.17 attempts on average (the seeded mix); 3 % are pending and stay.
ROWS_PER_EVENT = 3.05
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


class _ScheduledPurge:
    """The scheduler's purge in a thread: a run of WEBHOOKS_PURGE_SECONDS every
    WEBHOOKS_PURGE_INTERVAL, until stopped or nothing old is left; when it started, when
    it finished, and how long its runs worked."""

    def __init__(self, settings):
        self.settings = settings
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.started = self.finished = None
        self.busy_s = 0.0

    def _loop(self) -> None:
        from webhooks.db import get_engine
        from webhooks.retention import run_scheduled

        self.started = time.time()
        while not self.stop.is_set():
            began = time.monotonic()
            purged = run_scheduled(get_engine(), retention_days=RETENTION_DAYS,
                                   batch=self.settings.purge_batch,
                                   seconds=self.settings.purge_seconds)
            self.busy_s += time.monotonic() - began
            if not purged.rows:
                self.finished = time.time()  # nothing old is left
                return
            self.stop.wait(max(self.settings.purge_interval - (time.monotonic() - began), 0))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.thread.join(timeout=120)


def _drain(ctx: Context, label: str, history, purging: bool) -> dict:
    """Publish and drain fresh deliveries with worker and beat; the old rows purged meanwhile."""
    n = ctx.sizes.purge_deliveries
    path = f"/purge-{label}"
    target = seed.make_target(ctx.receiver.url(path), name=f"purge-{label}")
    seed.publish_deliveries(seed.bulk_deliveries(target, n))
    before = _old_rows(history.account_id)
    purge = _ScheduledPurge(_pace(ctx)) if purging else contextlib.nullcontext()
    with purge:
        worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool, f"purge-{label}",
                                                 WEBHOOKS_RETENTION_DAYS=0)
        try:
            arrivals = wait_for_unique(ctx.receiver, path, n, drain_timeout(n))
            ended = time.time()
            after = _old_rows(history.account_id)
        finally:
            ctx.stop(worker, beat)
    figures = drain_figures(arrivals, n)
    deleted = before["rows"] - after["rows"]
    figures.update(old_rows_deleted=deleted, old_rows_left=after["rows"], purge_rows_per_s=None,
                   purge_busy_rows_per_s=None)
    if purging and purge.started:
        figures["purge_rows_per_s"] = deleted / ((purge.finished or ended) - purge.started)
        figures["purge_busy_rows_per_s"] = deleted / purge.busy_s if purge.busy_s else None
    return figures


def _pace(ctx: Context):
    """The scheduler's settings, as the workers would read them (``--purge-pace`` may
    override the interval and the seconds of each run)."""
    import dataclasses

    from webhooks.config import get_settings

    interval, seconds = ctx.sizes.purge_pace
    settings = get_settings()
    return dataclasses.replace(settings, purge_interval=interval or settings.purge_interval,
                               purge_seconds=seconds or settings.purge_seconds)


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
    """Drains without and during the purge, in pairs (one per repeat) while old rows remain."""
    sizes = ctx.sizes
    ctx.reset()
    history = history_seed.make_history(ctx.receiver.url("/old"))
    events = math.ceil(sizes.purge_rows / ROWS_PER_EVENT)
    seeded = history_seed.seed_events(history, events, days_ago=OLD_DAYS)
    result: dict = {"seed_s": round(seeded, 2), **history_seed.finish(ctx.options.database_url),
                    "old": _old_rows(history.account_id), "load_at_start": list(os.getloadavg()),
                    "pairs": []}
    print(f"  seeded {result['old']['rows']} old rows in {seeded:.1f} s", flush=True)
    for repeat in range(ctx.options.repeats):
        without = _drain(ctx, f"without-{repeat}", history, purging=False)
        during = _drain(ctx, f"during-{repeat}", history, purging=True)
        result["pairs"].append({"without": without, "during": during})
        print(f"  deliveries/s without {without['rate_per_s']:.1f}, during "
              f"{during['rate_per_s']:.1f}; paced purge {during['purge_rows_per_s']:.0f} rows/s, "
              f"{during['old_rows_left']} old rows left", flush=True)
        if not during["old_rows_left"]:
            break
    pairs = result["pairs"]
    result["without_rate_per_s"] = summarise(p["without"]["rate_per_s"] for p in pairs)
    result["during_rate_per_s"] = summarise(p["during"]["rate_per_s"] for p in pairs)
    result["ratio"] = summarise(_ratio(p) for p in pairs)
    result["paced_rows_per_s"] = summarise(p["during"]["purge_rows_per_s"] for p in pairs)
    result["paced_busy_rows_per_s"] = summarise(p["during"]["purge_busy_rows_per_s"]
                                                for p in pairs)
    pace = _pace(ctx)
    result["pace"] = {"interval_s": pace.purge_interval, "run_s": pace.purge_seconds,
                      "batch": pace.purge_batch}
    result["full_speed"] = _full_speed(history)
    result["load_at_end"] = list(os.getloadavg())
    ctx.results["purge"] = result
    return result


def _ratio(pair: dict) -> float | None:
    without, during = pair["without"]["rate_per_s"], pair["during"]["rate_per_s"]
    return during / without if without and during else None


def rows(results: dict) -> list[Row]:
    r = results.get("purge")
    if not r:
        return []
    return [
        Row("purge", f"old rows seeded ({r['old']['rows']:,})", r["seed_s"], "s"),
        Row("purge", "deliveries/s without purge", r["without_rate_per_s"], "/s"),
        Row("purge", "deliveries/s during purge", r["during_rate_per_s"], "/s"),
        Row("purge", "ratio during / without", r["ratio"], "x", f">= {TARGET_RATIO}"),
        Row("purge", f"scheduled purge rows/s ({r['pace']['run_s']:g} s every "
                     f"{r['pace']['interval_s']:g} s)", r["paced_rows_per_s"], "/s"),
        Row("purge", "scheduled purge rows/s while a run works", r["paced_busy_rows_per_s"], "/s"),
        Row("purge", "full-speed purge rows/s", r["full_speed"]["rows_per_s"], "/s"),
    ]
