"""A lower bound on what a delivery writes: ``python -m benchmarks.write_bound``.

Issue 43 asks a delivery for at most 2x the durable floor's WAL and 1.5x its
PostgreSQL CPU. This measures, on one connection and in the same rounds, the
floor against writes that no design meeting the spec can go below:

- ``floor``: the durable ceiling's row (``ceiling_app``): the body inserted and
  committed, then marked delivered and committed (2 commits).
- ``once``: the service's own tables as they are (``events``, ``deliveries``,
  ``attempts``, with their keys, list indexes and foreign keys), each delivery
  written exactly once, already finished, in ONE transaction: the event with its
  body, the delivery as ``done``, its one attempt. No claim before the POST, no
  second commit, no rollup, no update: less than any design that keeps the
  spec's guarantees and its history reads (each index is one a read of
  docs/scaling.md's history scenario uses, or a key the spec needs).
- ``least``: the same three tables copied with every id a native ``uuid`` (16
  bytes instead of a 36-character string) and only the indexes a read or a rule
  of the spec needs (``_LEAST_TABLES``), written once as ``once`` is: the least
  any design that keeps the history could write.
- ``least_claimed``: ``least`` with the claim the spec requires committed before
  the POST, in the cheapest form: emit commits the event and a narrow state row
  (its id only indexed, room for HOT updates); the claim sets its ``claimed_at``
  and commits (a HOT update); the record commits the delivery's finished
  history row and its attempt and deletes the state row. Three commits, and
  generous still: nothing indexes the unfinished deliveries for the lists.
- ``least_grouped``: ``least_claimed`` with the claims and the records of 8
  deliveries sharing a statement and a commit, as the service's group commit
  shares them under load (emit still commits each event, as the floor does).

Each variant writes ``--deliveries`` deliveries a round, the variants' order
turning each round. Prints, per delivery, each round's figures and then each
variant's medians with the median of its ratios to the floor of the same round:
the backend's CPU (``/proc`` of the connection's server process, microseconds;
the floor commits twice a delivery, ``once`` and ``least`` once,
``least_claimed`` three times) and the WAL of this database's records and their
commit records (``pg_waldump``, bytes, full-page images included as they fall).
``--body-bytes`` pads the event's body, to see how the ratios move with its size.
Needs PostgreSQL on this machine (pg_waldump and the WAL directory readable: run
as root or postgres). The database (default ``webhooks_bench_write_bound``,
``WEBHOOKS_DATABASE_URL`` overrides; its name must contain ``bench``) is made and
migrated if missing; drop it afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import uuid

os.environ.setdefault("WEBHOOKS_DATABASE_URL",
                      "postgresql+psycopg2://postgres@127.0.0.1:5432/webhooks_bench_write_bound")

from sqlalchemy import create_engine  # noqa: E402  (after the environment it reads)

from . import services  # noqa: E402
from .ceiling_app import create_rows_table, mark_delivered, prebuilt_body, store_row  # noqa: E402
from .resources import database_counters, process_cpu_s, wal_bytes_of  # noqa: E402
from .seed import EVENT_TYPE, make_target  # noqa: E402

GROUP = 8  # deliveries a claim and a record commit share in ``least_grouped``

# The least the history can be: the three tables again, every id a uuid, and only the
# indexes a read or a rule of the spec needs: the event by id and its idempotency key (only
# when it has one); the delivery by id, by event, and the delivery list's three (by account,
# subscription and type, each with status and the keyset order); the attempts by delivery.
# No index for retention (time partitions would drop whole days), no foreign key to the
# accounts or subscriptions (whose row locks the service pays at emit). bound_states: the
# unfinished delivery's narrow state row of least_claimed and least_grouped.
_LEAST_TABLES = """
DROP TABLE IF EXISTS bound_attempts, bound_deliveries, bound_events;
CREATE TABLE bound_events (
    id uuid PRIMARY KEY, account_id uuid NOT NULL, type varchar(64) NOT NULL,
    version varchar(10) NOT NULL, idempotency_key varchar(255), body bytea NOT NULL,
    created_at timestamp NOT NULL);
CREATE UNIQUE INDEX ON bound_events (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE bound_deliveries (
    id uuid PRIMARY KEY, account_id uuid NOT NULL, event_id uuid NOT NULL REFERENCES bound_events,
    subscription_id uuid NOT NULL, event_type varchar(64) NOT NULL, status varchar(16) NOT NULL,
    attempt_count integer NOT NULL, created_at timestamp NOT NULL, updated_at timestamp NOT NULL);
CREATE INDEX ON bound_deliveries (event_id);
CREATE INDEX ON bound_deliveries (account_id, status, created_at, id);
CREATE INDEX ON bound_deliveries (subscription_id, status, created_at, id);
CREATE INDEX ON bound_deliveries (account_id, event_type, status, created_at, id);
CREATE TABLE bound_attempts (
    delivery_id uuid NOT NULL REFERENCES bound_deliveries, number integer NOT NULL,
    started_at timestamp NOT NULL, duration_ms integer NOT NULL, status_code integer,
    outcome varchar(20) NOT NULL, UNIQUE (delivery_id, number));
DROP TABLE IF EXISTS bound_states;
CREATE TABLE bound_states (
    id uuid PRIMARY KEY, event_id uuid NOT NULL, subscription_id uuid NOT NULL,
    claimed_at timestamp) WITH (fillfactor = 50);
"""

# The event, and the finished delivery with its attempt, in the service's tables ("once")
# and in the least ones; $1 event id, $2 delivery id, $3 account, $4 subscription, $5 body.
# "now() at time zone 'utc'": the service stores naive UTC.
_ONCE = {
    "once": """
PREPARE bound_event (text, text, text, text, bytea) AS
  INSERT INTO events (id, account_id, type, version, idempotency_key, body, created_at)
  VALUES ($1, $3, '{type}', '2026-07-30', NULL, $5, now() at time zone 'utc');
PREPARE bound_delivery (text, text, text, text) AS
  INSERT INTO deliveries (id, account_id, event_id, subscription_id, event_type, status,
    attempt_count, parked, created_at, updated_at, paced, behind_key)
  VALUES ($2, $3, $1, $4, '{type}', 'done', 1, false, now() at time zone 'utc',
          now() at time zone 'utc', false, false);
PREPARE bound_attempt (text) AS
  INSERT INTO attempts (delivery_id, number, started_at, duration_ms, status_code, outcome)
  VALUES ($1, 1, now() at time zone 'utc', 12, 200, 'success');
""",
    "least": """
PREPARE bound_event (uuid, uuid, uuid, uuid, bytea) AS
  INSERT INTO bound_events (id, account_id, type, version, body, created_at)
  VALUES ($1, $3, '{type}', '2026-07-30', $5, now() at time zone 'utc');
PREPARE bound_delivery (uuid, uuid, uuid, uuid) AS
  INSERT INTO bound_deliveries (id, account_id, event_id, subscription_id, event_type, status,
    attempt_count, created_at, updated_at)
  VALUES ($2, $3, $1, $4, '{type}', 'done', 1, now() at time zone 'utc', now() at time zone 'utc');
PREPARE bound_attempt (uuid) AS
  INSERT INTO bound_attempts (delivery_id, number, started_at, duration_ms, status_code, outcome)
  VALUES ($1, 1, now() at time zone 'utc', 12, 200, 'success');
""",
}


_STATE = """
PREPARE bound_state (uuid, uuid, uuid) AS
  INSERT INTO bound_states (id, event_id, subscription_id) VALUES ($2, $1, $3);
PREPARE bound_claim (uuid) AS
  UPDATE bound_states SET claimed_at = now() at time zone 'utc' WHERE id = $1;
PREPARE bound_settle (uuid) AS DELETE FROM bound_states WHERE id = $1;
PREPARE bound_claim_all (uuid[]) AS
  UPDATE bound_states SET claimed_at = now() at time zone 'utc' WHERE id = ANY($1);
PREPARE bound_settle_all (uuid[]) AS DELETE FROM bound_states WHERE id = ANY($1);
"""


def _write_floor(connection, count: int, body: bytes, _target) -> None:
    for _ in range(count):
        delivery_id = str(uuid.uuid4())
        store_row(connection, delivery_id, body)
        mark_delivered(connection, delivery_id)


def _new_ids(target) -> tuple[str, str, str, str]:
    """A new event's and delivery's ids, with the target's account and subscription: the
    four ids every prepared statement here takes in this order ($1 to $4)."""
    return (str(uuid.uuid4()), str(uuid.uuid4()), *target)


def _emit(cursor, ids, body: bytes, *, state: bool) -> None:
    """The event with its body; and, with ``state``, the unfinished delivery's state row."""
    cursor.execute("EXECUTE bound_event (%s, %s, %s, %s, %s)", (*ids, body))
    if state:
        event_id, delivery_id, _, subscription_id = ids
        cursor.execute("EXECUTE bound_state (%s, %s, %s)", (event_id, delivery_id,
                                                             subscription_id))


def _finish(cursor, ids) -> None:
    """The delivery's finished history row and its one attempt."""
    cursor.execute("EXECUTE bound_delivery (%s, %s, %s, %s)", ids)
    cursor.execute("EXECUTE bound_attempt (%s)", (ids[1],))


def _write_once(connection, count: int, body: bytes, target) -> None:
    with connection.cursor() as cursor:
        for _ in range(count):
            ids = _new_ids(target)
            _emit(cursor, ids, body, state=False)
            _finish(cursor, ids)
            connection.commit()


def _write_claimed(connection, count: int, body: bytes, target) -> None:
    with connection.cursor() as cursor:
        for _ in range(count):
            ids = _new_ids(target)
            _emit(cursor, ids, body, state=True)
            connection.commit()  # emit
            cursor.execute("EXECUTE bound_claim (%s)", (ids[1],))
            connection.commit()  # the claim, before the POST
            _finish(cursor, ids)
            cursor.execute("EXECUTE bound_settle (%s)", (ids[1],))
            connection.commit()  # the record


def _write_grouped(connection, count: int, body: bytes, target) -> None:
    with connection.cursor() as cursor:
        for start in range(0, count, GROUP):
            group = [_new_ids(target) for _ in range(min(GROUP, count - start))]
            for ids in group:
                _emit(cursor, ids, body, state=True)
                connection.commit()  # each emit
            delivery_ids = [ids[1] for ids in group]
            cursor.execute("EXECUTE bound_claim_all (%s::uuid[])", (delivery_ids,))
            connection.commit()  # the group's claims, before the POSTs
            for ids in group:
                _finish(cursor, ids)
            cursor.execute("EXECUTE bound_settle_all (%s::uuid[])", (delivery_ids,))
            connection.commit()  # the group's records


# Each variant: its prepared statements (None: the floor's plain ones), and its writer.
_VARIANTS = {
    "floor": (None, _write_floor),
    "once": (_ONCE["once"], _write_once),
    "least": (_ONCE["least"], _write_once),
    "least_claimed": (_ONCE["least"] + _STATE, _write_claimed),
    "least_grouped": (_ONCE["least"] + _STATE, _write_grouped),
}
VARIANTS = tuple(_VARIANTS)


def _prepare(connection, statements: str | None) -> None:
    """Make this connection's prepared statements ``statements``."""
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
        if statements:
            cursor.execute(statements.format(type=EVENT_TYPE))
    connection.commit()


def _measure(connection, meter, database: str, variant: str, count: int, body: bytes,
             target) -> dict:
    """One leg of ``variant``: backend CPU (us) and WAL (bytes) per delivery."""
    statements, write = _VARIANTS[variant]
    _prepare(connection, statements)
    backend = connection.get_backend_pid()
    before = database_counters(meter, database)
    cpu = process_cpu_s(backend)
    write(connection, count, body, target)
    cpu = process_cpu_s(backend) - cpu
    after = database_counters(meter, database)
    wal = wal_bytes_of(meter, before["oid"], before["lsn"], after["lsn"])
    ours = wal.get("this_database") if wal else None
    return {"cpu_us": cpu / count * 1e6, "wal_b": None if ours is None else ours / count}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=2000, help="per variant and round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the order turning (3)")
    parser.add_argument("--body-bytes", type=int, default=0,
                        help="pad the event's body to this many bytes with random hex (default: "
                             "the benchmark's sample envelope as it is)")
    args = parser.parse_args(argv)
    url = os.environ["WEBHOOKS_DATABASE_URL"]
    database = url.rsplit("/", 1)[-1]
    if "bench" not in database:
        raise SystemExit("WEBHOOKS_DATABASE_URL must name a database with 'bench' in its name")
    services.ensure_database(url)
    services.truncate_tables(url)
    made = make_target("https://hooks.example.com/bound")
    target_text = (made.account_id, made.subscription_id)
    target_least = (str(uuid.uuid4()), str(uuid.uuid4()))

    import psycopg2

    dsn = url.replace("postgresql+psycopg2://", "postgresql://")
    connection = psycopg2.connect(dsn, options="-c synchronous_commit=off")
    with connection.cursor() as cursor:
        cursor.execute(_LEAST_TABLES)
    connection.commit()
    create_rows_table(connection)
    body = _padded(prebuilt_body(), args.body_bytes)
    meter = create_engine(url, isolation_level="AUTOCOMMIT").connect()
    targets = {"floor": None, "once": target_text, "least": target_least,
               "least_claimed": target_least, "least_grouped": target_least}  # by variant
    print(f"{args.rounds} rounds of {args.deliveries} deliveries a variant; body {len(body)} B; "
          f"per delivery: backend CPU us, WAL B (this database's records)")
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    try:
        for round_number in range(args.rounds):
            shift = round_number % len(VARIANTS)
            order = VARIANTS[shift:] + VARIANTS[:shift]
            figures = {name: _measure(connection, meter, database, name, args.deliveries, body,
                                      targets[name]) for name in order}
            for name in order:
                results[name].append(figures[name])
            print(f"round {round_number + 1} ({', '.join(order)}): " + "; ".join(
                f"{name} {f['cpu_us']:.0f} us, {_wal(f['wal_b'])}"
                for name, f in figures.items()))
        _summary(results)
    finally:
        meter.close()
        connection.close()
    return 0


def _padded(body: bytes, size: int) -> bytes:
    """``body`` (a JSON object) with a ``padding`` field of random hex (which PostgreSQL
    cannot compress, as a real body mostly cannot) making it ``size`` bytes; as it is if
    already that long."""
    room = size - len(body) - len(b',"padding":""')
    if room <= 0:
        return body
    return body[:-1] + b',"padding":"' + os.urandom(room // 2 + 1).hex()[:room].encode() + b'"}'


def _wal(value) -> str:
    return "WAL -" if value is None else f"{value:.0f} B"


def _summary(results: dict[str, list[dict]]) -> None:
    """Each variant's medians, and the median of its per-round ratios to the floor."""
    for name in VARIANTS:
        rounds = results[name]
        cpu = statistics.median(r["cpu_us"] for r in rounds)
        wals = [r["wal_b"] for r in rounds if r["wal_b"] is not None]
        line = f"{name:>10}: CPU {cpu:.0f} us, WAL {_wal(statistics.median(wals) if wals else None)}"
        if name != "floor":
            cpu_ratio = statistics.median(r["cpu_us"] / f["cpu_us"]
                                          for r, f in zip(rounds, results["floor"]))
            wal_ratios = [r["wal_b"] / f["wal_b"] for r, f in zip(rounds, results["floor"])
                          if r["wal_b"] and f["wal_b"]]
            line += f"; to the floor: CPU {cpu_ratio:.2f}x"
            line += f", WAL {statistics.median(wal_ratios):.2f}x" if wal_ratios else ", WAL -"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
