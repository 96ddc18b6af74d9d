"""``python -m cluster [--short] [--faults a,b] [--seconds N] [--rate R] [--cpu-hog [N]]
[--[no-]ceiling] [--cores N] [--utilisation U] [--paths P,Q]``: one run.

Prints the progress, each fault's figures, and as its last line
``cluster: events E, delivered D, lost L, stuck S, duplicates U, faults F``;
exits 0 only when L and S are 0. Before it (unless ``--short`` or ``--no-ceiling``):
what the load cost the PostgreSQL primary and its replica per delivery, and the ceiling
that sets (cluster/ceiling.py, docs/scaling.md "The cluster's ceiling"). Needs root (network namespaces), PostgreSQL
15's binaries, redis-server, nftables and faketime (scripts/cluster-setup.sh
installs the Debian packages; with ``--cpu-hog`` also stress-ng).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from . import faults as schedule
from .probe import PATHS
from .scenario import CeilingMeter, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster")
    parser.add_argument("--short", action="store_true", help="the short run of make test")
    parser.add_argument("--faults", help="comma-separated fault names (default: all)")
    parser.add_argument("--seconds", type=float, help="seconds of load")
    parser.add_argument("--rate", type=float, help="events a second from each emitter")
    parser.add_argument("--cpu-hog", type=int, nargs="?", const=2 * (os.cpu_count() or 1),
                        default=0, metavar="N", help="N processes spinning (stress-ng) beside "
                        "the cluster, from the load's start to the end (default N: 2 per CPU)")
    parser.add_argument("--ceiling", action=argparse.BooleanOptionalAction, default=None,
                        help="measure what the load costs the PostgreSQL primary and replica, "
                        "per delivery, and print the ceiling they set (default: on, off "
                        "with --short); --faults none for a clean figure")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="the ceiling of a primary of N cores (default: this machine's)")
    parser.add_argument("--utilisation", type=float, default=0.7, metavar="U",
                        help="the fraction of the primary's cores the ceiling may use "
                        "(default 0.7)")
    parser.add_argument("--paths", default=",".join(PATHS), metavar="P,Q",
                        help="the receiver paths each event goes to, one subscription each "
                        f"(default {','.join(PATHS)}; ok alone: one attempt per delivery)")
    args = parser.parse_args(argv)
    if set(args.paths.split(",")) - set(PATHS):
        parser.error(f"--paths: each one of {', '.join(PATHS)}")
    if args.cpu_hog and shutil.which("stress-ng") is None:
        print("cluster: --cpu-hog needs stress-ng (bash scripts/cluster-setup.sh --cpu-hog "
              "installs it)", file=sys.stderr)
        return 2
    faults = schedule.SHORT if args.short else schedule.FULL
    if args.faults == "none":
        faults = ()
    elif args.faults:
        faults = schedule.schedule_named(args.faults)
    seconds = args.seconds or (schedule.SHORT_LOAD_S if args.short else schedule.FULL_LOAD_S)
    rate = args.rate or (2.0 if args.short else 4.0)
    def log(line):
        print(time.strftime("%H:%M:%S "), line, sep="", flush=True)

    metered = not args.short if args.ceiling is None else args.ceiling
    meter = CeilingMeter(args.cores, args.utilisation, log=log) if metered else None
    try:
        verdict, figures = run(faults, load_seconds=seconds, rate=rate,
                               drain_timeout=120 if args.short else 900,
                               drain_stall=60 if args.short else 90, cpu_hog=args.cpu_hog,
                               meter=meter, paths=args.paths, log=log)
    except KeyboardInterrupt:
        print("cluster: interrupted; everything torn down", flush=True)
        return 130
    for fault in figures["faults"]:
        print(f"cluster: fault {fault['name']}: held {fault['hold_s']} s, deliveries/s "
              f"before {fault['before_per_s']}, during {fault['during_per_s']}, after "
              f"{fault['after_per_s']}, recovered {fault['recover_s']} s after the repair, "
              f"worst /ok wait {fault['worst_wait_s']} s, web reads {fault['reads_ok']} ok "
              f"({fault['reads_failed_over']} failed over) {fault['reads_failed']} failed, "
              f"duplicates {verdict.explained.get(fault['name'], 0)}")
    print(f"cluster: throughput {figures['throughput_per_s']} deliveries/s over "
          f"{figures['load_s']} s; /ok latency p50 {figures['ok_latency_p50_s']} s, "
          f"max {figures['ok_latency_max_s']} s")
    if verdict.unexplained:
        print(f"cluster: {len(verdict.unexplained)} duplicates outside every fault's window: "
              f"{verdict.unexplained[:5]}")
    for url, (stored, expected) in verdict.counters.items():
        print(f"cluster: pause counter of {url}: {stored} stored, {expected} from the attempts"
              + ("" if stored == expected else "  <-- differs"))
    if verdict.sweeps is not None:
        print(verdict.sweeps.line())
    for why, what in verdict.lost_detail:
        print(f"cluster: lost: {why}: {what}")
    for status, what in verdict.stuck_detail:
        print(f"cluster: stuck: {status}: {what}")
    passed = verdict.lost == 0 and verdict.stuck == 0
    if args.short and passed:
        shutil.rmtree(figures["run_dir"], ignore_errors=True)  # make test runs it every time
    else:
        print(f"cluster: logs and figures.json in {figures['run_dir']}")
    print(verdict.line(), flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
