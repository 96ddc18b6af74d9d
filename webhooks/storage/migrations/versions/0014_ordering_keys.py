"""ordering keys: deliveries of one key attempted one at a time, in emit order

- ``deliveries.ordering_key`` and ``deliveries.key_sequence``: the key given at
  emit (CONTRACT 9.4) and the event's place among the account's events with it.
- ``deliveries.behind_key``: the delivery waits for its key's predecessor.
- ``ordering_keys``: the last sequence number per (account, key), taken with an
  upsert in the emitting transaction.
- ``ix_deliveries_ordering``: unfinished keyed deliveries by (subscription, key,
  sequence), for the claim's look-up of a predecessor and the record's of a successor.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

UNFINISHED_KEYED = "ordering_key IS NOT NULL AND status IN ('pending', 'sending', 'paused')"


def upgrade() -> None:
    op.create_table(
        "ordering_keys",
        sa.Column("account_id", sa.String(length=36), sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("ordering_key", sa.String(length=200), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("account_id", "ordering_key"),
    )
    # Plain ALTER TABLE, not a batch: on SQLite a batch copies the table, which would
    # drop the waiting counts' triggers on deliveries (0008).
    op.add_column("deliveries", sa.Column("ordering_key", sa.String(length=200), nullable=True))
    op.add_column("deliveries", sa.Column("key_sequence", sa.BigInteger(), nullable=True))
    op.add_column("deliveries", sa.Column("behind_key", sa.Boolean(), nullable=False,
                                          server_default=sa.false()))
    op.create_index(
        "ix_deliveries_ordering", "deliveries", ["subscription_id", "ordering_key", "key_sequence"],
        unique=False, postgresql_where=sa.text(UNFINISHED_KEYED),
        sqlite_where=sa.text(UNFINISHED_KEYED))


def downgrade() -> None:
    op.drop_index("ix_deliveries_ordering", table_name="deliveries")
    for column in ("behind_key", "key_sequence", "ordering_key"):
        # ALTER TABLE … DROP COLUMN on both engines (SQLite 3.35+), keeping the triggers.
        op.execute(f"ALTER TABLE deliveries DROP COLUMN {column}")
    op.drop_table("ordering_keys")
