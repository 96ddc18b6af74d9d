"""pace rate: the adaptive pace also follows the rate a receiver accepts

- ``subscriptions.pace_rate`` (attempts/s, nullable) and ``pace_rate_at``
  (unix seconds, nullable): set when the endpoint answers 429 or 503 from the
  rate it accepted lately, climbing from then on (webhooks/lifecycle/pace_rate.py).
  Null on every existing row: no subscription is paced until its receiver asks.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""
from alembic import op
import sqlalchemy as sa

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("pace_rate", sa.Float(), nullable=True))
        batch.add_column(sa.Column("pace_rate_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("pace_rate_at")
        batch.drop_column("pace_rate")
