"""A deployment-wide cap on retries that ride broker countdowns.

A worker holds every countdown message in memory until it is due (about
14 KB each, measured), so an outage of one large endpoint would otherwise
put every delivery's first retry into worker memory. Once about
``WEBHOOKS_COUNTDOWN_MAX`` retries are riding countdowns, further short
waits are parked in the database like long ones and the sweep sends them.

The count is read from the database at most once per ``REFRESH_S`` seconds
per process; between reads, this process adds the countdowns it issued, so
the cap can be overshot by at most what all processes issue in one refresh.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from webhooks.states import riding_countdown
from webhooks.storage.models import Delivery

__all__ = ["CountdownBudget", "riding_countdowns"]

REFRESH_S = 1.0


def riding_countdowns(connection: Connection, now: dt.datetime) -> int:
    """How many pending deliveries wait for a countdown message that is not yet due."""
    return connection.execute(
        select(func.count()).select_from(Delivery.__table__)
        .where(riding_countdown(Delivery.__table__, now))
    ).scalar_one()


class CountdownBudget:
    """Answers "may one more retry ride a countdown?" for this process."""

    def __init__(self, maximum: int):
        self.maximum = maximum
        self._lock = threading.Lock()
        self._counted = 0
        self._issued_since = 0
        self._read_at = float("-inf")

    def take(self, connection: Connection, now: dt.datetime) -> bool:
        """True (and count it) if the cap leaves room for one more countdown."""
        with self._lock:
            if time.monotonic() - self._read_at >= REFRESH_S:
                self._counted = riding_countdowns(connection, now)
                self._issued_since = 0
                self._read_at = time.monotonic()
            if self._counted + self._issued_since >= self.maximum:
                return False
            self._issued_since += 1
            return True
