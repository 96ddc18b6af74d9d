"""Retention's drop of a day of attempts at several sizes: ``python -m benchmarks.partition_drop``.

Step 5 of the purge scenario (benchmarks/scenarios/purge.py, ``day_drops``) on
its own, without the drains: creates (or empties) the database in
WEBHOOKS_DATABASE_URL (its name must contain ``bench``; PostgreSQL), migrates it
to the newest revision, then for each of ``--sizes`` seeds that many events
into one day long past, in a day partition of its own, and times retention's
drop of that day. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

DEFAULT_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/webhooks_bench_partitions"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.partition_drop")
    parser.add_argument("--sizes", default="10000,2000000",
                        help="events seeded into each day dropped, comma-separated")
    parser.add_argument("--repeats", type=int, default=3,
                        help="drops of the first size (the others: one each)")
    parser.add_argument("--finished", action="store_true",
                        help="mark each day's pending deliveries dead first: nothing kept")
    args = parser.parse_args(argv)

    from webhooks.storage.migrate import upgrade

    from . import history_seed, services
    from .scenarios.purge import day_drops

    url = services.fresh_bench_database(DEFAULT_URL)
    upgrade(url)
    history = history_seed.make_history("https://history.example.com/")
    sizes = tuple(int(size) for size in args.sizes.split(","))
    drops = day_drops(history, sizes, args.repeats, finished=args.finished)
    json.dump({"drops": drops, "load_average": list(os.getloadavg())}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
