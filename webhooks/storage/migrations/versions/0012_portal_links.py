"""portal links: single-use sign-in links to an account's dashboard (CONTRACT 9.3)

``POST /api/webhooks/portal-links`` stores a row here, named by the SHA-256
of the random token its URL carries. Opening the link sets ``used_at`` once
(a conditional UPDATE: two opens at once give one session) and starts a
dashboard session ending at ``expires_at``. Links of a deleted account go
with it (ON DELETE CASCADE).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "portal_links",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("read_only", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_portal_links_account_id", "portal_links", ["account_id"])
    op.create_index("ix_portal_links_expires_at", "portal_links", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_portal_links_expires_at", table_name="portal_links")
    op.drop_index("ix_portal_links_account_id", table_name="portal_links")
    op.drop_table("portal_links")
