"""Following a guide's block on a machine, line by line, and keeping the score.

A line runs in the machine's shell as written (``sudo`` being root there, see
machines.py), except ``systemctl``, which units.py carries out, and the lines a
step does itself (``sudoedit``: a person edits the file; the step writes the
values). Each line's output is kept for the checks and written to the run's
log of that machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .machines import Machine
from .text import command_lines, systemctl_argv
from .units import Systemd

__all__ = ["Follower", "Report", "Failed"]


class Failed(RuntimeError):
    """A guide's line that did not do what the guide says (the message names it)."""


@dataclass
class Report:
    """Every check of the run, printed as it is made."""

    log: callable = print
    checks: list = field(default_factory=list)  # (guide, what, ok, detail)

    def check(self, guide: str, what: str, ok: bool, detail: str = "") -> bool:
        self.checks.append((guide, what, bool(ok), detail))
        self.log(f"guides: {guide}: {'ok  ' if ok else 'FAIL'} {what}"
                 + (f" ({detail})" if detail else ""))
        return bool(ok)

    def failed(self) -> list:
        return [c for c in self.checks if not c[2]]

    def summary(self) -> str:
        parts = []
        for guide in dict.fromkeys(c[0] for c in self.checks):
            mine = [c for c in self.checks if c[0] == guide]
            parts.append(f"{guide} {sum(c[2] for c in mine)}/{len(mine)}")
        return "guides: checks passed: " + ", ".join(parts)


class Follower:
    """Runs guide lines on machines; ``env`` is what every line's shell has besides root's
    usual PATH and HOME (the run's pip settings, the CA that curl trusts)."""

    def __init__(self, systemd: Systemd, log_dir, env: dict[str, str], log=print):
        self.systemd = systemd
        self.log_dir = log_dir
        self.env = env
        self.log = log

    def run(self, machine: Machine, line: str, *, cwd: str = "/root",
            allow_exit: tuple[int, ...] = (0,)) -> str:
        """One command line; returns its output (stdout then stderr). Raises Failed when
        its exit status is not in ``allow_exit``."""
        output = []
        for part in line.split(" && "):
            argv = systemctl_argv(part)
            if argv is not None:
                self.systemd.systemctl(machine, argv)
                continue
            started = time.monotonic()
            result = machine.sh(part, env=self.env, cwd=cwd,
                                log=self.log_dir / f"{machine.name}.sh.log")
            output.append(result.stdout + result.stderr)
            if result.returncode not in allow_exit:
                raise Failed(f"{machine.name}$ {part}\n  exit {result.returncode} after "
                             f"{time.monotonic() - started:.0f} s: "
                             f"{(result.stderr or result.stdout).strip()[-1500:]}")
        return "".join(output)

    def block(self, machine: Machine, body: str, *, cwd: str = "/root", skip=(),
              allow_exit: dict[str, tuple[int, ...]] | None = None,
              before: dict | None = None) -> list[tuple[str, str]]:
        """Every line of a shell block in order; a line starting with one of ``skip`` is
        left to the caller, ``before[prefix](machine)`` runs before the line that starts
        with ``prefix`` (what a person does between two lines: put the certificate in
        place). Returns (line, output) pairs."""
        done = []
        for line in command_lines(body):
            words = line.removeprefix("sudo ").lstrip()
            for prefix, hook in (before or {}).items():
                if words.startswith(prefix):
                    hook(machine)
            if any(words.startswith(s) for s in skip):
                done.append((line, ""))
                continue
            allowed = next((codes for prefix, codes in (allow_exit or {}).items()
                            if words.startswith(prefix)), (0,))
            done.append((line, self.run(machine, line, cwd=cwd, allow_exit=allowed)))
        return done
