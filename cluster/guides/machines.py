"""Machines for following the guides: cluster hosts (network namespaces, cluster/net.py)
that also have a filesystem of their own, as separate machines have.

A guide's commands write where a real host would: ``useradd`` into /etc/passwd,
the release into /opt/webhooks, the unit files into /etc/systemd/system, nginx's
pid into /run. On one machine those places are shared, so each machine here
sees copy-on-write layers (overlayfs) over the real /etc, /opt, /var/lib,
/var/log and /run: what it writes goes to its own folder under the run's folder
and nothing changes on the real machine. The layers live in one mount namespace
per machine, held by an idle process; every command of that machine enters it
(``nsenter``), so all of a machine's processes see one filesystem, and a
machine's /etc/hosts names the others (``db.internal``, ``webhooks.example.com``).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from ..net import Host, Network, kill_processes, leftover_namespaces, run
from ..processes import Processes

__all__ = ["Machine", "Machines", "OVERLAID", "SHELL_PRELUDE"]

OVERLAID = ("/etc", "/opt", "/var/lib", "/var/log", "/run")
# The guides write `sudo` and `sudo -u webhooks`; these machines have no sudo, and the
# guides say what stands for it: root itself, and `runuser -u webhooks --`.
SHELL_PRELUDE = ('sudo() { if [ "$1" = -u ]; then local user=$2; shift 2; '
                 'runuser -u "$user" -- "$@"; else "$@"; fi; }\n')
# systemd's PATH for services, and the one a root shell has.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Machine:
    """One host with its own filesystem layers; ``command()`` runs inside both namespaces
    (so it stands in for a :class:`~cluster.net.Host` wherever the cluster takes one)."""

    def __init__(self, host: Host, layers: Path, holder: int):
        self.host = host
        self.layers = layers
        self.holder = holder

    name = property(lambda self: self.host.name)
    namespace = property(lambda self: self.host.namespace)
    address = property(lambda self: self.host.address)

    def command(self, *argv: str) -> list[str]:
        return ["nsenter", "-t", str(self.holder), "-m", "-u", "-n", "--", *argv]

    def sh(self, script: str, *, env: dict[str, str] | None = None, cwd: str = "/root",
           timeout: float = 900, log: Path | None = None) -> subprocess.CompletedProcess:
        """``script`` run by bash as root in ``cwd``, as an operator's shell on this host
        would; its output is appended to ``log`` with the script itself."""
        full_env = {"PATH": PATH, "LANG": "C.UTF-8", "HOME": "/root", **(env or {})}
        argv = self.command("bash", "-c", f"cd {shlex.quote(cwd)} && {{\n{SHELL_PRELUDE}{script}\n}}")
        result = subprocess.run(argv, capture_output=True, text=True, env=full_env,
                                timeout=timeout)
        if log is not None:
            with open(log, "a") as out:
                out.write(f"### {self.name}$ {script}\n{result.stdout}{result.stderr}"
                          f"### exit {result.returncode}\n")
        return result

    def write(self, inside: str, text: str, mode: str = "0644") -> None:
        """Write a file as root on this machine (into its own layer)."""
        subprocess.run(self.command("install", "-m", mode, "/dev/stdin", inside), input=text,
                       text=True, check=True, capture_output=True)

    def path(self, inside: str) -> Path:
        """Where a file this machine wrote under one of the layers lies on the real
        machine (for reading its logs); a file it never wrote is the real one."""
        for top in OVERLAID:
            if inside == top or inside.startswith(top + "/"):
                upper = self.layers / top.strip("/").replace("/", "-") / "upper"
                candidate = upper / inside[len(top):].lstrip("/")
                if candidate.exists():
                    return candidate
        return Path(inside)


class Machines:
    """The network and the machines of one run; :meth:`down` removes every trace."""

    def __init__(self, prefix: str, run_dir: Path):
        self.net = Network(prefix)
        self.run_dir = run_dir
        self.processes = Processes(run_dir / "logs")
        self.machines: dict[str, Machine] = {}
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)

    def host(self, name: str) -> Host:
        """A plain host (servers the guides take as given: PostgreSQL, Redis, receivers)."""
        return self.net.add_host(name)

    def machine(self, name: str, hosts_file: str) -> Machine:
        """A host with its own filesystem layers and ``hosts_file`` as its /etc/hosts."""
        host = self.net.add_host(name)
        layers = self.run_dir / "machines" / name
        mounts = []
        for top in OVERLAID:
            layer = layers / top.strip("/").replace("/", "-")
            (layer / "upper").mkdir(parents=True)
            (layer / "work").mkdir()
            mounts.append(f"mount -t overlay overlay -o lowerdir={top},upperdir={layer}/upper,"
                          f"workdir={layer}/work {top}")
        (layers / "etc" / "upper" / "hosts").write_text(hosts_file)
        ready = layers / "ready"
        script = " && ".join([*mounts, f"hostname {name}", f"touch {ready}", "exec sleep infinity"])
        holder = self.processes.start(f"{name}-machine", host,
                                      ["unshare", "--mount", "--propagation", "private", "--uts",
                                       "sh", "-c", script], env={"PATH": PATH})
        deadline = time.monotonic() + 30
        while not ready.exists():
            if not holder.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"machine {name}: its filesystem did not come up; see {holder.log}")
            time.sleep(0.05)
        machine = Machine(host, layers, holder.popen.pid)
        self.machines[name] = machine
        return machine

    def down(self) -> None:
        """Stop every process (also those that left their group: nginx's daemon), then
        remove the namespaces; the layers go with the run's folder."""
        self.processes.stop_all(grace=5)
        for host in self.net.hosts.values():
            kill_processes(host.namespace)
        self.net.remove()


def clean_leftovers(prefix_start: str, log=print) -> None:
    """Remove namespaces of earlier runs (named ``<prefix_start><pid>-…``) whose run is gone."""
    for namespace in leftover_namespaces(prefix_start):
        owner = namespace[len(prefix_start):].split("-")[0]
        if owner.isdigit() and Path(f"/proc/{owner}").exists():
            continue
        kill_processes(namespace)
        run("ip", "netns", "delete", namespace, check=False)
        log(f"guides: removed the leftover namespace {namespace}")
