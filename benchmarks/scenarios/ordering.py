"""Scenario ordering (optional): what ordering keys cost a drain.

The same backlog of ``ordering_deliveries`` deliveries to one fast
subscription is drained twice by a service worker (the scenario pool, with
beat): once without keys, once with each delivery given one of
``ordering_keys`` keys round-robin, numbered in publish order (as emit
numbers them); in both drains each delivery gets its own creation time, in
publish order, as emit gives each event (a bulk insert gives them one). A keyed delivery whose predecessor is unfinished is turned
away by its claim and released by its predecessor's record, so it may be
claimed twice. Reported: deliveries per second of each drain (first arrival
to last) and their ratio (target: keyed >= 0.8 x unkeyed), and whether every
key arrived in order.
"""

from __future__ import annotations

from sqlalchemy import text

from .. import seed, services
from ..context import Context
from . import Row
from .common import fmt
from .drain import drain_figures, drain_timeout, wait_for_unique

PATH = "/ordered"

# Each delivery its own creation time, a microsecond apart in publish order, as emit
# stamps each event (the bulk insert gives them one time); keys (if any) round-robin.
_SPREAD = text("""
UPDATE deliveries AS d
   SET created_at = d.created_at + (given.n * interval '1 microsecond'),
       ordering_key = CASE WHEN :keys > 0 THEN 'key-' || ((given.n - 1) % :keys) END,
       key_sequence = CASE WHEN :keys > 0 THEN (given.n - 1) / :keys + 1 END
  FROM unnest(CAST(:ids AS text[])) WITH ORDINALITY AS given(id, n)
 WHERE d.id = given.id
""")


def _spread(ids: list[str], keys: int) -> None:
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        session.execute(_SPREAD, {"ids": ids, "keys": keys})


def _in_order(arrivals, ids: list[str], keys: int) -> bool:
    """True when each key's deliveries first arrived in their numbered order."""
    place = {delivery_id: n for n, delivery_id in enumerate(ids)}
    last_seen: dict[int, int] = {}
    seen = set()
    for arrival in sorted(arrivals, key=lambda a: a.at):
        if arrival.delivery_id in seen or arrival.delivery_id not in place:
            continue
        seen.add(arrival.delivery_id)
        n = place[arrival.delivery_id]
        if last_seen.get(n % keys, -1) > n:
            return False
        last_seen[n % keys] = n
    return True


def measure(ctx: Context, keys: int | None) -> dict:
    n = ctx.sizes.ordering_deliveries
    ctx.reset()
    target = seed.make_target(ctx.receiver.url(PATH), "ordering")
    ids = seed.bulk_deliveries(target, n)
    _spread(ids, keys or 0)
    services.analyse(ctx.options.database_url)
    seed.publish_deliveries(ids)
    worker, beat = ctx.start_worker_and_beat(ctx.options.scenario_pool,
                                             f"ordering-{'keyed' if keys else 'plain'}",
                                             WEBHOOKS_SWEEP_INTERVAL=ctx.sizes.sweep_interval)
    try:
        arrivals = wait_for_unique(ctx.receiver, PATH, n, drain_timeout(n))
    finally:
        ctx.stop(worker, beat)
    figures = drain_figures(arrivals, n)
    figures["in_order"] = _in_order(arrivals, ids, keys) if keys else None
    return figures


def run(ctx: Context) -> dict:
    keys = ctx.sizes.ordering_keys
    plain = measure(ctx, None)
    keyed = measure(ctx, keys)
    ratio = (keyed["rate_per_s"] / plain["rate_per_s"]
             if keyed["rate_per_s"] and plain["rate_per_s"] else None)
    print(f"  ordering: unkeyed {fmt(plain['rate_per_s'])}/s, keyed over {keys} keys "
          f"{fmt(keyed['rate_per_s'])}/s ({fmt(ratio, '.2f')} x; in order: {keyed['in_order']})",
          flush=True)
    result = {"deliveries": ctx.sizes.ordering_deliveries, "keys": keys,
              "pool": ctx.options.scenario_pool.label, "plain": plain, "keyed": keyed,
              "ratio": ratio}
    ctx.results["ordering"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("ordering")
    if not r:
        return []
    return [Row("ordering", "unkeyed drain", r["plain"]["rate_per_s"], "/s"),
            Row("ordering", f"keyed drain over {r['keys']} keys", r["keyed"]["rate_per_s"], "/s"),
            Row("ordering", "keyed / unkeyed", r["ratio"], "x", ">= 0.8"),
            Row("ordering", "each key in order", r["keyed"]["in_order"])]
