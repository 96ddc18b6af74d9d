"""release and notice budgets: a resume sends only its own held deliveries; notices get a budget

- ``subscriptions.releasing_since`` (nullable): when the subscription's release
  task (webhooks/lifecycle/release.py), which sends what a resume released batch
  by batch, was last sent or ran; null on every existing row (none is running).
- table ``notice_budgets`` (``subject_id``: an account's or a subscription's id)
  with ``due_after``, ``deferred_event_id`` and ``suppressed``: the budget of
  pause and resume notices of each (webhooks/operational/budget.py). Empty at
  first: every budget starts full.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("releasing_since", sa.DateTime(), nullable=True))
    op.create_table(
        "notice_budgets",
        sa.Column("subject_id", sa.String(length=36), nullable=False),
        sa.Column("due_after", sa.DateTime(), nullable=False),
        sa.Column("deferred_event_id", sa.String(length=36), nullable=True),
        sa.Column("suppressed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("subject_id"),
    )


def downgrade() -> None:
    op.drop_table("notice_budgets")
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("releasing_since")
