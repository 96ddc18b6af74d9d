"""What migrations 0004-0006 cost on a large table: ``python -m benchmarks.migration_cost``.

Creates (or empties) the database in WEBHOOKS_DATABASE_URL (its name must
contain ``bench``), migrates it to 0003, seeds ``--events`` events of
history as the history scenario does, then runs each later migration on its
own and prints how long it took and what the database weighs after it. Run
it with nothing else using that database: 0004 holds an ACCESS EXCLUSIVE
lock on attempts for its whole run, 0006 a SHARE lock on deliveries.
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
    args = parser.parse_args(argv)
    os.environ.setdefault("WEBHOOKS_DATABASE_URL", DEFAULT_URL)
    url = os.environ["WEBHOOKS_DATABASE_URL"]
    if "bench" not in url.rsplit("/", 1)[-1]:
        raise SystemExit("the database's name must contain 'bench': it is emptied")

    import sqlalchemy
    from sqlalchemy.engine import make_url

    from webhooks.storage.migrate import upgrade

    from . import history_seed

    name = make_url(url).database
    admin = sqlalchemy.create_engine(make_url(url).set(database="postgres"),
                                     isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    upgrade(url, "0003")
    history = history_seed.make_history("https://history.example.com/")
    figures: dict = {"events": args.events,
                     "seed_s": round(history_seed.seed_events(history, args.events), 1)}
    _vacuum(url)
    figures["0003"] = history_seed.database_size()
    for revision in ("0004", "0005", "0006"):
        started = time.perf_counter()
        upgrade(url, revision)
        figures[revision] = {"seconds": round(time.perf_counter() - started, 1),
                             **history_seed.database_size()}
        print(revision, figures[revision], flush=True)
    figures["load_average"] = list(os.getloadavg())
    json.dump(figures, sys.stdout, indent=2)
    print()
    return 0


def _vacuum(url: str) -> None:
    from webhooks.storage.db import get_engine

    with get_engine(url).connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")


if __name__ == "__main__":
    sys.exit(main())
