"""Receivers that misbehave, through the whole stack: every attempt ends by WEBHOOKS_TIMEOUT
(2 s here), the worker is never stuck, and each delivery ends as the policy says."""

from __future__ import annotations

import socket

import pytest

from tests.support.fastreceiver import CloseMidResponse, Garbage, Hang, Huge, Redirect, Trickle
from tests.support.ledger import account, missing_arrivals, report
from tests.support.stack import wait_until

from .helpers import Clock, attempt_rows, emit_event_to, statuses

pytestmark = [pytest.mark.fault, pytest.mark.integration]

TIMEOUT_MS = 2000
SLACK_MS = 1500  # scheduling on a loaded 2-core machine; a per-read time-out would need 1000 s


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_misbehaving_receivers_through_the_whole_stack(stack, fault_receiver):
    clock = Clock()
    r = fault_receiver
    target = r.url("/private-target")
    # path: (rule, status the delivery must end in, what attempt 1 must record)
    cases = {
        "/hang": (lambda a: Hang(30) if a.attempt == 1 else 200, "done", "timeout"),
        "/trickle": (lambda a: Trickle(1.0) if a.attempt == 1 else 200, "done", "timeout"),
        "/close-mid": (lambda a: CloseMidResponse() if a.attempt == 1 else 200, "done",
                       "connection error"),
        "/garbage": (lambda a: Garbage() if a.attempt == 1 else 200, "done", "protocol error"),
        "/huge": (Huge(), "done", 200),
        "/gone": (410, "failed", 410),
        "/redirect": (Redirect(target, 307), "dead", 307),
    }
    urls = {path: r.url(path) for path in cases}
    urls["/refused"] = f"http://127.0.0.1:{_closed_port()}/refused"
    for path, (rule, _, _) in cases.items():
        r.rule(path, rule)
    delivery_of = {path: emit_event_to(url) for path, url in urls.items()}
    expected = {path: end for path, (_, end, _) in cases.items()}
    expected["/refused"] = "dead"

    # The worker is not stuck behind them: an ordinary delivery goes through meanwhile.
    ordinary = emit_event_to(r.url("/ordinary"))
    wait_until(lambda: statuses([ordinary]).get(ordinary) == "done", timeout=10,
               what="an ordinary delivery while four attempts misbehave")

    finished = ("done", "failed", "dead")
    wait_until(lambda: all(s in finished for s in statuses().values()), timeout=40,
               what=f"every delivery finished ({statuses()})")
    ends = {path: statuses([d])[d] for path, d in delivery_of.items()}
    assert ends == expected

    firsts = {path: attempt_rows(d)[0] for path, d in delivery_of.items()}
    for path, (_, _, first) in cases.items():
        number, status_code, error, outcome, duration_ms = firsts[path]
        if isinstance(first, int):
            assert (status_code, error) == (first, None), path
        else:
            assert status_code is None and error.startswith(first), (path, error)
        assert duration_ms <= TIMEOUT_MS + SLACK_MS, (path, duration_ms)
    assert firsts["/refused"].error == "connection refused"
    # The trickle sent a byte each second: each read was quick, the attempt still ended at 2 s.
    assert firsts["/trickle"].duration_ms >= TIMEOUT_MS - 100
    # 10 MB answered: only the first KiB is kept, the rest never read.
    assert len(attempt_rows(delivery_of["/huge"])) == 1
    # Redirects are never followed: every attempt got the 307, the target got nothing.
    assert [row.status_code for row in attempt_rows(delivery_of["/redirect"])] == [307] * 4
    assert r.count("/private-target") == 0

    arrivals = r.arrivals()
    result = report(account("misbehaving receivers", arrivals, seconds=clock(),
                            allowed=("done", "failed", "dead"),
                            notes={"slowest attempt ms": max(f.duration_ms for f in firsts.values())}))
    assert result.problems == [] and not missing_arrivals(arrivals)
    assert result.duplicates == 0
