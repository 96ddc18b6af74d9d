"""The checker: what the primary and the receivers' logs say at the end of a run.

``verdict()`` is pure: it takes the rows read from the primary, the
emitters' and receivers' JSON lines and the faults' time windows, and
counts:

- events E: events the emitters got an id for (an emit that never succeeded
  counts as lost);
- delivered D: deliveries ``done`` (delivered) in the database;
- lost L: an emitted event missing from the database, a subscription that
  wanted it without a delivery, a delivery ``done`` that no receiver
  answered 2xx, a ``dead`` one short of the ladder's attempts, or one that
  ended otherwise (``failed``, ``paused``);
- stuck S: deliveries still ``sending``, or ``pending`` past their due time
  (plus ``stuck_slack`` seconds);
- duplicates U: 2xx answers beyond the first for one delivery, each
  explained by the latest fault whose window (its start to its end plus
  ``explain_after`` s) holds it, or unexplained;
- pause counters: each subscription's ``consecutive_failures`` against its
  attempts: the failures recorded after its last success, by attempt id;
- the sweep's runs per interval (:func:`sweep_runs`): each slot of
  WEBHOOKS_SWEEP_INTERVAL from the load's start to its end, with the run that
  claimed it in ``scheduled_runs`` (at most one: its key), that is the sweep
  that started in it: its own send's, or a late one's (a run that starts after
  its own slot ended claims the slot of now, webhooks/storage/scheduled_runs.py);
  and the sends refused; against the workers' logs, where each refused send
  and each late run says so.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Verdict", "verdict", "read_lines", "read_primary", "sweep_runs", "SweepRuns"]


@dataclass
class Verdict:
    events: int = 0
    delivered: int = 0
    lost: int = 0
    stuck: int = 0
    duplicates: int = 0
    faults: int = 0
    explained: dict = field(default_factory=dict)   # fault name -> duplicates in its window
    unexplained: list = field(default_factory=list)  # delivery ids
    lost_detail: list = field(default_factory=list)  # (why, id), at most 20 kept
    stuck_detail: list = field(default_factory=list)
    counters: dict = field(default_factory=dict)     # subscription url -> (stored, expected)
    sweeps: "SweepRuns | None" = None

    @property
    def counters_exact(self) -> bool:
        return all(stored == expected for stored, expected in self.counters.values())

    def line(self) -> str:
        return (f"cluster: events {self.events}, delivered {self.delivered}, lost {self.lost}, "
                f"stuck {self.stuck}, duplicates {self.duplicates}, faults {self.faults}")

    def _lose(self, why: str, what: str) -> None:
        self.lost += 1
        if len(self.lost_detail) < 20:
            self.lost_detail.append((why, what))


def read_lines(paths) -> list[dict]:
    """Every JSON line of ``paths`` (a torn last line of a killed writer is skipped)."""
    lines = []
    for path in paths:
        for raw in Path(path).read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
    return lines


def read_primary(url: str) -> dict:
    """The rows the verdict needs, read from the primary in one snapshot."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="REPEATABLE READ")
    with engine.begin() as connection:
        rows = {
            "now": connection.execute(text("SELECT clock_timestamp()")).scalar_one().timestamp(),
            "events": {r[0] for r in connection.execute(text("SELECT id FROM events"))},
            "subscriptions": [dict(r._mapping) for r in connection.execute(text(
                "SELECT id, url, event_types, consecutive_failures FROM subscriptions "
                "WHERE deleted_at IS NULL"))],
            "deliveries": [dict(r._mapping) for r in connection.execute(text(
                "SELECT id, event_id, subscription_id, status, attempt_count, "
                "extract(epoch FROM next_attempt_at) AS due FROM deliveries"))],
            "attempts": [dict(r._mapping) for r in connection.execute(text(
                "SELECT a.id, d.subscription_id, a.outcome FROM attempts a "
                "JOIN deliveries d ON d.id = a.delivery_id ORDER BY a.id"))],
            "sweep_runs": [dict(r._mapping) for r in connection.execute(text(
                "SELECT extract(epoch FROM slot_start) AS slot, run_id, refused, "
                "extract(epoch FROM claimed_at - slot_start) AS into FROM scheduled_runs "
                "WHERE task = 'webhooks.sweep' ORDER BY slot_start"))],
        }
    engine.dispose()
    return rows


def verdict(primary: dict, emitted: list[dict], received: list[dict], faults: list[dict], *,
            max_attempts: int, explain_after: float, stuck_slack: float) -> Verdict:
    """Count E, D, L, S, U and the pause counters (see the module)."""
    result = Verdict(faults=len(faults))
    emits = [line for line in emitted if "key" in line]
    result.events = sum(1 for line in emits if line.get("event"))
    for line in emits:
        if not line.get("event"):
            result._lose("emit never succeeded", line["key"])
        elif line["event"] not in primary["events"]:
            result._lose("event not stored", line["event"])

    by_event = defaultdict(set)
    for delivery in primary["deliveries"]:
        by_event[delivery["event_id"]].add(delivery["subscription_id"])
    wanting = [s["id"] for s in primary["subscriptions"] if not s["event_types"]
               or "email.sent" in s["event_types"]]
    for line in emits:
        if line.get("event") in primary["events"]:
            for missing in set(wanting) - by_event[line["event"]]:
                result._lose("no delivery for a subscription", f"{line['event']}/{missing}")

    answered_2xx = Counter(line["delivery"] for line in received if 200 <= line["status"] < 300)
    for delivery in primary["deliveries"]:
        status = delivery["status"]
        if status == "done":
            result.delivered += 1
            if not answered_2xx[delivery["id"]]:
                result._lose("delivered but no 2xx at a receiver", delivery["id"])
        elif status == "dead":
            if delivery["attempt_count"] < max_attempts:
                result._lose("dead before the ladder's end", delivery["id"])
        elif status == "sending" or (status == "pending" and (
                delivery["due"] is None or float(delivery["due"]) < primary["now"] - stuck_slack)):
            result.stuck += 1
            if len(result.stuck_detail) < 20:
                result.stuck_detail.append((status, delivery["id"]))
        elif status != "pending":
            result._lose(f"ended {status}", delivery["id"])

    _count_duplicates(result, received, faults, explain_after)
    _check_counters(result, primary)
    return result


def _count_duplicates(result: Verdict, received: list[dict], faults: list[dict],
                      explain_after: float) -> None:
    seen = Counter()
    for line in sorted(received, key=lambda line: line["t"]):
        if not 200 <= line["status"] < 300:
            continue
        seen[line["delivery"]] += 1
        if seen[line["delivery"]] == 1:
            continue
        result.duplicates += 1
        # The latest fault begun before it whose window still holds it: windows overlap
        # (a fault's repair plus ``explain_after`` can reach into the next fault).
        holding = [f for f in faults if f["start"] <= line["t"] <= f["end"] + explain_after]
        cause = max(holding, key=lambda f: f["start"])["name"] if holding else None
        if cause is None:
            result.unexplained.append(line["delivery"])
        else:
            result.explained[cause] = result.explained.get(cause, 0) + 1


def _check_counters(result: Verdict, primary: dict) -> None:
    """Each counter against the failures recorded after the subscription's last success."""
    expected = Counter()
    for attempt in primary["attempts"]:  # in attempt-id order
        if attempt["outcome"] == "success":
            expected[attempt["subscription_id"]] = 0
        else:
            expected[attempt["subscription_id"]] += 1
    for subscription in primary["subscriptions"]:
        result.counters[subscription["url"]] = (subscription["consecutive_failures"],
                                                expected[subscription["id"]])


_REFUSED = re.compile(r"webhooks\.sweep: the run of slot \S+ was made already")
_LATE = re.compile(r"webhooks\.sweep: the run of slot \S+ \((\S+)\) starts ([\d.]+) s after "
                   r"its slot ended")


@dataclass
class SweepRuns:
    """The sweep's runs per slot of its interval over the load (see :func:`sweep_runs`)."""

    interval: float
    slots: int = 0          # slots that started within the load
    once: int = 0           # ... in which one sweep started (a row: its key allows no second)
    by_late: int = 0        # ... of those, by a late run sent for an earlier slot
    missed: dict = field(default_factory=dict)   # fault name (or "none") -> slots without one
    refused: int = 0        # sends refused because their slot's (or now's) sweep had started
    refused_in: dict = field(default_factory=dict)  # fault name -> refused sends
    refused_total: int = 0    # refused sends of the whole run (set-up and drain too)
    logged_refusals: int = 0  # the workers' log lines of refused sends (the whole run)
    late: int = 0             # runs that started after their slot ended (workers' logs)
    late_swept: int = 0       # ... that swept, in the slot of their start (the rest: refused)
    latest_s: float = 0.0     # the latest of them: seconds after their slot ended
    into_s: tuple = (0.0, 0.0)  # how far into its slot each sweep started (s): median, max

    def line(self) -> str:
        missed = ", ".join(f"{name} {count}" for name, count in self.missed.items())
        refused = ", ".join(f"{name} {count}" for name, count in self.refused_in.items())
        return (f"cluster: sweep runs per {self.interval:g} s interval: {self.slots} intervals, "
                f"{self.once} with one sweep started in it ({self.by_late} of them by a late "
                f"run; started {self.into_s[0]:g} s into it at the median, {self.into_s[1]:g} s "
                f"at most), none with two, {sum(self.missed.values())} with none"
                f"{f' ({missed})' if missed else ''}; {self.refused} sends refused "
                f"({refused or 'none in a fault'}); over the whole run {self.refused_total} "
                f"refused, {self.logged_refusals} in the workers' logs; {self.late} runs "
                f"started after their interval ended (the latest {self.latest_s:g} s after): "
                f"{self.late_swept} swept in the interval they started in, "
                f"{self.late - self.late_swept} refused (a sweep had started in it)")


def sweep_runs(rows: list[dict], interval: float, start: float, end: float,
               faults: list[dict], worker_log_text: str = "") -> SweepRuns:
    """Each slot of ``interval`` s starting within [``start``, ``end``] (Unix times): a sweep
    started in it (a row in ``scheduled_runs``; its key allows no second), or none, put
    down to the fault whose window holds the slot; the refused sends, likewise; and the
    late runs the workers logged (each once, by its Celery task id), those that swept
    being those that own a row."""
    result = SweepRuns(interval)
    ran = {round(float(row["slot"]) / interval): row for row in rows}
    late = {}
    for run_id, after in _LATE.findall(worker_log_text):
        late[run_id] = max(float(after), late.get(run_id, 0.0))
    first, last = int(-(-start // interval)), int(end // interval)
    into = []
    for index in range(first, last + 1):
        result.slots += 1
        cause = _fault_at(index * interval, interval, faults) or "none"
        row = ran.get(index)
        if row is None:
            result.missed[cause] = result.missed.get(cause, 0) + 1
            continue
        result.once += 1
        result.by_late += row["run_id"] in late
        into.append(float(row.get("into") or 0.0))
        if int(row["refused"]):
            result.refused += int(row["refused"])
            result.refused_in[cause] = result.refused_in.get(cause, 0) + int(row["refused"])
    result.refused_total = sum(int(row["refused"]) for row in rows)
    result.logged_refusals = len(_REFUSED.findall(worker_log_text))
    result.late = len(late)
    result.late_swept = len(late.keys() & {row["run_id"] for row in rows})
    result.latest_s = max(late.values(), default=0.0)
    if into:
        result.into_s = (round(statistics.median(into), 2), round(max(into), 2))
    return result


def _fault_at(slot: float, interval: float, faults: list[dict]) -> str | None:
    """The latest fault whose window (start to end) overlaps the slot."""
    holding = [f for f in faults if f["start"] < slot + interval and slot <= f["end"]]
    return max(holding, key=lambda f: f["start"])["name"] if holding else None
