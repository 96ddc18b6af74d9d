"""adaptive pace: a subscription's current limit on attempts in flight

- ``subscriptions.in_flight_limit``: the limit the adaptive pace keeps
  (webhooks/lifecycle/adaptive_pace.py), halved on a 429, a 503 or a time-out
  and raised by one after a run of successes; null while it is not lowered
  (the cap, ``max_in_flight`` or WEBHOOKS_MAX_IN_FLIGHT, applies).
- ``subscriptions.pace_successes``: successes since the limit last moved.

Both are added without rewriting rows (a nullable column, and a constant default).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("in_flight_limit", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("pace_successes", sa.Integer(), nullable=False,
                                      server_default=sa.text("0")))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("pace_successes")
        batch_op.drop_column("in_flight_limit")
