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

Then the latency leg, ``--repeats`` runs: whether a key whose head keeps
failing slows anything else (it should not: its successors wait without a
message, and the head's retries are ordinary ones). Per run one service
worker (the scenario pool) runs with a ladder of one-second retries
(``WEBHOOKS_RETRY_DELAYS`` = 1,1,..., the pause rule off) and unkeyed events
are emitted at half the paced rate (latency.py's rate, as isolation.py's
healthy subscription) to one subscription for ``latency_seconds``, measured
emit -> arrival as latency.py measures it: first alone, then again to a
fresh subscription while another account's subscription, whose endpoint
answers 500, has one key whose head keeps failing and as many keyed events
again (alternating with the unkeyed ones) queue behind it. Reported: p50
and p99 of each and their ratio (target: about 1, no change), and how many
deliveries the failing endpoint was sent (1, the head, if ordering held).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from sqlalchemy import text

from .. import seed, services
from ..context import Context
from ..pacing import paced
from . import Row
from .common import fmt, warm_up
from .drain import drain_figures, drain_timeout, wait_for_unique
from .latency import figures as latency_figures, latencies
from ..stats import summarise_all

PATH = "/ordered"
ALONE_PATH, BESIDE_PATH, FAILING_PATH = "/ordered-alone", "/ordered-beside", "/ordered-failing"
STUCK_KEY = "stuck"
# One-second retries, more than a phase lasts: the head is still failing at the end.
RETRY_LADDER = ",".join(["1"] * 120)
NO_PAUSE = 1_000_000

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


def _unkeyed_latency(ctx: Context, healthy: seed.Target, failing: seed.Target | None,
                     rate: float) -> dict:
    """Paced unkeyed events to ``healthy`` at ``rate`` for ``latency_seconds`` (with as many
    events of the stuck key to ``failing``, alternating, if given); their latency figures."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    data = sample_data(seed.EVENT_TYPE)
    path = urlsplit(healthy.url).path

    def emit(i):
        if failing is not None and i % 2:
            emit_event(failing.account_id, seed.EVENT_TYPE, data, ordering_key=STUCK_KEY)
            return None
        return emit_event(healthy.account_id, seed.EVENT_TYPE, data).id

    warm_up(ctx.receiver, healthy, path)
    run = paced(emit, rate * (1 if failing is None else 2), ctx.sizes.latency_seconds)
    sent = {event_id: at for event_id, at in zip(run.results, run.started) if event_id and at}
    seconds, missing = latencies(ctx.receiver, path, sent, "event_id", timeout=60)
    return latency_figures(seconds, missing, run)


LATENCY_KEYS = ["alone_p50_ms", "alone_p99_ms", "beside_p50_ms", "beside_p99_ms",
                "p50_ratio", "p99_ratio", "alone_missing", "beside_missing", "failing_attempts",
                "failing_deliveries_attempted"]


def measure_latency(ctx: Context, rate: float) -> dict:
    """One run of the latency leg: unkeyed p50/p99 alone, then beside a key whose head
    keeps failing (LATENCY_KEYS)."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    ctx.reset()
    ctx.receiver.set_mode(FAILING_PATH, "fail")
    worker = ctx.start_worker(ctx.options.scenario_pool, "ordering-latency",
                              WEBHOOKS_RETRY_DELAYS=RETRY_LADDER, WEBHOOKS_PAUSE_AFTER=NO_PAUSE)
    try:
        alone = _unkeyed_latency(
            ctx, seed.make_target(ctx.receiver.url(ALONE_PATH), "ordering-alone"), None, rate)
        failing = seed.make_target(ctx.receiver.url(FAILING_PATH), "ordering-failing")
        emit_event(failing.account_id, seed.EVENT_TYPE, sample_data(seed.EVENT_TYPE),
                   ordering_key=STUCK_KEY)
        ctx.receiver.wait_for(2, FAILING_PATH, timeout=30)  # the head failed, and again
        beside = _unkeyed_latency(
            ctx, seed.make_target(ctx.receiver.url(BESIDE_PATH), "ordering-beside"), failing,
            rate)
        failing_records = ctx.receiver.records(FAILING_PATH)
    finally:
        ctx.stop(worker)
    return compare(alone, beside, failing_records)


def compare(alone: dict, beside: dict, failing_records) -> dict:
    """One run's LATENCY_KEYS from the two phases' latency figures (latency.figures) and
    the failing endpoint's arrivals."""
    out = {f"{leg}_{key}": figures[key] for leg, figures in (("alone", alone), ("beside", beside))
           for key in ("p50_ms", "p99_ms", "missing")}
    for p in ("p50", "p99"):
        a, b = out[f"alone_{p}_ms"], out[f"beside_{p}_ms"]
        out[f"{p}_ratio"] = b / a if a and b else None
    out["failing_attempts"] = len(failing_records)
    out["failing_deliveries_attempted"] = len({r.delivery_id for r in failing_records})
    return out


def run(ctx: Context) -> dict:
    keys = ctx.sizes.ordering_keys
    plain = measure(ctx, None)
    keyed = measure(ctx, keys)
    ratio = (keyed["rate_per_s"] / plain["rate_per_s"]
             if keyed["rate_per_s"] and plain["rate_per_s"] else None)
    print(f"  ordering: unkeyed {fmt(plain['rate_per_s'])}/s, keyed over {keys} keys "
          f"{fmt(keyed['rate_per_s'])}/s ({fmt(ratio, '.2f')} x; in order: {keyed['in_order']})",
          flush=True)
    # Half the paced rate, as isolation.py's healthy subscription: the other half is the
    # stuck key's events in the second phase.
    rate, source = ctx.paced_rate()
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure_latency(ctx, rate / 2))
        r = runs[-1]
        print(f"  ordering latency run {repeat + 1} at {rate / 2:.0f}/s unkeyed: p50 "
              f"{fmt(r['alone_p50_ms'])} -> {fmt(r['beside_p50_ms'])} ms, p99 "
              f"{fmt(r['alone_p99_ms'])} -> {fmt(r['beside_p99_ms'])} ms beside a failing key "
              f"({fmt(r['p99_ratio'], '.2f')} x; the failing endpoint got "
              f"{r['failing_attempts']} attempts of {r['failing_deliveries_attempted']} "
              f"deliveries)", flush=True)
    result = {"deliveries": ctx.sizes.ordering_deliveries, "keys": keys,
              "pool": ctx.options.scenario_pool.label, "plain": plain, "keyed": keyed,
              "ratio": ratio,
              "latency": {"rate_per_s": rate / 2, "rate_source": source,
                          "seconds": ctx.sizes.latency_seconds,
                          **summarise_all(runs, LATENCY_KEYS)}}
    ctx.results["ordering"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("ordering")
    if not r:
        return []
    return [Row("ordering", "unkeyed drain", r["plain"]["rate_per_s"], "/s"),
            Row("ordering", f"keyed drain over {r['keys']} keys", r["keyed"]["rate_per_s"], "/s"),
            Row("ordering", "keyed / unkeyed", r["ratio"], "x", ">= 0.8"),
            Row("ordering", "each key in order", r["keyed"]["in_order"]),
            *_latency_rows(r.get("latency"))]


def _latency_rows(r: dict | None) -> list[Row]:
    if not r:
        return []
    at, beside = f"at {r['rate_per_s']:.0f}/s", "beside a failing key"
    return [Row("ordering", f"unkeyed p50 {at} alone", r["alone_p50_ms"], "ms"),
            Row("ordering", f"unkeyed p99 {at} alone", r["alone_p99_ms"], "ms"),
            Row("ordering", f"unkeyed p50 {at} {beside}", r["beside_p50_ms"], "ms"),
            Row("ordering", f"unkeyed p99 {at} {beside}", r["beside_p99_ms"], "ms"),
            Row("ordering", f"unkeyed p50 {beside} / alone", r["p50_ratio"], "x"),
            Row("ordering", f"unkeyed p99 {beside} / alone", r["p99_ratio"], "x", "~ 1"),
            Row("ordering", "failing key: deliveries attempted",
                r["failing_deliveries_attempted"], "", "1")]
