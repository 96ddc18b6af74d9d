"""audit log guards: TRUNCATE on PostgreSQL, DELETE on SQLite

Migration 0024 made ``audit_log`` append-only on PostgreSQL against UPDATE and
DELETE (a row trigger; retention's transactions set ``webhooks.audit_purge``)
and against UPDATE on SQLite. Two gaps were left (noticed in issue 41's and
43's notes): ``TRUNCATE audit_log`` (a statement no row trigger sees) emptied
the log on PostgreSQL, and any DELETE went through on SQLite. Now:

- PostgreSQL: a statement trigger refuses TRUNCATE of ``audit_log`` unless the
  transaction set ``webhooks.audit_purge`` (the function of 0024 learns the
  case; the test and benchmark resets set it, as retention does for DELETE).
- SQLite: a trigger refuses DELETE unless the transaction holds a row in
  ``audit_purges``, which the backend's ``audit_purge`` adds and removes around
  retention's deletes (SQLite has no per-transaction setting, and its writers
  take turns, so the row is never seen outside that transaction). The table
  is made on both engines, as the models are one; PostgreSQL never uses it.

Downgrade removes both and restores 0024's function.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-28
"""
import importlib

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

# 0024's guard, made and dropped by its own text: one copy of the function.
_0024 = importlib.import_module("webhooks.storage.migrations.versions.0024_audit_log")
_0024_FUNCTION = _0024._PG_GUARD.split("CREATE TRIGGER")[0]
_PG_FUNCTION = (_0024_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
                .replace("TG_OP = 'DELETE'", "TG_OP IN ('DELETE', 'TRUNCATE')"))
assert "TRUNCATE" in _PG_FUNCTION and "OR REPLACE" in _PG_FUNCTION

_PG_TRUNCATE_GUARD = """
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
"""

_SQLITE_DELETE_GUARD = """
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN NOT EXISTS (SELECT 1 FROM audit_purges)
BEGIN
    SELECT RAISE(ABORT, 'audit_log entries are never deleted (only retention purges them)');
END
"""


def upgrade() -> None:
    op.create_table("audit_purges", sa.Column("id", sa.Integer(), primary_key=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(_PG_TRUNCATE_GUARD)
    else:
        op.execute(_SQLITE_DELETE_GUARD)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log")
        op.execute(_0024_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
    else:
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_delete")
    op.drop_table("audit_purges")
