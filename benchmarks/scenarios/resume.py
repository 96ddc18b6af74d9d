"""Scenario "resume" (run on request: ``--scenarios resume``): what a tenant's resumes cost
the worker, and what they do to another tenant's deliveries (issue 36, item 2).

Set-up per repeat: a stored history of ``resume_stored`` events (history_seed:
finished deliveries mostly, as the audit's 122,000 were), one worker of the
scenario pool, no beat. Tenant A has one subscription with nothing to deliver;
tenant B one to the receiver. Every request is tenant A's, through the HTTP API
in this process (Flask's test client: the code gunicorn runs), at
``resume_request_rate`` requests/s (the API's rate limit is off here).

Three legs of ``resume_requests`` requests each:

- ``gets``: ``GET /subscriptions/<id>``, which asks nothing of the worker;
- ``resumes``: ``POST …/resume`` of A's active subscription (the audit's case:
  each queued a full sweep);
- ``pause_resume``: ``POST …/pause`` then ``POST …/resume``, a pair per request.

Each leg runs twice. Alone: the worker's CPU (its process group, from
``/proc``) from the first request until it has been idle for a second, the
broker's queue empty (``worker_cpu_s``), and that less what the worker spends
idle in as long (``worker_cpu_above_idle_s``: a leg whose requests are slower
in this process lasts longer). Beside tenant B: B emits at
``resume_other_rate`` events/s while the requests run, and the latency of each
of its deliveries (emit to arrival; ``other_p50_ms``, ``other_p99_ms``).

Targets: ``resumes_cpu_to_gets`` below 2 (the audit: 6.35 s against 0.10 s)
and B's p99 beside resumes about its p99 beside GETs (the audit: 0.13 s to
0.59-0.82 s).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from .. import history_seed, seed, services
from ..context import Context
from ..pacing import paced
from ..resources import group_cpu_s
from ..stats import percentile, summarise_all
from . import Row
from .common import fmt, warm_up
from .drain import first_arrivals

OTHER_PATH = "/resume-other"
LEGS = ("gets", "resumes", "pause_resume")
IDLE_S = 1.0  # the worker counts as done once its CPU has not moved for this long
SETTLE_CAP_S = 180.0
QUIET_CPU_S = 0.01  # CPU per quarter second that still counts as idle (its own timers)
IDLE_RATE_S = 2.0  # how long the worker's idle CPU is measured before each leg


@contextlib.contextmanager
def _no_api_rate_limit():
    """The API's per-account rate limit off in this process (the requests are the load)."""
    from webhooks.config import reset_settings_cache

    before = os.environ.get("WEBHOOKS_API_RATE_LIMIT")
    os.environ["WEBHOOKS_API_RATE_LIMIT"] = "off"
    reset_settings_cache()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("WEBHOOKS_API_RATE_LIMIT", None)
        else:
            os.environ["WEBHOOKS_API_RATE_LIMIT"] = before
        reset_settings_cache()


def _tenant_a(ctx: Context):
    """Tenant A's API key and its one subscription (with nothing to deliver)."""
    from webhooks.storage.db import session_scope
    from webhooks.tenants.accounts import create_account

    with session_scope() as session:
        account, api_key = create_account(session, "resumer")
        account_id = account.id
    target = seed.add_subscription(account_id, ctx.receiver.url("/resume-a"))
    return api_key, target.subscription_id


def _requests(api, api_key: str, subscription_id: str):
    """Each leg's request, as a callable of its index; each checks its answer."""
    headers = {"Authorization": f"Bearer {api_key}"}
    base = f"/api/webhooks/subscriptions/{subscription_id}"

    def call(method, path):
        response = getattr(api, method)(path, headers=headers)
        assert response.status_code == 200, (path, response.status_code, response.get_data()[:200])

    return {
        "gets": lambda i: call("get", base),
        "resumes": lambda i: call("post", f"{base}/resume"),
        "pause_resume": lambda i: (call("post", f"{base}/pause"), call("post", f"{base}/resume")),
    }


def _settle(ctx: Context, pid: int) -> None:
    """Wait until the worker's CPU has not moved for IDLE_S and its queue is empty."""
    deadline = time.monotonic() + SETTLE_CAP_S
    last, quiet_since = group_cpu_s(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = group_cpu_s(pid)
        busy = now - last > QUIET_CPU_S or services.broker_queue_lengths(
            ctx.options.broker_url)["ready"]
        last = now
        if busy:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= IDLE_S:
            return


def _alone(ctx: Context, pid: int, request) -> dict:
    """The leg's requests with nothing else going on: the worker's CPU from the first until
    it is idle again (``worker_cpu_s``), and that less what it spends idle in as long
    (``worker_cpu_above_idle_s``: its timers, measured over IDLE_RATE_S just before)."""
    sizes = ctx.sizes
    _settle(ctx, pid)
    quiet = group_cpu_s(pid)
    time.sleep(IDLE_RATE_S)
    idle_rate = (group_cpu_s(pid) - quiet) / IDLE_RATE_S
    before, started = group_cpu_s(pid), time.monotonic()
    run = paced(request, sizes.resume_request_rate,
                sizes.resume_requests / sizes.resume_request_rate, threads=1)
    _settle(ctx, pid)
    spent, window = group_cpu_s(pid) - before, time.monotonic() - started
    return {"worker_cpu_s": spent, "worker_cpu_above_idle_s": spent - idle_rate * window,
            "window_s": window, "request_errors": len(run.errors), "requests_per_s": run.rate}


def _beside_other(ctx: Context, other: seed.Target, request) -> dict:
    """The leg's requests while tenant B emits: B's delivery latencies."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    sizes = ctx.sizes
    seconds = sizes.resume_requests / sizes.resume_request_rate
    data = sample_data(seed.EVENT_TYPE)
    emitted: dict = {}

    def emit_other():
        def one(i):
            return emit_event(other.account_id, seed.EVENT_TYPE, data).id
        run = paced(one, sizes.resume_other_rate, seconds, threads=2)
        emitted.update({event_id: at for event_id, at in zip(run.results, run.started)
                        if event_id and at})

    background = threading.Thread(target=emit_other, daemon=True)
    background.start()
    paced(request, sizes.resume_request_rate, seconds, threads=1)
    background.join()
    first = first_arrivals(ctx.receiver, OTHER_PATH, emitted, "event_id", timeout=60.0)
    waited_until = time.time()
    latencies = [first.get(event_id, waited_until) - at for event_id, at in emitted.items()]
    return {
        "other_sent": len(emitted),
        "other_missing": len(emitted) - len(first),
        "other_p50_ms": percentile(latencies, 50) * 1000 if latencies else None,
        "other_p99_ms": percentile(latencies, 99) * 1000 if latencies else None,
    }


def measure(ctx: Context) -> dict:
    """One repeat: the history, the worker, then each leg alone and beside tenant B."""
    from web import create_app

    ctx.reset()
    history = history_seed.make_history(ctx.receiver.url("/resume-history"))
    history_seed.seed_events(history, ctx.sizes.resume_stored, niceness=ctx.sizes.seed_nice)
    history_seed.finish(ctx.options.database_url, niceness=ctx.sizes.seed_nice)
    api_key, subscription_id = _tenant_a(ctx)
    other = seed.make_target(ctx.receiver.url(OTHER_PATH), "other-tenant")
    worker = ctx.start_worker(ctx.options.scenario_pool, "resume")
    out = {}
    try:
        warm_up(ctx.receiver, other, OTHER_PATH)
        with _no_api_rate_limit():
            api = create_app({"TESTING": True}).test_client()
            requests = _requests(api, api_key, subscription_id)
            requests["gets"](0)  # the app's first request builds what it caches
            for leg in LEGS:
                out.update({f"{leg}_{k}": v for k, v in _alone(ctx, worker.pid, requests[leg]).items()})
                out.update({f"{leg}_{k}": v for k, v in
                            _beside_other(ctx, other, requests[leg]).items()})
    finally:
        ctx.stop(worker)
    gets_cpu = out["gets_worker_cpu_s"]
    for leg in ("resumes", "pause_resume"):
        out[f"{leg}_cpu_to_gets"] = out[f"{leg}_worker_cpu_s"] / gets_cpu if gets_cpu > 0 else None
        gets_p99 = out["gets_other_p99_ms"]
        out[f"{leg}_p99_to_gets"] = (out[f"{leg}_other_p99_ms"] / gets_p99
                                     if gets_p99 and out[f"{leg}_other_p99_ms"] else None)
    return out


def run(ctx: Context) -> dict:
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx))
        r = runs[-1]
        print(f"  resume run {repeat + 1}: worker CPU for {ctx.sizes.resume_requests} requests: "
              + ", ".join(f"{leg} {fmt(r[f'{leg}_worker_cpu_s'], '.2f')} s" for leg in LEGS)
              + "; other tenant's p99: "
              + ", ".join(f"{leg} {fmt(r[f'{leg}_other_p99_ms'], '.0f')} ms" for leg in LEGS),
              flush=True)
    result = {
        "requests": ctx.sizes.resume_requests,
        "request_rate_per_s": ctx.sizes.resume_request_rate,
        "other_rate_per_s": ctx.sizes.resume_other_rate,
        "stored_events": ctx.sizes.resume_stored,
        "pool": ctx.options.scenario_pool.label,
        **summarise_all(runs, sorted(runs[0]) if runs else []),
    }
    ctx.results["resume"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("resume")
    if not r:
        return []
    n = r["requests"]
    out = [Row("resume", f"worker CPU, {n} {leg.replace('_', '+')}", r[f"{leg}_worker_cpu_s"], "s")
           for leg in LEGS]
    out += [Row("resume", f"worker CPU above idle, {n} {leg.replace('_', '+')}",
                r[f"{leg}_worker_cpu_above_idle_s"], "s") for leg in LEGS]
    out += [Row("resume", "worker CPU, resumes / GETs", r["resumes_cpu_to_gets"], "x", "< 2"),
            Row("resume", "worker CPU, pause+resume / GETs", r["pause_resume_cpu_to_gets"], "x",
                "< 2")]
    out += [Row("resume", f"other tenant p99 beside {leg.replace('_', '+')}",
                r[f"{leg}_other_p99_ms"], "ms") for leg in LEGS]
    out.append(Row("resume", "other tenant p99, resumes / GETs", r["resumes_p99_to_gets"], "x",
                   "about 1"))
    return out
