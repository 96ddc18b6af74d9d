"""How each server of the cluster is started: PostgreSQL primary and streaming replica,
Redis primary and replica, Sentinels, and the service's Procfile entries.

All of them are the real programs: PostgreSQL 15's binaries run as the
``postgres`` user on data folders under the run's folder, ``redis-server``
(also with ``--sentinel``), and the Procfile's commands with this
repository's virtual environment first on the PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .net import Host
from .processes import Processes

__all__ = ["PG_BIN", "procfile", "start_postgres_primary", "start_postgres_replica",
           "start_redis", "start_sentinel", "start_procfile_entry", "wait_for_port"]

PG_BIN = Path(os.environ.get("CLUSTER_PG_BIN", "/usr/lib/postgresql/15/bin"))
ROOT = Path(__file__).resolve().parents[1]
PG_PORT, REDIS_PORT, SENTINEL_PORT = 5432, 6379, 26379
MASTER_NAME = "webhooks"


def procfile(path: Path = ROOT / "Procfile") -> dict[str, str]:
    """The Procfile's entries, ``{name: command}``."""
    entries = {}
    for line in path.read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.startswith("#"):
            entries[name.strip()] = command.strip()
    return entries


def wait_for_port(host: Host, address: str, port: int, timeout: float = 60.0,
                  process=None) -> None:
    """Wait until ``address:port`` accepts a TCP connection, tried from inside ``host``."""
    deadline = time.monotonic() + timeout
    probe = ["python3", "-c", "import socket,sys; socket.create_connection((sys.argv[1], "
             "int(sys.argv[2])), timeout=1).close()", address, str(port)]
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise RuntimeError(f"{process.name} exited ({process.popen.returncode}); "
                               f"see {process.log}")
        if subprocess.run(host.command(*probe), capture_output=True).returncode == 0:
            return
        time.sleep(0.3)
    raise RuntimeError(f"nothing answered on {address}:{port} within {timeout:g} s")


def _as_postgres(*argv: str) -> None:
    result = subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True,
                            text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {result.stderr.strip() or result.stdout.strip()}")


def _postgres_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.chown(folder, "postgres", "postgres")
    folder.chmod(0o700)
    return folder


def start_postgres_primary(processes: Processes, host: Host, folder: Path, subnet: str):
    """initdb, trust for the cluster's subnet (its addresses exist only in the run's
    namespaces), replication allowed; returns the process once it accepts connections."""
    _postgres_folder(folder)  # the unix socket and its lock file go here
    data = _postgres_folder(folder / "data")
    _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--no-sync")
    with open(data / "pg_hba.conf", "a") as hba:
        hba.write(f"host all all {subnet}.0/24 trust\n"
                  f"host replication all {subnet}.0/24 trust\n")
    process = processes.start(
        "postgres-primary", host,
        [str(PG_BIN / "postgres"), "-D", str(data), "-c", f"listen_addresses={host.address}",
         "-c", f"unix_socket_directories={folder}", "-c", "max_connections=400",
         "-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "hot_standby=on",
         "-c", "fsync=off", "-c", "shared_buffers=64MB", "-c", "log_min_messages=warning"],
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, user="postgres")
    wait_for_port(host, host.address, PG_PORT, process=process)
    return process


def start_postgres_replica(processes: Processes, host: Host, primary: Host, folder: Path):
    """pg_basebackup from the primary (over the cluster's link, from inside the replica's
    namespace), written as a standby (-R); returns the process once it accepts reads."""
    _postgres_folder(folder)
    data = folder / "data"  # pg_basebackup makes it
    base = subprocess.run(
        host.command("runuser", "-u", "postgres", "--", str(PG_BIN / "pg_basebackup"),
                     "-h", primary.address, "-U", "postgres", "-D", str(data), "-R",
                     "-X", "stream", "--no-sync", "--checkpoint=fast"), capture_output=True, text=True, timeout=300)
    if base.returncode != 0:
        raise RuntimeError(f"pg_basebackup failed: {base.stderr.strip()}")
    process = processes.start(
        "postgres-replica", host,
        [str(PG_BIN / "postgres"), "-D", str(data), "-c", f"listen_addresses={host.address}",
         "-c", f"unix_socket_directories={folder}", "-c", "max_connections=400",
         "-c", "hot_standby=on", "-c", "fsync=off", "-c", "log_min_messages=warning"],
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, user="postgres")
    wait_for_port(host, host.address, PG_PORT, process=process)
    return process


def start_redis(processes: Processes, name: str, host: Host, folder: Path,
                replica_of: Host | None = None):
    """redis-server without persistence (a restarted one comes back empty, as after a
    lost disk: the sweep re-sends what it lost)."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["redis-server", "--bind", host.address, "--port", str(REDIS_PORT),
            "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", str(folder)]
    if replica_of is not None:
        argv += ["--replicaof", replica_of.address, str(REDIS_PORT)]
    process = processes.start(name, host, argv, env={"PATH": os.environ["PATH"]})
    wait_for_port(host, host.address, REDIS_PORT, process=process)
    return process


def start_sentinel(processes: Processes, name: str, host: Host, primary: Host, folder: Path,
                   down_after_ms: int = 2000):
    """A Sentinel watching ``primary`` (quorum 2 of 3); it rewrites its own config file."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{name}.conf"
    config.write_text(
        f"port {SENTINEL_PORT}\nbind {host.address}\nprotected-mode no\ndir {folder}\n"
        f"sentinel monitor {MASTER_NAME} {primary.address} {REDIS_PORT} 2\n"
        f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n"
        f"sentinel failover-timeout {MASTER_NAME} 10000\n"
        f"sentinel parallel-syncs {MASTER_NAME} 1\n")
    process = processes.start(name, host, ["redis-server", str(config), "--sentinel"],
                              env={"PATH": os.environ["PATH"]})
    wait_for_port(host, host.address, SENTINEL_PORT, process=process)
    return process


def start_procfile_entry(processes: Processes, name: str, entry: str, host: Host,
                         env: dict[str, str], wrapper: list[str] = ()):
    """The Procfile's ``entry`` command on ``host``, run by ``sh -c`` as a platform would,
    with the virtual environment's programs first on the PATH; ``wrapper`` goes in front
    (``faketime``)."""
    command = procfile()[entry]
    venv_bin = str(ROOT / ".venv" / "bin")
    full_env = {**env, "PATH": f"{venv_bin}:{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}
    return processes.start(name, host, [*wrapper, "sh", "-c", f"exec {command}"], env=full_env,
                           cwd=ROOT, hostname=name)


def local_name() -> str:
    return socket.gethostname()


def quoted(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
