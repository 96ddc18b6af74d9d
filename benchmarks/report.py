"""The printed table, the JSON file, and a description of the machine."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from .processes import ROOT
from .scenarios import Row

__all__ = ["machine", "table", "markdown", "write_json"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _git() -> dict:
    def run(*args):
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": run("rev-parse", "--short", "HEAD"),
            "dirty": bool(run("status", "--porcelain", "--untracked-files=no"))}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(servers: dict) -> dict:
    """What the figures were measured on; ``load_average`` shows whether the machine was busy."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in
                     ("celery", "kombu", "redis", "requests", "SQLAlchemy", "psycopg2-binary")},
        "servers": servers,
        "git": _git(),
        "load_average_at_start": list(os.getloadavg()),
    }


def _format_number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def _cells(figure) -> tuple[str, str]:
    """(median, min-max) of a summary dict, or the plain value."""
    if isinstance(figure, dict) and "median" in figure:
        spread = f"{_format_number(figure['min'])} - {_format_number(figure['max'])}"
        return _format_number(figure["median"]), spread
    return _format_number(figure), ""


def table(rows: list[Row]) -> str:
    """A plain-text table of every row: median and min-max over the repeats."""
    header = ("scenario", "figure", "median", "min - max", "unit", "target")
    lines = [header]
    for row in rows:
        median, spread = _cells(row.figure)
        lines.append((row.scenario, row.name, median, spread, row.unit, row.target))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rendered = []
    for index, line in enumerate(lines):
        cells = [cell.rjust(widths[i]) if i in (2, 3) else cell.ljust(widths[i])
                 for i, cell in enumerate(line)]
        rendered.append("  ".join(cells).rstrip())
        if index == 0:
            rendered.append("  ".join("-" * w for w in widths))
    return "\n".join(rendered)


def markdown(rows: list[Row]) -> str:
    """The same table in Markdown, for docs/performance.md."""
    out = ["| scenario | figure | median | min - max | unit | target |",
           "|---|---|---:|---:|---|---|"]
    for row in rows:
        median, spread = _cells(row.figure)
        out.append(f"| {row.scenario} | {row.name} | {median} | {spread} | {row.unit} | {row.target} |")
    return "\n".join(out)


def write_json(path: Path, results: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)
