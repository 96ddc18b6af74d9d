"""Scenario "shared": emit and delivery share the machine, as in production.

Each repeat runs these legs in turn, each against the fast receiver
(``loaded.py`` measures a leg):

- ``service``: ``shared_workers`` (1) service workers with the scenario pool
  (the Procfile's worker line unless ``--scenario-pool``; several, as a
  Procfile entry is scaled, with ``--shared-workers``) while ``shared_emitters`` (2)
  processes call ``webhooks.emit_event`` at full speed, held to a backlog
  of 1,000 waiting messages (each from ``shared_emitter_threads`` (1)
  threads with ``--shared-emitter-threads``, as a web app's request threads:
  their calls may share statements and commits, emit.py's group commit); events go round robin to ``tenants`` (10)
  accounts with one subscription each, so no per-subscription or
  per-account cap binds (as with many tenants);
- ``service_ed25519`` (only with ``--shared-ed25519``): the ``service`` leg
  again, every subscription ``standard-ed25519`` (an Ed25519 signature per
  attempt, webhooks/signing.py) instead of the service scheme's HMAC: its CPU
  per delivery beside the HMAC leg's of the same repeat, and what signing one
  attempt's headers costs in each scheme, in-process (``signing_cost.py``: a
  figure the machine's noise does not move as much);
- ``ceiling``: a ceiling worker (``ceiling_app.py``, ``--ceiling-pool``,
  prefork -c 2 by default: the stack's best) fed the same way by bare
  publishers (``ceiling_app.send``);
- ``durable_ceiling`` (only with ``--scenarios ...,durable_ceiling``): the
  ceiling worker and publishers again, made durable (``ceiling_app.py``:
  each publisher commits its message's row durably before publishing, the
  task marks it delivered after its POST), in the benchmark's database;
- ``django_webhook2`` (only with ``--scenarios ...,django_webhook2`` and
  ``WEBHOOKS_BENCH_DJANGO_WEBHOOK2_PYTHON``: ``benchmarks/dw2.py``): the
  package's workers (as many, with the scenario pool), fed by processes calling its
  ``emit_event``.

Per leg: deliveries/s, worker CPU ms per delivery and the emitters' CPU,
PostgreSQL commits, WAL bytes, backend CPU and connections opened per delivery (emit's and
delivery's together, as both run), Redis commands per delivery, and the whole
machine's CPU per delivery with the cores it kept busy (meter.py). The service
is given as a ratio to the ceiling (target 0.8, issue 24), to django-webhook2
(target 3) and to the durable ceiling of the same repeat.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

from sqlalchemy.engine import make_url

from .. import seed
from ..signing_cost import signing_cpu_us
from ..context import Context
from ..stats import summarise, summarise_all
from . import Row
from .loaded import KEYS, Leg, run_leg

PATHS = {"service": "/shared", "ceiling": "/shared-ceiling", "durable_ceiling": "/shared-durable",
         "django_webhook2": "/shared-dw2", "service_ed25519": "/shared-ed25519"}
EMITTER = "benchmarks.emitter"


def _database(ctx: Context) -> str:
    return make_url(ctx.options.database_url).database


def service_leg(ctx: Context, ed25519: bool = False) -> dict:
    """The service's leg; with ``ed25519``, its subscriptions are ``standard-ed25519``."""
    ctx.reset()
    scheme = "standard-ed25519" if ed25519 else "service"
    path = PATHS["service_ed25519" if ed25519 else "service"]
    accounts = [seed.make_target(ctx.receiver.url(path), name=f"shared-{i}",
                                 signature_scheme=scheme).account_id
                for i in range(max(1, ctx.sizes.tenants))]
    leg = Leg("shared-ed25519" if ed25519 else "shared", path, sys.executable, EMITTER,
              ("--kind", "service", "--accounts", ",".join(accounts),
               "--threads", str(ctx.sizes.shared_emitter_threads)), ctx.env(),
              _database(ctx), ctx.options.broker_url)
    figures = run_leg(ctx, leg, [ctx.start_worker(ctx.options.scenario_pool, f"shared-{i + 1}")
                                 for i in range(ctx.sizes.shared_workers)])
    if ed25519:
        figures.update(signing_us_per_attempt=signing_cpu_us(scheme),
                       hmac_signing_us_per_attempt=signing_cpu_us("service"))
    return figures


def ceiling_leg(ctx: Context) -> dict:
    ctx.reset()
    path = PATHS["ceiling"]
    leg = Leg("shared-ceiling", path, sys.executable, EMITTER, ("--kind", "ceiling"), ctx.env(),
              _database(ctx), ctx.options.broker_url)
    return run_leg(ctx, leg, [ctx.start_ceiling_worker(ctx.options.ceiling_pool, path,
                                                       "shared-ceiling")])


def durable_ceiling_leg(ctx: Context) -> dict:
    import psycopg2

    from ..ceiling_app import DATABASE_ENV, create_rows_table

    ctx.reset()
    path = PATHS["durable_ceiling"]
    url = libpq_url(ctx.options.database_url)
    with contextlib.closing(psycopg2.connect(url)) as connection:
        create_rows_table(connection)
    env = ctx.env(**{DATABASE_ENV: url})
    leg = Leg("shared-durable", path, sys.executable, EMITTER, ("--kind", "durable-ceiling"), env,
              _database(ctx), ctx.options.broker_url)
    return run_leg(ctx, leg, [ctx.start_ceiling_worker(
        ctx.options.ceiling_pool, path, "shared-durable", **{DATABASE_ENV: url})])


def libpq_url(database_url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL (its driver dropped), for psycopg2."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(
        hide_password=False)


def dw2_leg(ctx: Context, dw2) -> dict:
    ctx.reset()
    path = PATHS["django_webhook2"]
    item = dw2.prepare(path)
    leg = Leg("shared-dw2", path, dw2.python, "benchmarks.dw2_project.emit", ("--item", item),
              dw2.env(), dw2.database, dw2.broker_url)
    return run_leg(ctx, leg, [dw2.start_worker(ctx.options.scenario_pool, i + 1)
                              for i in range(ctx.sizes.shared_workers)])


def _legs(ctx: Context) -> tuple[dict, object]:
    """The legs to run, by name, and django-webhook2's harness if it runs."""
    from ..dw2 import DjangoWebhook2, python_or_reason

    wanted = set(ctx.options.scenarios)
    legs = {}
    if "shared" in wanted:
        legs["service"] = service_leg
        if ctx.options.shared_ed25519:  # right after the HMAC leg: the machine as alike as can be
            legs["service_ed25519"] = lambda c: service_leg(c, ed25519=True)
        legs["ceiling"] = ceiling_leg
    if "durable_ceiling" in wanted:
        legs["durable_ceiling"] = durable_ceiling_leg
    dw2 = None
    if "django_webhook2" in wanted:
        python, reason = python_or_reason()
        try:
            dw2 = DjangoWebhook2(ctx, python) if python else None
        except RuntimeError as exc:
            reason = str(exc)
        if dw2 is None:
            ctx.results["django_webhook2"] = {"error": f"not run: {reason}"}
        else:
            legs["django_webhook2"] = lambda c: dw2_leg(c, dw2)
    return legs, dw2


def run(ctx: Context) -> dict:
    legs, dw2 = _legs(ctx)
    runs: dict[str, list[dict]] = {name: [] for name in legs}
    version = None
    for repeat in range(ctx.options.repeats):
        for name, leg in list(legs.items()):
            if name == "django_webhook2":
                try:  # its failure must not lose the service's figures
                    version = version or dw2.version()
                    runs[name].append(leg(ctx))
                except Exception as exc:  # noqa: BLE001 - reported, the other legs go on
                    traceback.print_exc()
                    ctx.results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                    del legs[name], runs[name]
                    continue
            else:
                runs[name].append(leg(ctx))
            r = runs[name][-1]
            print(f"  shared {name} run {repeat + 1}: {r['rate_per_s']:.1f}/s, worker "
                  f"{r['worker_cpu_ms_per_delivery']:.2f} ms/delivery, emitters "
                  f"{r['emitters_cpu_ms_per_delivery']:.2f} ms/delivery", flush=True)
            _store(ctx, runs, version)
    return ctx.results.get("shared") or ctx.results.get("django_webhook2")


def _leg_summary(runs: list[dict]) -> dict:
    out = summarise_all(runs, KEYS)
    out["redis_commands_by_name"] = runs[-1].get("redis_commands_by_name")
    out["wal_by_relation"] = [run.get("wal_by_relation") for run in runs]  # each run's
    return out


def _ratios(runs: list[dict], references: list[dict]) -> dict:
    return summarise(r["rate_per_s"] / ref["rate_per_s"] if ref["rate_per_s"] else None
                     for r, ref in zip(runs, references))


_CPU_PARTS = ("worker_cpu_ms_per_delivery", "emitters_cpu_ms_per_delivery", "pg_cpu_ms_per_delivery")


def _cpu(run: dict) -> float | None:
    """The CPU of the worker, the emitters and PostgreSQL per delivery of one leg (ms)."""
    parts = [run.get(name) for name in _CPU_PARTS]
    return None if None in parts else sum(parts)


def _machine_cpu(run: dict) -> float | None:
    """What the whole machine ran per delivery of one leg (ms): Redis, the receiver and the
    harness included."""
    return run.get("machine_cpu_ms_per_delivery")


def _cpu_ratios(runs: list[dict], references: list[dict], cpu=_cpu) -> dict:
    """Each run's ``cpu`` per delivery over its reference's (None where either is missing)."""
    return summarise(cpu(r) / cpu(ref) if cpu(r) and cpu(ref) else None
                     for r, ref in zip(runs, references))


def _store(ctx: Context, runs: dict[str, list[dict]], version: str | None) -> None:
    sizes = ctx.sizes
    pool = ctx.options.scenario_pool.label
    setting = {"seconds": sizes.shared_seconds, "emitters": sizes.shared_emitters,
               "emitter_threads": sizes.shared_emitter_threads,
               "backlog": sizes.shared_backlog, "workers": sizes.shared_workers,
               "pool": pool if sizes.shared_workers == 1 else f"{sizes.shared_workers} x {pool}"}
    service = runs.get("service") or []
    if "service" in runs:
        shared = {**setting, "tenants": sizes.tenants,
                  "ceiling_pool": ctx.options.ceiling_pool.label,
                  "service": _leg_summary(service) if service else {},
                  "ceiling": _leg_summary(runs["ceiling"]) if runs["ceiling"] else {}}
        if runs["ceiling"]:
            shared["ratio_to_ceiling"] = _ratios(service, runs["ceiling"])
            shared["cpu_ratio_to_ceiling"] = _cpu_ratios(service, runs["ceiling"])
            shared["machine_cpu_ratio_to_ceiling"] = _cpu_ratios(service, runs["ceiling"],
                                                                 _machine_cpu)
        if runs.get("django_webhook2"):
            shared["ratio_to_django_webhook2"] = _ratios(service, runs["django_webhook2"])
        if runs.get("service_ed25519"):
            shared.update(_ed25519_figures(service, runs["service_ed25519"]))
        if runs.get("durable_ceiling"):
            shared["ratio_to_durable_ceiling"] = _ratios(service, runs["durable_ceiling"])
            shared["machine_cpu_ratio_to_durable_ceiling"] = _cpu_ratios(
                service, runs["durable_ceiling"], _machine_cpu)
        ctx.results["shared"] = shared
    if runs.get("durable_ceiling"):
        ctx.results["durable_ceiling"] = {**setting, "pool": ctx.options.ceiling_pool.label,
                                          **_leg_summary(runs["durable_ceiling"])}
    if runs.get("django_webhook2"):
        ctx.results["django_webhook2"] = {**setting, "version": version,
                                          **_leg_summary(runs["django_webhook2"])}


def _ed25519_figures(hmac_runs: list[dict], ed25519_runs: list[dict]) -> dict:
    """The Ed25519 leg's figures and its CPU per delivery beyond the HMAC leg's of the same
    repeat (ms): the worker's, which signs, and the whole machine's."""
    def extra(key: str) -> dict:
        return summarise(e[key] - h[key] if e.get(key) is not None and h.get(key) is not None
                         else None for h, e in zip(hmac_runs, ed25519_runs))

    return {"service_ed25519": _leg_summary(ed25519_runs),
            "ed25519_worker_cpu_ms_beyond_hmac": extra("worker_cpu_ms_per_delivery"),
            "ed25519_machine_cpu_ms_beyond_hmac": extra("machine_cpu_ms_per_delivery"),
            "signing_us_per_attempt": summarise_all(
                ed25519_runs, ["hmac_signing_us_per_attempt", "signing_us_per_attempt"])}


def rows(results: dict) -> list[Row]:
    out = []
    shared = results.get("shared")
    if shared:
        pool, ceiling_pool = shared["pool"], shared["ceiling_pool"]
        threads = shared.get("emitter_threads", 1)
        service = f"service {pool}" + (f", {threads} emitter threads" if threads > 1 else "")
        for name, label in (("service", service), ("ceiling", f"ceiling {ceiling_pool}")):
            if shared[name]:
                out.extend(_leg_rows("shared", label, shared[name], name == "service"))
        if shared.get("service_ed25519"):
            out.extend(_leg_rows("shared", f"{service}, Ed25519", shared["service_ed25519"],
                                 False))
            out.append(Row("shared", "Ed25519 signing: worker CPU per delivery beyond HMAC's",
                           shared["ed25519_worker_cpu_ms_beyond_hmac"], "ms"))
            out.append(Row("shared", "Ed25519 signing: the whole machine's CPU per delivery "
                           "beyond HMAC's", shared["ed25519_machine_cpu_ms_beyond_hmac"], "ms"))
            signing = shared["signing_us_per_attempt"]
            out.append(Row("shared", "one attempt's headers signed, HMAC (service), in-process",
                           signing["hmac_signing_us_per_attempt"], "us"))
            out.append(Row("shared", "one attempt's headers signed, Ed25519, in-process",
                           signing["signing_us_per_attempt"], "us"))
        if "ratio_to_ceiling" in shared:
            out.append(Row("shared", "service ratio to ceiling", shared["ratio_to_ceiling"], "x",
                           ">= 0.8"))
        if "cpu_ratio_to_ceiling" in shared:
            out.append(Row("shared", "service CPU per delivery (worker, emitters, PostgreSQL) "
                           "to the ceiling's", shared["cpu_ratio_to_ceiling"], "x", "<= 1.6"))
        if "machine_cpu_ratio_to_ceiling" in shared:
            out.append(Row("shared", "the whole machine's CPU per delivery to the ceiling's",
                           shared["machine_cpu_ratio_to_ceiling"], "x"))
        if "ratio_to_django_webhook2" in shared:
            out.append(Row("shared", "service ratio to django-webhook2",
                           shared["ratio_to_django_webhook2"], "x", ">= 3"))
        if "ratio_to_durable_ceiling" in shared:
            out.append(Row("shared", "service ratio to the durable ceiling",
                           shared["ratio_to_durable_ceiling"], "x"))
            out.append(Row("shared", "the whole machine's CPU per delivery to the durable "
                           "ceiling's", shared["machine_cpu_ratio_to_durable_ceiling"], "x"))
    durable = results.get("durable_ceiling")
    if durable:
        out.extend(_leg_rows("durable_ceiling", f"durable ceiling {durable['pool']}", durable,
                             False))
    dw2 = results.get("django_webhook2")
    if dw2:
        out.extend(_leg_rows("django_webhook2", f"{dw2['version']} {dw2['pool']}", dw2, False))
    return out


def _leg_rows(scenario: str, label: str, r: dict, targets: bool) -> list[Row]:
    return [
        Row(scenario, f"{label}: deliveries/s", r["rate_per_s"], "/s"),
        Row(scenario, f"{label}: worker CPU per delivery", r["worker_cpu_ms_per_delivery"], "ms",
            "<= 2.5" if targets else ""),
        Row(scenario, f"{label}: emitters' CPU per delivery", r["emitters_cpu_ms_per_delivery"],
            "ms"),
        Row(scenario, f"{label}: PostgreSQL commits per delivery", r["pg_commits_per_delivery"]),
        Row(scenario, f"{label}: WAL bytes per delivery", r["wal_bytes_per_delivery"], "B"),
        Row(scenario, f"{label}: PostgreSQL CPU per delivery", r["pg_cpu_ms_per_delivery"], "ms"),
        Row(scenario, f"{label}: PostgreSQL connections opened per delivery",
            r["pg_sessions_per_delivery"]),
        Row(scenario, f"{label}: Redis commands per delivery", r["redis_commands_per_delivery"]),
        Row(scenario, f"{label}: the whole machine's CPU per delivery",
            r.get("machine_cpu_ms_per_delivery"), "ms"),
        Row(scenario, f"{label}: cores kept busy (of {os.cpu_count()})", r.get("machine_busy_cores")),
    ]
