"""Account for every delivery at the end of a fault case, and report duplicates.

``account()`` reads the deliveries and attempts tables (the source of
truth) and what the receiver saw, checks that nothing was lost or recorded
twice, and returns an :class:`Accounting` that the test prints and asserts
on. Every accounting is also kept in ``REPORTS`` (printed in pytest's
terminal summary by tests/fault/conftest.py) and, when
``WEBHOOKS_RELIABILITY_REPORT`` names a file, appended to it as one JSON line,
which is where the numbers of docs/reliability.md come from.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from sqlalchemy import text

__all__ = ["Accounting", "account", "REPORTS", "report"]

REPORTS: list["Accounting"] = []
STATUSES = ("done", "failed", "dead", "paused", "pending", "sending")


@dataclass
class Accounting:
    """What became of the deliveries of one case."""

    case: str
    created: int
    statuses: dict
    attempts_recorded: int
    requests_received: int
    duplicates: int               # requests beyond the first for one (delivery, attempt number)
    duplicated_deliveries: int    # deliveries that saw at least one duplicate
    seconds: float = 0.0
    problems: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)

    def line(self) -> str:
        shown = ", ".join(f"{name} {self.statuses.get(name, 0)}" for name in STATUSES
                          if self.statuses.get(name))
        extra = "".join(f", {k} {v}" for k, v in self.notes.items())
        return (
            f"{self.case}: {self.created} deliveries ({shown}); {self.attempts_recorded} attempts "
            f"recorded, {self.requests_received} requests received, {self.duplicates} duplicate "
            f"attempts ({self.duplicated_deliveries} deliveries); {self.seconds:.1f} s{extra}"
        )


def _rows(connection, sql: str, **params):
    return connection.execute(text(sql), params).all()


def account(case: str, arrivals, *, expected: dict | None = None, allowed=("done",),
            seconds: float = 0.0, notes: dict | None = None) -> Accounting:
    """Account for every delivery in the (per-test) database.

    ``arrivals`` are the receiver's records (fastreceiver.Arrival). A
    delivery must end in a status of ``allowed``, or the one ``expected``
    names for it (delivery id -> status). Checked for every delivery:
    its attempts are numbered 1..attempt_count with no gap and none twice;
    every attempt that recorded a response arrived at the receiver (when the
    delivery's endpoint is the receiver); nothing is left ``sending``.
    ``problems`` lists every violation; the caller asserts it is empty.
    """
    from webhooks.storage.db import get_engine

    with get_engine().connect() as connection:
        deliveries = _rows(connection, "SELECT id, status, attempt_count FROM deliveries")
        attempts = _rows(
            connection,
            "SELECT delivery_id, number, status_code FROM attempts ORDER BY delivery_id, number",
        )
    by_delivery = defaultdict(list)
    for delivery_id, number, status_code in attempts:
        by_delivery[delivery_id].append((number, status_code))
    received = Counter((a.delivery_id, a.attempt) for a in arrivals)
    ours = {row.id for row in deliveries}
    problems = []
    statuses = Counter()
    for delivery_id, status, attempt_count in deliveries:
        statuses[status] += 1
        want = (expected or {}).get(delivery_id)
        if want is not None and status != want:
            problems.append(f"{delivery_id}: {status}, expected {want}")
        elif want is None and status not in allowed:
            problems.append(f"{delivery_id}: {status}, expected one of {allowed}")
        numbers = [n for n, _ in by_delivery[delivery_id]]
        settled = status in ("done", "failed", "dead", "pending", "paused")
        if settled and numbers != list(range(1, attempt_count + 1)):
            problems.append(f"{delivery_id}: attempts {numbers} but attempt_count {attempt_count}")
    duplicates = sum(n - 1 for n in received.values() if n > 1)
    duplicated = len({d for (d, _), n in received.items() if n > 1})
    strangers = {d for d, _ in received if d and d not in ours}
    if strangers:
        problems.append(f"{len(strangers)} requests name deliveries that do not exist")
    result = Accounting(
        case=case, created=len(deliveries), statuses=dict(statuses),
        attempts_recorded=len(attempts), requests_received=sum(received.values()),
        duplicates=duplicates, duplicated_deliveries=duplicated, seconds=seconds,
        problems=problems, notes=dict(notes or {}),
    )
    return result


def missing_arrivals(arrivals, delivery_ids=None) -> list[str]:
    """Attempts recorded with a response (status code) that never reached the receiver."""
    from webhooks.storage.db import get_engine

    with get_engine().connect() as connection:
        rows = _rows(connection, "SELECT delivery_id, number FROM attempts WHERE status_code IS NOT NULL")
    seen = {(a.delivery_id, a.attempt) for a in arrivals}
    return [f"{d}#{n}" for d, n in rows
            if (delivery_ids is None or d in delivery_ids) and (d, n) not in seen]


def report(accounting: Accounting) -> Accounting:
    """Print the accounting, keep it for the terminal summary, append it to the report file."""
    print(accounting.line())
    REPORTS.append(accounting)
    path = os.environ.get("WEBHOOKS_RELIABILITY_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({k: v for k, v in asdict(accounting).items()}) + "\n")
    return accounting
