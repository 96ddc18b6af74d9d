"""subscription features: staged secret rotation, custom headers, per-subscription limits

- ``subscriptions.next_secret`` / ``next_secret_active_at``: a staged rotation
  (the next secret signs from that time on).
- ``subscriptions.headers``: extra request headers of every delivery.
- ``subscriptions.max_in_flight`` / ``rate_limit``: per-subscription limits,
  and ``rate_next_slot``, the rate limit's shared state (unix seconds).
- ``deliveries.paced``: the delivery holds a reserved slot of the rate limit.

(Recover asks of each failed delivery whether it was replayed already through
``ix_deliveries_replay_of``, which 0006 made.)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

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


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("paced")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        for column in ("rate_next_slot", "rate_limit", "max_in_flight", "headers",
                       "next_secret_active_at", "next_secret"):
            batch_op.drop_column(column)
