"""waiting counts off the hot path: drop the triggers on ``deliveries`` that kept them

Migration 0008 made statement triggers (PostgreSQL) and row triggers (SQLite)
on ``deliveries`` that added every change of status into ``waiting_counts``,
so that /metrics read a few rows. They ran in every emit, claim and record:
measured (docs/performance.md, "Counters off the hot path") at about 0.4 ms of
PostgreSQL CPU and 0.4 KB of WAL per delivery, nearly half the backend's CPU
of an attempt. Each sweep now counts the unfinished deliveries on their
indexes into row 0 of the same table, which /metrics reads as before
(webhooks/storage/waiting_counts.py); the other rows go at the first sweep.
An old host's /metrics reads the same table during a rolling upgrade.
Downgrade makes the triggers again as 0008 did and counts the deliveries
waiting now.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""
import importlib

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# 0008's triggers and functions, dropped and made again by its own code: one copy.
_0008 = importlib.import_module("webhooks.storage.migrations.versions.0008_waiting_counts")


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if _postgresql():
        _0008._postgresql_downgrade()
    else:
        _0008._sqlite_downgrade()


def downgrade() -> None:
    if _postgresql():
        _0008._postgresql_upgrade()
    else:
        _0008._sqlite_upgrade()
    # Counted afresh: nothing was counted while the triggers were gone.
    op.execute("DELETE FROM waiting_counts")
    op.execute(
        "INSERT INTO waiting_counts (backend, pending, sending, paused) SELECT 0, "
        "(SELECT count(*) FROM deliveries WHERE status = 'pending'), "
        "(SELECT count(*) FROM deliveries WHERE status = 'sending'), "
        "(SELECT count(*) FROM deliveries WHERE status = 'paused')")
