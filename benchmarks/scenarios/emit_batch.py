"""Scenario "emit_batch" (run on request: ``--scenarios emit_batch``): what one emit_events
call costs its caller, with and without idempotency keys. No worker runs.

Per repeat, for each size in ``emit_batch_sizes`` (1,000 and 10,000 events of one
account with one subscription), three calls, each timed (wall clock and this
process's CPU):

- ``unkeyed``: events without an idempotency key;
- ``keyed``: as many events, each with a new key;
- ``repeated``: the keyed batch sent again (a client's retry): every event is a
  duplicate, answered with the first call's id.

Issue 36 measured a keyed event at about 9 ms; ``keyed_ratio`` (keyed over
unkeyed) says how far keys cost more. The broker's queue is emptied after each
size (nothing is to be delivered).
"""

from __future__ import annotations

import time

from .. import seed, services
from ..context import Context
from ..stats import summarise_all
from . import Row

LEGS = ("unkeyed", "keyed", "repeated")


def _timed(call) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``call()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def _one_size(ctx: Context, n: int, repeat: int) -> dict:
    from webhooks import emit_events
    from webhooks.events.samples import sample_data

    target = seed.make_target(ctx.receiver.url("/emit-batch"), name=f"emit-batch-{n}")
    data = sample_data(seed.EVENT_TYPE)
    plain = [{"type": seed.EVENT_TYPE, "data": data} for _ in range(n)]
    keyed = [{"type": seed.EVENT_TYPE, "data": data, "idempotency_key": f"r{repeat}-{i}"}
             for i in range(n)]
    out = {}
    for leg, events in zip(LEGS, (plain, keyed, keyed)):
        wall, cpu = _timed(lambda: emit_events(target.account_id, events))
        out[f"{leg}_{n}_s"] = wall
        out[f"{leg}_{n}_cpu_s"] = cpu
    out[f"keyed_ratio_{n}"] = out[f"keyed_{n}_s"] / out[f"unkeyed_{n}_s"]
    services.flush_broker(ctx.options.broker_url)
    return out


def measure(ctx: Context, repeat: int) -> dict:
    """One repeat: a small batch first, untimed (schemas built, connections opened,
    statements cached), then each size."""
    ctx.reset()
    _one_size(ctx, 10, -1)
    out = {}
    for n in ctx.sizes.emit_batch_sizes:
        out.update(_one_size(ctx, n, repeat))
    return out


def run(ctx: Context) -> dict:
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx, repeat))
        r = runs[-1]
        print("  emit_batch run {}: {}".format(repeat + 1, ", ".join(
            f"{n}: unkeyed {r[f'unkeyed_{n}_s']:.2f} s, keyed {r[f'keyed_{n}_s']:.2f} s, "
            f"repeated {r[f'repeated_{n}_s']:.2f} s" for n in ctx.sizes.emit_batch_sizes)),
            flush=True)
    result = {"sizes": list(ctx.sizes.emit_batch_sizes),
              **summarise_all(runs, sorted(runs[0]) if runs else [])}
    ctx.results["emit_batch"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("emit_batch")
    if not r:
        return []
    out = []
    for n in r["sizes"]:
        out += [Row("emit_batch", f"{n} events, {leg}", r[f"{leg}_{n}_s"], "s") for leg in LEGS]
        out.append(Row("emit_batch", f"{n} events, keyed / unkeyed", r[f"keyed_ratio_{n}"], "x",
                       "about 1"))
    return out
