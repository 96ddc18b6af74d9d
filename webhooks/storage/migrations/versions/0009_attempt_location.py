"""attempt location: the Location header of a 3xx answer, kept with the attempt

- ``attempts.location``: at most 1,000 characters of a redirect's ``Location``
  (CONTRACT 9.1); null for any other answer. The redirect is never followed.
  A nullable column with no default: adding it rewrites no row, and workers
  of the revision before simply leave it null.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("location", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("location")
