"""``python -m benchmarks``: run the scenarios, print a table, write the figures as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .scenarios import ALL, ORDER

DEFAULT_DATABASE_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/webhooks_bench"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/14"
DEFAULT_POOLS = "prefork:2,threads:32"


# Options that change one of the sizes (context.Sizes): flag, field, type, help with the
# full run's default.
SIZE_OPTIONS = [
    ("--deliveries", "throughput_deliveries", int, "deliveries per throughput run (20000)"),
    ("--backlog", "backlog_deliveries", int, "deliveries in the backlog (100000)"),
    ("--backlog-countdown-fraction", "backlog_countdown_fraction", float,
     "share of the backlog riding countdown messages (0.8)"),
    ("--backlog-wait", "backlog_wait", float,
     "seconds from seeding until the backlog falls due (600)"),
    ("--latency-seconds", "latency_seconds", float, "seconds of paced emitting (20)"),
    ("--isolation-seconds", "isolation_seconds", float, "seconds per isolation phase (20)"),
    ("--events", "history_events", int, "events seeded for the history scenario (2000000)"),
    ("--seed-nice", "seed_nice", int,
     "niceness of the PostgreSQL process that seeds the history, when the database runs on "
     "this host and may be reniced (default 0)"),
    ("--purge-rows", "purge_rows", int, "rows the purge scenario seeds and deletes (1000000)"),
    ("--purge-deliveries", "purge_deliveries", int,
     "deliveries of each drain of the purge scenario (10000)"),
    ("--purge-pairs", "purge_pairs", int, "pairs of drains without and during the purge (6)"),
    ("--realistic-deliveries", "realistic_deliveries", int,
     "deliveries per phase of the realistic scenario (6000)"),
    ("--slow-delay-ms", "realistic_slow_ms", float,
     "the realistic scenario's uniform answer time, ms (200)"),
    ("--pace-deliveries", "pace_deliveries", int,
     "the backlog each leg of the pace scenario drains (5000)"),
    ("--pace-capacity", "pace_capacity", int,
     "the pace scenario's receiver capacity, requests/s (0: both 20 and 200)"),
    ("--pace-legs", "pace_legs", str, "the pace scenario's legs: on, off or on,off (on,off)"),
    ("--ordering-deliveries", "ordering_deliveries", int,
     "deliveries of each drain of the ordering scenario (5000)"),
    ("--ordering-keys", "ordering_keys", int,
     "keys the ordering scenario's keyed drain is spread over (1000)"),
    ("--tenants", "tenants", int, "accounts of the realistic and shared subscriptions (10)"),
    ("--shared-seconds", "shared_seconds", float, "the shared scenario's timed window, s (30)"),
    ("--shared-emitters", "shared_emitters", int, "emitting processes in the shared scenario (2)"),
    ("--shared-emitter-threads", "shared_emitter_threads", int,
     "threads calling emit_event in each of the shared scenario's service emitters (1)"),
    ("--shared-workers", "shared_workers", int,
     "worker processes of the service and of django-webhook2 in the shared scenario (1)"),
    ("--shared-backlog", "shared_backlog", int,
     "messages the shared scenario's emitters let wait at most (1000)"),
    ("--resume-requests", "resume_requests", int,
     "requests of each leg of the resume scenario (400)"),
    ("--resume-stored", "resume_stored", int,
     "events of history the resume scenario stores first (100000)"),
]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark the webhook service against the PostgreSQL and Redis in "
                    "WEBHOOKS_DATABASE_URL / WEBHOOKS_BROKER_URL (defaults: "
                    f"{DEFAULT_DATABASE_URL}, {DEFAULT_BROKER_URL}). It empties that "
                    "database's tables and that Redis db.")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and 1 repeat: the seconds-long smoke run CI uses")
    parser.add_argument("--scenarios", default=",".join(ORDER),
                        help=f"comma-separated, from: {', '.join(ALL)} (default: all but "
                             "cost, profile and django_webhook2)")
    parser.add_argument("--repeats", type=int, help="runs per scenario (default 3; 1 with --quick)")
    parser.add_argument("--pools", help="pools for ceiling and throughput, e.g. "
                        f"prefork:2,prefork:4,threads:16 (default {DEFAULT_POOLS}; "
                        "the Procfile's with --quick)")
    parser.add_argument("--scenario-pool",
                        help="pool of the other scenarios' workers, emit to shared and "
                             "django_webhook2 (default: the Procfile's)")
    for flag, field, kind, text in SIZE_OPTIONS:
        parser.add_argument(flag, dest=field, type=kind, metavar="N", help=text)
    parser.add_argument("--purge-pace", metavar="INTERVAL,SECONDS",
                        help="the purge scenario's schedule: a run of SECONDS every INTERVAL "
                             "(default: WEBHOOKS_PURGE_INTERVAL, WEBHOOKS_PURGE_SECONDS: 60,10)")
    parser.add_argument("--delay-mix", metavar="LOW-HIGH",
                        help="the realistic scenario's range of answer times, ms (50-1000)")
    parser.add_argument("--ceiling-pool", default="prefork:2",
                        help="the shared scenario's ceiling worker (default prefork:2)")
    parser.add_argument("--shared-ed25519", action="store_true",
                        help="the shared scenario also runs its service leg with every "
                             "subscription signed with Ed25519 (standard-ed25519), and reports "
                             "its CPU per delivery beside the HMAC leg's")
    parser.add_argument("--keep-history", action="store_true",
                        help="the history scenario reuses the histories an earlier run with "
                             "this flag seeded, when of the same size, and keeps its databases "
                             "(drop them by hand)")
    parser.add_argument("--rate", type=float,
                        help="events/s for latency and isolation (default: half the measured "
                             "throughput of the scenario pool)")
    parser.add_argument("--output", default="bench-results.json", help="JSON file to write")
    parser.add_argument("--loglevel", default="INFO", help="workers' log level (as the Procfile)")
    parser.add_argument("--keep-logs", action="store_true", help="keep worker logs after success")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--force", action="store_true",
                        help="allow a database without 'bench'/'test' in its name, or Redis db 0")
    return parser.parse_args(argv)


def _database_url() -> str:
    """WEBHOOKS_DATABASE_URL as the service takes it (postgresql:// through psycopg2), or the
    service's one-line refusal."""
    from webhooks.config.values import supported_database_url
    from webhooks.errors import ConfigError

    try:
        return supported_database_url(os.environ["WEBHOOKS_DATABASE_URL"], "WEBHOOKS_DATABASE_URL")
    except ConfigError as error:
        raise SystemExit(f"error: {error}") from None


def build_options(args: argparse.Namespace):
    from .context import FULL, QUICK, Options, PoolConfig, procfile_pool, replace_sizes

    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(scenarios) - set(ALL)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}; choose from {ALL}")
    scenario_pool = (PoolConfig.parse(args.scenario_pool) if args.scenario_pool
                     else procfile_pool())
    pools_text = args.pools or (f"{scenario_pool.pool}:{scenario_pool.concurrency}"
                                if args.quick else DEFAULT_POOLS)
    sizes = replace_sizes(
        QUICK if args.quick else FULL,
        **{field: getattr(args, field) for _, field, _, _ in SIZE_OPTIONS},
        purge_pace=_pace(args.purge_pace), realistic_mix_ms=_mix(args.delay_mix),
    )
    return Options(
        database_url=_database_url(),
        broker_url=os.environ["WEBHOOKS_BROKER_URL"],
        scenarios=[s for s in ALL if s in scenarios],
        repeats=args.repeats or (1 if args.quick else 3),
        pools=[PoolConfig.parse(p) for p in pools_text.split(",") if p.strip()],
        scenario_pool=scenario_pool,
        sizes=sizes,
        quick=args.quick,
        loglevel=args.loglevel,
        output=Path(args.output),
        rate=args.rate,
        ceiling_pool=PoolConfig.parse(args.ceiling_pool),
        shared_ed25519=args.shared_ed25519,
        keep_history=args.keep_history,
    )


def _pace(text: str | None) -> tuple[float, float] | None:
    """``--purge-pace 60,10`` as (60.0, 10.0); None when not given."""
    if not text:
        return None
    try:
        interval, seconds = (float(part) for part in text.split(","))
    except ValueError:
        raise SystemExit(f"--purge-pace is INTERVAL,SECONDS such as 60,10, got {text!r}") from None
    if interval <= 0 or not 0 < seconds <= interval:
        raise SystemExit(f"--purge-pace needs 0 < SECONDS <= INTERVAL, got {text!r}")
    return interval, seconds


def _mix(text: str | None) -> tuple[float, float] | None:
    """``--delay-mix 50-1000`` as (50.0, 1000.0) ms; None when not given."""
    from .mix import parse_range_ms

    try:
        return parse_range_ms(text) if text else None
    except ValueError as exc:
        raise SystemExit(f"--delay-mix: {exc}") from None


def run_scenarios(ctx, save) -> list[str]:
    """Run each selected scenario once (ceiling and throughput together); returns the failures.

    ``save()`` is called after each scenario, so an interrupted run keeps what it measured.
    """
    from .scenarios import module_for

    failed = []
    done_modules = set()
    for name in ctx.options.scenarios:
        module = module_for(name)
        if module.__name__ in done_modules:
            continue
        done_modules.add(module.__name__)
        print(f"== {name}", flush=True)
        started = time.monotonic()
        try:
            module.run(ctx)
        except Exception as exc:  # noqa: BLE001 - report it, run the other scenarios
            traceback.print_exc()
            ctx.results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            failed.append(name)
        print(f"   ({time.monotonic() - started:.0f} s)", flush=True)
        save()
    return failed


def collect_rows(results: dict) -> list:
    """The table's rows, scenario by scenario; a failed scenario shows its error."""
    from .scenarios import Row, module_for

    rows, seen = [], set()
    good = {name: value for name, value in results.items() if "error" not in value}
    for name in ALL:
        if "error" in results.get(name, {}):
            rows.append(Row(name, "failed", results[name]["error"][:60]))
            continue
        module = module_for(name)
        if module.__name__ not in seen:
            seen.add(module.__name__)
            rows.extend(module.rows(good))
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    # Set before any webhooks module is imported: the settings and the Celery app read them once.
    os.environ.setdefault("WEBHOOKS_DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ.setdefault("WEBHOOKS_BROKER_URL", DEFAULT_BROKER_URL)
    options = build_options(args)

    from . import services

    if not args.force:
        services.check_targets(options.database_url, options.broker_url)
    services.ensure_database(options.database_url)
    with services.exclusive_run(options.database_url):  # nothing is emptied before this
        return run(options, args)


def run(options, args) -> int:
    """The run proper: start the receiver, run the scenarios, save and print the figures."""
    from webhooks.config import get_settings

    from . import report, services
    from .context import Context
    from .processes import Registry
    from .receiver import start_receiver

    services.flush_broker(options.broker_url)
    log_dir = Path(tempfile.mkdtemp(prefix="webhooks-bench-"))
    print(f"database {options.database_url}, broker {options.broker_url}, logs in {log_dir}",
          flush=True)
    started = time.time()
    meta = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": options.quick,
        "repeats": options.repeats,
        "scenarios": options.scenarios,
        "pools": [p.label for p in options.pools],
        "scenario_pool": options.scenario_pool.label,
        "sizes": dataclasses.asdict(options.sizes),
        "machine": report.machine(services.server_versions(options.database_url,
                                                           options.broker_url)),
    }
    results: dict = {}

    def save(final: bool = False) -> None:
        meta["seconds"] = round(time.time() - started, 1)
        meta["load_average_at_end"] = list(os.getloadavg())
        meta["complete"] = final
        report.write_json(options.output, {"meta": meta, "scenarios": results})

    try:
        with Registry() as registry:
            receiver = start_receiver(registry, service_name=get_settings().service_name,
                                      log_dir=log_dir)
            ctx = Context(options, registry, receiver, log_dir, results)
            failed = run_scenarios(ctx, save)
    except (KeyboardInterrupt, SystemExit) as exc:
        meta["interrupted"] = True
        save()
        print(f"\ninterrupted; every process it started is stopped. What was measured is in "
              f"{options.output}; logs in {log_dir}", file=sys.stderr)
        return 130 if isinstance(exc, KeyboardInterrupt) else 143
    finally:
        services.flush_broker(options.broker_url)

    meta["failed"] = failed
    save(final=True)
    rows = collect_rows(results)
    print()
    print(report.table(rows))
    if args.markdown:
        print()
        print(report.markdown(rows))
    print(f"\nwrote {options.output}", flush=True)
    if failed:
        print(f"failed scenarios: {', '.join(failed)}; logs kept in {log_dir}", file=sys.stderr)
        return 1
    if not args.keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0
