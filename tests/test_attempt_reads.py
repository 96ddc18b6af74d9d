"""Reads of a delivery's attempts name a lower bound on ``started_at``: the delivery's
creation less the clocks' margin (storage/attempt_window.py). They find every attempt
they found before, on both engines (an attempt stamped a little before its delivery's
creation, one in PostgreSQL's default partition); and on PostgreSQL the plan of the list's
and the page's read scans only the day partitions from the bound on (docs/architecture.md,
"Reading by delivery"). The error_kind filter's bound is checked by what it reads, not by
its plan: PostgreSQL prunes it only when it probes per delivery, and picks another join
from the statistics the other tests' rows leave (a nested loop driven by the attempts, or
a hash semi-join, in full runs), so a plan test of it failed by the run's order."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from tests.factories import make_account, make_subscription, stored_delivery
from web.dashboard import queries
from web.delivery_list import DeliveryFilters, delivery_page
from webhooks.services import reads
from webhooks.storage import partitions
from webhooks.storage.attempt_window import CLOCK_MARGIN, earliest_start
from webhooks.storage.backends import backend_of
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import Delivery, utcnow

pytestmark = pytest.mark.database

NOW = utcnow().replace(hour=12, minute=0, second=0, microsecond=0)
BACK = 10  # day partitions made before today (the migration made today's and later)


def _created_days(engine) -> list[partitions.Partition]:
    wanted = [partitions.day_of((NOW - dt.timedelta(days=n)).date()) for n in range(BACK + 1)]
    with engine.begin() as connection:
        created = backend_of(engine).create_partitions(connection, wanted)
    return [p for p in wanted if p.name in created]


def _with_days_back():
    """Day partitions for the ``BACK`` days before today (none on SQLite), dropped after."""
    engine = get_engine()
    created = _created_days(engine)
    yield engine
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM attempts"))
        for partition in created:
            connection.execute(text(f"DROP TABLE {partition.name}"))


@pytest.fixture
def days_back(any_db):
    """The ``BACK`` days' partitions, on both engines."""
    yield from _with_days_back()


@pytest.fixture
def pg_days(db):
    """The ``BACK`` days' partitions, on PostgreSQL only (the plans' tests)."""
    yield from _with_days_back()


def _delivery(account_id, subscription_id, created_at, starts, error_kind=None) -> Delivery:
    """A dead delivery created at ``created_at`` with one attempt per time in ``starts``
    (factories.stored_delivery), read back."""
    delivery_id = stored_delivery(account_id, subscription_id, created_at, "dead", starts,
                                  error_kind=error_kind)
    with session_scope() as session:
        found = session.get(Delivery, delivery_id)
        session.expunge(found)
        return found


def _account():
    account_id, _ = make_account()
    return account_id, make_subscription(account_id, "https://example.com/hook").id


def _numbers(attempts) -> list[tuple[int, dt.datetime]]:
    return [(a.number, a.started_at) for a in attempts]


def test_reads_find_every_attempt_of_their_deliveries(days_back):
    account_id, subscription_id = _account()
    created = NOW - dt.timedelta(days=3)
    # Stamped 20 h before its delivery's creation (another host's clock): within the margin,
    # on PostgreSQL in the day partition before the creation's.
    early = created - dt.timedelta(hours=20)
    starts = [early, created + dt.timedelta(hours=1), created + dt.timedelta(hours=30)]
    skewed = _delivery(account_id, subscription_id, created, starts, error_kind="timeout")
    # 90 days old: no day partition holds it, its attempt is in the default partition.
    old_at = NOW - dt.timedelta(days=90)
    old = _delivery(account_id, subscription_id, old_at, [old_at + dt.timedelta(minutes=5)])
    other = _delivery(account_id, subscription_id, created, [created])  # not asked for
    assert early < earliest_start(created) + CLOCK_MARGIN
    with session_scope() as session:
        by_delivery = reads.attempts_by_delivery(session, [skewed, old])
        assert _numbers(by_delivery[skewed.id]) == list(enumerate(starts, start=1))
        assert _numbers(by_delivery[old.id]) == [(1, old_at + dt.timedelta(minutes=5))]
        assert other.id not in by_delivery
        assert _numbers(queries.attempts_of(session, skewed)) == list(enumerate(starts, 1))
        assert _numbers(queries.attempts_of(session, old)) == [(1, old_at + dt.timedelta(minutes=5))]
        page, _ = delivery_page(session, account_id, DeliveryFilters(error_kind="timeout"), 10)
        assert [d.id for d in page] == [skewed.id]  # found by its early attempt
    with days_back.connect() as connection:
        if backend_of(days_back).day_partitions(connection):  # PostgreSQL's partitions
            assert connection.execute(text(
                f"SELECT count(*) FROM {partitions.DEFAULT}")).scalar() == 1


def test_an_attempt_before_the_margin_is_not_read(days_back):
    """The bound is a real condition on both engines (what no clock should stamp)."""
    account_id, subscription_id = _account()
    created = NOW - dt.timedelta(days=3)
    impossible = created - CLOCK_MARGIN - dt.timedelta(hours=1)
    delivery = _delivery(account_id, subscription_id, created, [impossible, created],
                         error_kind="timeout")
    with session_scope() as session:
        assert [a.number for a in queries.attempts_of(session, delivery)] == [2]
        page, _ = delivery_page(session, account_id, DeliveryFilters(error_kind="timeout"), 10)
        assert page == []


# ---------------------------------------------------------------- the plans (PostgreSQL)

_PARTITION = re.compile(r"\battempts_(?:p\d{8}|default|k\d{8})\b")


def _scanned(plan_lines: list[str]) -> set[str]:
    """The partitions a plan scans (an ANALYZE's "never executed" nodes not counted)."""
    return {name for line in plan_lines if "never executed" not in line
            for name in _PARTITION.findall(line)}


def _all_days(engine) -> set[str]:
    with engine.connect() as connection:
        return {p.name for p in backend_of(engine).day_partitions(connection)}


def _expected(bound: dt.datetime, engine) -> set[str]:
    """The partitions a read bounded by ``bound`` may scan: the days that end after it and
    the default partition."""
    with engine.connect() as connection:
        days = backend_of(engine).day_partitions(connection)
    return {p.name for p in days if p.end > partitions.naive_utc(bound)} | {partitions.DEFAULT}


def _compiled(statement, values: dict) -> tuple[str, list]:
    """``statement`` as PostgreSQL text with ``$n`` parameters, and their values in order."""
    compiled = statement.compile(dialect=postgresql.dialect(paramstyle="numeric_dollar"))
    state = compiled.construct_expanded_state(values)
    return state.statement, [_as_stored(state.parameters[name]) for name in state.positiontup]


def _as_stored(value):
    return partitions.naive_utc(value) if isinstance(value, dt.datetime) else value


def _plans(engine, statement, values: dict) -> dict[str, list[str]]:
    """EXPLAIN ANALYZE's lines for ``statement``: its values inlined (the custom plan, as
    psycopg2 sends them) and bound to a prepared statement's generic plan (pruned when the
    executor starts)."""
    sql, parameters = _compiled(statement, values)
    plans = {}
    with engine.connect() as connection:
        driver = connection.connection.dbapi_connection.cursor()
        driver.execute("SET plan_cache_mode = force_custom_plan")
        driver.execute(f"PREPARE read_attempts AS {sql}")
        arguments = ", ".join(["%s"] * len(parameters))
        for mode in ("custom", "generic"):
            driver.execute(f"SET plan_cache_mode = force_{mode}_plan")
            driver.execute(f"EXPLAIN ANALYZE EXECUTE read_attempts({arguments})", parameters)
            plans[mode] = [row[0] for row in driver.fetchall()]
        driver.execute("DEALLOCATE read_attempts")
        driver.execute("RESET plan_cache_mode")
    return plans


def _two_deliveries(engine):
    account_id, subscription_id = _account()
    newer_at, older_at = NOW - dt.timedelta(days=2), NOW - dt.timedelta(days=4)
    newer = _delivery(account_id, subscription_id, newer_at, [newer_at], error_kind="timeout")
    older = _delivery(account_id, subscription_id, older_at, [older_at])
    return account_id, newer, older


def test_the_delivery_list_reads_attempts_from_its_oldest_delivery_on(pg_days):
    _, newer, older = _two_deliveries(pg_days)
    bound = earliest_start(older.created_at)
    plans = _plans(pg_days, reads._ATTEMPTS,
                   {"delivery_ids": [newer.id, older.id], "earliest": bound})
    expected = _expected(bound, pg_days)
    assert _all_days(pg_days) - expected  # days before the bound exist, and are skipped
    for mode, lines in plans.items():
        assert _scanned(lines) == expected, (mode, lines)


def test_a_delivery_page_reads_attempts_from_its_creation_on(pg_days):
    _, newer, _ = _two_deliveries(pg_days)
    bound = earliest_start(newer.created_at)
    plans = _plans(pg_days, reads._ATTEMPTS, {"delivery_ids": [newer.id], "earliest": bound})
    for mode, lines in plans.items():
        assert _scanned(lines) == _expected(bound, pg_days), (mode, lines)
