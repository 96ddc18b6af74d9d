"""The PostgreSQL backend: the hot transitions in one prepared round trip, row locks,
advisory locks, REPEATABLE READ snapshots, and the waiting counts kept per connection.

The claim joins the event and the subscription (UPDATE … FROM … RETURNING)
after taking the account's turn (an advisory lock, so that concurrent claims
count each other's attempts in flight); the record's steps run as one
statement of data-modifying CTEs. Both are prepared once per connection
(storage/prepared.py) and built from the statements lifecycle/claim.py and
lifecycle/record.py write once for both engines.
"""

from __future__ import annotations

import contextlib

from sqlalchemy import (Integer, and_, any_, bindparam, false, func, literal, literal_column,
                        select, text)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from webhooks.storage.backends import Backend, claim_row_with
from webhooks.storage.batched import BatchedStatement, Body
from webhooks.storage.prepared import PreparedStatement, execute_together

__all__ = ["PostgreSQLBackend"]


def _claim_statements():
    """(the account's turn, the claim with its loads), prepared.

    Claims of one account take turns, always (a subscription may have a cap of
    its own even when the service's are 0): under READ COMMITTED two concurrent
    claims would each count the attempts in flight without the other's, so N
    threads could overshoot a cap by N - 1. The lock is held until the claim
    commits and taken in its own statement, so that the claim's snapshot,
    taken after it, sees every claim committed before. (SQLite's BEGIN
    IMMEDIATE already serialises writers.)
    """
    turn = PreparedStatement.from_core("claim_turn", _turn())
    take = PreparedStatement.from_core("claim", _take())
    return turn, take


def _turn_key(deliveries):
    """The advisory lock of a delivery's account: claims of one account take turns."""
    return func.hashtextextended(deliveries.c.account_id, 7403)


def _turn():
    from webhooks.lifecycle import claim

    d = claim.deliveries
    return select(func.pg_advisory_xact_lock(_turn_key(d))).where(d.c.id == bindparam("d_id"))


def _take():
    from webhooks.lifecycle import claim

    d = claim.deliveries
    return claim._TAKE.where(
        claim.events.c.id == d.c.event_id, claim.subscriptions.c.id == d.c.subscription_id,
    ).returning(*claim._TAKEN, *claim._LOADED)


def _claims_statement() -> BatchedStatement:
    """Claims of a batch (group commit): the turns of all their accounts first, in one
    order (two batches that took them in different orders could deadlock), then each
    claim as it runs alone (the claim, the turn-away if not taken), in order. Its turn
    is held already, from before its statement's snapshot, as alone; the turns are held
    to the batch's commit, as one claim holds its own."""
    from webhooks.lifecycle import claim

    d = claim.deliveries
    key = _turn_key(d).label("turn")
    turns = (select(key).where(d.c.id == any_(bindparam("d_id", type_=d.c.id.type)))
             .distinct().order_by(key).subquery())
    returns = [(column.name, column.type) for column in (*claim._TAKEN, *claim._LOADED)]
    return BatchedStatement(
        "claims", Body(main=_take(), returns=returns, otherwise=[claim._TURN_AWAY]),
        prologue=select(func.pg_advisory_xact_lock(turns.c.turn)))


def _records_statement() -> BatchedStatement:
    """Records of a batch of successful attempts (group commit): each one's statement as
    it runs alone (record_success), in order."""
    from webhooks.lifecycle import record

    id_type = record.deliveries.c.id.type
    returns = [("moved", Integer()), ("failures", Integer()),
               ("released_id", id_type), ("released_count", Integer()),
               ("successor_id", id_type), ("successor_count", Integer())]
    return BatchedStatement("records", Body(main=_record_statement(record._COUNT_SUCCESS),
                                            returns=returns))


def _record_statement(count):
    """The record's steps as data-modifying CTEs; each later one only if the move
    happened. The sixth, for a keyed delivery (``okey`` not null) that finished, releases
    the next delivery of its key if that waits behind it (ordering.release_successor's
    statement); for any other, a one-time filter skips it.

    PostgreSQL runs every data-modifying CTE to completion whether or not the
    final SELECT reads it, so that SELECT reads only what the caller uses
    (each CTE it read cost executor work on every attempt).
    """
    from sqlalchemy import exists, insert

    from webhooks.lifecycle import ordering, record
    from webhooks.lifecycle.states import FINISHED
    from webhooks.storage import rollup

    d = record.deliveries
    moved = record._MOVE.returning(d.c.id, d.c.account_id, d.c.status).cte("moved")
    ours = exists(select(moved.c.id))
    finished = [literal_column(f"'{status}'") for status in FINISHED]  # literals: prepared
    finished_keyed = and_(ordering.KEY.is_not(None),
                          exists(select(moved.c.id).where(moved.c.status.in_(finished))))
    successor = ordering.RELEASE.where(finished_keyed).cte("successor")
    recorded = (insert(record.attempts)
                .from_select(["delivery_id", *record._ATTEMPT],
                             select(moved.c.id, *record._ATTEMPT.values()))
                .cte("recorded"))
    counted = (count.where(ours).returning(record.subscriptions.c.consecutive_failures)
               .cte("counted"))
    released = record._release(locking=True).where(ours).cte("released")
    hour_counted, total_counted = rollup.count_in_statement(
        moved, subscription_id=record._SUBSCRIPTION_ID, started_at=record._ATTEMPT["started_at"],
        outcome=record._ATTEMPT["outcome"], duration_ms=record._ATTEMPT["duration_ms"])
    return select(
        select(func.count()).select_from(moved).scalar_subquery().label("moved"),
        select(counted.c.consecutive_failures).scalar_subquery().label("failures"),
        select(released.c.id).scalar_subquery().label("released_id"),
        select(released.c.attempt_count).scalar_subquery().label("released_count"),
        # Due now, so it needs a message; one put in the queue for a free slot does not.
        select(successor.c.id).where(successor.c.parked == false())
        .scalar_subquery().label("successor_id"),
        select(successor.c.attempt_count).where(successor.c.parked == false())
        .scalar_subquery().label("successor_count"),
    ).add_cte(recorded, hour_counted, total_counted)


def _dispatches(released_id, released_count, successor_id, successor_count) -> list:
    """The messages a record's row asks for: the delivery released into the slot it freed,
    and the next of its key released behind it (each if any)."""
    from webhooks.broker.outbox import Dispatch

    return [Dispatch(delivery_id, count) for delivery_id, count in
            ((released_id, released_count), (successor_id, successor_count)) if delivery_id]


# Rows of backends that are gone, moved into row 0 in one statement. A row whose
# pid a new backend took meanwhile is folded too, which is as correct: only the sum counts.
_FOLD = text("""
WITH gone AS (
    DELETE FROM waiting_counts AS w
     WHERE w.backend <> 0
       AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = w.backend)
    RETURNING w.pending, w.sending, w.paused
), added AS (
    INSERT INTO waiting_counts AS t (backend, pending, sending, paused)
    SELECT 0, sum(pending), sum(sending), sum(paused) FROM gone HAVING count(*) > 0
    ON CONFLICT (backend) DO UPDATE SET pending = t.pending + excluded.pending,
        sending = t.sending + excluded.sending, paused = t.paused + excluded.paused
    RETURNING 1
)
SELECT count(*) FROM gone
""")


class PostgreSQLBackend(Backend):
    name = "postgresql"
    emits_in_one_statement = True

    def __init__(self):
        from webhooks.lifecycle import record
        from webhooks.storage.models import Event

        self._turn, self._claim = _claim_statements()
        self._record_failure = PreparedStatement.from_core(
            "record_failure", _record_statement(record._COUNT_FAILURE))
        self._record_success = PreparedStatement.from_core(
            "record_success", _record_statement(record._COUNT_SUCCESS))
        self._claims, self._records = _claims_statement(), _records_statement()
        events = Event.__table__
        self._insert_event_once = (
            pg_insert(events)
            .on_conflict_do_nothing(index_elements=["account_id", "idempotency_key"])
            .returning(events.c.id))

    def claim(self, connection, params: dict):
        # Always: even with the service's caps at 0, a subscription may have its own.
        # One round trip: the turn, then the claim (each with its own snapshot); on an
        # autocommit connection the two are one implicit transaction, committed at the end.
        rows = execute_together(
            connection, [(self._turn, {"d_id": params["d_id"]}), (self._claim, params)])
        return rows[0] if rows else None

    def record(self, connection, params: dict, is_failure: bool):
        statement = self._record_failure if is_failure else self._record_success
        # A success is this one statement, committed on its own on the attempt engine; a
        # failure opens a transaction, as it may pause the subscription after it (record()).
        ((moved, failures, *released),) = execute_together(
            connection, [(statement, params)], begin=is_failure)
        if not moved:
            return None
        return failures, _dispatches(*released)

    def claim_many(self, connection, items: list[dict]) -> list:
        return [row if row[0] is not None else None  # subscription_id: None if not taken
                for row in self._claims.run(connection, items)]

    def record_many(self, connection, items: list[dict]) -> list:
        # Each subscription's rows (its counters, its waiting deliveries) are taken in one
        # order by every batch: by subscription, then delivery.
        order = sorted(range(len(items)), key=lambda i: (items[i]["sub_id"], items[i]["d_id"]))
        rows = self._records.run(connection, [items[i] for i in order])
        answers: list = [None] * len(items)
        for i, (moved, _, *released) in zip(order, rows):
            if moved:
                answers[i] = _dispatches(*released)
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

    def fold_waiting_counts(self, connection) -> int:
        return connection.execute(_FOLD).scalar_one()

    def lock_replays_of(self, session, subscription_id: str, seed: int) -> None:
        session.execute(select(func.pg_advisory_xact_lock(
            func.hashtextextended(literal(subscription_id), seed))))

    def allow_audit_purge(self, connection) -> None:
        # Read by the audit_log trigger (migration 0025); LOCAL: it ends with the transaction.
        connection.execute(text("SET LOCAL webhooks.audit_purge = 'on'"))

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

    def in_autocommit(self, connection) -> bool:
        return connection.connection.dbapi_connection.autocommit
