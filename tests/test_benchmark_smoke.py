"""The benchmark harness still runs: ``python -m benchmarks --quick`` end to end.

A smoke run, not a benchmark: tiny sizes, one repeat, against the test
PostgreSQL database and the tests' Redis db. It checks only that the run
completed and wrote well-formed JSON with every scenario's figures; no
figure is compared with a target here (docs/performance.md has the numbers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import services
from tests.support.services import PG_URL, REDIS_URL

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 240  # the run takes well under a minute; this only stops a hang

SUMMARY = {"median", "min", "max", "runs"}
# For each scenario: figures that must be summaries (median and spread over repeats).
FIGURES = {
    "emit": [
        "bare_publish_per_s", "one_subscription_events_per_s", "one_subscription_ratio",
        "one_subscription_call_p50_ms", "one_subscription_call_p99_ms",
        "fanout_deliveries_per_s", "fanout_ratio", "fanout_call_p50_ms", "fanout_call_p99_ms",
    ],
    "latency": ["p50_ms", "p95_ms", "p99_ms", "max_ms", "missing", "achieved_rate_per_s",
                "p50_ratio_to_ceiling", "p99_ratio_to_ceiling", "flush_p99_ms", "flush_max_ms"],
    "isolation": ["baseline_healthy_rate_per_s", "hanging_healthy_rate_per_s", "throughput_kept",
                  "baseline_healthy_p99_ms", "hanging_healthy_p99_ms", "hanging_hanging_attempts"],
    "backlog": ["countdown_messages", "held_by_worker", "parked", "worker_idle_rss_mb", "worker_rss_mb",
                "worker_pss_mb", "broker_used_mb", "fresh_p50_ms", "fresh_p99_ms",
                "early_attempts"],
    "punctuality": ["countdown_p95_s", "countdown_max_s", "parked_p95_s", "parked_max_s", "dead"],
}
# Scenarios whose figures are grouped by phase or leg: {scenario: {part: [figures]}}.
_LEG = ["rate_per_s", "worker_cpu_ms_per_delivery", "emitters_cpu_ms_per_delivery",
        "pg_commits_per_delivery", "pg_sessions_per_delivery", "redis_commands_per_delivery",
        "machine_cpu_ms_per_delivery", "machine_busy_cores"]
NESTED = {
    "realistic": {"fast": ["rate_per_s", "worker_cpu_ms_per_delivery", "duplicates"],
                  "slow": ["rate_per_s", "ratio_to_fast", "worker_cpu_ms_per_delivery"],
                  "mix": ["rate_per_s", "ratio_to_fast", "worker_cpu_ms_per_delivery"]},
    "shared": {"service": _LEG, "ceiling": _LEG, "service_ed25519": _LEG},
}
PER_POOL = {
    "ceiling": ["rate_per_s", "duplicates", "delivered"],
    "throughput": ["rate_per_s", "ratio_to_ceiling", "duplicates", "delivered", "done"],
}


@pytest.fixture
def quick_run(postgres, tmp_path):
    """Run the quick benchmark once; returns (completed process, parsed JSON)."""
    services.check_redis()
    env = {name: value for name, value in os.environ.items() if not name.startswith("WEBHOOKS_")}
    env.update(WEBHOOKS_DATABASE_URL=PG_URL, WEBHOOKS_BROKER_URL=REDIS_URL)
    output = tmp_path / "bench.json"
    process = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--shared-ed25519", "--output",
         str(output)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )
    assert process.returncode == 0, (
        f"benchmark failed:\n{process.stdout[-4000:]}\n{process.stderr[-4000:]}")
    return process, json.loads(output.read_text())


def _assert_summary(figure, where: str) -> None:
    assert isinstance(figure, dict) and SUMMARY <= set(figure), f"{where} is not a summary: {figure!r}"
    assert isinstance(figure["runs"], list) and len(figure["runs"]) == 1, where


def test_quick_run_writes_every_scenario(quick_run):
    process, results = quick_run
    meta = results["meta"]
    assert meta["quick"] is True and meta["failed"] == []
    assert meta["machine"]["cores"] and meta["machine"]["cpu"]
    scenarios = results["scenarios"]
    assert set(scenarios) == set(FIGURES) | set(PER_POOL) | set(NESTED) | {"history", "purge"}
    for name, parts in NESTED.items():
        for part, keys in parts.items():
            for key in keys:
                _assert_summary(scenarios[name][part].get(key), f"{name}.{part}.{key}")
    _assert_summary(scenarios["shared"].get("ratio_to_ceiling"), "shared.ratio_to_ceiling")
    _assert_summary(scenarios["shared"].get("machine_cpu_ratio_to_ceiling"),
                    "shared.machine_cpu_ratio_to_ceiling")
    for key in ("ed25519_worker_cpu_ms_beyond_hmac", "ed25519_machine_cpu_ms_beyond_hmac"):
        _assert_summary(scenarios["shared"].get(key), f"shared.{key}")
    for key, figure in scenarios["shared"]["signing_us_per_attempt"].items():
        _assert_summary(figure, f"shared.signing_us_per_attempt.{key}")
        assert figure["median"] > 0, key
    assert "Ed25519 signing: worker CPU per delivery beyond HMAC's" in process.stdout
    for leg in ("service", "ceiling"):  # everything on the machine spent at least the leg's parts
        figures = {key: scenarios["shared"][leg][key]["median"]
                   for key in ("machine_cpu_ms_per_delivery", "worker_cpu_ms_per_delivery",
                               "emitters_cpu_ms_per_delivery", "machine_busy_cores")}
        assert figures["machine_cpu_ms_per_delivery"] >= (
            figures["worker_cpu_ms_per_delivery"] + figures["emitters_cpu_ms_per_delivery"]), leg
        assert 0 < figures["machine_busy_cores"] <= meta["machine"]["cores"], leg
    for name, keys in FIGURES.items():
        for key in keys:
            _assert_summary(scenarios[name].get(key), f"{name}.{key}")
    for name, keys in PER_POOL.items():
        configs = scenarios[name]["configs"]
        assert configs, f"{name} measured no pool"
        for label, entry in configs.items():
            for key in keys:
                _assert_summary(entry.get(key), f"{name}.{label}.{key}")
    assert scenarios["throughput"]["best"] in scenarios["throughput"]["configs"]
    _assert_summary(scenarios["latency"]["ceiling"]["p99_ms"], "latency.ceiling.p99_ms")
    assert "median" in process.stdout and "wrote" in process.stdout  # the table was printed
    _assert_history_and_purge(scenarios)


def _assert_history_and_purge(scenarios: dict) -> None:
    """The history scenario timed every call at both sizes; the purge drained twice."""
    history = scenarios["history"]
    assert set(history["large"]) == set(history["small"]) and "emit_event" in history["large"]
    assert all(timing["median_ms"] > 0 for timing in history["large"].values())
    assert history["seed"]["seed_s"] > 0 and history["seed"]["database_mb"] > 0
    assert all(plan["plan"] for plans in history["plans"].values() for plan in plans)
    purge = scenarios["purge"]
    assert purge["old"]["rows"] > 0
    _assert_summary(purge["ratio"], "purge.ratio")
    (pair,) = purge["pairs"]
    assert pair["without"]["rate_per_s"] and pair["during"]["rate_per_s"]
    assert pair["during"]["old_rows_deleted"] + purge["full_speed"]["rows"] >= purge["old"]["rows"]
