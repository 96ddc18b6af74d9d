"""attempt rollups: attempts per subscription and hour, and totals for /metrics

The dashboard's charts and counts and /metrics read these instead of the
attempts table, so their cost no longer grows with history (webhooks/storage/rollup.py).
Both tables are filled from the attempts already stored, in one
INSERT ... SELECT ... GROUP BY each (docs/scaling.md gives the time on 2.36
million attempts). Run it with the workers stopped: attempts recorded while
it runs are in the attempts table but not counted.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Frozen here (a migration must not change when webhooks.storage.rollup does).
DURATION_BUCKETS_MS = (25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000, 30000)


def _bucket_sql() -> str:
    whens = " ".join(f"WHEN a.duration_ms <= {bound} THEN {index}"
                     for index, bound in enumerate(DURATION_BUCKETS_MS))
    return f"CASE {whens} ELSE {len(DURATION_BUCKETS_MS)} END"


def _hour_sql() -> str:
    if op.get_bind().dialect.name == "postgresql":
        return "date_trunc('hour', a.started_at)"
    return "strftime('%Y-%m-%d %H:00:00.000000', a.started_at)"


def upgrade() -> None:
    op.create_table(
        "attempt_hours",
        sa.Column("subscription_id", sa.String(length=36), nullable=False),
        sa.Column("hour_start", sa.DateTime(), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("shard", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("attempts", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"]),
        sa.PrimaryKeyConstraint("subscription_id", "hour_start", "outcome", "shard"),
    )
    with op.batch_alter_table("attempt_hours", schema=None) as batch_op:
        batch_op.create_index("ix_attempt_hours_account_hour", ["account_id", "hour_start"],
                              unique=False)
    op.create_table(
        "attempt_totals",
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("duration_bucket", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("shard", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("attempts", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("outcome", "duration_bucket", "shard"),
    )
    hour = _hour_sql()
    op.execute(
        "INSERT INTO attempt_hours (subscription_id, hour_start, outcome, shard, account_id, "
        "attempts) "
        f"SELECT d.subscription_id, {hour}, a.outcome, 0, d.account_id, count(*) "
        "FROM attempts AS a JOIN deliveries AS d ON d.id = a.delivery_id "
        f"GROUP BY d.subscription_id, {hour}, a.outcome, d.account_id"
    )
    bucket = _bucket_sql()
    op.execute(
        "INSERT INTO attempt_totals (outcome, duration_bucket, shard, attempts, duration_ms) "
        f"SELECT a.outcome, {bucket}, 0, count(*), sum(a.duration_ms) FROM attempts AS a "
        f"GROUP BY a.outcome, {bucket}"
    )


def downgrade() -> None:
    op.drop_table("attempt_totals")
    with op.batch_alter_table("attempt_hours", schema=None) as batch_op:
        batch_op.drop_index("ix_attempt_hours_account_hour")
    op.drop_table("attempt_hours")
