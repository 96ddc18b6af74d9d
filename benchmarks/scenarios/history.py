"""Scenario 8: a year's worth of history. Do the calls of one request stay as fast?

One account's history is seeded by set-based SQL (benchmarks/history_seed.py)
twice: ``history_small`` events (10,000) in a database of its own beside the
benchmark's (``<name>_small``, dropped at the end), and ``history_events``
(2,000,000) in the benchmark's, each followed by the rollup recount and
VACUUM ANALYZE. At both sizes the same calls are timed, the sizes taking
turns round after round (the median of ``history_rounds`` rounds' medians,
each round ``history_repeats`` calls after three untimed ones, warm
cache): the writes
of one delivery (emit, claim + record, the sweep), the dashboard's queries
and whole pages, the API's delivery list with each filter (and a page far
down), and the /metrics exposition. At the large size each read's SQL is
run under EXPLAIN (ANALYZE, BUFFERS) and the plan kept. The account's audit log holds
``history_seed.AUDIT_ENTRIES`` entries at both sizes, read by the API and the Activity page;
the publisher API's account list is read with a publisher key made for the run.

``--keep-history`` reuses the histories an earlier run with that flag seeded (both
databases are kept at the end): a run at 2,000,000 events then starts in seconds, which
is what comparing two commits in alternated runs needs. Drop the databases by hand.

No worker runs; what emit publishes is flushed.
"""

from __future__ import annotations

import contextlib
import os

from .. import history_seed, services
from ..context import Context
from ..plans import explain, statements_of, timed_ms
from ..stats import median
from . import Row

TARGET_MS = 20.0  # every read at the large size, median (issue 43)
TARGET_RATIO = 1.2  # large / small (issue 43)
WARMUP = 3  # untimed calls before the timed ones


def _calls(history: history_seed.History, repeats: int) -> dict:
    """Each timed call by name: (callable, is_read). Built once per size."""
    from prometheus_client import generate_latest

    from webhooks.services import publishers

    from web import create_app
    from web.dashboard import queries
    from web.dashboard.views_overview import chart_since
    from web.metrics import registry
    from webhooks import emit_event
    from webhooks.config import get_settings
    from webhooks.events.samples import sample_data
    from webhooks.lifecycle.claim import Caps, claim
    from webhooks.lifecycle.policy import next_step
    from webhooks.lifecycle.record import record
    from webhooks.services.attempt import rules_of
    from webhooks.services.sweep import run_sweep
    from webhooks.storage.db import get_engine, session_scope
    from webhooks.storage.models import utcnow

    settings = get_settings()
    account, first = history.account_id, history.subscription_ids[0]
    data = sample_data(history_seed.TYPES[0])
    app = create_app({"TESTING": True, "SECRET_KEY": "history-benchmark-" * 3})
    api = app.test_client()
    headers = {"Authorization": f"Bearer {history.api_key}"}
    with session_scope() as session:
        _, publisher_key = publishers.create(session, "history benchmark")
    publisher = {"Authorization": f"Bearer {publisher_key}"}
    pages = app.test_client()
    _sign_in(pages, history.api_key)  # a server-side dashboard session, as a person gets one

    def get(client, path, **kwargs):
        def call():
            response = client.get(path, **kwargs)
            assert response.status_code == 200, (path, response.status_code)
        return call

    def read(query):
        def call():
            with session_scope() as session:
                query(session)
        return call

    def emit():
        emit_event(account, history_seed.TYPES[0], data)

    # Deliveries for claim + record, emitted beforehand so that the timing holds the worker's
    # two transactions only.
    ready = [emit_event(account, history_seed.TYPES[0], data).delivery_ids[0]
             for _ in range(repeats + WARMUP)]

    def claim_and_record():
        delivery_id = ready.pop()
        engine = get_engine(pre_ping=False)
        with engine.begin() as connection:
            claimed = claim(connection, delivery_id, 0, utcnow(), Caps.of(settings))
        now, rules = utcnow(), rules_of(settings)
        with engine.begin() as connection:
            record(connection, claimed, step=next_step(1, 200, claimed.event_type, rules),
                   rules=rules, started_at=now, now=now, duration_ms=40, status_code=200,
                   error=None, excerpt="ok")

    api_list = "/api/webhooks/deliveries"
    deep = _deep_cursor(api, api_list, headers, pages_down=20)
    since = chart_since(utcnow())
    return {
        "emit_event": (emit, False),
        "claim + record of one attempt": (claim_and_record, False),
        "sweep": (run_sweep, False),
        "dashboard chart, 24 h": (read(lambda s: queries.hourly_outcomes(s, account, since)), True),
        "dashboard status counts": (read(lambda s: queries.status_counts(s, account, since)), True),
        "subscription page chart": (
            read(lambda s: queries.hourly_outcomes(s, account, since, first)), True),
        "GET /deliveries?subscription_id&status=dead": (
            get(api, f"{api_list}?subscription_id={first}&status=dead", headers=headers), True),
        "GET /deliveries?status=dead": (get(api, f"{api_list}?status=dead", headers=headers), True),
        "GET /deliveries": (get(api, api_list, headers=headers), True),
        "GET /deliveries?status=pending": (
            get(api, f"{api_list}?status=pending", headers=headers), True),
        "GET /deliveries?event_type": (
            get(api, f"{api_list}?event_type={history_seed.TYPES[3]}", headers=headers), True),
        "GET /deliveries, page 21": (get(api, f"{api_list}{deep}", headers=headers), True),
        "/metrics exposition": (lambda: generate_latest(registry), True),
        "page /dashboard/": (get(pages, "/dashboard/"), True),
        "page /dashboard/subscriptions/<id>": (get(pages, f"/dashboard/subscriptions/{first}"), True),
        "page /dashboard/deliveries?status=dead": (
            get(pages, "/dashboard/deliveries?status=dead"), True),
        "GET /deliveries/<id>": (get(api, f"{api_list}/{ready[0]}", headers=headers), True),
        "GET /audit-log": (get(api, "/api/webhooks/audit-log", headers=headers), True),
        "GET /accounts (publisher API)": (get(api, "/api/webhooks/accounts", headers=publisher),
                                          True),
        "page /dashboard/activity": (get(pages, "/dashboard/activity"), True),
    }


def _deep_cursor(client, path: str, headers: dict, pages_down: int) -> str:
    """The query string of the page ``pages_down`` pages below the newest (default page size),
    or of the last page when there are fewer."""
    cursor = None
    for _ in range(pages_down):
        query = f"?cursor={cursor}" if cursor else ""
        following = client.get(path + query, headers=headers).get_json()["next_cursor"]
        if following is None:
            break
        cursor = following
    return f"?cursor={cursor}" if cursor else ""


@contextlib.contextmanager
def _using(database_url: str):
    """The service's code (settings, engines, the app) pointed at ``database_url`` for a while.

    The API's per-account rate limit is off meanwhile: the scenario times what one request
    costs, calling the same routes hundreds of times a second, which the limit (100 per
    second by default) would turn away with 429.
    """
    from webhooks.config import reset_settings_cache

    changes = {"WEBHOOKS_DATABASE_URL": database_url, "WEBHOOKS_API_RATE_LIMIT": "off"}
    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    reset_settings_cache()
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset_settings_cache()


def _seeded(ctx: Context, url: str, events: int) -> tuple[history_seed.History, dict]:
    """An emptied database at ``url`` holding ``events`` events of history; what it took.

    With ``--keep-history``, the history an earlier such run left there is reused when it
    was seeded with as many events (what the run's own calls added since is kept too).
    """
    name = f"history of {events} events"
    with _using(url):
        kept = history_seed.seeded_history(name) if ctx.options.keep_history else None
        if kept is not None:
            print(f"  reusing the {events} events seeded before in {url.rsplit('/', 1)[-1]}",
                  flush=True)
            return kept, {"seed_s": None, "reused": True, **history_seed.database_size()}
        services.truncate_tables(url)
        history = history_seed.make_history(ctx.receiver.url("/history"), name)
        history_seed.seed_audit(history)
        niceness = ctx.sizes.seed_nice
        seeded = history_seed.seed_events(history, events, niceness=niceness)
        figures = {"seed_s": round(seeded, 2), **history_seed.finish(url, niceness=niceness),
                   **history_seed.database_size()}
    print(f"  seeded {events} events in {seeded:.1f} s: {figures}", flush=True)
    return history, figures


def _sign_in(client, api_key: str) -> None:
    """Sign in through the dashboard's form (its CSRF token read from the page)."""
    import re

    page = client.get("/dashboard/").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page) or re.search(
        r'value="([^"]+)"[^>]*name="csrf_token"', page)
    assert token, "the sign-in page has no csrf_token"
    answer = client.post("/dashboard/sign-in", data={"csrf_token": token.group(1), "api_key": api_key})
    assert answer.status_code in (302, 303), ("sign-in", answer.status_code)


def _measure(ctx: Context, sized: dict) -> tuple[dict, dict]:
    """Every call at each size, round after round, the sizes taking turns in each round.

    ``sized``: {label: (database url, history)}. Taking turns puts the
    moments when others load the shared machine on both sizes alike; per
    call and size the median of the rounds' medians is kept. The plans are
    those of the first round.
    """
    from webhooks.storage.db import get_engine

    sizes = ctx.sizes
    rounds: dict[str, dict[str, list[dict]]] = {label: {} for label in sized}
    plans: dict[str, list] = {}
    for number in range(sizes.history_rounds):
        for label, (url, history) in sized.items():
            with _using(url):
                for name, (call, is_read) in _calls(history, sizes.history_repeats).items():
                    rounds[label].setdefault(name, []).append(
                        timed_ms(call, sizes.history_repeats, WARMUP))
                    if label == "large" and is_read and number == 0:
                        plans[name] = explain(get_engine(), statements_of(get_engine(), call))
            services.flush_broker(ctx.options.broker_url)
        print(f"  round {number + 1} done", flush=True)
    return {label: _summary(runs) for label, runs in rounds.items()}, plans


def _summary(runs: dict[str, list[dict]]) -> dict:
    timings = {}
    for name, measured in runs.items():
        medians = [run["median_ms"] for run in measured]
        timings[name] = {"median_ms": round(median(medians), 2), "min_ms": min(medians),
                         "max_ms": max(medians),
                         "p95_ms": round(median(r["p95_ms"] for r in measured), 2),
                         "p99_ms": round(median(r["p99_ms"] for r in measured), 2),
                         "rounds": medians}
    return timings


def run(ctx: Context) -> dict:
    sizes = ctx.sizes
    small, large = min(sizes.history_small, sizes.history_events), sizes.history_events
    keep = ctx.options.keep_history
    if keep:
        services.flush_broker(ctx.options.broker_url)
    else:
        ctx.reset()
    small_url = _sibling(ctx.options.database_url)
    services.ensure_database(small_url)
    result: dict = {"small_events": small, "events": large, "load_at_start": list(os.getloadavg())}
    try:
        small_history, result["small_seed"] = _seeded(ctx, small_url, small)
        large_history, result["seed"] = _seeded(ctx, ctx.options.database_url, large)
        timings, result["plans"] = _measure(ctx, {
            "small": (small_url, small_history),
            "large": (ctx.options.database_url, large_history),
        })
    finally:
        if not keep:
            services.drop_database(small_url)
    result.update(small=timings["small"], large=timings["large"])
    for name in result["large"]:
        at_small, at_large = result["small"][name], result["large"][name]
        print(f"  {name}: {at_small['median_ms']} ms (p99 {at_small['p99_ms']}) at {small}, "
              f"{at_large['median_ms']} ms (p99 {at_large['p99_ms']}) at {large}", flush=True)
    result["load_at_end"] = list(os.getloadavg())
    ctx.results["history"] = result
    return result


def _sibling(database_url: str) -> str:
    """The URL of the small size's own database, beside the benchmark's."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    return url.set(database=f"{url.database}_small").render_as_string(hide_password=False)


def rows(results: dict) -> list[Row]:
    r = results.get("history")
    if not r:
        return []
    n = f"{r['events']:,}"
    out = [Row("history", f"seeding {n} events", r["seed"]["seed_s"], "s"),
           Row("history", f"database at {n} events", r["seed"]["database_mb"], "MB")]
    for name, large in r["large"].items():
        small = r["small"][name]["median_ms"]
        ratio = large["median_ms"] / small if small else None
        out.append(Row("history", f"{name} at {n}", large["median_ms"], "ms", f"<= {TARGET_MS:g}"))
        out.append(Row("history", f"{name}: x of {r['small_events']:,}", ratio, "x",
                       f"<= {TARGET_RATIO:g}"))
    return out
