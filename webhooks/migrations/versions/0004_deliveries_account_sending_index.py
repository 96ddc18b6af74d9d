"""index the attempts in flight of each account

Every claim counts the account's attempts in flight
(WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT). Without this index that count reads every
delivery of the account; with it, only the few in flight.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SENDING = "status = 'sending'"


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_account_sending", ["account_id"], unique=False,
            postgresql_where=sa.text(SENDING), sqlite_where=sa.text(SENDING),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_account_sending")
