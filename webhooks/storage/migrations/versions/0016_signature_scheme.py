"""signature scheme: how a subscription's deliveries are signed

- ``subscriptions.signature_scheme``: ``service`` (the SPEC 2.4 headers, what
  every subscription used until now, so existing rows get it by the server
  default) or ``standard`` (Standard Webhooks; webhooks/tenants/schemes.py).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("signature_scheme", sa.String(length=16), nullable=False,
                                      server_default="service"))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_column("signature_scheme")
