"""The hot statements that move one delivery find it by its primary key, whatever the
statistics say (transitions.one_row), on the real PostgreSQL.

The table is as the service finds it after an install or a TRUNCATE: never analysed,
with a backlog. Compared plainly with ``status = 'pending'`` (or ``'sending'``), the
moved row was found by scanning the partial index of every pending (or sending) delivery
and filtering it by id, as the planner costs the two as a tie without statistics: a
read of the whole backlog per claim. Every case here failed so before one_row. Each plan
is PostgreSQL's generic one, which a prepared statement keeps once it has run five times;
the batches' functions (storage/batched.py) are compiled from the same statements.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from benchmarks import seed
from tests.factories import make_account, make_subscription
from webhooks.storage.backends.postgresql import PostgreSQLBackend
from webhooks.storage.db import get_engine

pytestmark = pytest.mark.integration

BACKLOG = 1_000  # pending deliveries
SENDING = 100  # of them then sending: the benchmark's backlog and attempts in flight


def _backlog(sending: int) -> None:
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
    scans: list[str] = []

    def walk(node: dict) -> None:
        if (node.get("Relation Name") == "deliveries" and node.get("Alias") == "deliveries"
                and "Scan" in node["Node Type"]):
            scans.append(node.get("Index Name") or node["Node Type"])
        for child in node.get("Plans", ()):
            walk(child)

    walk(plan["Plan"])
    return scans


@pytest.mark.parametrize("statement", ["_claim", "_record_success", "_record_failure"])
@pytest.mark.parametrize("sending", [0, SENDING])
def test_the_moved_row_is_found_by_its_primary_key_without_statistics(db, statement, sending):
    _backlog(sending)
    scans = _scans_of_the_moved_row(getattr(PostgreSQLBackend(), statement))
    assert scans and set(scans) == {"deliveries_pkey"}, scans
