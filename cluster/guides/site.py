"""The site the guides are followed on: which machines, their names, the servers the
guides take as given, the two releases' checkouts, the TLS certificate.

Servers the guides take as given (deploy.md, section 1: "reachable from every
host") are started with the cluster's own code (cluster/services.py):
PostgreSQL primary ``db.internal`` and its streaming replica
``db-replica.internal``, Redis primary and replica with three Sentinels
``sentinel1..3.internal``, and a receiver ``recv.internal``. The machines the
guides install on are ``web1`` and ``web2`` (web and nginx), ``lb`` (the
balancer in front of them, ``webhooks.example.com``), ``work1`` (workers and
the one scheduler), ``work2`` (workers), ``app`` (the integrating application)
and ``client`` (a user's machine: curl and a browser's requests).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

from .. import services
from ..net import SUBNET
from ..services import ROOT
from .follow import Follower
from .machines import Machine, Machines
from .units import Systemd

__all__ = ["Site", "SERVERS", "MACHINES", "SERVICE_HOSTS", "OLD_COMMIT", "PUBLIC_NAME"]

# Servers first, machines after: the order gives the addresses (cluster/net.py).
SERVERS = ("db", "db2", "redis1", "redis2", "sent1", "sent2", "sent3", "recv")
MACHINES = ("web1", "web2", "lb", "work1", "work2", "app", "client")
SERVICE_HOSTS = ("web1", "web2", "work1", "work2", "app")  # deploy.md's "every host"
NAMES = {"db": "db.internal", "db2": "db-replica.internal", "redis1": "redis.internal",
         "sent1": "sentinel1.internal", "sent2": "sentinel2.internal",
         "sent3": "sentinel3.internal", "recv": "recv.internal", "web1": "web1.internal",
         "web2": "web2.internal", "lb": "webhooks.example.com"}
PUBLIC_NAME = "webhooks.example.com"
RECEIVER_PORT = 8080
# The "old" release of upgrade.md: main before migrations 0015 and 0016 (schema 0014).
OLD_COMMIT = "c549be0538cb2c3d3a5dc2e97cdaf67d3e7d32a5"
RELEASES = {"0.1.0": OLD_COMMIT, "0.2.0": None}  # None: this checkout's files as they are
# Kept between runs: the wheels pip installs from inside the namespaces (no index there).
WHEELHOUSE = Path("/var/tmp/webhooks-guides-wheelhouse")
# async-timeout: redis needs it below Python 3.11.3 (Debian 12 has 3.11.2), this venv not.
EXTRA_WHEELS = ("pip", "setuptools", "wheel", "flask-sqlalchemy", "django", "psycopg2-binary",
                "async-timeout")


def address(name: str) -> str:
    return f"{SUBNET}.{(SERVERS + MACHINES).index(name) + 1}"


def hosts_file() -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{address(host)} {name}" for host, name in NAMES.items()]
    lines += [f"{address(m)} {m}" for m in MACHINES]
    return "\n".join(lines) + "\n"


class Site:
    def __init__(self, run_dir: Path, prefix: str, log=print):
        self.run_dir = run_dir
        self.log = log
        self.machines = Machines(prefix, run_dir)
        self.processes = self.machines.processes
        self.systemd = Systemd(self.processes, self._unit_log)
        self.secret_key = secrets.token_urlsafe(48)
        self.metrics_token = secrets.token_urlsafe(24)
        self.wheelhouse = WHEELHOUSE
        self.tls = run_dir / "tls"
        self.follow = Follower(self.systemd, run_dir / "logs", {
            # No index reaches the namespaces: pip installs from the wheels built before.
            "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse),
            # The run's own certificate authority, trusted by curl and requests.
            "CURL_CA_BUNDLE": str(self.tls / "ca.pem"),
            "REQUESTS_CA_BUNDLE": str(self.tls / "ca.pem")}, log)

    def _unit_log(self, machine: Machine, text: str) -> None:
        with open(self.run_dir / "logs" / f"{machine.name}.sh.log", "a") as out:
            out.write(f"### {machine.name}: {text}\n")

    def __getitem__(self, name: str) -> Machine:
        return self.machines.machines[name]

    def checkout(self, release: str) -> str:
        return str(self.run_dir / "checkouts" / f"webhooks-checkout-{release}")

    # ------------------------------------------------------------------ preparing
    def prepare(self) -> None:
        """On the real machine, before any namespace: the releases' checkouts, the wheels
        pip installs from inside the namespaces, the certificates."""
        for release, commit in RELEASES.items():
            target = Path(self.checkout(release))
            target.mkdir(parents=True)
            if commit:
                archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit],
                                         capture_output=True, check=True)
            else:
                files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached",
                                        "--others", "--exclude-standard"],
                                       capture_output=True, check=True).stdout
                archive = subprocess.run(["tar", "-c", "-C", str(ROOT), "--null", "-T", "-"],
                                         input=files, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        stamp = self.wheelhouse / ".built-for"
        wanted = "\n".join([*(Path(self.checkout(r), "setup.cfg").read_text() for r in RELEASES),
                            *EXTRA_WHEELS])
        if not (stamp.exists() and stamp.read_text() == wanted):
            self._build_wheels()
            stamp.write_text(wanted)
        make_certificates(self.tls, PUBLIC_NAME)
        self.run_dir.chmod(0o755)

    def _build_wheels(self) -> None:
        self.log("guides: building the wheelhouse (pip wheel of both releases and the "
                 "integration's packages)")
        for release in RELEASES:  # one at a time: both are "webhooks 0.1.0" to pip
            built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir",
                                    str(self.wheelhouse), self.checkout(release), *EXTRA_WHEELS],
                                   capture_output=True, text=True, timeout=900)
            if built.returncode != 0:
                raise RuntimeError(f"pip wheel {release}: {built.stderr.strip()[-1500:]}")

    def up(self) -> None:
        """The namespaces, the given servers, the empty machines."""
        net = self.machines.net
        net.create_switch()
        hosts = {name: self.machines.host(name) for name in SERVERS}
        pg = self.run_dir / "pg"
        pg.mkdir(mode=0o755)
        services.start_postgres_primary(self.processes, hosts["db"], pg / "primary", SUBNET)
        services.start_redis(self.processes, "redis1", hosts["redis1"], self.run_dir / "redis1")
        services.start_redis(self.processes, "redis2", hosts["redis2"], self.run_dir / "redis2",
                             replica_of=hosts["redis1"])
        for name in ("sent1", "sent2", "sent3"):
            services.start_sentinel(self.processes, name, hosts[name], hosts["redis1"],
                                    self.run_dir / "sentinel")
        self.processes.start("recv", hosts["recv"], [
            sys.executable, "-m", "cluster.receiver", hosts["recv"].address,
            str(RECEIVER_PORT), str(self.received_log)], env={"PATH": "/usr/bin:/bin"}, cwd=ROOT)
        for name in MACHINES:
            self.machines.machine(name, hosts_file())
        self.hosts = hosts

    def start_replica(self) -> None:
        """The streaming replica, made once the guide created the role and the database."""
        services.start_postgres_replica(self.processes, self.hosts["db2"], self.hosts["db"],
                                        self.run_dir / "pg" / "replica")

    @property
    def received_log(self) -> Path:
        return self.run_dir / "logs" / "recv.jsonl"

    def down(self) -> None:
        self.machines.down()

    # ------------------------------------------------------------------ helpers
    def psql(self, sql: str, *, replica: bool = False) -> str:
        """One query as postgres, from the client machine (tab-separated rows)."""
        server = "db-replica.internal" if replica else "db.internal"
        result = self["client"].sh(f"psql -h {server} -U postgres -d webhooks -At -F '\t' "
                                   f"-c \"{sql}\"")
        if result.returncode != 0:
            raise RuntimeError(f"psql {sql}: {result.stderr.strip()}")
        return result.stdout.strip()

    def primary_url(self) -> str:
        return f"postgresql+psycopg2://postgres@{address('db')}:5432/webhooks"


def make_certificates(folder: Path, name: str) -> None:
    """A certificate authority of the run and a certificate for ``name`` it signed
    (fullchain.pem, privkey.pem), as a real CA would hand over."""
    folder.mkdir(parents=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=guides run CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", "privkey.pem", "-out", "server.csr")
    (folder / "ext.cnf").write_text(f"subjectAltName=DNS:{name}\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "fullchain.pem")
