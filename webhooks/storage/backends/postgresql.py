"""The PostgreSQL backend: the hot transitions in one prepared round trip, row locks,
advisory locks, REPEATABLE READ snapshots.

The claim joins the event and the subscription (UPDATE … FROM … RETURNING)
after taking the account's turn (an advisory lock, so that concurrent claims
count each other's attempts in flight); the record's steps run as one
statement of data-modifying CTEs. Both are prepared once per connection
(storage/prepared.py) and built from the statements lifecycle/claim.py and
lifecycle/record.py write once for both engines and hand down with each call.
"""

from __future__ import annotations

import contextlib

from sqlalchemy import (Integer, and_, any_, bindparam, exists, false, func, insert, literal,
                        literal_column, select, text)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from webhooks.states import FINISHED
from webhooks.storage.backends import pg_partitions
from webhooks.storage.backends.base import (Backend, Built, ClaimStatements, RecordStatements,
                                            claim_row_with)
from webhooks.storage.batched import BatchedStatement, Body
from webhooks.storage.models import Event
from webhooks.storage.prepared import PreparedStatement, execute_together

__all__ = ["PostgreSQLBackend"]


class _Claims:
    """The claim's statements as PostgreSQL runs them: the account's turn and the claim
    with its loads, prepared; and the claims of a batch as one statement.

    Claims of one account take turns, always (a subscription may have a cap of
    its own even when the service's are 0): under READ COMMITTED two concurrent
    claims would each count the attempts in flight without the other's, so N
    threads could overshoot a cap by N - 1. The lock is held until the claim
    commits and taken in its own statement, so that the claim's snapshot,
    taken after it, sees every claim committed before. (SQLite's BEGIN
    IMMEDIATE already serialises writers.)
    """

    def __init__(self, statements: ClaimStatements):
        d = statements.deliveries
        self.turn = PreparedStatement.from_core(
            "claim_turn",
            select(func.pg_advisory_xact_lock(_turn_key(d))).where(d.c.id == bindparam("d_id")))
        self.take = PreparedStatement.from_core("claim", _take(statements))
        self.batch = _claims_statement(statements)


def _turn_key(deliveries):
    """The advisory lock of a delivery's account: claims of one account take turns."""
    return func.hashtextextended(deliveries.c.account_id, 7403)


def _take(statements: ClaimStatements):
    d = statements.deliveries
    return statements.take.where(
        statements.events.c.id == d.c.event_id,
        statements.subscriptions.c.id == d.c.subscription_id,
    ).returning(*statements.taken, *statements.loaded)


def _claims_statement(statements: ClaimStatements) -> BatchedStatement:
    """Claims of a batch (group commit): the turns of all their accounts first, in one
    order (two batches that took them in different orders could deadlock), then each
    claim as it runs alone (the claim, the turn-away if not taken), in order. Its turn
    is held already, from before its statement's snapshot, as alone; the turns are held
    to the batch's commit, as one claim holds its own."""
    d = statements.deliveries
    key = _turn_key(d).label("turn")
    turns = (select(key).where(d.c.id == any_(bindparam("d_id", type_=d.c.id.type)))
             .distinct().order_by(key).subquery())
    returns = [(column.name, column.type)
               for column in (*statements.taken, *statements.loaded)]
    return BatchedStatement(
        "claims", Body(main=_take(statements), returns=returns,
                       otherwise=[statements.turn_away]),
        prologue=select(func.pg_advisory_xact_lock(turns.c.turn)))


class _Records:
    """The record's statements as PostgreSQL runs them: one prepared statement after a
    failure, one after a success, and the records of a batch of successes as one."""

    def __init__(self, statements: RecordStatements):
        self.failure = PreparedStatement.from_core(
            "record_failure", _record_statement(statements, statements.count_failure))
        self.success = PreparedStatement.from_core(
            "record_success", _record_statement(statements, statements.count_success))
        self.batch = _records_statement(statements)


def _records_statement(statements: RecordStatements) -> BatchedStatement:
    """Records of a batch of successful attempts (group commit): each one's statement as
    it runs alone (record_success), in order, but for its counts in the rollups, which
    come after them all, together (:func:`_count_batch`)."""
    id_type = statements.deliveries.c.id.type
    returns = [("moved", Integer()), ("failures", Integer()),
               ("released_id", id_type), ("released_count", Integer()),
               ("successor_id", id_type), ("successor_count", Integer()),
               ("account_id", id_type)]
    return BatchedStatement(
        "records", Body(main=_record_statement(statements, statements.count_success,
                                               batched=True),
                        returns=returns),
        after=lambda calls: _count_batch(statements, calls))


def _count_batch(statements: RecordStatements, calls) -> tuple:
    """The rollups' counts of a batch's records that moved their delivery, as CTEs read
    from ``calls`` (the batch's items and rows, batched.py): after every record, each
    row taken once and in the one order every record takes them (rollup.py). Counted in
    each item's own statement, they were taken item by item, in the items' order, which
    is not the rows' order: two batches whose backends share a shard deadlocked."""
    return statements.count_in_statement(_to_count(
        calls, calls.c.sub_id, calls.c.t_started, calls.c.result, calls.c.t_duration,
        calls.c.o_account_id, calls.c.o_moved > 0))


def _to_count(source, subscription_id, started_at, outcome, duration_ms, account_id, *where):
    """The attempts the rollups count (rollup.count_in_statement), one row each, from
    ``source``'s rows that pass ``where``."""
    return (select(subscription_id.label("subscription_id"), started_at.label("started_at"),
                   outcome.label("outcome"), duration_ms.label("duration_ms"),
                   account_id.label("account_id"))
            .select_from(source).where(*where).subquery("to_count"))


def _record_statement(statements: RecordStatements, count, *, batched: bool = False):
    """The record's steps as data-modifying CTEs; each later one only if the move
    happened. The sixth, for a keyed delivery (``okey`` not null) that finished, releases
    the next delivery of its key if that waits behind it (ordering.release_successor's
    statement); for any other, a one-time filter skips it. ``batched``: without the
    counts in the rollups (a batch counts its records after them all), and returning the
    moved delivery's account for them.

    PostgreSQL runs every data-modifying CTE to completion whether or not the
    final SELECT reads it, so that SELECT reads only what the caller uses
    (each CTE it read cost executor work on every attempt).
    """
    s = statements
    d = s.deliveries
    moved = s.move.returning(d.c.id, d.c.account_id, d.c.status).cte("moved")
    ours = exists(select(moved.c.id))
    finished = [literal_column(f"'{status}'") for status in FINISHED]  # literals: prepared
    finished_keyed = and_(s.successor_key.is_not(None),
                          exists(select(moved.c.id).where(moved.c.status.in_(finished))))
    successor = s.successor.where(finished_keyed).cte("successor")
    recorded = (insert(s.attempts)
                .from_select(["delivery_id", *s.attempt_values],
                             select(moved.c.id, *s.attempt_values.values()))
                .cte("recorded"))
    counted = (count.where(ours).returning(s.subscriptions.c.consecutive_failures)
               .cte("counted"))
    released = s.release(True).where(ours).cte("released")
    columns = [
        select(func.count()).select_from(moved).scalar_subquery().label("moved"),
        select(counted.c.consecutive_failures).scalar_subquery().label("failures"),
        select(released.c.id).scalar_subquery().label("released_id"),
        select(released.c.attempt_count).scalar_subquery().label("released_count"),
        # Due now, so it needs a message; one put in the queue for a free slot does not.
        select(successor.c.id).where(successor.c.parked == false())
        .scalar_subquery().label("successor_id"),
        select(successor.c.attempt_count).where(successor.c.parked == false())
        .scalar_subquery().label("successor_count"),
    ]
    if batched:
        account = select(moved.c.account_id).scalar_subquery().label("account_id")
        return select(*columns, account).add_cte(recorded)
    values = s.attempt_values
    to_count = _to_count(moved, s.subscription_id, values["started_at"], values["outcome"],
                         values["duration_ms"], moved.c.account_id)
    return select(*columns).add_cte(recorded, *s.count_in_statement(to_count))


def _released(released_id, released_count, successor_id, successor_count) -> list:
    """The deliveries a record's row released, as (id, attempt_count): the one released
    into the slot it freed, and the next of its key released behind it (each if any)."""
    return [(delivery_id, count) for delivery_id, count in
            ((released_id, released_count), (successor_id, successor_count)) if delivery_id]


class PostgreSQLBackend(Backend):
    name = "postgresql"
    emits_in_one_statement = True

    def __init__(self):
        self._claims, self._records = Built(_Claims), Built(_Records)
        events = Event.__table__
        self._insert_event_once = (
            pg_insert(events)
            .on_conflict_do_nothing(index_elements=["account_id", "idempotency_key"])
            .returning(events.c.id))

    def claim(self, connection, params: dict, statements: ClaimStatements):
        # Always: even with the service's caps at 0, a subscription may have its own.
        # One round trip: the turn, then the claim (each with its own snapshot); on an
        # autocommit connection the two are one implicit transaction, committed at the end.
        claims = self._claims.of(statements)
        rows = execute_together(
            connection, [(claims.turn, {"d_id": params["d_id"]}), (claims.take, params)])
        return rows[0] if rows else None

    def record(self, connection, params: dict, is_failure: bool,
               statements: RecordStatements):
        records = self._records.of(statements)
        statement = records.failure if is_failure else records.success
        # A success is this one statement, committed on its own on the attempt engine; a
        # failure opens a transaction, as it may pause the subscription after it (record()).
        ((moved, failures, *released),) = execute_together(
            connection, [(statement, params)], begin=is_failure)
        if not moved:
            return None
        return failures, _released(*released)

    def claim_many(self, connection, items: list[dict], statements: ClaimStatements) -> list:
        return [row if row[0] is not None else None  # subscription_id: None if not taken
                for row in self._claims.of(statements).batch.run(connection, items)]

    def record_many(self, connection, items: list[dict], statements: RecordStatements) -> list:
        # Each subscription's rows (its counters, its waiting deliveries) are taken in one
        # order by every batch: by subscription, then delivery.
        order = sorted(range(len(items)), key=lambda i: (items[i]["sub_id"], items[i]["d_id"]))
        rows = self._records.of(statements).batch.run(connection, [items[i] for i in order])
        answers: list = [None] * len(items)
        for i, (moved, _, *released, _account) in zip(order, rows):
            if moved:
                answers[i] = _released(*released)
        return answers

    def insert_event_once(self):
        return self._insert_event_once

    def upsert_adding(self, table, values, key, increments):
        statement = pg_insert(table).values(**values)
        return statement.on_conflict_do_update(
            index_elements=list(key),
            set_={name: table.c[name] + statement.excluded[name] for name in increments})

    def claim_row(self, table, values, key, owner, refused):
        return claim_row_with(pg_insert, table, values, key, owner, refused)

    def hour_of(self, column):
        return func.date_trunc("hour", column)

    def lock_replays_of(self, session, subscription_id: str, seed: int) -> None:
        session.execute(select(func.pg_advisory_xact_lock(
            func.hashtextextended(literal(subscription_id), seed))))

    def create_partitions(self, connection, wanted: list) -> list[str]:
        return pg_partitions.create(connection, wanted)

    def day_partitions(self, connection) -> list:
        return pg_partitions.day_partitions(connection)

    def drop_partition(self, connection, partition, keep) -> tuple[int, int]:
        return pg_partitions.drop(connection, partition, keep)

    def drop_emptied_partitions(self, connection) -> list[str]:
        return pg_partitions.drop_emptied(connection)

    def in_values(self, column, ids):
        return pg_partitions.in_one_array(column, ids)

    @contextlib.contextmanager
    def audit_purge(self, connection):
        # Read by the audit_log triggers (migrations 0024, 0030); LOCAL: it ends with the
        # transaction, so nothing needs undoing when the block ends.
        connection.execute(text("SET LOCAL webhooks.audit_purge = 'on'"))
        yield

    def skip_locked(self, statement):
        return statement.with_for_update(skip_locked=True)

    @contextlib.contextmanager
    def alone(self, engine, key: int):
        # A session lock on a connection in autocommit mode: it holds no transaction open
        # (which would keep vacuum from cleaning up behind the purge), and a process that
        # dies releases it with its connection.
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            taken = connection.execute(select(func.pg_try_advisory_lock(key))).scalar()
            try:
                yield taken
            finally:
                if taken:
                    connection.execute(select(func.pg_advisory_unlock(key)))

    def begin_snapshot(self, session) -> None:
        # Under READ COMMITTED each statement sees its own moment: the request's earlier
        # reads (the caller's key) are ended, and the rest run in one REPEATABLE READ.
        if session.in_transaction():
            session.commit()  # only reads so far: the account of the API key
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})

    def limit_statement_time(self, connection, milliseconds: int) -> None:
        connection.exec_driver_sql(f"SET LOCAL statement_timeout = {int(milliseconds)}")
