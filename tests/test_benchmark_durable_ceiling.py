"""The durable ceiling's writes (benchmarks/ceiling_app.py), on the real PostgreSQL: the row a
publisher commits before it publishes, and the mark its task commits after the POST."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from benchmarks.ceiling_app import ROWS_TABLE, create_rows_table, mark_delivered, store_row
from benchmarks.scenarios.shared import libpq_url


def test_libpq_url_drops_the_driver_and_keeps_the_rest():
    assert (libpq_url("postgresql+psycopg2://app:s3cret@db.internal:6543/webhooks_bench")
            == "postgresql://app:s3cret@db.internal:6543/webhooks_bench")


@pytest.fixture
def rows_connection(postgres):
    psycopg2 = pytest.importorskip("psycopg2")
    url = libpq_url(postgres)
    with contextlib.closing(psycopg2.connect(url)) as connection:
        try:
            yield connection, lambda: psycopg2.connect(url)
        finally:  # the test database holds the service's schema only
            connection.rollback()
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {ROWS_TABLE}")
            connection.commit()


def _row(connect, delivery_id: str):
    with contextlib.closing(connect()) as other, other.cursor() as cursor:
        cursor.execute(f"SELECT body, delivered_at IS NOT NULL FROM {ROWS_TABLE} WHERE id = %s",
                       (delivery_id,))
        return cursor.fetchone()


def test_a_stored_row_is_committed_then_marked_delivered(rows_connection):
    connection, connect = rows_connection
    create_rows_table(connection)
    delivery_id = str(uuid.uuid4())
    store_row(connection, delivery_id, b'{"type":"reply.received"}')
    body, delivered = _row(connect, delivery_id)  # another connection sees it: committed
    assert bytes(body) == b'{"type":"reply.received"}' and delivered is False
    mark_delivered(connection, delivery_id)
    assert _row(connect, delivery_id)[1] is True
    create_rows_table(connection)  # each leg starts on an empty table
    assert _row(connect, delivery_id) is None
