"""The fault schedule: each fault is an injection and a repair, run under load.

A fault is named, starts at ``at`` seconds into the load, lasts ``hold``
seconds, and records its window (wall-clock start and end) for the checker
and the figures. :data:`FULL` is the schedule of ``make cluster``;
:data:`SHORT` the one of the short run in ``make test``.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

__all__ = ["Fault", "FULL", "SHORT", "schedule_named"]


@dataclass(frozen=True)
class Fault:
    name: str
    at: float     # seconds after the load starts
    hold: float   # seconds the fault lasts before its repair

    def inject(self, cluster) -> None:
        getattr(self, f"_inject_{self.kind}")(cluster)

    def repair(self, cluster) -> None:
        getattr(self, f"_repair_{self.kind}")(cluster)

    @property
    def kind(self) -> str:
        return self.name.split(":")[0].replace("-", "_")

    # worker-pg: worker1 loses PostgreSQL (both servers), packets dropped both ways
    def _inject_worker_pg(self, c):
        for peer in ("pg1", "pg2"):
            c.net.partition(c.host("work1"), c.host(peer))

    def _repair_worker_pg(self, c):
        c.net.heal(c.host("work1"))

    # worker-redis: worker2 loses the Redis servers and the Sentinels
    def _inject_worker_redis(self, c):
        for peer in ("redis1", "redis2", "sent1", "sent2", "sent3"):
            c.net.partition(c.host("work2"), c.host(peer))

    def _repair_worker_redis(self, c):
        c.net.heal(c.host("work2"))

    # worker-kill: worker3's whole process tree SIGKILLed; the host comes back after hold
    def _inject_worker_kill(self, c):
        c.processes.kill("work3")

    def _repair_worker_kill(self, c):
        c.start_worker("work3")

    # redis-primary-kill: the Redis primary SIGKILLed; Sentinel promotes the replica. The
    # old primary comes back empty after hold and the Sentinels make it a replica.
    def _inject_redis_primary_kill(self, c):
        c.killed_redis = c.current_redis_primary()
        c.processes.kill(c.killed_redis)

    def _repair_redis_primary_kill(self, c):
        c.start_redis(c.killed_redis, replica_of=c.current_redis_primary())

    # replica-stop: the PostgreSQL replica stopped (SIGSTOP): reads hang, WAL piles up; it
    # resumes after hold and catches up
    def _inject_replica_stop(self, c):
        c.processes.running["postgres-replica"].signal_tree(signal.SIGSTOP)

    def _repair_replica_stop(self, c):
        c.processes.running["postgres-replica"].signal_tree(signal.SIGCONT)

    # web-kill: web1 SIGKILLed behind the emitters, which go on through web2; back after hold
    def _inject_web_kill(self, c):
        c.processes.kill("web1")

    def _repair_web_kill(self, c):
        c.start_web("web1")

    # clock-skew: worker3 restarted with its clock 90 s ahead (libfaketime), then back
    def _inject_clock_skew(self, c):
        c.processes.stop("work3")
        c.start_worker("work3", clock_offset="+90s")

    def _repair_clock_skew(self, c):
        c.processes.stop("work3")
        c.start_worker("work3")

    # beat-restart: the beat host's scheduler SIGKILLed and started again, twice within one
    # sweep interval, from just after the interval's sweep was sent. Each restarted beat
    # sends the sweep of the interval it is in at once (its schedule file, synced every
    # 3 minutes, is older): the run's claim refuses it (webhooks/storage/scheduled_runs.py).
    def _inject_beat_restart(self, c):
        interval = float(c.service_env("beat")["WEBHOOKS_SWEEP_INTERVAL"])
        time.sleep(interval - time.time() % interval + 0.3)  # one clock for every namespace
        slot = time.time() // interval * interval
        times = [_restart_beat(c) for _ in range(2)]
        c.log(f"fault {self.name}: into a {interval:g} s interval, beat killed at "
              + ", then at ".join(f"+{killed - slot:.1f} s and up at +{up - slot:.1f} s"
                                  for killed, up in times))

    def _repair_beat_restart(self, c):
        pass  # running again since the injection

    # beat-twice: a second scheduler started by mistake (on the beat host, with a data
    # folder of its own) beside the first, until the repair: both send every interval's
    # sweep, and every interval's second send is refused.
    def _inject_beat_twice(self, c):
        c.start_beat("beat2")

    def _repair_beat_twice(self, c):
        c.processes.stop("beat2")


def _restart_beat(c, timeout: float = 30.0) -> tuple[float, float]:
    """SIGKILL the scheduler, start it again, and wait until it has started and had time to
    send what was due at once; returns when it was killed and when it was up (Unix times)."""
    log = c.processes.running["beat"].log
    started = log.read_text(errors="replace").count("beat: Starting")
    c.processes.kill("beat")
    killed = time.time()
    c.start_beat()
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count("beat: Starting") <= started:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the restarted beat did not start within {timeout:g} s")
        time.sleep(0.05)
    up = time.time()
    time.sleep(0.3)  # its send at once follows its start within milliseconds
    return killed, up


FULL = (
    Fault("worker-pg", at=20, hold=30),
    Fault("worker-redis", at=70, hold=30),
    Fault("worker-kill", at=120, hold=10),
    Fault("redis-primary-kill", at=150, hold=15),
    Fault("replica-stop", at=185, hold=20),
    Fault("web-kill", at=225, hold=10),
    Fault("clock-skew", at=255, hold=40),
    Fault("beat-restart", at=305, hold=10),
    Fault("beat-twice", at=325, hold=20),
)
FULL_LOAD_S = 355.0

SHORT = (
    Fault("worker-pg", at=5, hold=10),
    Fault("redis-primary-kill", at=18, hold=5),
)
SHORT_LOAD_S = 28.0


def schedule_named(names: str) -> tuple[Fault, ...]:
    """The faults of FULL named in ``names`` (comma-separated), spaced as in FULL."""
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    known = {fault.name: fault for fault in FULL}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(known)}")
    return tuple(known[name] for name in wanted)


def run_schedule(cluster, faults, started: float, log) -> list[dict]:
    """Inject and repair each fault at its time; returns their windows (Unix times)."""
    windows = []
    for fault in sorted(faults, key=lambda f: f.at):
        _sleep_until(started + fault.at)
        begun = time.time()
        log(f"fault {fault.name}: injecting")
        fault.inject(cluster)
        _sleep_until(started + fault.at + fault.hold)
        log(f"fault {fault.name}: repairing")
        fault.repair(cluster)
        windows.append({"name": fault.name, "start": begun, "end": time.time()})
    return windows


def _sleep_until(monotonic_deadline: float) -> None:
    pause = monotonic_deadline - time.monotonic()
    if pause > 0:
        time.sleep(pause)
