"""receiver credentials: client certificates and OAuth2 (CONTRACT 10.3)

- ``subscriptions.client_certificate`` and ``subscriptions.oauth2`` (JSON,
  nullable): the credentials a receiver requires, write-only in answers
  (webhooks/tenants/credentials.py). Null on every existing row.
- ``oauth2_tokens``: one row per subscription using OAuth2, its current
  access token, when to refresh it and the lease of the worker fetching it
  (webhooks/storage/oauth2_tokens.py). Empty at first.

Revision ID: 0022
Revises: 0018
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0022"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("client_certificate", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("oauth2", sa.JSON(), nullable=True))
    op.create_table(
        "oauth2_tokens",
        sa.Column("subscription_id", sa.String(length=36),
                  sa.ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("config_hash", sa.String(length=64), nullable=True),
        sa.Column("access_token", sa.Text(), nullable=True),
        sa.Column("refresh_at", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("lease_owner", sa.String(length=36), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("oauth2_tokens")
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("oauth2")
        batch.drop_column("client_certificate")
