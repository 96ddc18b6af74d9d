"""Scenario ``zoo``: the worker's peak memory across the whole endpoint zoo (issue 22).

Per repeat, two fresh workers of the scenario pool (the Procfile's) run in
turn, each measured by the peak resident set (``VmHWM``) of every process in
its group:

- clean: ``ZOO_ROUNDS`` x the zoo's size deliveries to an endpoint that
  answers 200 at once, the baseline a worker sits at;
- zoo: ``ZOO_ROUNDS`` deliveries to every endpoint of tests/support/zoo.py
  (redirects with 200 MB and gzip-bomb bodies, cookie floods, gzip and
  deflate bombs, hanging handshakes, slow DNS, ...), each walking a ladder of
  three attempts, all at once.

The zoo's endpoints and certificates are the tests' own (tests/support/zoo.py,
which needs the test extra: trustme). Target: the zoo's peak under 150 MB.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import text

from .. import seed
from ..context import ROOT, Context
from ..processes import ManagedProcess, _group_members, _kib
from ..stats import summarise_all
from . import Row
from .common import fmt

ZOO_ROUNDS = 2  # deliveries per zoo endpoint in one run
TIMEOUT_S = 2  # WEBHOOKS_TIMEOUT of the zoo's workers: the hanging endpoints wait it out
FINISH_TIMEOUT_S = 120.0
SLOW_DNS = ROOT / "tests" / "support" / "slowdns"


def peak_rss_mb(process: ManagedProcess) -> float:
    """The largest peak resident set (VmHWM) of any process of the group, in MB."""
    peaks = [_kib(f"/proc/{pid}/status", "VmHWM:") for pid in _group_members(process.pid)]
    return round(max(peaks, default=0) / 1024, 1)


def _all_finished(expected: int) -> bool:
    from webhooks.storage.db import get_engine

    with get_engine().connect() as connection:
        finished = connection.execute(text(
            "SELECT count(*) FROM deliveries WHERE status IN ('done', 'failed', 'dead')")).scalar()
    return finished >= expected


def _run_deliveries(ctx: Context, name: str, urls: list[str], ca_bundle: Path) -> dict:
    """A fresh worker delivers one event to each URL; returns its peak and the time taken."""
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    ctx.reset()
    worker = ctx.start_worker(
        ctx.options.scenario_pool, f"zoo-{name}", WEBHOOKS_TIMEOUT=TIMEOUT_S,
        WEBHOOKS_RETRY_DELAYS="1,1", WEBHOOKS_PAUSE_AFTER=1_000_000,
        WEBHOOKS_CA_BUNDLE=ca_bundle, PYTHONPATH=f"{SLOW_DNS}:{ROOT}")
    try:
        idle = peak_rss_mb(worker)
        started = time.monotonic()
        data = sample_data(seed.EVENT_TYPE)
        for index, url in enumerate(urls):
            target = seed.make_target(url, f"zoo-{name}-{index}")
            emit_event(target.account_id, seed.EVENT_TYPE, data)
        deadline = started + FINISH_TIMEOUT_S
        while not _all_finished(len(urls)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return {"idle_rss_mb": idle, "peak_rss_mb": peak_rss_mb(worker),
                "finished": _all_finished(len(urls)), "seconds": time.monotonic() - started}
    finally:
        ctx.stop(worker)


def measure(ctx: Context) -> dict:
    from tests.support.zoo import Certificates, ZooEndpoint, answer, url_of, zoo

    certificates = Certificates()
    endpoints = zoo(certificates)
    plain = ZooEndpoint(answer(200))
    try:
        zoo_urls = [url_of(name, endpoint) for name, (endpoint, _) in endpoints.items()] * ZOO_ROUNDS
        clean = _run_deliveries(ctx, "clean", [plain.url()] * len(zoo_urls), certificates.ca_bundle)
        hostile = _run_deliveries(ctx, "hostile", zoo_urls, certificates.ca_bundle)
    finally:
        plain.close()
        for endpoint, _ in endpoints.values():
            endpoint.close()
    return {
        "endpoints": len(endpoints),
        "deliveries": len(zoo_urls),
        "clean_peak_rss_mb": clean["peak_rss_mb"],
        "zoo_idle_rss_mb": hostile["idle_rss_mb"],
        "zoo_peak_rss_mb": hostile["peak_rss_mb"],
        "zoo_all_finished": 1.0 if hostile["finished"] else 0.0,
        "zoo_seconds": hostile["seconds"],
    }


def run(ctx: Context) -> dict:
    runs = []
    for repeat in range(ctx.options.repeats):
        runs.append(measure(ctx))
        r = runs[-1]
        print(f"  zoo run {repeat + 1}: worker peak {fmt(r['clean_peak_rss_mb'])} MB clean, "
              f"{fmt(r['zoo_peak_rss_mb'])} MB across {r['endpoints']} zoo endpoints "
              f"({r['deliveries']} deliveries, all finished: {bool(r['zoo_all_finished'])})",
              flush=True)
    result = {"pool": ctx.options.scenario_pool.label, "rounds": ZOO_ROUNDS,
              **summarise_all(runs, sorted(runs[0]) if runs else [])}
    ctx.results["zoo"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("zoo")
    if not r:
        return []
    return [
        Row("zoo", "worker peak RSS, clean deliveries", r["clean_peak_rss_mb"], "MB"),
        Row("zoo", "worker peak RSS across the zoo", r["zoo_peak_rss_mb"], "MB", "< 150"),
        Row("zoo", "zoo deliveries all finished", r["zoo_all_finished"], "", "1"),
    ]
