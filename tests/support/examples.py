"""How many examples a property with its own ``max_examples`` generates in this run.

An explicit ``@settings(max_examples=N)`` wins over the loaded profile, so the
fast tier's smaller profile (tests/conftest.py) would not reach it. ``examples(N)``
scales N by the profile against Hypothesis's default of 100: N under
``make test``, a quarter of N under ``make test-fast``.
"""

from __future__ import annotations

from hypothesis import settings

__all__ = ["examples"]

HYPOTHESIS_DEFAULT = 100  # max_examples of Hypothesis's own default profile


def examples(full: int) -> int:
    """``full`` scaled by the loaded profile's max_examples (read when the test module is imported)."""
    return max(1, full * settings.default.max_examples // HYPOTHESIS_DEFAULT)
