"""One module per scenario. Each has ``run(ctx) -> dict`` and ``rows(result) -> list[Row]``.

``ORDER`` is the order they run in: throughput first, because the paced
scenarios (latency, isolation) emit at half the rate it measured; history
and purge last, because they leave the database large.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "ORDER", "OPTIONAL", "ALL", "module_for"]

ORDER = ["ceiling", "throughput", "emit", "latency", "isolation", "backlog", "punctuality",
         "realistic", "shared", "history", "purge"]
# Run only when named with --scenarios (django_webhook2 also needs its virtualenv: dw2.py;
# zoo needs the test extra, for tests/support/zoo.py; pace measures the adaptive pace,
# ordering what ordering keys cost a drain, emit_batch what emit_events costs with and
# without idempotency keys, resume what resumes cost the worker and another tenant).
OPTIONAL = ["cost", "profile", "django_webhook2", "durable_ceiling", "zoo", "pace", "ordering",
            "emit_batch", "resume"]
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
    """The module that runs scenario ``name`` (ceiling and throughput share one, as do shared,
    django_webhook2 and durable_ceiling: legs of one module run in turn within each repeat)."""
    import importlib

    module = {"ceiling": "throughput", "django_webhook2": "shared",
              "durable_ceiling": "shared"}.get(name, name)
    return importlib.import_module(f"benchmarks.scenarios.{module}")
