"""The figures of a run, from the receivers' and emitters' logs (pure).

- throughput: deliveries completed per second (a delivery's first 2xx at a
  receiver), over the fault's hold before it, during it, and after its repair;
- time to recover: from the repair until the last ``/ok`` delivery of an
  event emitted while the fault held got its first 2xx (0 when none waited
  for the repair); ``/ok`` answers 200 at once, so any wait is the fault's;
- the worst wait: the longest time from emit to first 2xx of an ``/ok``
  delivery of an event emitted while the fault held;
- the emitters' reads through the web hosts while it held: answered 200,
  answered only by the second web host (failed over), or not at all;
- duplicates per fault come from the checker.
"""

from __future__ import annotations

__all__ = ["summarize"]


def summarize(windows: list[dict], received: list[dict], emitted: list[dict],
              load_started: float, load_ended: float) -> dict:
    first_2xx: dict[str, dict] = {}
    for line in sorted(received, key=lambda line: line["t"]):
        if 200 <= line["status"] < 300 and line["delivery"] not in first_2xx:
            first_2xx[line["delivery"]] = line
    done_at = sorted(line["t"] for line in first_2xx.values())
    emitted_at = {line["event"]: line["t"] for line in emitted if line.get("event")}
    ok_done = {line["event"]: line["t"] for line in first_2xx.values() if line["path"] == "/ok"}

    def rate(start: float, end: float) -> float:
        if end <= start:
            return 0.0
        return round(sum(1 for t in done_at if start <= t < end) / (end - start), 2)

    faults = []
    for window in windows:
        start, end = window["start"], window["end"]
        hold = end - start
        caught = [ok_done[event] for event, t in emitted_at.items()
                  if start <= t <= end and event in ok_done]
        waits = [ok_done[event] - t for event, t in emitted_at.items()
                 if start <= t <= end and event in ok_done]
        reads = [line for line in emitted if "web" in line and start <= line["t"] <= end]
        faults.append({
            "name": window["name"], "hold_s": round(hold, 1),
            "worst_wait_s": round(max(waits, default=0.0), 1),
            "reads_ok": sum(1 for r in reads if r["status"] == 200),
            "reads_failed_over": sum(1 for r in reads if r["status"] == 200 and r["failed_over"]),
            "reads_failed": sum(1 for r in reads if r["status"] != 200),
            "before_per_s": rate(start - hold, start), "during_per_s": rate(start, end),
            "after_per_s": rate(end, end + hold),
            "recover_s": round(max([0.0, *(t - end for t in caught)]), 1),
        })
    latencies = sorted(ok_done[e] - emitted_at[e] for e in ok_done if e in emitted_at)
    return {
        "load_s": round(load_ended - load_started, 1),
        "throughput_per_s": rate(load_started, load_ended),
        "ok_latency_p50_s": _quantile(latencies, 0.5), "ok_latency_max_s": _quantile(latencies, 1),
        "faults": faults,
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(q * (len(values) - 1)))], 2)
