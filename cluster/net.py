"""The cluster's network: one namespace per host, all on one bridge in a namespace of its own.

Every host is a network namespace (``ip netns``) with one veth link whose
other end hangs on a bridge inside a "switch" namespace. The addresses are
the run's own (``SUBNET``) and exist only inside those namespaces: nothing
is added to the machine's own network, no host has a route anywhere else,
and removing the namespaces removes every address. Faults are nftables
rules inside a host's namespace (a partition drops every packet to or from
one peer, both ways, while both sides stay up).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

__all__ = ["Host", "Network", "SUBNET", "run"]

SUBNET = "10.27.0"  # /24; .1 upwards are the hosts, in the order they are added
_TABLE = "cluster_faults"


def run(*command: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command of the set-up (ip, nft); its error output goes into the exception."""
    result = subprocess.run(command, capture_output=True, text=True, input=input, timeout=60)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    return result


@dataclass(frozen=True)
class Host:
    """One machine of the cluster: a namespace and its address on the cluster's link."""

    name: str
    namespace: str
    address: str

    def command(self, *argv: str) -> list[str]:
        """``argv`` to run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


class Network:
    """The namespaces of one run, named ``<prefix>-<host>``; :meth:`remove` takes all away."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.switch = f"{prefix}-switch"
        self.hosts: dict[str, Host] = {}
        self._created: list[str] = []

    def create_switch(self) -> None:
        self._add_namespace(self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")

    def add_host(self, name: str) -> Host:
        """A namespace with loopback and one link to the switch, at the next address."""
        index = len(self.hosts) + 1
        host = Host(name, f"{self.prefix}-{name}", f"{SUBNET}.{index}")
        self._add_namespace(host.namespace)
        ns = host.namespace
        run("ip", "-n", ns, "link", "set", "lo", "up")
        # Both ends are made inside the host's namespace, so no interface ever
        # appears in the machine's own; the switch's end then moves to the switch.
        run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{index}")
        run("ip", "-n", ns, "link", "set", f"p{index}", "netns", self.switch)
        run("ip", "-n", self.switch, "link", "set", f"p{index}", "master", "br0")
        run("ip", "-n", self.switch, "link", "set", f"p{index}", "up")
        run("ip", "-n", ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        self.hosts[name] = host
        return host

    def _add_namespace(self, namespace: str) -> None:
        run("ip", "netns", "add", namespace)
        self._created.append(namespace)

    # ------------------------------------------------------------------ faults
    def partition(self, host: Host, peer: Host) -> None:
        """Drop every packet between ``host`` and ``peer`` (both directions), inside
        ``host``'s namespace; established connections hang as on a real network."""
        rules = (f"table inet {_TABLE} {{\n"
                 f"  chain input {{ type filter hook input priority 0; ip saddr {peer.address} drop; }}\n"
                 f"  chain output {{ type filter hook output priority 0; ip daddr {peer.address} drop; }}\n"
                 "}\n")
        run("ip", "netns", "exec", host.namespace, "nft", "-f", "-", input=rules)

    def heal(self, host: Host) -> None:
        """Remove every partition of ``host``."""
        run("ip", "netns", "exec", host.namespace, "nft", "delete", "table", "inet", _TABLE,
            check=False)

    # ------------------------------------------------------------------ teardown
    def remove(self) -> None:
        """Delete every namespace this run created (their links and addresses go with them)."""
        for namespace in reversed(self._created):
            run("ip", "netns", "delete", namespace, check=False)
        self._created.clear()


def leftover_namespaces(prefix_start: str) -> list[str]:
    """Namespaces whose name starts with ``prefix_start`` (a run that died before tearing down)."""
    listed = run("ip", "netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in listed if line.startswith(prefix_start)]


def kill_processes(namespace: str) -> None:
    """SIGKILL every process inside ``namespace``, also those that left the process group
    they were started in (a daemon such as nginx)."""
    pids = run("ip", "netns", "pids", namespace, check=False).stdout.split()
    if pids:
        run("kill", "-KILL", *pids, check=False)

