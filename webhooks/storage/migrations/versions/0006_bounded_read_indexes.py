"""indexes for reads that stay fast as history grows, and for retention

- The delivery list (API and dashboard) reads one short index range per
  stored status and merges them (web/delivery_list.py): by account, by
  subscription and by event type, each followed by status and the keyset
  order (created_at, id). They replace ix_deliveries_account_created and
  ix_deliveries_subscription_status (whose leading columns the new
  ix_deliveries_by_subscription keeps, for the claim's in-flight count).
- ix_deliveries_replay_of: the replays of a delivery (its page, retention).
- ix_events_account_created replaces ix_events_account_id: retention finds
  an account's old events.

CREATE INDEX blocks writes to its table while it builds; docs/scaling.md
gives the time on 2 million deliveries. On a large live table, create them
beforehand with CREATE INDEX CONCURRENTLY under the same names
(ix_deliveries_by_subscription, ix_deliveries_by_account,
ix_deliveries_by_type, ix_deliveries_replay_of, ix_events_account_created;
columns as below); this migration then only drops the old ones.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

REPLAYS = "replay_of IS NOT NULL"


def _existing(table: str) -> set[str]:
    return {index["name"] for index in sa.inspect(op.get_bind()).get_indexes(table)}


def _create(table: str, name: str, columns: list[str], **where) -> None:
    """Create the index unless an operator built it beforehand (CONCURRENTLY)."""
    if name not in _existing(table):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_index(name, columns, unique=False, **where)


def upgrade() -> None:
    _create("deliveries", "ix_deliveries_by_subscription",
            ["subscription_id", "status", "created_at", "id"])
    _create("deliveries", "ix_deliveries_by_account", ["account_id", "status", "created_at", "id"])
    _create("deliveries", "ix_deliveries_by_type",
            ["account_id", "event_type", "status", "created_at", "id"])
    _create("deliveries", "ix_deliveries_replay_of", ["replay_of"],
            postgresql_where=sa.text(REPLAYS), sqlite_where=sa.text(REPLAYS))
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_subscription_status")
        batch_op.drop_index("ix_deliveries_account_created")
    _create("events", "ix_events_account_created", ["account_id", "created_at"])
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_account_id")


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_account_id", ["account_id"], unique=False)
        batch_op.drop_index("ix_events_account_created")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_deliveries_account_created", ["account_id", "created_at", "id"],
                              unique=False)
        batch_op.drop_index("ix_deliveries_replay_of", postgresql_where=sa.text(REPLAYS),
                            sqlite_where=sa.text(REPLAYS))
        batch_op.create_index("ix_deliveries_subscription_status", ["subscription_id", "status"],
                              unique=False)
        batch_op.drop_index("ix_deliveries_by_type")
        batch_op.drop_index("ix_deliveries_by_account")
        batch_op.drop_index("ix_deliveries_by_subscription")
