"""One run of the cluster: up, load, faults, drain, check, down (``python -m cluster``).

The hosts (each a network namespace, cluster/net.py): ``pg1`` (PostgreSQL
primary), ``pg2`` (its streaming replica, made by pg_basebackup), ``redis1``
and ``redis2`` (Redis primary and replica), ``sent1``..``sent3`` (Sentinels),
``web1`` and ``web2`` (the Procfile's ``web``), ``work1``..``work3`` (its
``worker``), ``beat`` (its ``scheduler``), ``recv1`` and ``recv2``
(receivers, cluster/receiver.py), ``emit1`` and ``emit2`` (emitters,
cluster/emitter.py), and ``ctl``, from where the set-up, the drain and the
checker reach the cluster. Everything is torn down at the end, also on
Ctrl-C or SIGTERM.

``cpu_hog`` (``python -m cluster --cpu-hog N``) adds a loaded machine: N
processes spinning (``stress-ng --cpu 1`` each, :meth:`Cluster.start_cpu_hog`)
beside the cluster from the start of the load to the teardown (the drain and
the check included), as other engineers' work would on a shared machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import ceiling, checker, figures
from .faults import run_schedule
from .metering import ClusterMeter
from .net import SUBNET, Host, Network, leftover_namespaces
from .probe import PATHS
from .processes import Processes
from .services import (MASTER_NAME, PG_BIN, PG_PORT, ROOT, SENTINEL_PORT, _as_postgres, procfile,
                       start_postgres_primary, start_postgres_replica, start_procfile_entry,
                       start_redis, start_sentinel, wait_for_port)

__all__ = ["Cluster", "run", "PREFIX"]

PREFIX = "whc"  # namespaces are named whc<pid>-<host>
HOSTS = ("pg1", "pg2", "redis1", "redis2", "sent1", "sent2", "sent3", "web1", "web2",
         "work1", "work2", "work3", "beat", "recv1", "recv2", "emit1", "emit2", "ctl")
WEB_PORT, RECEIVER_PORT = 8000, 8080
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
# The ladder and recovery of the run: short, so that dead deliveries and recoveries happen
# within minutes (README, "Configuration", says what each means).
SERVICE_SETTINGS = {
    "WEBHOOKS_RETRY_DELAYS": "2,4,8",
    "WEBHOOKS_TIMEOUT": "5",
    # The service's default; long enough for the beat-restart fault's two restarts to fit
    # in one interval (a beat starts in about a second here).
    "WEBHOOKS_SWEEP_INTERVAL": "5",
    "WEBHOOKS_RECOVER_AFTER": "10",
    "WEBHOOKS_PAUSE_AFTER": "1000000",  # the /fail subscription is never paused: its counter climbs
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",  # the receivers are on the cluster's own subnet
    "WEBHOOKS_RETENTION_DAYS": "0",
    "WEBHOOKS_CLOCK_REFRESH": "5",
    "WEBHOOKS_BROKER_MASTER_NAME": MASTER_NAME,
    "WEBHOOKS_SECRET_KEY": "cluster-run-secret-key-0123456789abcdef",
    "WEBHOOKS_API_RATE_LIMIT": "off",
}
# libpq: give up on a connection attempt after 3 s, and on a connection whose packets go
# unanswered after 10 s (TCP_USER_TIMEOUT), instead of the kernel's minutes.
LIBPQ_OPTIONS = "connect_timeout=3&keepalives_idle=5&keepalives_interval=2&keepalives_count=3" \
                "&tcp_user_timeout=10000"


class Cluster:
    """The hosts and processes of one run; ``with Cluster(...)`` tears everything down."""

    def __init__(self, run_dir: Path, log=print, paths: str = ",".join(PATHS)):
        self.run_dir = run_dir
        self.paths = paths  # the receiver paths subscribed to (cluster/probe.py, PATHS)
        self.log = log
        self.net = Network(f"{PREFIX}{os.getpid()}")
        self.processes = Processes(run_dir / "logs")
        self.killed_redis: str | None = None
        self.account: dict = {}
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.down()

    def host(self, name: str) -> Host:
        return self.net.hosts[name]

    # ---------------------------------------------------------------- environment
    def url(self, host: str, *, driver: bool = True) -> str:
        scheme = "postgresql+psycopg2" if driver else "postgresql"
        return f"{scheme}://postgres@{self.host(host).address}:{PG_PORT}/webhooks?{LIBPQ_OPTIONS}"

    def service_env(self, name: str) -> dict[str, str]:
        sentinels = ";".join(f"sentinel://{self.host(s).address}:{SENTINEL_PORT}"
                             for s in ("sent1", "sent2", "sent3"))
        data = self.run_dir / "data" / name
        data.mkdir(parents=True, exist_ok=True)
        return {**SERVICE_SETTINGS, "PATH": os.environ["PATH"], "LANG": "C.UTF-8",
                "HOME": str(data), "WEBHOOKS_DATA_DIR": str(data),
                "WEBHOOKS_DATABASE_URL": self.url("pg1"),
                "WEBHOOKS_READ_DATABASE_URL": self.url("pg2"),
                "WEBHOOKS_BROKER_URL": sentinels}

    def python(self, host: str, *argv: str, timeout: float = 120) -> dict:
        """``python -m cluster.<argv>`` inside ``host``; its JSON answer."""
        command = self.host(host).command(sys.executable, "-m", *argv)
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=self.service_env(host), cwd=ROOT)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {result.stderr.strip()[-2000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    # ---------------------------------------------------------------- up
    def up(self) -> None:
        self.log(f"cluster: namespaces {self.net.prefix}-*, subnet {SUBNET}.0/24, "
                 f"run folder {self.run_dir}")
        self.net.create_switch()
        for name in HOSTS:
            self.net.add_host(name)
        pg = self.run_dir / "pg"
        pg.mkdir(mode=0o755)
        start_postgres_primary(self.processes, self.host("pg1"), pg / "primary", SUBNET)
        _as_postgres(str(PG_BIN / "createdb"), "-h", str(pg / "primary"), "-U", "postgres", "webhooks")
        self._release()
        start_postgres_replica(self.processes, self.host("pg2"), self.host("pg1"), pg / "replica")
        self.start_redis("redis1")
        self.start_redis("redis2", replica_of="redis1")
        for name in ("sent1", "sent2", "sent3"):
            start_sentinel(self.processes, name, self.host(name), self.host("redis1"),
                           self.run_dir / "sentinel")
        for name in ("recv1", "recv2"):
            self.processes.start(
                name, self.host(name),
                [sys.executable, "-m", "cluster.receiver", self.host(name).address,
                 str(RECEIVER_PORT), str(self.run_dir / "logs" / f"{name}.jsonl")],
                env={"PATH": os.environ["PATH"]}, cwd=ROOT)
        for name in ("web1", "web2"):
            self.start_web(name)
        for name in ("work1", "work2", "work3"):
            self.start_worker(name)
        self.start_beat()
        for name in ("recv1", "recv2"):
            wait_for_port(self.host("ctl"), self.host(name).address, RECEIVER_PORT)
        for name in ("web1", "web2"):
            wait_for_port(self.host("ctl"), self.host(name).address, WEB_PORT,
                          process=self.processes.running[name])
        self.account = self.python(
            "ctl", "cluster.probe", "setup", self.web_url("web1"),
            ",".join(f"http://{self.host(r).address}:{RECEIVER_PORT}" for r in ("recv1", "recv2")),
            self.paths)
        self.log(f"cluster: up, {len(HOSTS)} hosts, {len(self.processes.running)} processes")

    def _release(self) -> None:
        """The Procfile's ``release`` entry (the migrations), run from the control host."""
        command = procfile()["release"]
        env = {**self.service_env("ctl"),
               "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
        result = subprocess.run(self.host("ctl").command("sh", "-c", f"exec {command}"),
                                capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"release failed: {result.stderr.strip()[-2000:]}")

    def web_url(self, name: str) -> str:
        return f"http://{self.host(name).address}:{WEB_PORT}"

    def start_web(self, name: str):
        env = {**self.service_env(name), "PORT": str(WEB_PORT)}
        return start_procfile_entry(self.processes, name, "web", self.host(name), env)

    def start_worker(self, name: str, clock_offset: str | None = None):
        env = self.service_env(name)
        if clock_offset:
            # A host whose clock is off: Linux has one clock for every namespace, so
            # libfaketime moves this host's processes' clock alone.
            env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME=clock_offset, FAKETIME_DONT_RESET="1")
        return start_procfile_entry(self.processes, name, "worker", self.host(name), env)

    def start_beat(self, name: str = "beat"):
        """The Procfile's ``scheduler`` on the beat host, as process ``name`` with the data
        folder of that name: its schedule file stays there across restarts, as on a host."""
        return start_procfile_entry(self.processes, name, "scheduler", self.host("beat"),
                                    self.service_env(name))

    def start_redis(self, name: str, replica_of: str | None = None):
        return start_redis(self.processes, name, self.host(name), self.run_dir / "redis" / name,
                           replica_of=self.host(replica_of) if replica_of else None)

    def current_redis_primary(self) -> str:
        """The host the Sentinels now name as the master."""
        sentinels = ",".join(self.host(s).address for s in ("sent1", "sent2", "sent3"))
        address = self.python("ctl", "cluster.probe", "master", sentinels, MASTER_NAME)["address"]
        return next(name for name in ("redis1", "redis2") if self.host(name).address == address)

    # ---------------------------------------------------------------- load and check
    def start_emitters(self, rate: float, seconds: float) -> None:
        webs = ",".join(self.web_url(w) for w in ("web1", "web2"))
        for name in ("emit1", "emit2"):
            env = {**self.service_env(name), "CLUSTER_ACCOUNT_ID": self.account["account_id"],
                   "CLUSTER_API_KEY": self.account["api_key"]}
            self.processes.start(
                name, self.host(name),
                [sys.executable, "-m", "cluster.emitter", name, str(rate), str(seconds),
                 str(self.run_dir / "logs" / f"{name}.jsonl"), webs], env=env, cwd=ROOT)

    def start_cpu_hog(self, spinners: int) -> None:
        """``spinners`` processes spinning on arithmetic (``stress-ng --cpu 1`` each), in the
        control host's namespace so that the teardown stops them with the rest.

        Each is a session of its own, as another user's programs are: Linux's autogroup
        scheduler shares the CPUs between sessions first, so one ``stress-ng --cpu N``
        (one session) weighs as much as one of the cluster's many processes, however
        large N (beside ``stress-ng --cpu 2``, no sweep of a full run started late).
        """
        for number in range(spinners):
            self.processes.start(f"cpu-hog{number + 1}", self.host("ctl"),
                                 ["stress-ng", "--cpu", "1", "--quiet"],
                                 env={"PATH": os.environ["PATH"]})
        self.log(f"cluster: CPU hog: {spinners} x stress-ng --cpu 1, each a session of its own, "
                 f"beside the cluster until the teardown")

    def wait_for_emitters(self, timeout: float) -> None:
        for name in ("emit1", "emit2"):
            self.processes.running[name].popen.wait(timeout=timeout)

    def drain(self, timeout: float, stall: float) -> tuple[float, int]:
        """Wait until no delivery is pending or sending; returns the wait (s) and how many
        are left. Gives up after ``timeout`` s, or once none has finished for ``stall`` s:
        a loaded machine drains slowly, and the wait lasts as long as it progresses (a
        fixed wait counted a slow drain's queue as stuck)."""
        started = progressed = time.monotonic()
        left = None
        while time.monotonic() - started < timeout:
            try:
                waiting = sum(self.python("ctl", "cluster.probe", "waiting",
                                          self.url("pg1")).values())
            except RuntimeError as error:
                self.log(f"cluster: drain check failed: {error}")
                waiting = left
            if waiting == 0:
                return time.monotonic() - started, 0
            if waiting is not None and (left is None or waiting < left):
                left, progressed = waiting, time.monotonic()
            elif time.monotonic() - progressed >= stall:
                break
            time.sleep(2)
        return time.monotonic() - started, left or 0

    def check(self, faults: list[dict], load: tuple[float, float]) -> checker.Verdict:
        """The checker's verdict, with the sweep's runs per interval over ``load`` (the
        load's start and end, Unix times)."""
        logs = self.run_dir / "logs"
        primary = self._read_primary()
        result = checker.verdict(
            primary, checker.read_lines(sorted(logs.glob("emit*.jsonl"))),
            checker.read_lines(sorted(logs.glob("recv*.jsonl"))), faults,
            max_attempts=len(SERVICE_SETTINGS["WEBHOOKS_RETRY_DELAYS"].split(",")) + 1,
            explain_after=float(SERVICE_SETTINGS["WEBHOOKS_TIMEOUT"])
            + float(SERVICE_SETTINGS["WEBHOOKS_RECOVER_AFTER"]) + 30,
            stuck_slack=float(SERVICE_SETTINGS["WEBHOOKS_RECOVER_AFTER"]))
        workers = "".join(path.read_text(errors="replace") for path in logs.glob("work*.log"))
        result.sweeps = checker.sweep_runs(
            primary["sweep_runs"], float(SERVICE_SETTINGS["WEBHOOKS_SWEEP_INTERVAL"]), *load,
            faults, workers)
        return result

    def _read_primary(self) -> dict:
        """checker.read_primary, run inside the control host (the primary is there only)."""
        out = self.run_dir / "primary.json"
        script = ("import json,sys; from cluster.checker import read_primary; "
                  "rows = read_primary(sys.argv[1]); "
                  "rows['events'] = sorted(rows['events']); "
                  "json.dump(rows, open(sys.argv[2], 'w'), default=str)")
        result = subprocess.run(
            self.host("ctl").command(sys.executable, "-c", script, self.url("pg1"), str(out)),
            capture_output=True, text=True, timeout=300, cwd=ROOT, env=self.service_env("ctl"))
        if result.returncode != 0:
            raise RuntimeError(f"reading the primary failed: {result.stderr.strip()[-2000:]}")
        rows = json.loads(out.read_text())
        rows["events"] = set(rows["events"])
        return rows

    # ---------------------------------------------------------------- down
    def down(self) -> None:
        self.processes.stop_all()
        self.net.remove()
        shutil.rmtree(self.run_dir / "pg", ignore_errors=True)
        shutil.rmtree(self.run_dir / "data", ignore_errors=True)


def clean_leftovers(log=print) -> None:
    """Remove the namespaces of earlier runs whose process is gone (a run killed by
    SIGKILL could not tear down), after killing what still runs in them."""
    for namespace in leftover_namespaces(PREFIX):
        owner = namespace[len(PREFIX):].split("-")[0]
        if owner.isdigit() and Path(f"/proc/{owner}").exists():
            continue  # a run still going
        pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
        log(f"cluster: removed the leftover namespace {namespace}")


class CeilingMeter:
    """What the run measures of PostgreSQL and how it states the ceiling: ``cores`` and
    ``utilisation`` of the primary the ceiling is for (the table's rows too), ``idle_s``
    seconds measured with the cluster up and no load before it (0: none)."""

    def __init__(self, cores: int, utilisation: float, idle_s: float = 10.0, log=print):
        self.cores, self.utilisation, self.idle_s, self.log = cores, utilisation, idle_s, log

    def _meter(self, cluster: Cluster, *, wal: bool) -> ClusterMeter:
        groups = {kind: [cluster.processes.running[name].popen.pid for name in names]
                  for kind, names in (("workers", ("work1", "work2", "work3")),
                                      ("web", ("web1", "web2")))}
        return ClusterMeter(cluster.run_dir / "pg", groups, wal=wal)

    def before_load(self, cluster: Cluster) -> dict | None:
        """The idle window, then the load's meter started; None (logged) if it failed."""
        try:
            idle = None
            if self.idle_s:
                window = self._meter(cluster, wal=False)
                window.start()
                time.sleep(self.idle_s)
                window.stop()
                idle = window.figures()
                window.close()
            load = self._meter(cluster, wal=True)
            load.start()
            return {"idle": idle, "meter": load}
        except Exception as error:  # noqa: BLE001 - the run's verdict matters more
            self.log(f"cluster: PostgreSQL not metered: {error!r}")
            return None

    def after_drain(self, state: dict, faults: int = 0) -> dict | None:
        """The load's figures and the ceiling (also logged), JSON-ready; None if it failed.
        ``faults``: how many faults the window held (their retries and recoveries are in
        the figures then)."""
        load: ClusterMeter = state["meter"]
        try:
            load.stop()
            measured = load.figures()
            cores = (self.cores, *(n for n in ceiling.TABLE_CORES))
            rows = ceiling.from_figures(measured, cores=cores, utilisation=self.utilisation)
        except Exception as error:  # noqa: BLE001 - the run's verdict matters more
            self.log(f"cluster: PostgreSQL not metered: {error!r}")
            return None
        finally:
            load.close()
        for line in ceiling.lines(measured, rows, state["idle"]):
            self.log(line)
        if faults:
            self.log(f"cluster: the {faults} faults' retries and recoveries are in these "
                     f"figures: --faults none for the ceiling alone")
        return {"load": measured, "idle": state["idle"],
                "ceiling": [{**row.__dict__, "replay_bound": row.replay_bound} for row in rows]}


def run(faults, *, load_seconds: float, rate: float, drain_timeout: float,
        drain_stall: float = 60.0, run_dir: Path | None = None, cpu_hog: int = 0,
        meter: CeilingMeter | None = None, paths: str = ",".join(PATHS),
        log=print) -> tuple[checker.Verdict, dict]:
    """The whole scenario; returns the verdict and the figures. Tears down on any exit.

    The drain after the load ends when nothing is left, after ``drain_timeout`` s, or
    once nothing has finished for ``drain_stall`` s. ``cpu_hog``: processes spinning from
    the load's start to the teardown (0: none). ``meter``: measure what the load costs
    PostgreSQL, from its start to the drain's end, and the ceiling it sets (None: not).
    ``paths``: the receiver paths each event goes to (one subscription each).
    """
    clean_leftovers(log)
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="webhooks-cluster-"))
    run_dir.chmod(0o755)
    postgres = None
    with _teardown_on_signals(), Cluster(run_dir, log, paths) as cluster:
        cluster.up()
        if meter:
            postgres = meter.before_load(cluster)
        if cpu_hog:
            cluster.start_cpu_hog(cpu_hog)
        load_started = time.time()
        cluster.start_emitters(rate, load_seconds)
        windows = run_schedule(cluster, faults, time.monotonic(), log)
        cluster.wait_for_emitters(timeout=load_seconds + 300)
        load_ended = time.time()
        load_average = "/".join(f"{figure:.1f}" for figure in os.getloadavg())
        drained, left = cluster.drain(drain_timeout, drain_stall)
        log(f"cluster: load over (load average {load_average} over 1/5/15 min), "
            + (f"drained in {drained:.0f} s" if not left else
               f"drain given up after {drained:.0f} s, {left} deliveries unfinished"))
        if postgres is not None:
            postgres = meter.after_drain(postgres, faults=len(windows))
        verdict = cluster.check(windows, (load_started, load_ended))
        received = checker.read_lines(sorted((run_dir / "logs").glob("recv*.jsonl")))
        emitted = checker.read_lines(sorted((run_dir / "logs").glob("emit*.jsonl")))
        summary = figures.summarize(windows, received, emitted, load_started, load_ended)
        summary["load_average"] = load_average
        if postgres is not None:
            summary["postgres"] = postgres
        (run_dir / "figures.json").write_text(json.dumps(
            {"faults": windows, "figures": summary, "verdict": verdict.__dict__}, indent=1,
            default=str))
    summary["run_dir"] = str(run_dir)
    return verdict, summary


class _teardown_on_signals:
    """SIGTERM and SIGHUP end the run as Ctrl-C does, through the same teardown."""

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            self.previous = None
            return self

        def interrupt(signum, _frame):
            raise KeyboardInterrupt(f"signal {signum}")

        self.previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
        return self

    def __exit__(self, *_):
        for number, handler in (self.previous or {}).items():
            signal.signal(number, handler)
