"""paused reason: why a subscription is paused

- ``subscriptions.paused_reason``: ``failures`` (the pause rule), ``manual``
  (its owner paused it) or ``gone`` (the endpoint answered 410); null while
  active (webhooks/states.py, ``PauseReason``). Subscriptions paused
  before this revision were paused by the only rule there was, so they get
  ``failures``. A nullable column: workers of the revision before pause without
  a reason, which the API shows as null until the subscription is resumed.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("paused_reason", sa.String(length=16), nullable=True))
    op.execute("UPDATE subscriptions SET paused_reason = 'failures' WHERE status = 'paused'")


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("paused_reason")
