"""``systemctl`` for machines without a running systemd: the units the guide installed
(/etc/systemd/system on that machine) run as systemd would run them.

Each unit's own lines decide: ``ExecStart`` (``%i`` and ``%H`` expanded),
``User``, ``EnvironmentFile``, ``WorkingDirectory``, ``KillSignal`` and
``TimeoutStopSec``; a ``oneshot`` runs to its end. What is not emulated:
``Restart=`` (nothing restarts a unit that dies), cgroups, the sandboxing
options. ``restart`` of a unit that is not running starts it, as systemd does
for an installed unit; a glob (``'webhooks-worker@*'``) matches only the
running instances, as it matches only loaded units.
"""

from __future__ import annotations

import fnmatch
import shlex
import signal
import subprocess
from dataclasses import dataclass

from .machines import PATH, Machine

__all__ = ["Unit", "Systemd", "environment_file"]

NGINX = "nginx"  # Debian's nginx.service: ExecStart=/usr/sbin/nginx -g 'daemon on; master_process on;'


@dataclass
class Unit:
    name: str            # webhooks-worker@1.service
    settings: dict       # [Service] and [Unit] keys, the last value of each


def environment_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads them: comments and blank lines skipped, one pair of
    surrounding quotes removed."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def _parse(text: str) -> dict:
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def _seconds(value: str, default: float) -> float:
    value = (value or "").strip()
    if not value:
        return default
    if value.endswith("min"):
        return float(value[:-3]) * 60
    return float(value.rstrip("s"))


class Systemd:
    """The units of every machine of one run, started through the run's Processes."""

    def __init__(self, processes, log):
        self.processes = processes
        self.log = log  # log(machine, text): one line of what systemctl did

    def key(self, machine: Machine, unit: str) -> str:
        return f"{machine.name}:{unit}"

    def running(self, machine: Machine) -> list[str]:
        prefix = f"{machine.name}:"
        return [name[len(prefix):] for name, process in self.processes.running.items()
                if name.startswith(prefix) and process.alive()]

    def is_active(self, machine: Machine, unit: str) -> bool:
        return _full(unit) in self.running(machine)

    # ------------------------------------------------------------------ systemctl
    def systemctl(self, machine: Machine, argv: list[str]) -> None:
        """One ``systemctl`` command line (without the word itself)."""
        args = [a for a in argv if not a.startswith("--") or a == "--now"]
        verb, names = args[0], [a for a in args[1:] if a != "--now"]
        if verb == "daemon-reload":
            return
        if verb == "enable":
            if "--now" in argv:
                for name in names:
                    self.start(machine, name)
            return
        for name in names:
            if verb == "start":
                self.start(machine, name)
            elif verb == "stop":
                for unit in self._matching(machine, name):
                    self.stop(machine, unit)
            elif verb == "restart":
                matching = self._matching(machine, name)
                if "*" in name:
                    targets = matching
                else:
                    targets = [_full(name)]
                for unit in targets:
                    if unit in matching:
                        self.stop(machine, unit)
                    self.start(machine, unit)
            elif verb == "reload" and name.removesuffix(".service") == NGINX:
                self._nginx(machine, reload=True)
            else:
                raise ValueError(f"systemctl {verb} {name}: not emulated")

    def _matching(self, machine: Machine, pattern: str) -> list[str]:
        return [u for u in self.running(machine) if fnmatch.fnmatch(u, _full(pattern))]

    # ------------------------------------------------------------------ one unit
    def read(self, machine: Machine, unit: str) -> Unit:
        unit = _full(unit)
        template = unit.split("@")[0] + "@.service" if "@" in unit else unit
        text = machine.path(f"/etc/systemd/system/{template}").read_text()
        return Unit(unit, _parse(text))

    def start(self, machine: Machine, unit: str) -> None:
        unit = _full(unit)
        if unit.removesuffix(".service") == NGINX:
            self._nginx(machine, reload=False)
            return
        if self.is_active(machine, unit):
            return
        settings = self.read(machine, unit).settings
        instance = unit.split("@", 1)[1].removesuffix(".service") if "@" in unit else ""
        command = (settings["ExecStart"].replace("%i", instance).replace("%H", machine.name)
                   .replace("%%", "%"))
        env = {"PATH": PATH, "LANG": "C.UTF-8"}
        if "EnvironmentFile" in settings:
            path = settings["EnvironmentFile"].lstrip("-")
            env.update(environment_file(machine.path(path).read_text()))
        user = settings.get("User")
        if user:
            home = machine.sh(f"getent passwd {user} | cut -d: -f6").stdout.strip()
            env.update(HOME=home, USER=user, LOGNAME=user)
        cwd = settings.get("WorkingDirectory", "/")
        argv = ["sh", "-c", 'cd "$0" && exec "$@"', cwd, *shlex.split(command)]
        if user:
            # setpriv execs (runuser would stay the parent, and on SIGTERM kill the unit's
            # processes 2 s later, cutting Celery's warm shutdown short).
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *argv]
        if settings.get("Type") == "oneshot":
            result = subprocess.run(machine.command(*argv), capture_output=True, text=True,
                                    env=env, timeout=600)
            self.log(machine, f"systemctl start {unit}: exit {result.returncode}: "
                              f"{(result.stdout + result.stderr).strip()}")
            if result.returncode != 0:
                raise RuntimeError(f"{unit} on {machine.name} failed: {result.stderr.strip()}")
            return
        self.processes.start(self.key(machine, unit), machine, argv, env=env)
        self.log(machine, f"systemctl start {unit}: {command}")

    def stop(self, machine: Machine, unit: str) -> None:
        """KillSignal to the unit's processes, SIGKILL after TimeoutStopSec (systemd's
        default 90 s); returns once they are gone."""
        unit = _full(unit)
        settings = self.read(machine, unit).settings
        number = getattr(signal, settings.get("KillSignal", "SIGTERM"))
        grace = _seconds(settings.get("TimeoutStopSec"), 90.0)
        process = self.processes.running[self.key(machine, unit)]
        process.signal(number)
        try:
            process.popen.wait(timeout=grace)
            how = "stopped"
        except subprocess.TimeoutExpired:
            process.signal(signal.SIGKILL)
            process.popen.wait(timeout=30)
            how = f"killed after {grace:g} s"
        process.signal(signal.SIGKILL)  # what outlived the main process, as the cgroup's end
        self.log(machine, f"systemctl stop {unit}: {how}")

    def _nginx(self, machine: Machine, *, reload: bool) -> None:
        """Debian's nginx.service: start the daemon, or reload it (``nginx -s reload``)."""
        pid = machine.path("/run/nginx.pid")
        running = pid.exists() and pid.read_text().strip() and \
            machine.sh(f"kill -0 {pid.read_text().strip()}").returncode == 0
        script = "nginx -s reload" if running else "nginx -g 'daemon on; master_process on;'"
        result = machine.sh(script)
        self.log(machine, f"systemctl {'reload' if reload else 'start'} nginx: {script}: "
                          f"exit {result.returncode} {result.stderr.strip()}")
        if result.returncode != 0:
            raise RuntimeError(f"nginx on {machine.name}: {result.stderr.strip()}")


def _full(unit: str) -> str:
    return unit if unit.endswith(".service") else f"{unit}.service"
