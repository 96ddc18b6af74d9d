"""What every scenario is given: the options, the receiver, and how to start workers.

Sizes come in two sets: FULL (the issue's figures) and QUICK (the seconds-long
CI smoke run). Durations are seconds, rates are per second.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import services
from .processes import (BEAT_MARK, READY_MARK, ROOT, ManagedProcess, Registry, start_beat,
                        start_worker)
from .receiver import ReceiverClient

__all__ = ["PoolConfig", "Sizes", "FULL", "QUICK", "Options", "Context", "procfile_pool"]


STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PoolConfig:
    """A worker pool and its concurrency, written ``prefork:2``."""

    pool: str
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.pool}-{self.concurrency}"

    @classmethod
    def parse(cls, text: str) -> "PoolConfig":
        pool, _, concurrency = text.strip().partition(":")
        if pool not in ("prefork", "threads", "gevent", "eventlet", "solo") or not concurrency.isdigit():
            raise ValueError(f"a pool is written like prefork:2 or threads:16, got {text!r}")
        return cls(pool, int(concurrency))


def procfile_pool(path: Path = ROOT / "Procfile") -> PoolConfig:
    """The pool and concurrency of the Procfile's ``worker:`` entry (prefork:2 if not found)."""
    try:
        line = next(l for l in path.read_text().splitlines() if l.startswith("worker:"))
    except (OSError, StopIteration):
        return PoolConfig("prefork", 2)
    pool = re.search(r"(?:--pool[= ]|-P ?)(\w+)", line)
    concurrency = re.search(r"(?:--concurrency[= ]|-c ?)(\d+)", line)
    return PoolConfig(pool.group(1) if pool else "prefork",
                      int(concurrency.group(1)) if concurrency else 2)


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is."""

    throughput_deliveries: int = 20_000  # per run, to one fast subscription
    emit_calls: int = 2_000  # emit_event calls with 1 subscription (and bare publishes)
    emit_batch_sizes: tuple[int, ...] = (1_000, 10_000)  # events per emit_events call (emit_batch)
    fanout_calls: int = 100  # emit_event calls with 100 subscriptions
    fanout_subscriptions: int = 100
    latency_seconds: float = 20.0  # how long events are emitted at the paced rate
    latency_fallback_rate: float = 100.0  # events/s when no throughput was measured this run
    isolation_seconds: float = 20.0
    isolation_timeout: float = 2.0  # WEBHOOKS_TIMEOUT of the isolation worker
    isolation_drain_cap: float = 30.0  # s after the last emit to wait for the healthy ones
    backlog_deliveries: int = 100_000
    backlog_countdown_fraction: float = 0.8  # the rest are parked (no broker message)
    # s from seeding until the backlog falls due: long enough to publish 80,000 messages
    # on a busy 2-core machine and measure, short of the broker's visibility timeout (915 s)
    backlog_wait: float = 600.0
    backlog_measure_seconds: float = 20.0
    backlog_fresh_rate: float = 50.0  # fresh events/s meanwhile, if no throughput was measured
    punctuality_deliveries: int = 20
    punctuality_ladder: tuple[int, ...] = (2, 4, 8)
    punctuality_countdown_limit: int = 3
    sweep_interval: float = 1.0  # WEBHOOKS_SWEEP_INTERVAL where a scenario runs beat
    history_events: int = 2_000_000  # events (one delivery each) seeded for the history scenario
    history_small: int = 10_000  # the size the same calls are timed at first
    history_repeats: int = 25  # timed calls of each kind, per round
    history_rounds: int = 3  # rounds of every call, per size
    seed_nice: int = 0  # niceness of the database process seeding the history (0: unchanged)
    purge_rows: int = 1_000_000  # rows (events + deliveries + attempts) the purge scenario deletes
    purge_deliveries: int = 10_000  # deliveries of each drain, without or during the purge
    purge_pairs: int = 6  # pairs of drains (without, during), their order alternating
    # (interval, seconds per run) of the scheduled purge; 0: the WEBHOOKS_PURGE_* settings
    purge_pace: tuple[float, float] = (0.0, 0.0)
    # Events seeded into one day of attempts, whose partition retention then drops, per size
    # (PostgreSQL; the first size is timed --purge-day-repeats times, the others once).
    purge_day_events: tuple[int, ...] = (10_000, 2_000_000)
    purge_day_repeats: int = 3
    cost_deliveries: int = 5_000  # deliveries drained to measure what one costs (--scenarios cost)
    pace_deliveries: int = 5_000  # the backlog each leg of the pace scenario drains
    pace_capacity: int = 0  # the receiver's requests/s of the pace scenario; 0: 20 and 200
    pace_legs: str = "on,off"  # the pace scenario's legs: the adaptive pace on, off, or both
    ordering_deliveries: int = 5_000  # each drain of the ordering scenario (keyed, unkeyed)
    ordering_keys: int = 1_000  # keys the keyed drain's deliveries are spread over
    realistic_deliveries: int = 6_000  # per phase, spread evenly over the subscriptions
    realistic_subscriptions: int = 100
    realistic_slow_ms: float = 200.0  # every endpoint's answer time in the second phase
    realistic_mix_ms: tuple[float, float] = (50.0, 1000.0)  # the third phase's range (mix.py)
    tenants: int = 10  # accounts the realistic and shared subscriptions are spread over
    shared_seconds: float = 30.0  # the timed window while emitters and a worker share the machine
    shared_warmup: float = 3.0  # s from the first arrival to the start of that window
    shared_monitor_seconds: float = 5.0  # a further window counting Redis commands (MONITOR)
    shared_emitters: int = 2  # emitting processes
    shared_emitter_threads: int = 1  # threads calling emit_event in each (the service's)
    shared_workers: int = 1  # worker processes of the service (and of django-webhook2)
    shared_backlog: int = 1_000  # messages the emitters let wait at most (back-pressure)
    resume_requests: int = 400  # requests of each leg of the resume scenario
    resume_request_rate: float = 50.0  # their rate, requests/s
    resume_other_rate: float = 20.0  # the other tenant's events/s meanwhile
    resume_stored: int = 100_000  # events of history stored first (the audit had 122,000)


FULL = Sizes()
QUICK = Sizes(
    throughput_deliveries=200, emit_calls=100, emit_batch_sizes=(100,), fanout_calls=5,
    latency_seconds=1.0, latency_fallback_rate=50.0, isolation_seconds=1.0, isolation_drain_cap=2.0,
    backlog_deliveries=1_000, backlog_wait=40.0, backlog_measure_seconds=2.0,
    backlog_fresh_rate=20.0, punctuality_deliveries=3, punctuality_ladder=(1, 2),
    punctuality_countdown_limit=1, history_events=3_000, history_small=1_000, history_repeats=3,
    history_rounds=1,
    purge_rows=3_000, purge_deliveries=200, purge_pairs=1, purge_day_events=(1_000, 3_000), cost_deliveries=100, pace_deliveries=300,
    ordering_deliveries=300, ordering_keys=50,
    realistic_deliveries=200, realistic_subscriptions=20, shared_seconds=2.0, shared_warmup=0.5,
    shared_monitor_seconds=1.0, shared_backlog=200, resume_requests=40, resume_stored=2_000,
)


@dataclass
class Options:
    """The command line, resolved."""

    database_url: str
    broker_url: str
    scenarios: list[str]
    repeats: int
    pools: list[PoolConfig]
    scenario_pool: PoolConfig
    sizes: Sizes
    quick: bool = False
    loglevel: str = "INFO"
    output: Path = Path("bench-results.json")
    rate: float | None = None  # events/s for the paced scenarios; None: half the measured maximum
    ceiling_pool: PoolConfig = PoolConfig("prefork", 2)  # the shared scenario's ceiling worker
    shared_ed25519: bool = False  # the shared scenario's service leg again, signed with Ed25519
    keep_history: bool = False  # the history scenario reuses (and keeps) an earlier seeding


@dataclass
class Context:
    """Shared by the scenarios of one run."""

    options: Options
    registry: Registry
    receiver: ReceiverClient
    log_dir: Path
    results: dict = field(default_factory=dict)

    @property
    def sizes(self) -> Sizes:
        return self.options.sizes

    def env(self, **overrides) -> dict[str, str]:
        """The environment of a worker or beat: this run's database and broker, loopback allowed."""
        env = dict(os.environ)
        env.update({
            "WEBHOOKS_DATABASE_URL": self.options.database_url,
            "WEBHOOKS_BROKER_URL": self.options.broker_url,
            "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receiver is on 127.0.0.1
            "WEBHOOKS_DATA_DIR": str(self.log_dir / "data"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        })
        env.update({name: str(value) for name, value in overrides.items()})
        return env

    def reset(self) -> None:
        """Empty the database's tables, the broker's db and the receiver. No worker may be running."""
        services.flush_broker(self.options.broker_url)
        services.truncate_tables(self.options.database_url)
        self.receiver.reset()

    def queue_deliveries(self, path: str, n: int, name: str = "bench") -> float:
        """``n`` pending deliveries to one subscription on the receiver's ``path``, inserted in
        bulk and published as the service publishes; returns messages published per second."""
        from . import seed

        target = seed.make_target(self.receiver.url(path), name=name)
        ids = seed.bulk_deliveries(target, n)
        services.analyse(self.options.database_url)
        return seed.publish_deliveries(ids)

    def start_worker(self, config: PoolConfig, name: str, **env) -> ManagedProcess:
        """A service worker (``celery -A worker worker``) with this pool."""
        return start_worker(self.registry, name=name, env=self.env(**env), log_dir=self.log_dir,
                            pool=config.pool, concurrency=config.concurrency,
                            loglevel=self.options.loglevel)

    def start_ceiling_worker(self, config: PoolConfig, path: str, name: str = "ceiling", **env):
        """A worker of the bare ceiling task, posting to the receiver's ``path`` (``env``:
        more of its environment, ``BENCH_CEILING_DATABASE_URL`` for the durable ceiling)."""
        from .ceiling_app import QUEUE

        env = self.env(BENCH_CEILING_URL=self.receiver.url(path), **env)
        return start_worker(self.registry, name=name, env=env, log_dir=self.log_dir,
                            app="benchmarks.ceiling_app", queues=QUEUE, pool=config.pool,
                            concurrency=config.concurrency, loglevel=self.options.loglevel)

    def start_worker_and_beat(self, config: PoolConfig, name: str,
                              **env) -> tuple[ManagedProcess, ManagedProcess]:
        """A service worker and beat (the sweep) with the same environment, started side by side."""
        worker = start_worker(self.registry, name=name, env=self.env(**env), log_dir=self.log_dir,
                              pool=config.pool, concurrency=config.concurrency,
                              loglevel=self.options.loglevel, wait=False)
        beat = start_beat(self.registry, env=self.env(**env), log_dir=self.log_dir,
                          loglevel=self.options.loglevel, wait=False)
        worker.wait_for_log(READY_MARK, STARTUP_TIMEOUT_S)
        beat.wait_for_log(BEAT_MARK, STARTUP_TIMEOUT_S)
        return worker, beat

    def stop(self, *processes: ManagedProcess, grace: float = 0.0) -> None:
        """Stop workers or beat; by default at once (SIGKILL).

        Every scenario empties the broker and the database before its next
        run, so nothing a worker holds is needed; a warm shutdown would only
        add seconds (and requeue every countdown message of the backlog).
        """
        for process in processes:
            if process is not None:
                self.registry.stop(process, grace)

    def measured_rate(self, config: PoolConfig) -> float | None:
        """The median sustained deliveries/s measured this run for ``config``, if any."""
        configs = self.results.get("throughput", {}).get("configs", {})
        return (configs.get(config.label, {}).get("rate_per_s") or {}).get("median")

    def paced_rate(self, fallback: float | None = None) -> tuple[float, str]:
        """Events/s for the paced scenarios: half the sustained maximum, and where it came from.

        Without ``--rate`` and without a throughput figure for the scenario
        pool in this run, ``fallback`` (default ``latency_fallback_rate``).
        """
        if self.options.rate:
            return self.options.rate, "given with --rate"
        measured = self.measured_rate(self.options.scenario_pool)
        if measured:
            pool = self.options.scenario_pool.label
            return measured / 2, f"half of {measured:.0f}/s measured with {pool}"
        rate = fallback if fallback is not None else self.sizes.latency_fallback_rate
        return rate, "fallback (throughput not measured in this run)"


def replace_sizes(sizes: Sizes, **changes) -> Sizes:
    return dataclasses.replace(sizes, **{k: v for k, v in changes.items() if v is not None})
