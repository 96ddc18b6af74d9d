"""The guides' own text: the fenced blocks under a heading, and their command lines.

The run executes what the guide says by reading it from docs/*.md, so that a
changed guide is what the next run tries; a block that moved or changed shape
makes the run fail, naming the heading.
"""

from __future__ import annotations

import re
import shlex

from ..services import ROOT

__all__ = ["blocks", "block", "command_lines", "comment_of", "systemctl_argv"]

DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(guide: str, heading: str, language: str | None = None) -> list[str]:
    """The fenced blocks (of ``language``, if given) between the heading that starts with
    ``heading`` and the next heading of the same or a higher level (a ``#`` line inside a
    block being a comment, not a heading)."""
    section, level, fenced = [], None, False
    for line in (DOCS / guide).read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        depth = len(line) - len(line.lstrip("#")) if line.startswith("#") and not fenced else 0
        if level is None:
            if depth and line[depth:].strip().startswith(heading):
                level = depth
            continue
        if depth and depth <= level:
            break
        section.append(line)
    if level is None:
        raise LookupError(f"{guide}: no heading starting with {heading!r}")
    return [body for lang, body in _FENCE.findall("".join(section)) if language in (None, lang)]


def block(guide: str, heading: str, index: int = 0, language: str | None = None,
          **replace: str) -> str:
    """One block, with each ``replace`` key (a placeholder the guide writes, such as
    ``/path/to/webhooks-checkout``) replaced by its value."""
    found = blocks(guide, heading, language)
    if index >= len(found):
        raise LookupError(f"{guide}, {heading!r}: {len(found)} blocks, not {index + 1}")
    body = found[index]
    for placeholder, value in replace.items():
        body = body.replace(placeholder, value)
    return body


def command_lines(body: str) -> list[str]:
    """A shell block's commands, one per entry: continuation lines joined, blank lines and
    whole-line comments left out (a trailing comment stays: the shell ignores it)."""
    lines, current = [], ""
    for raw in body.splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    return lines


def comment_of(line: str) -> str:
    """The trailing ``# …`` comment of a command line ('' if none)."""
    position = line.find(" #")
    return line[position + 2:].strip() if position >= 0 else ""


def systemctl_argv(line: str) -> list[str] | None:
    """``systemctl``'s arguments if ``line`` is a (sudo) systemctl command, else None."""
    words = shlex.split(line, comments=True)
    if words[:1] == ["sudo"]:
        words = words[1:]
    return words[1:] if words[:1] == ["systemctl"] else None
