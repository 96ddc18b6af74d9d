"""dashboard sessions: a server-side record of each signed-in dashboard session

Signing out used to clear only the browser's cookie: a copy saved before
still opened pages for the rest of its 12 hours. Each sign-in now makes a
row here, named by the SHA-256 of the random token its cookie carries;
signing out deletes the row, and a cookie whose row is gone or past
``expires_at`` opens nothing. ``read_only`` is ready for portal links
(CONTRACT 9.3). Sessions of a deleted account go with it (ON DELETE CASCADE).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("read_only", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_dashboard_sessions_account_id", "dashboard_sessions", ["account_id"])
    op.create_index("ix_dashboard_sessions_expires_at", "dashboard_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_expires_at", table_name="dashboard_sessions")
    op.drop_index("ix_dashboard_sessions_account_id", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
