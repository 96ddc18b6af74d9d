"""delivery trace context: the W3C traceparent of the span a delivery's attempts belong under

- ``deliveries.trace_context`` (nullable, 55 characters): the ``traceparent``
  of the ``webhooks.emit`` span of its event, or of the ``webhooks.replay`` span
  of a replay (webhooks/config/tracing.py), stored when tracing is on so that
  every attempt joins the event's trace whichever worker makes it and however
  much later, with or without a broker message (the sweep and recover send
  none). Null on every existing row and whenever tracing is off.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("trace_context", sa.String(length=55), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("trace_context")
