"""How slow the realistic scenario's endpoints are, and the order their deliveries are queued in.

Pure functions, no I/O. Delays are seconds unless a name says ms.

The mix (``--delay-mix 50-1000``) is fixed, not drawn at random: ``n``
delays spaced evenly on a logarithmic scale from the low to the high end
(50, 51.5, 53.1 ... 1,000 ms for 100 endpoints: median 224 ms, mean
319 ms), a stand-in for the right-skewed answer times of real receivers.
They are dealt to the subscriptions in an order shuffled with a fixed seed,
so that the slow ones are not all in one account. Every run gets the same
delays on the same subscriptions.
"""

from __future__ import annotations

import math
import random
from typing import Sequence

__all__ = ["parse_range_ms", "log_spread", "dealt", "interleave", "concurrency_bound"]

SEED = 14  # the number: any fixed value gives every run the same deal


def parse_range_ms(text: str) -> tuple[float, float]:
    """``"50-1000"`` as (50.0, 1000.0) ms; a single ``"200"`` as (200.0, 200.0)."""
    low, _, high = text.strip().partition("-")
    try:
        low_ms, high_ms = float(low), float(high or low)
    except ValueError:
        raise ValueError(f"a delay range is written 50-1000 (ms), got {text!r}") from None
    if not 0 <= low_ms <= high_ms:
        raise ValueError(f"a delay range needs 0 <= low <= high, got {text!r}")
    return low_ms, high_ms


def log_spread(n: int, low_ms: float, high_ms: float) -> list[float]:
    """``n`` delays (seconds) from ``low_ms`` to ``high_ms``, evenly spaced on a log scale.

    A low end of 0 is spaced linearly instead (a logarithm of 0 does not exist).
    """
    if n <= 0:
        return []
    if n == 1 or low_ms == high_ms:
        return [low_ms / 1000.0] * n
    step = 1.0 / (n - 1)
    if low_ms == 0:
        return [high_ms * i * step / 1000.0 for i in range(n)]
    ratio = math.log(high_ms / low_ms)
    return [low_ms * math.exp(ratio * i * step) / 1000.0 for i in range(n)]


def dealt(delays: Sequence[float], seed: int = SEED) -> list[float]:
    """The same delays in the fixed shuffled order they are dealt to subscriptions in."""
    order = list(delays)
    random.Random(seed).shuffle(order)
    return order


def interleave(groups: Sequence[Sequence]) -> list:
    """Round robin over ``groups``: the first of each, then the second of each, and so on.

    Deliveries are queued this way so that every subscription has work at every
    moment of a drain, as with many tenants, instead of one block per
    subscription (which its ``max_in_flight`` would hold back).
    """
    out = []
    longest = max((len(group) for group in groups), default=0)
    for index in range(longest):
        out.extend(group[index] for group in groups if index < len(group))
    return out


def concurrency_bound(concurrency: int, delays: Sequence[float]) -> float | None:
    """Deliveries/s that ``concurrency`` attempts at once allow when each endpoint is used alike.

    Each attempt holds a slot for its endpoint's delay, so the bound is the
    concurrency over the mean delay, whatever the CPU; None if the endpoints
    answer at once.
    """
    mean = sum(delays) / len(delays) if delays else 0.0
    return concurrency / mean if mean > 0 else None
