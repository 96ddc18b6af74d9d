"""the publisher API: publisher keys, and accounts that can be deleted

- table ``publishers`` (``id``, ``name``, ``key_hash`` unique, ``created_at``,
  ``last_used_at``, ``revoked_at``): the operator's keys for the publisher API
  (CONTRACT 10.7). Empty at first.
- ``accounts.deleted_at`` (nullable): set by ``DELETE /api/webhooks/accounts/<id>``;
  null on every existing row. Retention deletes a deleted account's rows in batches.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "publishers",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
    )
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("deleted_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("deleted_at")
    op.drop_table("publishers")
