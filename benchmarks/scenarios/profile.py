"""Scenario "profile" (run on request: ``--scenarios profile``): where a delivery's CPU goes.

Two drains of ``2 * cost_deliveries`` messages with the scenario pool (the
Procfile's): the ceiling's bare task (ceiling_app.py), then the service's
deliveries to one fast subscription, each with py-spy (``pip install py-spy``)
sampling the worker's process group from the first arrival to the last.
py-spy samples only the thread that holds the GIL (``--gil``): a thread
waiting for a socket, a lock or a pooled connection costs no CPU and is not
counted. Each sample is ``1 / SAMPLES_PER_S`` s of Python running; divided
by the deliveries drained it gives milliseconds per delivery, per part of the
service (``profile_categories.py``: the first frame from the leaf up that
belongs to a known part names it). What the worker group spent in the same
window (``/proc``) beyond that is CPU outside the GIL: the kernel's socket
work, and C code that released the GIL. The raw stacks are kept with
``--keep-logs`` for a flame graph (py-spy's raw format is collapsed stacks).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from .. import resources
from ..context import Context
from ..profile_categories import categorise
from . import Row
from .drain import drain_timeout

PATH = "/profile"
SAMPLES_PER_S = 250


def _start_pyspy(pid: int, output: Path) -> subprocess.Popen:
    """py-spy recording ``pid`` and its children into ``output`` until interrupted."""
    binary = shutil.which("py-spy")
    if binary is None:
        raise RuntimeError("py-spy is not installed: pip install py-spy")
    return subprocess.Popen(
        [binary, "record", "--pid", str(pid), "--subprocesses", "--nonblocking", "--gil",
         "--rate", str(SAMPLES_PER_S), "--format", "raw", "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_pyspy(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    process.wait(timeout=60)


def read_stacks(path: Path) -> Counter:
    """The collapsed stacks py-spy wrote: ``frame;frame;... count`` per line."""
    stacks: Counter = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


OUTSIDE_GIL = "outside the GIL (kernel, C code)"


def breakdown(stacks: Counter, deliveries: int, cpu_ms_per_delivery: float) -> dict[str, float]:
    """Milliseconds of Python per delivery for each part, then the rest of the worker's CPU
    (``cpu_ms_per_delivery``, from /proc) as :data:`OUTSIDE_GIL`."""
    by_category: Counter = Counter()
    for stack, count in stacks.items():
        by_category[categorise(stack.split(";"))] += count
    per_sample_ms = 1000.0 / SAMPLES_PER_S / max(deliveries, 1)
    parts = {name: round(count * per_sample_ms, 3) for name, count in by_category.most_common()}
    parts[OUTSIDE_GIL] = round(max(0.0, cpu_ms_per_delivery - sum(parts.values())), 3)
    return parts


def _fill_service(ctx: Context, n: int) -> None:
    ctx.queue_deliveries(PATH, n, name="profile")


def _fill_ceiling(ctx: Context, n: int) -> None:
    from ..ceiling_app import send_many

    send_many(n)


def _profile_drain(ctx: Context, name: str, n: int, fill, start) -> dict:
    """Fill the queue with ``n`` messages, start a worker, profile it while it drains."""
    ctx.reset()
    fill(ctx, n)
    output = ctx.log_dir / f"profile-{name}-stacks.txt"
    worker = start()
    try:
        ctx.receiver.wait_for(1, PATH, timeout=60, interval=0.01)
        spy = _start_pyspy(worker.pid, output)
        cpu_before, started = resources.group_cpu_s(worker.pid), time.monotonic()
        ctx.receiver.wait_for(n, PATH, timeout=drain_timeout(n), interval=0.05)
        seconds = time.monotonic() - started
        cpu = resources.group_cpu_s(worker.pid) - cpu_before
        _stop_pyspy(spy)
    finally:
        ctx.stop(worker)
    drained = ctx.receiver.count(PATH) - 1  # counted from the first arrival on
    cpu_ms = cpu * 1000 / max(drained, 1)
    return {"deliveries": drained, "rate_per_s": round(drained / seconds, 1) if seconds else None,
            "worker_cpu_ms_per_delivery": round(cpu_ms, 3),
            "ms_per_delivery_by_part": breakdown(read_stacks(output), drained, cpu_ms),
            "stacks": str(output)}


def run(ctx: Context) -> dict:
    n, pool = ctx.sizes.cost_deliveries * 2, ctx.options.scenario_pool
    result = {
        "pool": pool.label,
        "ceiling": _profile_drain(ctx, "ceiling", n, _fill_ceiling,
                                  lambda: ctx.start_ceiling_worker(pool, PATH)),
        "service": _profile_drain(ctx, "service", n, _fill_service,
                                  lambda: ctx.start_worker(pool, "profile")),
    }
    print(f"  {result}", flush=True)
    ctx.results["profile"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("profile")
    if not r:
        return []
    out = []
    for worker in ("ceiling", "service"):
        figures = r[worker]
        out.append(Row("profile", f"{worker} ({r['pool']}): worker CPU per delivery",
                       figures["worker_cpu_ms_per_delivery"], "ms"))
        out.extend(Row("profile", f"  of which {part}", ms, "ms")
                   for part, ms in figures["ms_per_delivery_by_part"].items())
    return out
