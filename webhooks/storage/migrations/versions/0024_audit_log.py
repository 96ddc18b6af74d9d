"""audit log: table ``audit_log``, append-only (CONTRACT 10.5)

- table ``audit_log``: one row per change of an account's subscriptions,
  secrets, deliveries (replays) and portal links, with who made it and the
  fields it changed (redacted; webhooks/audit). Empty at first: nothing
  before this revision is known.
- PostgreSQL: a trigger refuses every UPDATE of an entry, and every DELETE
  unless the transaction set ``webhooks.audit_purge`` to ``on`` (retention
  does, lifecycle/retention.py), so no route, bug or hand-typed statement of
  the service's own role alters an entry. SQLite (the embedded ``webhooks
  dev`` store): a trigger refuses UPDATE; DELETE is left to retention.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_PG_GUARD = """
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('webhooks.audit_purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log entries are never changed or deleted (only retention purges them)'
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
"""

_SQLITE_GUARD = """
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log entries are never changed');
END
"""


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("actor_kind", sa.String(length=16), nullable=False),
        sa.Column("actor_id", sa.String(length=200), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_kind", sa.String(length=32), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_log_account_created", "audit_log",
                    ["account_id", "created_at", "id"])
    op.create_index("ix_audit_log_created", "audit_log", ["created_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_GUARD)
    else:
        op.execute(_SQLITE_GUARD)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
    op.drop_index("ix_audit_log_created", table_name="audit_log")
    op.drop_index("ix_audit_log_account_created", table_name="audit_log")
    op.drop_table("audit_log")
