"""The drain after the load (cluster/scenario.py): it waits as long as deliveries finish,
and gives up once none has finished for its stall time (what is left is then stuck)."""

from __future__ import annotations

import pytest

from cluster import scenario


class FakeTime:
    """``time.monotonic`` and ``time.sleep`` of the scenario: sleeping moves the clock."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def drain(tmp_path, monkeypatch):
    """``drain(counts, timeout, stall)``: the drain of a cluster whose probe answers the
    unfinished deliveries ``counts`` (one per check; the last one for ever after)."""
    clock = FakeTime()
    monkeypatch.setattr(scenario, "time", clock)
    cluster = scenario.Cluster(tmp_path, log=lambda line: None)
    monkeypatch.setattr(cluster, "url", lambda host: "postgresql://primary")

    def run(counts, timeout, stall):
        answers = iter(counts)
        last = {}

        def probe(host, *argv):
            last["n"] = next(answers, last.get("n"))
            return {"pending": last["n"]} if last["n"] else {}

        monkeypatch.setattr(cluster, "python", probe)
        return cluster.drain(timeout, stall)

    return run


def test_a_slow_drain_is_waited_for_while_deliveries_finish(drain):
    # 200 checks 2 s apart, one delivery fewer each time: 400 s, past any fixed 180 s.
    waited, left = drain(list(range(200, -1, -1)), timeout=900, stall=90)
    assert (waited, left) == (400.0, 0)


def test_a_drain_that_stops_moving_gives_up_after_the_stall_naming_what_is_left(drain):
    waited, left = drain([50, 40, 30], timeout=900, stall=90)
    assert (waited, left) == (94.0, 30)  # 30 left from the third check (4 s), then 90 s


def test_the_time_limit_ends_even_a_drain_that_moves(drain):
    waited, left = drain(list(range(1000, 0, -1)), timeout=100, stall=90)
    assert (waited, left) == (100.0, 951)  # 50 checks, 2 s apart
