"""index deliveries waiting for a free slot of their subscription

A delivery turned away by WEBHOOKS_MAX_IN_FLIGHT waits pending, parked and
without next_attempt_at; every recorded attempt of its subscription looks
for the oldest one. Without this index that lookup reads every pending row
of the subscription, which for an endpoint with a large backlog is most of
them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""
from alembic import op
import sqlalchemy as sa

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

WAITING = "status = 'pending' AND parked AND next_attempt_at IS NULL"
WAITING_SQLITE = "status = 'pending' AND parked = 1 AND next_attempt_at IS NULL"


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_waiting", ["subscription_id", "created_at"], unique=False,
            postgresql_where=sa.text(WAITING), sqlite_where=sa.text(WAITING_SQLITE),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_waiting")
