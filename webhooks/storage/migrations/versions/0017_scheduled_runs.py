"""scheduled runs: one run of each periodic task per slot of its interval

- table ``scheduled_runs`` (``task``, ``slot_start``) with the run that has
  the slot (``run_id``, the Celery task id), when it claimed it, and how many
  other sends of the slot were ``refused``. Beat names the slot in each
  message (webhooks/broker/slots.py); the run claims it before it works
  (webhooks/storage/scheduled_runs.py), so a restarted or a second beat
  cannot run the sweep or the purge twice in one interval. Rows older than a
  day are deleted by the claims.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduled_runs",
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("slot_start", sa.DateTime(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.Column("refused", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("task", "slot_start"),
    )


def downgrade() -> None:
    op.drop_table("scheduled_runs")
