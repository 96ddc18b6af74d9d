"""The benchmark harness's pure parts: the realistic scenario's delay mix, the emitters'
back-pressure, and the receiver's per-path delay (a local socket, no other server)."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time

import pytest

from benchmarks import mix
from benchmarks.backpressure import may_emit, run_gated
from benchmarks.receiver import ReceiverClient, _Server


def test_log_spread_runs_from_low_to_high_evenly_on_a_log_scale():
    delays = mix.log_spread(100, 50, 1000)
    assert len(delays) == 100
    assert delays[0] == pytest.approx(0.050) and delays[-1] == pytest.approx(1.0)
    ratios = {round(b / a, 9) for a, b in zip(delays, delays[1:])}
    assert len(ratios) == 1  # one constant step
    assert sum(delays) / len(delays) == pytest.approx(0.319, abs=0.002)
    assert mix.log_spread(3, 200, 200) == [0.2, 0.2, 0.2]
    assert mix.log_spread(3, 0, 100) == [0.0, 0.05, 0.1]


def test_the_deal_is_fixed_and_keeps_every_delay():
    delays = mix.log_spread(100, 50, 1000)
    dealt = mix.dealt(delays)
    assert dealt == mix.dealt(delays)  # the same every run
    assert sorted(dealt) == delays and dealt != delays


def test_parse_range_ms():
    assert mix.parse_range_ms("50-1000") == (50.0, 1000.0)
    assert mix.parse_range_ms("200") == (200.0, 200.0)
    for bad in ("1000-50", "fast", "-5"):
        with pytest.raises(ValueError):
            mix.parse_range_ms(bad)


def test_interleave_is_round_robin():
    assert mix.interleave([[1, 2, 3], ["a", "b"], []]) == [1, "a", 2, "b", 3]


def test_concurrency_bound():
    assert mix.concurrency_bound(32, [0.2] * 100) == pytest.approx(160)
    assert mix.concurrency_bound(32, [0.0, 0.0]) is None


def test_may_emit_splits_the_backlog_between_emitters():
    assert may_emit(499, 0, backlog=1000, share=2)
    assert not may_emit(500, 0, backlog=1000, share=2)
    assert may_emit(500, 1, backlog=1000, share=2)


def test_run_gated_waits_for_deliveries_and_stops_in_time():
    delivered = {"n": 0}
    calls = []
    # Nothing is ever delivered: the emitter must stop at the backlog, then at the deadline.
    made = run_gated(calls.append, lambda: delivered["n"], backlog=50, share=1, seconds=0.3,
                     check_every=10)
    assert made == len(calls) == 50
    delivered["n"] = 10_000
    assert run_gated(lambda _i: None, lambda: delivered["n"], backlog=50, share=1, seconds=5,
                     max_calls=200) == 200


def test_emitter_threads_share_the_backlog_and_the_call_numbers(monkeypatch, capsys):
    """--threads 4: each thread holds a quarter of the process's backlog; the call numbers
    interleave (the accounts stay round robin), none twice; the total is printed."""
    import argparse

    from benchmarks import emitter

    class NothingDelivered:
        def __init__(self, *_):
            pass

        def count(self, _path):
            return 0

    monkeypatch.setattr(emitter, "ReceiverClient", NothingDelivered)
    calls, lock = [], threading.Lock()

    def emit_one(i):
        with lock:
            calls.append(i)

    args = argparse.Namespace(receiver_port=1, path="/p", backlog=1000, share=1, seconds=0.3)
    emitter.gated(args, emit_one, threads=4)
    # Each thread checks every 20 calls and stops once 4 x its calls reach the backlog.
    assert sorted(calls) == list(range(1040))
    assert "EMITTED 1040" in capsys.readouterr().out


@pytest.fixture
def receiver():
    """The receiver's server in a thread of this process (``serve`` wants the main thread)."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(
        asyncio.start_server(_Server("Service").handle, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield ReceiverClient("127.0.0.1", server.sockets[0].getsockname()[1])
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    server.close()
    loop.run_until_complete(server.wait_closed())
    loop.close()


def _post(client: ReceiverClient, path: str) -> tuple[int, float]:
    """POST to ``path``; the status and the seconds it took to answer."""
    connection = http.client.HTTPConnection(client.host, client.port, timeout=10)
    started = time.perf_counter()
    connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
    status = connection.getresponse().status
    connection.close()
    return status, time.perf_counter() - started


def test_a_delayed_path_answers_late_without_holding_the_others(receiver):
    receiver.set_delays({"/slow": 0.5})
    slow: list = []
    waiting = threading.Thread(target=lambda: slow.append(_post(receiver, "/slow")))
    waiting.start()
    time.sleep(0.1)  # the slow request is being held now
    status, seconds = _post(receiver, "/fast")
    assert status == 200 and seconds < 0.3
    assert receiver.count("/slow") == 1 and not slow  # arrived, not answered yet
    waiting.join(5)
    assert slow[0][0] == 200 and slow[0][1] >= 0.5
    receiver.reset()  # forgets the delay too
    assert _post(receiver, "/slow")[1] < 0.3


def test_the_pace_receiver_serves_its_capacity_per_second_and_429s_the_rest():
    from benchmarks.scenarios.pace import LimitedReceiver

    receiver = LimitedReceiver(3, "X-Service-Delivery-Id")
    try:
        answers = []
        for n in range(5):
            connection = http.client.HTTPConnection("127.0.0.1", receiver.server.server_address[1])
            connection.request("POST", "/limited", body=b"{}",
                               headers={"X-Service-Delivery-Id": f"d{n}"})
            response = connection.getresponse()
            answers.append((response.status, response.getheader("Retry-After")))
            connection.close()
    finally:
        receiver.stop()
    assert answers[:3] == [(200, None)] * 3 and answers[3:] == [(429, "1")] * 2
    assert (receiver.accepted, receiver.refused, len(receiver.delivered)) == (3, 2, 3)


def test_the_ordering_scenario_checks_each_key_s_order():
    from benchmarks.receiver import Arrival
    from benchmarks.scenarios.ordering import _in_order

    ids = ["a0", "b0", "a1", "b1"]  # two keys, round-robin: a*, b*
    def at(*order):
        return [Arrival(float(t), "/ordered", d, "-", 1) for t, d in enumerate(order)]
    assert _in_order(at("a0", "b0", "b1", "a1"), ids, 2)
    assert not _in_order(at("a1", "a0", "b0", "b1"), ids, 2)


def test_the_ordering_latency_leg_compares_the_phases_and_counts_the_stuck_key_s_deliveries():
    from benchmarks.receiver import Arrival
    from benchmarks.scenarios.ordering import LATENCY_KEYS, compare

    alone = {"p50_ms": 10.0, "p99_ms": 20.0, "missing": 0}
    beside = {"p50_ms": 12.0, "p99_ms": 50.0, "missing": 1}
    head_retried = [Arrival(float(t), "/ordered-failing", "head", "-", t + 1) for t in range(3)]
    run = compare(alone, beside, head_retried + [Arrival(9.0, "/ordered-failing", "next", "-", 1)])
    assert set(run) == set(LATENCY_KEYS)
    assert run["p50_ratio"] == pytest.approx(1.2) and run["p99_ratio"] == pytest.approx(2.5)
    assert (run["beside_missing"], run["failing_attempts"]) == (1, 4)
    assert run["failing_deliveries_attempted"] == 2  # the key's second was sent: out of order
    assert compare(alone, {**beside, "p99_ms": None}, [])["p99_ratio"] is None


def test_proc_stat_counts_all_but_idle_and_iowait_as_busy():
    from benchmarks.resources import _TICKS, parse_proc_stat

    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks
    text = "cpu  300 20 100 500 50 10 15 5 7 0\ncpu0 150 10 50 250 25 5 8 2 3 0\nintr 1 2\n"
    busy, total = parse_proc_stat(text)
    assert busy == pytest.approx((300 + 20 + 100 + 10 + 15) / _TICKS)  # not idle, iowait, steal
    assert total == pytest.approx(1000 / _TICKS)  # guest is inside user: not added twice
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1 2\n")


def test_the_meter_gives_the_machine_s_cpu_per_delivery_and_its_busy_cores(monkeypatch):
    from benchmarks import meter as meter_module

    class NoBackends:
        def sample(self):
            pass

        def spent_s(self):
            return 0.0

    readings = iter([(10.0, 100.0), (13.0, 104.0)])  # 3 s busy of 4 s of all cores
    resources = meter_module.resources
    monkeypatch.setattr(resources, "machine_cpu", lambda: next(readings))
    monkeypatch.setattr(resources, "database_counters", lambda *_: {"commits": 0, "sessions": None})
    monkeypatch.setattr(meter_module.os, "cpu_count", lambda: 2)
    meter = meter_module.Meter(None, "bench", {}, wal=False)
    meter.backends = NoBackends()
    meter.start()
    meter.stop()
    figures = meter.per_delivery(1000)
    assert figures["machine_cpu_ms_per_delivery"] == pytest.approx(3.0)
    assert figures["machine_busy_cores"] == pytest.approx(1.5)  # 3 of 4 core-seconds, of 2 cores


def test_the_flush_probe_times_real_flushes_in_the_folder_it_is_given(tmp_path):
    from benchmarks.flush_probe import flush_probe

    with flush_probe(str(tmp_path)) as probe:
        deadline = time.monotonic() + 5
        while len(probe.durations) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    figures = probe.figures()
    assert figures["flushes"] >= 3
    assert 0 < figures["flush_p50_ms"] <= figures["flush_p99_ms"] <= figures["flush_max_ms"]
    assert figures["flush_directory"] == str(tmp_path)
    assert list(tmp_path.iterdir()) == []  # the scratch file is removed


def test_only_runs_whose_flushes_stayed_under_10_ms_count_for_the_latency_target():
    from benchmarks.scenarios.latency import calm_runs

    runs = [{"p99_ms": 12.0, "flush_p99_ms": 2.0, "flush_max_ms": 7.0, "flushes_under_10_ms": True},
            {"p99_ms": 140.0, "flush_p99_ms": 30.0, "flush_max_ms": 95.0,
             "flushes_under_10_ms": False},
            {"p99_ms": 16.0, "flush_p99_ms": 3.0, "flush_max_ms": 9.0, "flushes_under_10_ms": True}]
    calm = calm_runs(runs)
    assert calm["calm_runs"] == 2
    assert calm["calm_p99_ms"] == 14.0
    assert [r["flush_max_ms"] for r in calm["runs_with_flushes"]] == [7.0, 95.0, 9.0]
