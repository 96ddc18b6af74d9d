"""subscription features: staged secret rotation, custom headers, per-subscription limits

- ``subscriptions.next_secret`` / ``next_secret_active_at``: a staged rotation
  (the next secret signs from that time on).
- ``subscriptions.headers``: extra request headers of every delivery.
- ``subscriptions.max_in_flight`` / ``rate_limit``: per-subscription limits,
  and ``rate_next_slot``, the rate limit's shared state (unix seconds).
- ``deliveries.paced``: the delivery holds a reserved slot of the rate limit.
- ``ix_deliveries_replay_of``: recover asks of each failed delivery whether it
  was replayed already.

Revision ID: 0008
Revises: 0004
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa

revision = "0008"
down_revision = "0004"
branch_labels = None
depends_on = None

REPLAYS = "replay_of IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("next_secret", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("next_secret_active_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("headers", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("max_in_flight", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("rate_limit", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("rate_next_slot", sa.Float(), nullable=True))
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("paced", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.create_index(
            "ix_deliveries_replay_of", ["replay_of"], unique=False,
            postgresql_where=sa.text(REPLAYS), sqlite_where=sa.text(REPLAYS),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_replay_of")
        batch_op.drop_column("paced")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        for column in ("rate_next_slot", "rate_limit", "max_in_flight", "headers",
                       "next_secret_active_at", "next_secret"):
            batch_op.drop_column(column)
