"""attempts partitioned by day of started_at (PostgreSQL): retention drops a day whole

On PostgreSQL ``attempts`` becomes a table range-partitioned by
``started_at``, one partition per UTC day (webhooks/storage/partitions.py),
plus ``attempts_default`` for any row no day takes. A partitioned table's
unique keys must hold the partition key, so the primary key becomes
``(id, started_at)`` and the unique key ``(delivery_id, number, started_at)``;
a duplicate attempt is still never recorded twice because the record inserts
its attempt only if its UPDATE of the delivery moved it from ``sending`` with
that attempt number (docs/architecture.md, "Attempts by day").

The rows move: the plain table is renamed, the partitioned one created with
day partitions for the days of the last ``DAYS_BACK`` days that hold rows and
for today and the ``DAYS_AHEAD`` after it, the rows copied (older ones land in
the default partition, where retention deletes them as before), the keys and
the index built and the foreign key to ``deliveries`` checked once after the
copy, and the plain table dropped. ``attempts`` is locked ACCESS EXCLUSIVE for the whole copy: no attempt
is recorded meanwhile (docs/upgrade.md gives the time on 1 M deliveries).

Downgrade copies the rows back into a plain table with the keys of before.
SQLite keeps its plain table: nothing to do there.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28
"""
import datetime as dt

from alembic import op

from webhooks.storage import partitions

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

#: Days before the upgrade whose rows get day partitions (older rows: the default one).
DAYS_BACK = 60
#: Days after today created at once (the scheduler keeps WEBHOOKS_PARTITION_DAYS_AHEAD).
DAYS_AHEAD = 3

_COLUMNS = """
    id bigint NOT NULL DEFAULT nextval('attempts_id_seq'),
    delivery_id character varying(36) NOT NULL,
    number integer NOT NULL,
    started_at timestamp without time zone NOT NULL,
    duration_ms integer NOT NULL,
    status_code integer,
    error text,
    outcome character varying(20) NOT NULL,
    response_excerpt text,
    location text,
    error_kind character varying(32)
"""
_NAMES = ("id, delivery_id, number, started_at, duration_ms, status_code, error, outcome, "
          "response_excerpt, location, error_kind")


def _set_aside(old: str, suffix: str, unique: str) -> None:
    """Rename ``attempts`` and its keys, index and foreign key out of the way, and free
    the id sequence from it (it is kept for the new table)."""
    op.execute(f"ALTER TABLE attempts RENAME TO {old}")
    op.execute(f"ALTER TABLE {old} RENAME CONSTRAINT attempts_pkey TO {old}_pkey")
    op.execute(f"ALTER TABLE {old} RENAME CONSTRAINT {unique} TO {old}_{suffix}_key")
    op.execute(f"ALTER TABLE {old} RENAME CONSTRAINT attempts_delivery_id_fkey "
               f"TO {old}_delivery_id_fkey")
    op.execute(f"ALTER INDEX ix_attempts_started_at RENAME TO ix_{old}_started_at")
    op.execute("ALTER SEQUENCE attempts_id_seq OWNED BY NONE")


def _copy_from(old: str, primary_key: str, unique_name: str, unique: str) -> None:
    """The rows of ``old`` into ``attempts``, then its keys and index built over them (one
    sorted build each is faster than an entry per row copied) and its foreign key checked
    once (not per row); the sequence owned again, ``old`` dropped."""
    op.execute(f"INSERT INTO attempts ({_NAMES}) SELECT {_NAMES} FROM {old}")
    op.execute(f"ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY ({primary_key})")
    op.execute(f"ALTER TABLE attempts ADD CONSTRAINT {unique_name} UNIQUE ({unique})")
    op.execute("CREATE INDEX ix_attempts_started_at ON attempts (started_at)")
    op.execute("ALTER TABLE attempts ADD CONSTRAINT attempts_delivery_id_fkey "
               "FOREIGN KEY (delivery_id) REFERENCES deliveries (id)")
    op.execute("ALTER SEQUENCE attempts_id_seq OWNED BY attempts.id")
    op.execute(f"DROP TABLE {old}")


def _days_with_rows(old: str) -> list[partitions.Partition]:
    rows = op.get_bind().exec_driver_sql(
        f"SELECT DISTINCT started_at::date FROM {old} "
        f"WHERE started_at >= (now() AT TIME ZONE 'UTC')::date - {DAYS_BACK}").scalars()
    return [partitions.day_of(day) for day in rows]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside("attempts_plain", "delivery_id_number", "attempts_delivery_id_number_key")
    op.execute(f"CREATE TABLE attempts ({_COLUMNS}) PARTITION BY RANGE (started_at)")
    op.execute(f"CREATE TABLE {partitions.DEFAULT} PARTITION OF attempts DEFAULT")
    now = dt.datetime.now(dt.timezone.utc)
    wanted = sorted(set(_days_with_rows("attempts_plain")) | set(partitions.ahead(now, DAYS_AHEAD)))
    for partition in wanted:
        op.execute(f"CREATE TABLE {partition.name} PARTITION OF attempts FOR VALUES "
                   f"FROM ('{partition.start.isoformat()}') TO ('{partition.end.isoformat()}')")
    _copy_from("attempts_plain", "id, started_at", "attempts_delivery_id_number_started_at_key",
               "delivery_id, number, started_at")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _set_aside("attempts_parted", "delivery_id_number_started_at",
               "attempts_delivery_id_number_started_at_key")
    op.execute(f"CREATE TABLE attempts ({_COLUMNS})")
    _copy_from("attempts_parted", "id", "attempts_delivery_id_number_key",
               "delivery_id, number")  # its partitions go with it
