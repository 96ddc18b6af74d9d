"""attempt error kind: why an attempt got no usable response, as a column of its own

- ``attempts.error_kind``: the kind of failure (webhooks/lifecycle/failure_kinds.py,
  ``ErrorKind``: ``timeout``, ``dns``, ``connection_refused``, ...) of an attempt
  that got no response; null when a response came. Until now the kind was only
  part of the ``error`` sentence; attempts recorded before this revision keep a
  null kind (their sentence still says it). A nullable column with no default:
  adding it rewrites no row, and workers of the revision before leave it null.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("error_kind", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("error_kind")
