"""Scenario 9: retention deletes a million old rows; does delivery keep its pace?

1. One account's history older than the retention (40 days ago, 72 hours
   of it) is seeded: about ``purge_rows`` rows of events, deliveries and
   attempts, almost all finished (benchmarks/history_seed.py).
2. Without purge: ``purge_deliveries`` fresh deliveries are published and
   drained by a service worker with beat, retention off.
3. During purge: the same again with retention on (30 days), so beat sends
   ``webhooks.purge`` every WEBHOOKS_PURGE_INTERVAL onto the maintenance
   queue and the same worker runs it beside the deliveries, as in service
   (the defaults, 10 s of batches every 60 s, or ``--purge-pace``). Beat's
   first run comes one interval after it starts, so one purge is also sent
   as the drain starts: the purge works at least as much of each drain as
   of a steady hour, never less. The old rows deleted meanwhile give the
   purge's rate; the worker's log lines give the time its runs worked.
4. What is left is purged at full speed in this process, as
   ``webhooks db purge`` does, with no worker running: its rate.
5. Days dropped whole (PostgreSQL, migration 0029): for each of
   ``purge_day_events`` (10 k and 2 M events), that many events are seeded
   into one day long past, in a day partition of attempts made for it, and
   retention drops that day (``retention.drop_old_days``, as its purge does
   first): the seconds and the attempts dropped. The day's deliveries still
   pending (3 % of the seeded mix) are marked ``dead`` first, as a running
   service would have ended them, so the day keeps none of its rows
   (``python -m benchmarks.partition_drop`` without ``--finished`` times a
   day that keeps them). The smallest size is timed ``purge_day_repeats``
   times. A day's drop should cost about the same at every size (target:
   under 1 s at 2 M); its deliveries and events still go by batches, as
   step 4 times.

Steps 2 and 3 run in ``purge_pairs`` pairs whose order alternates (without
then during, then during then without, ...), so a drift of the shared
machine's load weighs on both sides alike. Reported: each pair's ratio
(during / without), their median and the worst pair, and beside them the
machine's own noise: the ratio of two drains of one kind that ran one
after the other (where a pair ends and the next begins). Deliveries/s count
from the first arrival to the last; rows are events + deliveries + attempts.
"""

from __future__ import annotations

import math
import os
import re
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
    from webhooks.storage.db import get_engine

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
    from webhooks.broker.celery_app import MAINTENANCE_QUEUE, PURGE_TASK, get_app

    n = ctx.sizes.purge_deliveries
    path = f"/purge-{label}"
    target = seed.make_target(ctx.receiver.url(path), name=f"purge-{label}")
    seed.publish_deliveries(seed.bulk_deliveries(target, n))
    before = _old_rows(history.account_id)
    load_before = os.getloadavg()[0]
    worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool, f"purge-{label}",
                                             **_retention_env(ctx, purging))
    started = time.time()
    try:
        if purging:  # the run beat would send now if it had been running for an interval
            get_app().send_task(PURGE_TASK, queue=MAINTENANCE_QUEUE)
        arrivals = wait_for_unique(ctx.receiver, path, n, drain_timeout(n))
        ended = time.time()
        after = _old_rows(history.account_id)
        runs = _purge_runs(worker)
    finally:
        ctx.stop(worker, beat)
    figures = drain_figures(arrivals, n)
    deleted = before["rows"] - after["rows"]
    busy_s = sum(seconds for _rows, seconds in runs)
    figures.update(old_rows_deleted=deleted, old_rows_left=after["rows"], purge_runs=len(runs),
                   purge_busy_s=round(busy_s, 2), purge_busy_share=None, purge_rows_per_s=None,
                   purge_busy_rows_per_s=None,
                   load=[round(load_before, 2), round(os.getloadavg()[0], 2)])
    if purging:
        figures["purge_busy_share"] = round(busy_s / (ended - started), 3)
        figures["purge_rows_per_s"] = deleted / (ended - started)
        figures["purge_busy_rows_per_s"] = deleted / busy_s if busy_s else None
    return figures


def _retention_env(ctx: Context, purging: bool) -> dict:
    """Worker and beat settings: retention off, or on at the scheduler's pace."""
    if not purging:
        return {"WEBHOOKS_RETENTION_DAYS": 0}
    interval, seconds = ctx.sizes.purge_pace
    env = {"WEBHOOKS_RETENTION_DAYS": RETENTION_DAYS}
    if interval:
        env.update(WEBHOOKS_PURGE_INTERVAL=interval, WEBHOOKS_PURGE_SECONDS=seconds)
    return env


_RUN_LINE = re.compile(r"retention purged (\d+) events, (\d+) deliveries, (\d+) attempts, "
                       r"\d+ rollup rows in ([\d.]+) s")


def _purge_runs(worker) -> list[tuple[int, float]]:
    """(rows, seconds) of each purge run the worker logged (webhooks.lifecycle.retention.run_scheduled)."""
    text_ = worker.log_path.read_bytes()[worker.log_offset:].decode(errors="replace")
    return [(int(e) + int(d) + int(a), float(s)) for e, d, a, s in _RUN_LINE.findall(text_)]


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
    from webhooks.lifecycle.retention import purge
    from webhooks.storage.db import get_engine

    started = time.perf_counter()
    purged = purge(get_engine(), retention_days=RETENTION_DAYS, batch=get_settings().purge_batch)
    seconds = time.perf_counter() - started
    return {"rows": purged.rows, "seconds": round(seconds, 2),
            "rows_per_s": purged.rows / seconds if purged.rows else None}


DAY_TARGET_S = 1.0
DAY_DROPS_FROM = 100  # days ago of the first seeded day; each next one a day later


def day_drops(history, sizes: tuple[int, ...], repeats: int, *,
              finished: bool = False) -> list[dict]:
    """Seed each size's events into a day of its own, long past, then drop that day as
    retention does; one dict per drop (events, seconds, attempts dropped and kept, load).
    Each day is older than the next, so that each drop takes its own day alone.

    ``finished``: the seeded deliveries still pending (3 %) are marked ``dead`` before the
    drop, as they would have ended in a service whose workers ran (the last retry of the
    ladder is 15 h after the first attempt): then the day keeps none of its rows."""
    import datetime as dt

    from webhooks.lifecycle import retention
    from webhooks.storage import partitions
    from webhooks.storage.backends import backend_of
    from webhooks.storage.db import get_engine

    engine = get_engine()
    first_day = dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=DAY_DROPS_FROM)
    runs = [size for size in sizes[:1] for _ in range(repeats)] + list(sizes[1:])
    results = []
    for offset, events in enumerate(runs):
        day = partitions.day_of(first_day + dt.timedelta(days=offset))
        with engine.begin() as connection:
            backend_of(connection).create_partitions(connection, [day])
        # The seeding reads its own clock a little later: an hour's margin keeps every row
        # (attempts too: they start at most at the newest time) inside the day.
        newest = day.end.replace(tzinfo=dt.timezone.utc) - dt.timedelta(hours=1)
        days_ago = (dt.datetime.now(dt.timezone.utc) - newest) / dt.timedelta(days=1)
        seeded = history_seed.seed_events(history, events, hours=22.0, days_ago=days_ago)
        if finished:
            with engine.begin() as connection:
                connection.execute(text(
                    "UPDATE deliveries SET status = 'dead', parked = false, "
                    "next_attempt_at = NULL WHERE status = 'pending' AND created_at >= :start "
                    "AND created_at < :end"), {"start": day.start, "end": day.end})
        # A day retention drops is a month old: autovacuum has visited it and the
        # deliveries since (an unvacuumed index of deliveries made the look-up of the rows
        # to keep read 30,000 dead tuples, 0.3 s of a 2 M day's drop).
        with engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                f"VACUUM ANALYZE {day.name}, deliveries")
        load = os.getloadavg()[0]
        dropped = retention.drop_old_days(engine, day.end.replace(tzinfo=dt.timezone.utc))
        assert [d.name for d in dropped] == [day.name], dropped
        results.append({"events": events, "finished": finished, "seed_s": round(seeded, 1),
                        "seconds": round(dropped[0].seconds, 3), "attempts": dropped[0].rows,
                        "kept": dropped[0].kept, "load": round(load, 2)})
        print(f"  day of {events:,} events dropped in {dropped[0].seconds:.3f} s "
              f"({dropped[0].rows:,} attempts, {dropped[0].kept:,} kept; load {load:.2f})",
              flush=True)
    return results


def run(ctx: Context) -> dict:
    """Drains without and during the purge, in ``purge_pairs`` pairs while old rows remain."""
    sizes = ctx.sizes
    ctx.reset()
    history = history_seed.make_history(ctx.receiver.url("/old"))
    events = math.ceil(sizes.purge_rows / ROWS_PER_EVENT)
    seeded = history_seed.seed_events(history, events, days_ago=OLD_DAYS)
    result: dict = {"seed_s": round(seeded, 2), **history_seed.finish(ctx.options.database_url),
                    "old": _old_rows(history.account_id), "load_at_start": list(os.getloadavg()),
                    "pairs": []}
    print(f"  seeded {result['old']['rows']} old rows in {seeded:.1f} s", flush=True)
    for number in range(sizes.purge_pairs):
        # Alternate the order, so that a drift of the machine's load weighs on both sides.
        order = (False, True) if number % 2 == 0 else (True, False)
        drained = {purging: _drain(ctx, f"{'during' if purging else 'without'}-{number}",
                                   history, purging)
                   for purging in order}
        without, during = drained[False], drained[True]
        result["pairs"].append({"order": "without first" if number % 2 == 0 else "during first",
                                "without": without, "during": during})
        print(f"  pair {number + 1}: deliveries/s without {_fmt(without['rate_per_s'])}, during "
              f"{_fmt(during['rate_per_s'])} (x{_fmt(_ratio(result['pairs'][-1]), '.2f')}); "
              f"{during['purge_runs']} purge runs worked {_fmt(during['purge_busy_s'])} s, "
              f"{during['old_rows_deleted']} rows; {during['old_rows_left']} old rows left",
              flush=True)
        if not during["old_rows_left"]:
            break
    pairs = result["pairs"]
    result["without_rate_per_s"] = summarise(p["without"]["rate_per_s"] for p in pairs)
    result["during_rate_per_s"] = summarise(p["during"]["rate_per_s"] for p in pairs)
    result["ratio"] = summarise(_ratio(p) for p in pairs)  # its min is the worst pair
    result["paced_rows_per_s"] = summarise(p["during"]["purge_rows_per_s"] for p in pairs)
    result["paced_busy_rows_per_s"] = summarise(p["during"]["purge_busy_rows_per_s"]
                                                for p in pairs)
    result["purge_busy_share"] = summarise(p["during"]["purge_busy_share"] for p in pairs)
    result["noise"] = summarise(_same_kind_neighbours(pairs))
    pace = _pace(ctx)
    result["pace"] = {"interval_s": pace.purge_interval, "run_s": pace.purge_seconds,
                      "batch": pace.purge_batch}
    result["full_speed"] = _full_speed(history)
    result["day_drops"] = day_drops(history, sizes.purge_day_events, sizes.purge_day_repeats,
                                    finished=True)
    result["load_at_end"] = list(os.getloadavg())
    ctx.results["purge"] = result
    return result


def _same_kind_neighbours(pairs: list[dict]) -> list[float]:
    """later / earlier deliveries/s of two drains of one kind that ran one after the other
    (where one pair ends and the next begins): what the shared machine alone moves a ratio."""
    timeline = []
    for pair in pairs:
        kinds = ("without", "during") if pair["order"] == "without first" else ("during", "without")
        timeline += [(kind, pair[kind]["rate_per_s"]) for kind in kinds]
    return [later / earlier for (kind_a, earlier), (kind_b, later) in zip(timeline, timeline[1:])
            if kind_a == kind_b and earlier and later]


def _fmt(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


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
        Row("purge", f"ratio during / without ({len(r['pairs'])} pairs)", r["ratio"], "x",
            f">= {TARGET_RATIO}"),
        Row("purge", "ratio of the worst pair", r["ratio"]["min"], "x", f">= {TARGET_RATIO}"),
        Row("purge", "share of the drain the purge worked", r["purge_busy_share"], "x"),
        Row("purge", "noise: ratio of neighbouring drains of one kind", r.get("noise"), "x"),
        Row("purge", f"scheduled purge rows/s ({r['pace']['run_s']:g} s every "
                     f"{r['pace']['interval_s']:g} s)", r["paced_rows_per_s"], "/s"),
        Row("purge", "scheduled purge rows/s while a run works", r["paced_busy_rows_per_s"], "/s"),
        Row("purge", "full-speed purge rows/s", r["full_speed"]["rows_per_s"], "/s"),
        *_day_rows(r.get("day_drops") or []),
    ]


def _day_rows(drops: list[dict]) -> list[Row]:
    """One row per size: the seconds its day's drop took (a summary when repeated)."""
    rows_ = []
    for events in dict.fromkeys(d["events"] for d in drops):
        same = [d for d in drops if d["events"] == events]
        attempts = same[0]["attempts"] + same[0]["kept"]
        rows_.append(Row("purge", f"a day of {events:,} events dropped whole "
                                  f"({attempts:,} attempts)",
                         summarise(d["seconds"] for d in same), "s", f"< {DAY_TARGET_S:g}"))
    return rows_
