"""Months of history made in minutes: events, deliveries and attempts seeded by set-based SQL.

One account with ``SUBSCRIPTIONS`` subscriptions, each taking its own two of
the catalogue's types, so every event goes to exactly one of them (one
delivery each). Rows are spread evenly over a window of hours ending some
days ago (0: now), with the issue's mix of statuses:

=========  ======  ==========================================================
status     share   attempts
=========  ======  ==========================================================
done       90 %    1 (2 % of them: a retry, then the success)
failed      4 %    1, answered 404 or 410
dead        3 %    6: five retries, then the last
pending     3 %    1 to 3 retries so far; the next one parked, due 24 to 36 h after
                   the seeding (PARKED_AFTER)
=========  ======  ==========================================================

Each chunk of ``CHUNK`` events is one INSERT statement of data-modifying
CTEs (events, deliveries, attempts) over ``generate_series``; foreign-key
checks are switched off for the seeding session only (the rows refer to
each other by construction). The rollups and the waiting counts are counted
afterwards (``webhooks.storage.rollup.rebuild``, ``webhooks.storage.waiting_counts.refresh``)
and the tables vacuumed and analysed, as
autovacuum would have done on a table that grew over months.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from dataclasses import dataclass

from sqlalchemy import text

from . import seed

__all__ = ["History", "TYPES", "SUBSCRIPTIONS", "AUDIT_ENTRIES", "make_history", "seed_audit",
           "seed_events", "finish", "database_size", "seeded_history"]

SUBSCRIPTIONS = 4
TYPES = ("email.sent", "email.delivered", "email.opened", "email.clicked",
         "reply.received", "email.bounced", "contact.created", "contact.updated")
CHUNK = 100_000
# Entries of the account's audit log: more than a page of every list of them (50), and as many
# at every size, since the log grows with changes of configuration, not with events.
AUDIT_ENTRIES = 200
LADDER_S = (60, 300, 1800, 7200, 43200)  # the default WEBHOOKS_RETRY_DELAYS
# The pending deliveries' next attempts start this long after the seeding starts: none may fall
# due while a scenario runs, because no worker claims it then, and every sweep would send it
# again (at 20 M events the seeding alone took 77 minutes; with "within 12 h" a tenth of the
# 600,000 pending had fallen due by the timing, and the sweep timed its re-sending).
PARKED_AFTER = dt.timedelta(hours=24)


@dataclass(frozen=True)
class History:
    """The seeded account, its subscriptions (each takes TYPES[2i], TYPES[2i+1]) and its key."""

    account_id: str
    api_key: str
    subscription_ids: tuple[str, ...]


def make_history(url: str, name: str = "history") -> History:
    """The account ``name`` and its subscriptions, made through the core (no events yet)."""
    from webhooks.tenants.accounts import create_account, new_signing_secret
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Subscription, new_id, utcnow

    with session_scope() as session:
        account, api_key = create_account(session, name)
        ids = []
        for index in range(SUBSCRIPTIONS):
            subscription = Subscription(
                id=new_id(), account_id=account.id, url=url, secret=new_signing_secret(),
                event_types=list(TYPES[2 * index:2 * index + 2]), status="active",
                consecutive_failures=0, created_at=utcnow() - dt.timedelta(days=400))
            session.add(subscription)
            ids.append(subscription.id)
        return History(account.id, api_key, tuple(ids))


def seeded_history(name: str) -> History | None:
    """The history an earlier run seeded under the account ``name``, with a new API key (the
    old one was never stored); None when there is none (or more than one).

    What lets a run reuse a seeding of millions of events (``--keep-history``).
    """
    from sqlalchemy import select

    from webhooks.tenants.accounts import new_api_key
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Account, Subscription

    with session_scope() as session:
        found = session.scalars(select(Account).where(Account.name == name)).all()
        if len(found) != 1:
            return None
        account = found[0]
        subscriptions = session.scalars(
            select(Subscription).where(Subscription.account_id == account.id)).all()
        by_type = {subscription.event_types[0]: subscription.id for subscription in subscriptions}
        ids = tuple(by_type.get(TYPES[2 * index]) for index in range(SUBSCRIPTIONS))
        if None in ids:
            return None
        api_key, account.api_key_hash = new_api_key()
        return History(account.id, api_key, ids)


def seed_audit(history: History, n: int = AUDIT_ENTRIES) -> None:
    """``n`` entries of the account's audit log, a minute apart, ending now: its subscriptions'
    changes of URL, as the command line would write them."""
    from webhooks.audit.entries import Action, Actor, Target, TargetKind
    from webhooks.audit.log import write
    from webhooks.storage.db import get_engine
    from webhooks.storage.models import utcnow

    now, actor = utcnow(), Actor.cli("benchmark")
    with get_engine().begin() as connection:
        for index in range(n):
            subscription = history.subscription_ids[index % SUBSCRIPTIONS]
            write(connection, history.account_id, actor, Action.SUBSCRIPTION_UPDATED,
                  Target(TargetKind.SUBSCRIPTION, subscription),
                  {"url": {"from": f"https://old.example.com/{index}",
                           "to": f"https://new.example.com/{index}"}},
                  at=now - dt.timedelta(minutes=n - index))


# One chunk. "g" draws each event's fate once; the three inserts read it. Shares of
# "mix": [0, .90) done, [.90, .94) failed, [.94, .97) dead, [.97, 1) pending.
_CHUNK_SQL = text("""
WITH g AS MATERIALIZED (
    SELECT gen_random_uuid()::text AS event_id, gen_random_uuid()::text AS delivery_id,
           s.i % 8 AS type_index, random() AS mix, random() AS luck,
           :newest - random() * :hours * interval '1 hour' AS created_at
      FROM generate_series(1, :n) AS s(i)
), f AS MATERIALIZED (
    SELECT g.*, (ARRAY[:t0, :t1, :t2, :t3, :t4, :t5, :t6, :t7])[type_index + 1] AS event_type,
           (ARRAY[:s0, :s1, :s2, :s3])[type_index / 2 + 1] AS subscription_id,
           CASE WHEN mix < 0.90 THEN 'done' WHEN mix < 0.94 THEN 'failed'
                WHEN mix < 0.97 THEN 'dead' ELSE 'pending' END AS status,
           CASE WHEN mix < 0.90 THEN (CASE WHEN luck < 0.02 THEN 2 ELSE 1 END)
                WHEN mix < 0.94 THEN 1 WHEN mix < 0.97 THEN 6
                ELSE 1 + floor(luck * 3)::int END AS attempts
      FROM g
), ev AS (
    INSERT INTO events (id, account_id, type, version, idempotency_key, body, created_at)
    SELECT event_id, :account_id, event_type, :version, NULL,
           convert_to(replace(:template, :placeholder, event_id), 'UTF8'), created_at
      FROM f
), dl AS (
    INSERT INTO deliveries (id, account_id, event_id, subscription_id, event_type, status,
                            attempt_count, next_attempt_at, parked, claimed_at, replay_of,
                            created_at, updated_at)
    SELECT delivery_id, :account_id, event_id, subscription_id, event_type, status, attempts,
           CASE WHEN status = 'pending' THEN :parked_from + luck * interval '12 hours' END,
           status = 'pending', NULL, NULL, created_at, created_at
      FROM f
)
INSERT INTO attempts (delivery_id, number, started_at, duration_ms, status_code, error,
                      outcome, response_excerpt)
SELECT delivery_id, a.number,
       least(created_at + make_interval(secs => 0.05 + (ARRAY[0, 60, 360, 2160, 9360, 52560])[a.number]),
             :newest),
       CASE WHEN last AND status = 'done' THEN 20 + (luck * 1000)::int % 180
            WHEN (luck * 100)::int % 20 = 0 THEN 15000 ELSE 30 + (luck * 1000)::int % 270 END,
       CASE WHEN last AND status = 'done' THEN 200 WHEN last AND status = 'failed' THEN 410
            WHEN (luck * 100)::int % 20 = 0 THEN NULL ELSE 503 END,
       CASE WHEN NOT (last AND status IN ('done', 'failed')) AND (luck * 100)::int % 20 = 0
            THEN 'timed out after 15 s' END,
       CASE WHEN NOT last OR status = 'pending' THEN 'retry' WHEN status = 'done' THEN 'success'
            WHEN status = 'failed' THEN 'permanent_failure' ELSE 'dead' END,
       CASE WHEN last AND status = 'done' THEN '{"ok": true}' ELSE 'upstream unavailable' END
  FROM f CROSS JOIN LATERAL (
      SELECT n AS number, n = f.attempts AS last FROM generate_series(1, f.attempts) AS n
  ) AS a
""")


@contextlib.contextmanager
def _niced(connection, niceness: int):
    """Run the PostgreSQL backend of ``connection`` at ``niceness`` meanwhile (0: as it is).

    The seeding's CPU is spent in its backend, not in this client, so that is
    the process to lower on a shared machine. Needs the database on this host
    and the right to renice its processes (root); otherwise nothing changes.
    """
    pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar() if niceness else None
    try:
        if pid:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except OSError:  # another host's pid, or no right to renice it
        pid = None
    try:
        yield
    finally:
        if pid:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, 0)


def seed_events(history: History, n: int, *, hours: float = 72.0,
                days_ago: float = 0.0, niceness: int = 0) -> float:
    """Insert ``n`` events (one delivery each, with attempts); returns the seconds it took.

    Created times are spread over the ``hours`` before ``days_ago`` days ago;
    ``niceness`` lowers the priority of the database process doing it.
    """
    from webhooks.config import get_settings
    from webhooks.storage.db import get_engine

    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    template = seed.sample_body().decode()
    params = {
        "account_id": history.account_id, "version": get_settings().version,
        "template": template, "placeholder": seed.PLACEHOLDER_ID,
        "newest": now - dt.timedelta(days=days_ago), "hours": hours,
        "parked_from": now + PARKED_AFTER,
        **{f"t{i}": name for i, name in enumerate(TYPES)},
        **{f"s{i}": sid for i, sid in enumerate(history.subscription_ids)},
    }
    started = time.perf_counter()
    for start in range(0, n, CHUNK):
        with get_engine().begin() as connection, _niced(connection, niceness):
            # Foreign keys hold by construction; checking 6 million references costs minutes.
            connection.exec_driver_sql("SET LOCAL session_replication_role = replica")
            connection.execute(_CHUNK_SQL, {**params, "n": min(CHUNK, n - start)})
    return time.perf_counter() - started


def finish(database_url: str, *, niceness: int = 0) -> dict[str, float]:
    """Recount the rollups (the seeding skipped them) and the waiting counts (as a sweep
    does), then VACUUM ANALYZE; the seconds each took (``niceness`` as for seed_events)."""
    from webhooks.storage import waiting_counts as waiting
    from webhooks.storage.db import get_engine
    from webhooks.storage.rollup import rebuild

    started = time.perf_counter()
    with get_engine().begin() as connection, _niced(connection, niceness):
        rebuild(connection)
        waiting.refresh(connection)
    rolled = time.perf_counter() - started
    started = time.perf_counter()
    with get_engine(database_url).connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        with _niced(connection, niceness):
            connection.exec_driver_sql("VACUUM ANALYZE")
    return {"rollup_s": round(rolled, 2), "vacuum_analyze_s": round(time.perf_counter() - started, 2)}


def database_size() -> dict[str, float]:
    """The database's size and its largest tables' (with indexes), in MB."""
    from webhooks.storage.db import get_engine

    with get_engine().connect() as connection:
        total = connection.exec_driver_sql("SELECT pg_database_size(current_database())").scalar()
        # A partitioned table (attempts, migration 0029) weighs the sum of its partitions.
        tables = connection.exec_driver_sql(
            "SELECT c.relname, coalesce((SELECT sum(pg_total_relation_size(t.relid)) "
            "FROM pg_partition_tree(c.oid) AS t), pg_total_relation_size(c.oid))::bigint "
            "FROM pg_class AS c "
            "WHERE c.relname IN ('events', 'deliveries', 'attempts', 'attempt_hours')").all()
    mb = 1024 * 1024
    return {"database_mb": round(total / mb, 1),
            **{f"{name}_mb": round(size / mb, 1) for name, size in tables}}
