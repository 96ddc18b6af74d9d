"""Scenario 3: what emit_event costs its caller. No worker runs; the queue is emptied after.

Per repeat, in the harness process:

- ``emit_calls`` calls of ``emit_event`` for an account with 1 subscription:
  events/s (= deliveries enqueued/s);
- the same number of bare ``celery_app.send_task`` calls of the deliver task
  on the same broker (what publishing alone costs): messages/s;
- ``fanout_calls`` calls for an account with 100 subscriptions: deliveries
  enqueued/s, and the duration of one call (p50/p99, ms);
- the cost of filters (issue 42): the same 100-subscription emit for an account whose
  100 subscriptions each have a filter (of a few conditions, accepting the event, so both
  store and publish the same 100 deliveries), against the account without filters, in
  alternated blocks of calls (unfiltered first, then filtered first, and so on): this
  machine's load drifts, and a pair of neighbouring blocks sees about the same. The
  ratio is of the two accounts' median call durations over all blocks (<= 1.2 wanted).

A rate counts from the first call until the broker's queue holds every
message (``LLEN``), so publishing that emit_event hands to a background
thread is included.

Both emit rates are also given as a ratio to the bare publishing rate.
"""

from __future__ import annotations

import time
import uuid

from .. import seed, services
from ..context import Context
from ..stats import percentile, summarise_all
from . import Row

WARMUP_CALLS = 10
ENQUEUE_TIMEOUT_S = 60.0


def _subscribed_account(ctx: Context, subscriptions: int) -> str:
    """An account with ``subscriptions`` subscriptions (to the receiver; nothing is delivered)."""
    target = seed.make_target(ctx.receiver.url("/emit"), name=f"emit-{subscriptions}")
    for _ in range(subscriptions - 1):
        seed.add_subscription(target.account_id, target.url, target.secret)
    return target.account_id


# A filter of a few conditions that accepts the seeded event: the worst case for its cost
# (every condition is evaluated, and every delivery is still stored and published).
FILTER = {"type": {"$eq": seed.EVENT_TYPE},
          "$or": [{"data.no_such_field": {"$exists": True}},
                  {"type": {"$prefix": seed.EVENT_TYPE.split(".")[0] + "."}}],
          "$not": {"id": {"$in": ["none", "of", "these"]}}}
FILTER_PAIRS = 6  # alternated blocks of each account


def _filtered_account(ctx: Context, subscriptions: int) -> str:
    """An account like _subscribed_account's, each of its subscriptions with FILTER."""
    from sqlalchemy import update

    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Subscription

    account_id = _subscribed_account(ctx, subscriptions)
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.account_id == account_id)
                        .values(filter=FILTER))
    return account_id


def _alternated(ctx: Context, plain, filtered, calls: int, fan: int) -> tuple[list, list]:
    """Call durations (s) of ``plain`` and ``filtered``, in FILTER_PAIRS pairs of blocks of
    ``calls`` calls each, which of the two goes first alternating from pair to pair."""
    durations: dict = {plain: [], filtered: []}
    for pair in range(FILTER_PAIRS):
        order = (plain, filtered) if pair % 2 == 0 else (filtered, plain)
        block = {}
        for fn in order:
            block[fn] = _enqueued(ctx, fn, calls, fan)[1]
            durations[fn] += block[fn]
        services.flush_broker(ctx.options.broker_url)
        print(f"    filters, pair {pair + 1} ({'unfiltered' if order[0] is plain else 'filtered'}"
              f" first): call p50 {percentile(block[plain], 50) * 1000:.2f} ms unfiltered, "
              f"{percentile(block[filtered], 50) * 1000:.2f} ms filtered", flush=True)
    return durations[plain], durations[filtered]


def _timed_calls(fn, calls: int) -> list[float]:
    """Durations (seconds) of ``calls`` calls of ``fn()``."""
    durations = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        durations.append(time.perf_counter() - started)
    return durations


def _enqueued(ctx: Context, fn, calls: int, messages_per_call: int) -> tuple[float, list[float]]:
    """Messages enqueued per second by ``calls`` calls of ``fn``, and each call's duration (s).

    The clock stops when the broker's queue holds every message, not when
    the last call returns: a caller that hands messages to a background
    publisher is only done when they are on the broker.
    """
    queue = services.broker_queue_lengths
    url = ctx.options.broker_url
    before = queue(url)["ready"]
    expected = before + calls * messages_per_call
    started = time.perf_counter()
    durations = _timed_calls(fn, calls)
    deadline = time.monotonic() + ENQUEUE_TIMEOUT_S
    while queue(url)["ready"] < expected and time.monotonic() < deadline:
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    return (queue(url)["ready"] - before) / elapsed, durations


def measure(ctx: Context) -> dict:
    """One repeat of the three loops."""
    from webhooks import emit_event
    from webhooks.broker.celery_app import DELIVER_TASK, celery_app
    from webhooks.events.samples import sample_data

    sizes = ctx.sizes
    fan = sizes.fanout_subscriptions
    ctx.reset()
    data = sample_data(seed.EVENT_TYPE)
    one = _subscribed_account(ctx, 1)
    many = _subscribed_account(ctx, fan)
    filtered = _filtered_account(ctx, fan)

    def emit_one():
        emit_event(one, seed.EVENT_TYPE, data)

    def emit_many():
        emit_event(many, seed.EVENT_TYPE, data)

    def emit_filtered():
        emit_event(filtered, seed.EVENT_TYPE, data)

    def bare():
        celery_app.send_task(DELIVER_TASK, args=(str(uuid.uuid4()), 0))

    _enqueued(ctx, emit_one, WARMUP_CALLS, 1)
    _enqueued(ctx, bare, WARMUP_CALLS, 1)
    one_rate, one_durations = _enqueued(ctx, emit_one, sizes.emit_calls, 1)
    bare_rate, _ = _enqueued(ctx, bare, sizes.emit_calls, 1)
    many_rate, many_durations = _enqueued(ctx, emit_many, sizes.fanout_calls, fan)
    services.flush_broker(ctx.options.broker_url)  # nothing is to be delivered
    # Like for like: the filters accept the event, so both accounts get every delivery.
    assert len(emit_event(filtered, seed.EVENT_TYPE, data).delivery_ids) == fan
    _enqueued(ctx, emit_filtered, WARMUP_CALLS, fan)  # this process learns the filters once
    services.flush_broker(ctx.options.broker_url)
    plain, with_filters = _alternated(ctx, emit_many, emit_filtered, sizes.fanout_calls, fan)
    return {
        "bare_publish_per_s": bare_rate,
        "one_subscription_events_per_s": one_rate,
        "one_subscription_ratio": one_rate / bare_rate,
        "one_subscription_call_p50_ms": percentile(one_durations, 50) * 1000,
        "one_subscription_call_p99_ms": percentile(one_durations, 99) * 1000,
        "fanout_deliveries_per_s": many_rate,
        "fanout_ratio": many_rate / bare_rate,
        "fanout_call_p50_ms": percentile(many_durations, 50) * 1000,
        "fanout_call_p99_ms": percentile(many_durations, 99) * 1000,
        "unfiltered_call_p50_ms": percentile(plain, 50) * 1000,
        "filtered_call_p50_ms": percentile(with_filters, 50) * 1000,
        "filter_cost_ratio": percentile(with_filters, 50) / percentile(plain, 50),
    }


KEYS = [
    "bare_publish_per_s", "one_subscription_events_per_s", "one_subscription_ratio",
    "one_subscription_call_p50_ms", "one_subscription_call_p99_ms",
    "fanout_deliveries_per_s", "fanout_ratio", "fanout_call_p50_ms", "fanout_call_p99_ms",
    "unfiltered_call_p50_ms", "filtered_call_p50_ms", "filter_cost_ratio",
]


def run(ctx: Context) -> dict:
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx))
        print(f"  emit run {repeat + 1}: {runs[-1]['one_subscription_events_per_s']:.0f} events/s "
              f"(bare {runs[-1]['bare_publish_per_s']:.0f}/s), fan-out "
              f"{runs[-1]['fanout_deliveries_per_s']:.0f} deliveries/s", flush=True)
    result = {
        "emit_calls": ctx.sizes.emit_calls,
        "fanout_calls": ctx.sizes.fanout_calls,
        "fanout_subscriptions": ctx.sizes.fanout_subscriptions,
        **summarise_all(runs, KEYS),
    }
    ctx.results["emit"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("emit")
    if not r:
        return []
    fan = r["fanout_subscriptions"]
    return [
        Row("emit", "bare send_task loop", r["bare_publish_per_s"], "/s"),
        Row("emit", "1 subscription: events/s", r["one_subscription_events_per_s"], "/s"),
        Row("emit", "1 subscription: ratio to bare", r["one_subscription_ratio"], "x", ">= 0.8"),
        Row("emit", "1 subscription: call p99", r["one_subscription_call_p99_ms"], "ms"),
        Row("emit", f"{fan} subscriptions: deliveries/s", r["fanout_deliveries_per_s"], "/s"),
        Row("emit", f"{fan} subscriptions: ratio to bare", r["fanout_ratio"], "x", ">= 0.8"),
        Row("emit", f"{fan} subscriptions: call p50", r["fanout_call_p50_ms"], "ms"),
        Row("emit", f"{fan} subscriptions: call p99", r["fanout_call_p99_ms"], "ms"),
        Row("emit", f"{fan} filtered subscriptions: call p50 (alternated)",
            r["filtered_call_p50_ms"], "ms"),
        Row("emit", f"{fan} unfiltered subscriptions: call p50 (alternated)",
            r["unfiltered_call_p50_ms"], "ms"),
        Row("emit", "filtered / unfiltered call p50", r["filter_cost_ratio"], "x", "<= 1.2"),
    ]
