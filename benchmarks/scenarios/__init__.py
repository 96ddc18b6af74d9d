"""One module per scenario. Each has ``run(ctx) -> dict`` and ``rows(result) -> list[Row]``.

``ORDER`` is the order they run in: throughput first, because the paced
scenarios (latency, isolation) emit at half the rate it measured; history
and purge last, because they leave the database large.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "ORDER", "OPTIONAL", "ALL", "module_for"]

ORDER = ["ceiling", "throughput", "emit", "latency", "isolation", "backlog", "punctuality",
         "history", "purge"]
# Run only when named with --scenarios.
OPTIONAL = ["cost", "profile"]
ALL = ORDER + OPTIONAL


@dataclass(frozen=True)
class Row:
    """One line of the printed table; ``figure`` is a ``summarise()`` dict or a plain value."""

    scenario: str
    name: str
    figure: object
    unit: str = ""
    target: str = ""


def module_for(name: str):
    """The module that runs scenario ``name`` (ceiling and throughput share one)."""
    import importlib

    module = "throughput" if name == "ceiling" else name
    return importlib.import_module(f"benchmarks.scenarios.{module}")
