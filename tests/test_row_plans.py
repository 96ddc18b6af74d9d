"""The hot statements that move deliveries found by id find them by their primary key,
whatever the statistics say (transitions.one_row, transitions.park), on the real
PostgreSQL.

The table is as the service finds it after an install or a TRUNCATE: never analysed,
with a backlog. Compared plainly with ``status = 'pending'`` (or ``'sending'``), the
moved rows were found by scanning the partial index of every pending (or sending)
delivery and filtering it by id, as the planner costs the two as a tie without
statistics: a read of the whole backlog per claim. Every case here failed so before the
status was compared as ``status || ''``. Each plan of a prepared statement is
PostgreSQL's generic one, which it keeps once it has run five times; the batches'
functions (storage/batched.py) are compiled from the same statements.
"""

from __future__ import annotations

import pytest
from sqlalchemy import event, text

from benchmarks import seed
from tests.conftest import TABLES
from tests.factories import make_account, make_subscription
from tests.support.services import truncate
from webhooks.lifecycle import claim, record, transitions
from webhooks.storage.backends.postgresql import PostgreSQLBackend
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import utcnow

pytestmark = pytest.mark.integration

BACKLOG = 1_000  # pending deliveries
SENDING = 100  # of them then sending: the benchmark's backlog and attempts in flight


def _backlog(sending: int) -> list[str]:
    """BACKLOG pending deliveries, the first ``sending`` of them sending; their ids. The
    tables are truncated first: the ``db`` fixture's DELETE keeps what autovacuum analysed."""
    truncate(get_engine(), TABLES)
    account_id, _ = make_account("plans")
    subscription = make_subscription(account_id, "https://example.com/hook")
    target = seed.Target(account_id, subscription.id, subscription.url, subscription.secret)
    ids = seed.bulk_deliveries(target, BACKLOG)
    with get_engine().begin() as connection:
        connection.execute(text("UPDATE deliveries SET status = 'sending', claimed_at = now() "
                               "WHERE id = ANY(:ids)"), {"ids": ids[:sending]})
        analysed = connection.execute(text(
            "SELECT reltuples FROM pg_class WHERE relname = 'deliveries'")).scalar()
    assert analysed < 0, "the table must never have been analysed for this test to mean anything"
    return ids


def _scans_of_the_moved_row(prepared) -> list[str]:
    """How the generic plan of ``prepared`` reaches ``deliveries`` under its own name (not
    an alias of a subquery, such as the caps' count of attempts in flight)."""
    types = ", ".join(prepared._types[name] for name in prepared._order)
    nulls = ", ".join(["NULL"] * len(prepared._order))
    with get_engine().connect() as connection:
        connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        connection.exec_driver_sql(f"PREPARE plan_probe({types}) AS {prepared._text}")
        try:
            (plan,) = connection.exec_driver_sql(
                f"EXPLAIN (FORMAT JSON) EXECUTE plan_probe({nulls})").scalar()
        finally:
            connection.exec_driver_sql("DEALLOCATE plan_probe")
            connection.exec_driver_sql("RESET plan_cache_mode")
    return [node.get("Index Name") or node["Node Type"] for node in _nodes(plan["Plan"])
            if node.get("Relation Name") == "deliveries" and node.get("Alias") == "deliveries"
            and "Scan" in node["Node Type"]]


def _nodes(node: dict):
    """Every node of an EXPLAIN (FORMAT JSON) plan, from ``node`` down."""
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


# The PostgreSQL backend's prepared forms of the statements the lifecycle hands it.
PREPARED = {
    "claim": lambda backend: backend._claims.of(claim.STATEMENTS).take,
    "record_success": lambda backend: backend._records.of(record.STATEMENTS).success,
    "record_failure": lambda backend: backend._records.of(record.STATEMENTS).failure,
}


@pytest.mark.parametrize("statement", sorted(PREPARED))
@pytest.mark.parametrize("sending", [0, SENDING])
def test_the_moved_row_is_found_by_its_primary_key_without_statistics(db, statement, sending):
    _backlog(sending)
    scans = _scans_of_the_moved_row(PREPARED[statement](PostgreSQLBackend()))
    assert scans and set(scans) == {"deliveries_pkey"}, scans


def test_park_finds_its_rows_by_their_primary_key_without_statistics(db):
    """A refused publish parks the caller's deliveries (outbox.park): while the broker is
    down every emit does, and the backlog it would read grows meanwhile."""
    ids = _backlog(0)
    engine = get_engine()
    executed: list[tuple[str, dict]] = []

    def keep_updates(_conn, _cursor, statement, parameters, _context, _many):
        if statement.lstrip().upper().startswith("UPDATE DELIVERIES"):
            executed.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep_updates)
    try:
        with session_scope() as session:
            transitions.park(session, ids[:2], utcnow())
    finally:
        event.remove(engine, "before_cursor_execute", keep_updates)
    ((statement, parameters),) = executed
    with engine.connect() as connection:
        (plan,) = connection.exec_driver_sql(
            f"EXPLAIN (FORMAT JSON) {statement}", parameters).scalar()
    indexes = {node["Index Name"] for node in _nodes(plan["Plan"]) if "Index Name" in node}
    assert indexes == {"deliveries_pkey"}, indexes
