"""waiting counts: deliveries pending, sending and paused, kept by triggers

``/metrics`` showed these three gauges by counting the deliveries on their
partial indexes: 8.6 ms for 60,000 pending ones, growing with the backlog.
Now triggers on ``deliveries`` keep the counts in ``waiting_counts`` in the
same transaction as every change of status, whichever statement makes it
(emit, claim, record, pause, resume, the sweep, replay, delete), and the
scrape sums a few rows (webhooks/storage/waiting_counts.py).

- PostgreSQL: statement-level triggers with transition tables, so a
  statement that moves 100,000 deliveries writes one row once; each backend
  adds into its own row (``backend`` = its pid), so no two transactions ever
  wait for one row. TRUNCATE of ``deliveries`` empties the counts.
- SQLite: row-level triggers on one row (``backend`` 0); SQLite has one
  writer at a time anyway.

The counts are filled from the deliveries already stored after the triggers
are made: on PostgreSQL making a trigger locks ``deliveries`` against writes
until this migration commits, so no change falls between the two. The counts
read the partial indexes of pending and sending deliveries and, for paused
ones, the list index once per account: their cost follows the unfinished
deliveries, not the table (docs/scaling.md has the time at 20 M events).

A later migration that rebuilds ``deliveries`` on SQLite (batch mode copies
the table) drops these triggers with the old table: it must make them again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

WAITING = ("pending", "sending", "paused")

# ---------------------------------------------------------------- PostgreSQL

# Adds the deltas p, s, h (declared by each function) into this backend's row.
_PG_ADD = """
    IF p <> 0 OR s <> 0 OR h <> 0 THEN
        INSERT INTO waiting_counts AS w (backend, pending, sending, paused)
        VALUES (pg_backend_pid(), p, s, h)
        ON CONFLICT (backend) DO UPDATE SET pending = w.pending + excluded.pending,
            sending = w.sending + excluded.sending, paused = w.paused + excluded.paused;
    END IF;
    RETURN NULL;
"""


def _pg_deltas(rows_sql: str) -> str:
    """plpgsql: p, s, h := the sums of ``delta`` per waiting status over ``rows_sql``."""
    return (
        "SELECT coalesce(sum(delta) FILTER (WHERE status = 'pending'), 0), "
        "coalesce(sum(delta) FILTER (WHERE status = 'sending'), 0), "
        "coalesce(sum(delta) FILTER (WHERE status = 'paused'), 0) "
        f"INTO p, s, h FROM ({rows_sql}) AS changed;"
    )


_PG_FUNCTIONS = {
    "webhooks_waiting_inserted": _pg_deltas("SELECT status, 1 AS delta FROM new_rows"),
    "webhooks_waiting_updated": _pg_deltas(
        "SELECT status, 1 AS delta FROM new_rows UNION ALL SELECT status, -1 FROM old_rows"),
    "webhooks_waiting_deleted": _pg_deltas("SELECT status, -1 AS delta FROM old_rows"),
}
_PG_TRIGGERS = {
    "deliveries_waiting_inserted": ("INSERT", "NEW TABLE AS new_rows", "webhooks_waiting_inserted"),
    "deliveries_waiting_updated": ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows",
                                   "webhooks_waiting_updated"),
    "deliveries_waiting_deleted": ("DELETE", "OLD TABLE AS old_rows", "webhooks_waiting_deleted"),
}


def _postgresql_upgrade() -> None:
    for name, deltas in _PG_FUNCTIONS.items():
        op.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"DECLARE p bigint; s bigint; h bigint;\nBEGIN\n    {deltas}\n{_PG_ADD}END $$")
    for name, (event, referencing, function) in _PG_TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} AFTER {event} ON deliveries REFERENCING {referencing} "
                   f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()")
    op.execute("CREATE FUNCTION webhooks_waiting_truncated() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN DELETE FROM waiting_counts; RETURN NULL; END $$")
    op.execute("CREATE TRIGGER deliveries_waiting_truncated AFTER TRUNCATE ON deliveries "
               "FOR EACH STATEMENT EXECUTE FUNCTION webhooks_waiting_truncated()")


def _postgresql_downgrade() -> None:
    for name in (*_PG_TRIGGERS, "deliveries_waiting_truncated"):
        op.execute(f"DROP TRIGGER IF EXISTS {name} ON deliveries")
    for name in (*_PG_FUNCTIONS, "webhooks_waiting_truncated"):
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")


# ---------------------------------------------------------------- SQLite


def _sqlite_set(*terms: tuple[str, str]) -> str:
    """``pending = pending + (NEW.status = 'pending')``, ... for each (sign, row) in ``terms``."""
    return ", ".join(
        f"{status} = {status} " + " ".join(f"{sign} ({row}.status = '{status}')"
                                           for sign, row in terms)
        for status in WAITING)


_SQLITE_TRIGGERS = {
    "deliveries_waiting_inserted": ("AFTER INSERT ON deliveries", _sqlite_set(("+", "NEW"))),
    "deliveries_waiting_updated": (
        "AFTER UPDATE OF status ON deliveries WHEN OLD.status IS NOT NEW.status",
        _sqlite_set(("+", "NEW"), ("-", "OLD"))),
    "deliveries_waiting_deleted": ("AFTER DELETE ON deliveries", _sqlite_set(("-", "OLD"))),
}


def _sqlite_upgrade() -> None:
    for name, (when, assignments) in _SQLITE_TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {when} BEGIN "
                   f"UPDATE waiting_counts SET {assignments} WHERE backend = 0; END")


def _sqlite_downgrade() -> None:
    for name in _SQLITE_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")


# ---------------------------------------------------------------- both


def upgrade() -> None:
    op.create_table(
        "waiting_counts",
        sa.Column("backend", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("pending", sa.BigInteger(), nullable=False),
        sa.Column("sending", sa.BigInteger(), nullable=False),
        sa.Column("paused", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("backend"),
    )
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_upgrade()
    else:
        _sqlite_upgrade()
    # Row 0 always exists (SQLite's triggers add into it). Each count reads an index range,
    # not the table: pending and sending their partial indexes, paused the list index
    # (account_id, status, ...) once per account.
    op.execute(
        "INSERT INTO waiting_counts (backend, pending, sending, paused) SELECT 0, "
        "(SELECT count(*) FROM deliveries WHERE status = 'pending'), "
        "(SELECT count(*) FROM deliveries WHERE status = 'sending'), "
        "(SELECT coalesce(sum((SELECT count(*) FROM deliveries AS d "
        "WHERE d.account_id = a.id AND d.status = 'paused')), 0) FROM accounts AS a)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_downgrade()
    else:
        _sqlite_downgrade()
    op.drop_table("waiting_counts")
