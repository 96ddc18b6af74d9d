"""The attempt deadline of the tests that need *a* deadline, not a particular one.

A hanging or trickling receiver makes the sender wait its whole deadline, so
these tests take as long as it is: short here, so the fast tier does not sit
idle. ``WEBHOOKS_TEST_DEADLINE_S`` (seconds) sets another, e.g. the
production-like 1.5 to watch them at that scale. Senders whose receiver does
answer keep a longer deadline (``ANSWER_DEADLINE_S``): a TLS handshake on a
loaded machine must not run out of time.
"""

from __future__ import annotations

import os

__all__ = ["SHORT_DEADLINE_S", "ANSWER_DEADLINE_S", "SLACK_S", "trickle_interval"]

SHORT_DEADLINE_S = float(os.environ.get("WEBHOOKS_TEST_DEADLINE_S", "0.4"))
ANSWER_DEADLINE_S = 1.5
SLACK_S = 1.0  # past the deadline, allowed on a loaded 2-core machine


def trickle_interval() -> float:
    """Seconds between the bytes of a trickling receiver: each read well within the deadline,
    so only a deadline on the whole attempt (not per read) can end it."""
    return SHORT_DEADLINE_S / 4
