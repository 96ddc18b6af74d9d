"""Scenario 7: how late each retry fires against its ladder time.

A few deliveries go to an endpoint that always answers 500, with a short
ladder (``WEBHOOKS_RETRY_DELAYS``, e.g. 2,4,8) and
``WEBHOOKS_COUNTDOWN_LIMIT`` set so the first wait rides a countdown and the
longer ones are parked for the sweep (beat runs every ``sweep_interval`` s).
Once every delivery is dead, the attempts table gives, for each retry,

    lateness = started_at(n+1) - (started_at(n) + duration(n) + ladder[n-1])

in seconds (the wait is measured from the end of the failed attempt), split
by whether the wait rode a countdown or was parked.
"""

from __future__ import annotations

import datetime as dt
import time

from sqlalchemy import text

from .. import seed
from ..context import Context
from ..stats import percentile, summarise_all
from . import Row
from .common import fmt

PATH = "/punctual"


def _wait_dead(n: int, timeout: float) -> int:
    from webhooks.storage.db import session_scope

    deadline = time.monotonic() + timeout
    while True:
        with session_scope() as session:
            dead = session.execute(
                text("SELECT count(*) FROM deliveries WHERE status = 'dead'")).scalar()
        if dead >= n or time.monotonic() >= deadline:
            return dead
        time.sleep(0.25)


def _attempts() -> dict[str, list[tuple[int, dt.datetime, int]]]:
    """(number, started_at, duration_ms) of every attempt, by delivery."""
    from webhooks.storage.db import session_scope

    by_delivery: dict[str, list] = {}
    with session_scope() as session:
        rows = session.execute(text(
            "SELECT delivery_id, number, started_at, duration_ms FROM attempts "
            "ORDER BY delivery_id, number"))
        for delivery_id, number, started_at, duration_ms in rows:
            by_delivery.setdefault(delivery_id, []).append((number, started_at, duration_ms))
    return by_delivery


def lateness(attempts: dict, ladder: tuple[int, ...], countdown_limit: int) -> dict[str, list[float]]:
    """Seconds each retry started after its ladder time: ``{"countdown": [...], "parked": [...]}``."""
    late: dict[str, list[float]] = {"countdown": [], "parked": []}
    for rows in attempts.values():
        for (number, started, duration_ms), (next_number, next_started, _) in zip(rows, rows[1:]):
            if next_number != number + 1 or number > len(ladder):
                continue
            wait = ladder[number - 1]
            planned = started + dt.timedelta(milliseconds=duration_ms, seconds=wait)
            kind = "countdown" if wait <= countdown_limit else "parked"
            late[kind].append((next_started - planned).total_seconds())
    return late


def measure(ctx: Context) -> dict:
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    sizes = ctx.sizes
    ladder, limit = sizes.punctuality_ladder, sizes.punctuality_countdown_limit
    env = {
        "WEBHOOKS_RETRY_DELAYS": ",".join(map(str, ladder)),
        "WEBHOOKS_COUNTDOWN_LIMIT": limit,
        "WEBHOOKS_SWEEP_INTERVAL": sizes.sweep_interval,
        "WEBHOOKS_PAUSE_AFTER": 1_000_000,
    }
    ctx.reset()
    ctx.receiver.set_mode(PATH, "fail")
    target = seed.make_target(ctx.receiver.url(PATH), "punctual")
    worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool, "punctuality", **env)
    try:
        data = sample_data(seed.EVENT_TYPE)
        for _ in range(sizes.punctuality_deliveries):
            emit_event(target.account_id, seed.EVENT_TYPE, data)
        dead = _wait_dead(sizes.punctuality_deliveries,
                          timeout=sum(ladder) + 10 * sizes.sweep_interval + 60)
    finally:
        ctx.stop(worker, beat)
    late = lateness(_attempts(), ladder, limit)
    out = {"dead": dead}
    for kind, values in late.items():
        out[f"{kind}_waits"] = len(values)
        out[f"{kind}_p50_s"] = percentile(values, 50)
        out[f"{kind}_p95_s"] = percentile(values, 95)
        out[f"{kind}_max_s"] = max(values) if values else None
        out[f"{kind}_min_s"] = min(values) if values else None
    return out


def run(ctx: Context) -> dict:
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx))
        r = runs[-1]
        print(f"  punctuality run {repeat + 1}: countdown max {fmt(r['countdown_max_s'], '.2f')} s, "
              f"parked max {fmt(r['parked_max_s'], '.2f')} s late ({r['dead']} dead)", flush=True)
    keys = sorted(runs[0]) if runs else []
    result = {
        "deliveries": ctx.sizes.punctuality_deliveries,
        "ladder_s": list(ctx.sizes.punctuality_ladder),
        "countdown_limit_s": ctx.sizes.punctuality_countdown_limit,
        "sweep_interval_s": ctx.sizes.sweep_interval,
        "pool": ctx.options.scenario_pool.label,
        **summarise_all(runs, keys),
    }
    ctx.results["punctuality"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("punctuality")
    if not r:
        return []
    parked_target = f"< {r['sweep_interval_s'] + 2:g}"
    return [
        Row("punctuality", "countdown retry lateness p95", r["countdown_p95_s"], "s"),
        Row("punctuality", "countdown retry lateness max", r["countdown_max_s"], "s", "< 2"),
        Row("punctuality", "parked retry lateness p95", r["parked_p95_s"], "s"),
        Row("punctuality", "parked retry lateness max", r["parked_max_s"], "s", parked_target),
    ]
