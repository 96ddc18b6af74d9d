"""Small statistics helpers: percentiles of samples and the median and spread of repeats."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

__all__ = ["percentile", "percentiles_ms", "summarise", "summarise_all", "median"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    fraction = rank - low
    return float(ordered[low] + (ordered[high] - ordered[low]) * fraction)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)


def percentiles_ms(seconds: Sequence[float], points=(50, 95, 99)) -> dict[str, float | None]:
    """``{"p50_ms": ..., "p95_ms": ..., "max_ms": ...}`` of durations given in seconds."""
    result = {f"p{p}_ms": _ms(percentile(seconds, p)) for p in points}
    result["max_ms"] = _ms(max(seconds)) if seconds else None
    return result


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000.0, 2)


def summarise(runs: Iterable[float | None]) -> dict:
    """Median and spread of one figure over repeated runs.

    Returns ``{"median", "min", "max", "runs"}``; runs that produced no value
    (None) are kept in ``runs`` but left out of the statistics.
    """
    runs = list(runs)
    values = [v for v in runs if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": runs}
    middle = median(values)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values) and middle.is_integer():
        middle = int(middle)
    return {
        "median": _round(middle),
        "min": _round(min(values)),
        "max": _round(max(values)),
        "runs": [_round(v) for v in runs],
    }


def summarise_all(runs: list[dict], keys: Iterable[str]) -> dict:
    """``summarise`` each of ``keys`` over a list of per-run dicts."""
    return {key: summarise(run.get(key) for run in runs) for key in keys}


def _round(value):
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    return round(float(value), 4 if abs(value) < 10 else 2)
