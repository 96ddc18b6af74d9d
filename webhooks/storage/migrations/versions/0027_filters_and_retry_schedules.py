"""filters and retry schedules: a subscription chooses its events and its retries (CONTRACT 10.4)

- ``subscriptions.filter`` (nullable JSON): the payload filter (webhooks/events/filters.py)
  an event must pass to be delivered to it; null on every existing row (every event of
  its types, as before).
- ``subscriptions.retry_schedule`` (nullable JSON): its retry delays in seconds; null on
  every existing row (the service's ladder, WEBHOOKS_RETRY_DELAYS, as before).

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("filter", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("retry_schedule", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("retry_schedule")
        batch.drop_column("filter")
