"""attempts.id as a 64-bit integer

A 32-bit id runs out after 2,147,483,647 attempts. On PostgreSQL the column
and its sequence become bigint. ALTER COLUMN TYPE rewrites the whole table
and its indexes under an ACCESS EXCLUSIVE lock: no attempt can be recorded
while it runs (docs/scaling.md gives the time measured on 2.36 million rows;
stop the workers first, or expect them to wait). SQLite's INTEGER PRIMARY KEY
is 64-bit already: nothing to do there.

Downgrade narrows it back, which fails if an id above 2^31 - 1 exists.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _alter(column_type: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.alter_column("attempts", "id", type_=sa.BigInteger() if column_type == "bigint"
                    else sa.Integer(), existing_nullable=False)
    # The sequence has a type of its own (and a maximum from it) since PostgreSQL 10.
    op.execute(
        "DO $$ BEGIN EXECUTE format('ALTER SEQUENCE %s AS " + column_type + "', "
        "pg_get_serial_sequence('attempts', 'id')); END $$"
    )


def upgrade() -> None:
    _alter("bigint")


def downgrade() -> None:
    _alter("integer")
