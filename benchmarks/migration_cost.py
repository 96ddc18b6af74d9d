"""What migrations cost on a large table: ``python -m benchmarks.migration_cost``.

Creates (or empties) the database in WEBHOOKS_DATABASE_URL (its name must
contain ``bench``), migrates it to ``--base``, seeds ``--events`` events of
history (one delivery each) as the history scenario does, spread over the
``--hours`` before now, then runs each revision of ``--revisions`` on its own
and prints how long it took and what the database weighs after it. With
``--rollback N`` it then N times downgrades back to ``--base`` and upgrades
once more, each timed: the upgrade rehearsal of docs/upgrade.md.

Run it with nothing else using that database: 0004 and 0029 hold an ACCESS
EXCLUSIVE lock on attempts for their whole run, 0006 a SHARE lock on deliveries.

    python -m benchmarks.migration_cost --events 2000000                 # 0004-0006
    python -m benchmarks.migration_cost --base 0028 --revisions 0029 \\
        --events 1000000 --hours 720 --rollback 2                         # issue 43
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

DEFAULT_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/webhooks_bench_migrations"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.migration_cost")
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--base", default="0003", help="the revision seeded (0003)")
    parser.add_argument("--revisions", default="0004,0005,0006",
                        help="the revisions timed one by one, comma-separated (0004,0005,0006)")
    parser.add_argument("--hours", type=float, default=72.0,
                        help="hours before now the seeded rows are spread over (72)")
    parser.add_argument("--rollback", type=int, default=0, metavar="N",
                        help="then N times: downgrade to --base and upgrade again, each timed")
    args = parser.parse_args(argv)

    from webhooks.storage.migrate import upgrade

    from . import history_seed, services

    url = services.fresh_bench_database(DEFAULT_URL)
    upgrade(url, args.base)
    history = history_seed.make_history("https://history.example.com/")
    figures: dict = {"events": args.events, "hours": args.hours,
                     "seed_s": round(history_seed.seed_events(history, args.events,
                                                              hours=args.hours), 1)}
    _vacuum(url)
    figures[args.base] = {**history_seed.database_size(), "rows": _rows(url)}
    revisions = [revision for revision in args.revisions.split(",") if revision]
    for revision in revisions:
        figures[revision] = _timed(lambda: upgrade(url, revision))
        print(revision, figures[revision], flush=True)
    for cycle in range(1, args.rollback + 1):
        figures[f"downgrade to {args.base} ({cycle})"] = _timed(lambda: _downgrade(url, args.base))
        figures[f"upgrade to {revisions[-1]} again ({cycle})"] = _timed(
            lambda: upgrade(url, revisions[-1]))
        print(f"cycle {cycle}: down {figures[f'downgrade to {args.base} ({cycle})']['seconds']} s, "
              f"up {figures[f'upgrade to {revisions[-1]} again ({cycle})']['seconds']} s",
              flush=True)
    figures["rows_after"] = _rows(url)
    figures["load_average"] = list(os.getloadavg())
    json.dump(figures, sys.stdout, indent=2)
    print()
    return 0


def _timed(step) -> dict:
    """Run ``step``; its seconds, the database's size after it and the load meanwhile."""
    from . import history_seed

    load = os.getloadavg()[0]
    started = time.perf_counter()
    step()
    return {"seconds": round(time.perf_counter() - started, 1), "load_before": round(load, 2),
            **history_seed.database_size()}


def _downgrade(url: str, revision: str) -> None:
    from alembic import command

    from webhooks.storage.db import dispose_engine
    from webhooks.storage.migrate import alembic_config

    dispose_engine()  # no pooled connection of ours holds a lock on the tables
    command.downgrade(alembic_config(url), revision)


def _rows(url: str) -> dict:
    """Rows of the tables a migration of history moves (what must be there after it)."""
    from webhooks.storage.db import get_engine

    with get_engine(url).connect() as connection:
        return {table: connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()
                for table in ("events", "deliveries", "attempts")}


def _vacuum(url: str) -> None:
    from webhooks.storage.db import get_engine

    with get_engine(url).connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")


if __name__ == "__main__":
    sys.exit(main())
