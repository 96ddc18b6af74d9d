"""Retention: delete finished deliveries older than WEBHOOKS_RETENTION_DAYS, in small batches.

The rule (CONTRACT 8.1): a delivery that is ``done``, ``failed`` or
``dead`` and was created more than ``retention_days`` days ago is deleted
with its attempts; an event older than that with no delivery left is
deleted too, and so are the rollup's hours (``attempt_hours``) before the
cut-off. ``pending``, ``sending`` and ``paused`` deliveries are never
deleted, nor their events. ``0`` days keeps everything.

An ordering key's row (its sequence, ``ordering_keys``) goes in the batch
that deletes a delivery of the key, once no delivery of the key is
unfinished (lifecycle/ordering.py, forget_idle_keys): a key still in use
keeps its numbers, and a key's next event after that starts again at 1.

A delivery that a kept delivery replays (``replay_of``) is kept while that
replay exists: the link stays whole, and the original goes once its replay
has gone (a later pass of the same purge when both are old).

Work goes account by account and status by status, oldest first, through
the delivery list's own index (``ix_deliveries_by_account``), in batches
of ``batch`` deliveries: each batch is one short transaction (its
attempts, the deliveries, then their events). On PostgreSQL the batch's
rows are locked with SKIP LOCKED, so the scheduled purge and
``webhooks db purge`` may overlap without waiting for each other.

Audit log entries (webhooks/audit) older than ``audit_retention_days``
(WEBHOOKS_AUDIT_RETENTION_DAYS, 365 by default; 0 keeps them) are deleted
first, oldest first through ``ix_audit_log_created``, in batches of ``batch``
entries: the one DELETE of them the append-only trigger lets through
(backend ``audit_purge``, migrations 0024 and 0030).

On PostgreSQL the attempts are partitioned by day of ``started_at``
(storage/partitions.py): a day wholly older than the cut-off is dropped whole
(:func:`_drop_old_days`), which costs the same whatever the day holds, instead
of a DELETE per attempt. Its rows that the rule keeps (those of deliveries still
unfinished, or replayed) are kept, in a partition of kept rows of that day
(dropped once the batches below have emptied it). The
deliveries' own cut-off then stops at the start of the day partition that
holds the cut-off, so that the batches below do not delete that day's attempts
row by row a day before its partition goes whole: a delivery waits at most one
day longer than WEBHOOKS_RETENTION_DAYS. Attempts of younger days (a retry
after midnight), of the default partition and of SQLite go row by row as
before, with their deliveries.

``webhooks db purge`` runs :func:`purge` to the end; the scheduler runs
:func:`run_scheduled` every WEBHOOKS_PURGE_INTERVAL seconds, which stops
after WEBHOOKS_PURGE_SECONDS and rests after each batch as long as the
batch took, so delivery keeps most of the database (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from dataclasses import dataclass, fields
from typing import Callable

from sqlalchemy import and_, delete, exists, or_, select, true, tuple_, union
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import aliased

from webhooks.lifecycle import ordering, transitions
from webhooks.storage import partitions, scheduled_runs
from webhooks.storage.attempt_window import earliest_start
from webhooks.storage.backends import backend_of
from webhooks.storage.models import (Account, Attempt, AttemptHour, AuditEntry, Delivery,
                                     DeliveryStatus, Event, NoticeBudget, OrderingKey,
                                     Subscription, utcnow)
from webhooks.storage.rollup import floor_hour

__all__ = ["Purged", "FINISHED", "DroppedDay", "cutoff_for", "drop_old_days", "purge",
           "run_scheduled"]

log = logging.getLogger("webhooks.retention")  # its name from before the move: log searches use it

#: The statuses retention may delete; every other one is kept whatever its age.
FINISHED = (DeliveryStatus.DONE.value, DeliveryStatus.FAILED.value, DeliveryStatus.DEAD.value)
UNFINISHED = tuple(status.value for status in DeliveryStatus if status.value not in FINISHED)


@dataclass
class Purged:
    """Rows deleted: what ``webhooks db purge`` prints, and the rollup's hours."""

    events: int = 0
    deliveries: int = 0
    attempts: int = 0
    attempt_hours: int = 0
    ordering_keys: int = 0
    audit_entries: int = 0
    accounts: int = 0  # deleted accounts (DELETE /accounts/<id>) whose last rows went

    def add(self, other: "Purged") -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    @property
    def rows(self) -> int:
        return (self.events + self.deliveries + self.attempts + self.attempt_hours
                + self.ordering_keys + self.audit_entries + self.accounts)

    def report(self) -> dict[str, int]:
        """The CLI's answer (CONTRACT 8.2)."""
        return {"events": self.events, "deliveries": self.deliveries, "attempts": self.attempts}


def cutoff_for(now: dt.datetime, retention_days: int) -> dt.datetime | None:
    """The creation time before which finished rows go; None when retention is off (0 days)."""
    if retention_days <= 0:
        return None
    return now - dt.timedelta(days=retention_days)


class _Pacer:
    """Stops a purge at its deadline and, if asked, rests after each batch as long as it took."""

    def __init__(self, deadline: float | None, rest: bool):
        self.deadline, self.rest = deadline, rest
        self.started = time.monotonic()

    def batch_done(self) -> bool:
        """Called after each batch; False when the purge must stop now."""
        took = time.monotonic() - self.started
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return False
        if self.rest:
            time.sleep(took)
        self.started = time.monotonic()
        return True


def purge(engine: Engine, *, retention_days: int, batch: int, now: dt.datetime | None = None,
          deadline: float | None = None, rest: bool = False,
          audit_retention_days: int = 0) -> Purged:
    """Apply the retention rule in batches of short transactions; returns the rows deleted.

    Audit log entries first (``audit_retention_days``; 0 keeps them), then deliveries.
    Runs until nothing is left to delete, or until ``deadline`` (a
    ``time.monotonic()`` value) has passed; ``rest`` pauses after each batch
    as long as the batch took. Passes repeat while a pass deleted replays,
    which may have freed their (older) originals.

    A deleted account (``accounts.deleted_at``) loses every row, whatever its
    age and whatever WEBHOOKS_RETENTION_DAYS (0 included), by the same batches,
    then its subscriptions and the account itself; a delivery still in flight
    stays until it finished (the next run takes it).
    """
    total = Purged()
    now = now or utcnow()
    pacer = _Pacer(deadline, rest)
    audit_cutoff = cutoff_for(now, audit_retention_days)
    if audit_cutoff is not None and not _purge_audit_log(engine, audit_cutoff, batch, pacer,
                                                         total):
        return total
    cutoff = cutoff_for(now, retention_days)
    if cutoff is not None:
        cutoff, finished = _drop_old_days(engine, cutoff, total, pacer)
        if not finished:  # the deadline came first: the batches wait for the next run
            return total
    # Everything a deleted account has was created before now (it takes no new event).
    everything = now + dt.timedelta(days=1)
    while True:
        freed, finished = _one_pass(engine, cutoff, everything, batch, pacer, total)
        if not finished or not freed:
            return total


def _one_pass(engine: Engine, cutoff: dt.datetime | None, everything: dt.datetime, batch: int,
              pacer: _Pacer, total: Purged):
    """Every account once; (replays deleted, True if it got to the end). ``cutoff`` None:
    retention is off, only deleted accounts are purged (up to ``everything``).

    Each step deletes one batch in the caller's transaction and returns
    (rows deleted, whether to go on, where the next batch starts, replays deleted).
    """
    with engine.connect() as connection:
        accounts = connection.execute(
            select(Account.id, Account.deleted_at).order_by(Account.id)).all()
    freed = 0
    steps = [*[(_delivery_batch, status) for status in FINISHED], (_event_batch, None),
             (_hour_batch, None)]
    for account_id, deleted_at in accounts:
        account_cutoff = cutoff if deleted_at is None else everything
        if account_cutoff is None:
            continue
        for step, status in steps:
            after = None
            while True:
                with engine.begin() as connection:
                    done, more, after, replays = step(connection, account_id, status,
                                                      account_cutoff, after, batch)
                total.add(done)
                freed += replays
                if not more:
                    break
                if not pacer.batch_done():
                    return freed, False
        if deleted_at is not None:
            with engine.begin() as connection:
                total.add(_deleted_account(connection, account_id))
    return freed, True


def _kept_before(backend, end: dt.datetime):
    """The deliveries created before ``end`` whose attempts the rule keeps: unfinished
    ones, and the originals of a replay (index scans: the list index by account and
    status, the partial index of replays; the accounts as ``backend.in_values``, since a
    plain ``IN (SELECT ...)`` scanned every delivery, 0.6 s of a 2 M-event day's drop,
    when a never-analysed table of few accounts was guessed large)."""
    replay = aliased(Delivery)
    unfinished = select(Delivery.id).where(backend.in_values(Delivery.account_id,
                                                             select(Account.id)),
                                           Delivery.status.in_(UNFINISHED),
                                           Delivery.created_at < end)
    replayed = select(replay.replay_of).where(replay.replay_of.is_not(None))
    return union(unfinished, replayed)


@dataclass(frozen=True)
class DroppedDay:
    """A day of attempts retention dropped whole: its partition, the rows dropped with it,
    the rows it kept (a partition of kept rows of that day), and the seconds it took."""

    name: str
    rows: int
    kept: int
    seconds: float


def drop_old_days(engine: Engine, cutoff: dt.datetime,
                  go_on: Callable[[], bool] = lambda: True) -> list[DroppedDay]:
    """Drop the attempts' day partitions wholly older than ``cutoff``, oldest first, each
    in a short transaction of its own, keeping the rows the rule keeps (none on SQLite).
    ``go_on`` is asked after each day (the purge's deadline): False stops there."""
    with engine.begin() as connection:
        emptied = backend_of(connection).drop_emptied_partitions(connection)
        days = backend_of(connection).day_partitions(connection)
    if emptied:
        log.info("retention dropped the emptied partitions of kept attempts %s",
                 ", ".join(emptied))
    dropped = []
    for day in days:
        if day.end > partitions.naive_utc(cutoff):
            break
        started = time.monotonic()
        with engine.begin() as connection:
            backend = backend_of(connection)
            rows, kept = backend.drop_partition(connection, day,
                                                _kept_before(backend, _aware(day.end)))
        dropped.append(DroppedDay(day.name, rows, kept, time.monotonic() - started))
        log.info("retention dropped the attempts of %s: %d rows (%d kept) in %.2f s",
                 day.start.date().isoformat(), rows, kept, dropped[-1].seconds)
        if not go_on():
            break
    return dropped


def _drop_old_days(engine: Engine, cutoff: dt.datetime, total: Purged,
                   pacer: _Pacer) -> tuple[dt.datetime, bool]:
    """:func:`drop_old_days` at the purge's pace, counted in ``total``; (the cut-off of the
    rows that go by batches, whether every old day went). That cut-off is the start of
    the day partition that holds ``cutoff`` (it goes whole once it is wholly old), else
    ``cutoff``."""
    total.attempts += sum(day.rows for day in drop_old_days(engine, cutoff, pacer.batch_done))
    with engine.connect() as connection:
        days = backend_of(connection).day_partitions(connection)
    finished = not days or days[0].end > partitions.naive_utc(cutoff)
    holding = partitions.holding(days, cutoff)
    return (cutoff if holding is None else _aware(holding.start)), finished


def _aware(moment: dt.datetime) -> dt.datetime:
    """A partition's bound (naive UTC, as stored) as the models' columns take it."""
    return moment.replace(tzinfo=dt.timezone.utc)


def _purge_audit_log(engine: Engine, cutoff: dt.datetime, batch: int, pacer: _Pacer,
                     total: Purged) -> bool:
    """Delete the audit entries made before ``cutoff``, oldest first, ``batch`` a
    transaction; False if the deadline stopped it."""
    while True:
        with engine.begin() as connection, backend_of(connection).audit_purge(connection):
            oldest = _locked(select(AuditEntry.id).where(AuditEntry.created_at < cutoff)
                             .order_by(AuditEntry.created_at).limit(batch), connection)
            ids = list(connection.scalars(oldest))
            if ids:
                connection.execute(delete(AuditEntry).where(AuditEntry.id.in_(ids)))
        total.audit_entries += len(ids)
        if len(ids) < batch:
            return True
        if not pacer.batch_done():
            return False


def _deleted_account(connection: Connection, account_id: str) -> Purged:
    """The last rows of a deleted account once its deliveries and events are gone: its
    ordering keys, its subscriptions and their budgets, the account (its sessions, portal
    links and tokens go with it, ON DELETE CASCADE). Nothing while a delivery or an event
    is left (one in flight when the account was deleted: the next run)."""
    left = connection.execute(
        select(exists().where(Delivery.account_id == account_id)
               | exists().where(Event.account_id == account_id))).scalar()
    if left:
        return Purged()
    keys = connection.execute(
        delete(OrderingKey).where(OrderingKey.account_id == account_id)).rowcount
    subscriptions = select(Subscription.id).where(Subscription.account_id == account_id)
    connection.execute(delete(NoticeBudget).where(
        NoticeBudget.subject_id.in_(subscriptions) | (NoticeBudget.subject_id == account_id)))
    connection.execute(delete(Subscription).where(Subscription.account_id == account_id))
    gone = connection.execute(delete(Account).where(Account.id == account_id,
                                                    Account.deleted_at.is_not(None))).rowcount
    return Purged(ordering_keys=keys, accounts=gone)


def _after(created_column, id_column, after):
    """Rows after ``after`` = (created_at, id) in oldest-first order (None: from the start)."""
    if after is None:
        return true()
    created_at, row_id = after
    return and_(created_column >= created_at,
                or_(created_column > created_at,
                    and_(created_column == created_at, id_column > row_id)))


def _locked(statement, connection: Connection):
    """``statement`` FOR UPDATE SKIP LOCKED on PostgreSQL (SQLite has one writer at a time)."""
    return backend_of(connection).skip_locked(statement)


def _delivery_batch(connection: Connection, account_id: str, status: str,
                    cutoff: dt.datetime, after, batch: int):
    """Delete up to ``batch`` old deliveries in ``status``, their attempts, orphaned events
    and the rows of their ordering keys that nothing unfinished needs."""
    replay = aliased(Delivery)
    candidates = _locked(
        select(Delivery.id, Delivery.created_at, Delivery.ordering_key)
        .where(Delivery.account_id == account_id, Delivery.status == status,
               Delivery.created_at < cutoff, _after(Delivery.created_at, Delivery.id, after),
               ~exists().where(replay.replay_of == Delivery.id))
        .order_by(Delivery.created_at, Delivery.id)
        .limit(batch),
        connection,
    )
    rows = connection.execute(candidates).all()
    if not rows:
        return Purged(), False, None, 0
    ids = [row.id for row in rows]
    # From the batch's oldest creation less the clocks' margin only: PostgreSQL skips the
    # day partitions before it.
    attempts = connection.execute(delete(Attempt).where(
        Attempt.delivery_id.in_(ids),
        Attempt.started_at >= earliest_start(rows[0].created_at))).rowcount
    gone = transitions.delete_deliveries(connection, ids)
    event_ids = sorted({row.event_id for row in gone})
    events = connection.execute(
        delete(Event).where(Event.id.in_(event_ids),
                            ~exists().where(Delivery.event_id == Event.id))
    ).rowcount
    keys = ordering.forget_idle_keys(
        connection, account_id, list({row.ordering_key for row in rows if row.ordering_key}))
    replays = sum(1 for row in gone if row.replay_of is not None)
    done = Purged(events=events, deliveries=len(gone), attempts=attempts, ordering_keys=keys)
    # A short batch was the last (rows another purge holds are that purge's).
    return done, len(rows) == batch, (rows[-1].created_at, rows[-1].id), replays


def _event_batch(connection: Connection, account_id: str, _status, cutoff: dt.datetime,
                 after, batch: int):
    """Delete up to ``batch`` old events of the account that have no delivery (left)."""
    candidates = _locked(
        select(Event.id, Event.created_at)
        .where(Event.account_id == account_id, Event.created_at < cutoff,
               _after(Event.created_at, Event.id, after),
               ~exists().where(Delivery.event_id == Event.id))
        .order_by(Event.created_at, Event.id)
        .limit(batch),
        connection,
    )
    rows = connection.execute(candidates).all()
    if not rows:
        return Purged(), False, None, 0
    events = connection.execute(
        delete(Event).where(Event.id.in_([row.id for row in rows]),
                            ~exists().where(Delivery.event_id == Event.id))
    ).rowcount
    return Purged(events=events), len(rows) == batch, (rows[-1].created_at, rows[-1].id), 0


def _hour_batch(connection: Connection, account_id: str, _status, cutoff: dt.datetime,
                _after, batch: int):
    """Delete up to ``batch`` of the account's rollup rows of hours that ended before the cut-off."""
    key = tuple_(AttemptHour.subscription_id, AttemptHour.hour_start, AttemptHour.outcome,
                 AttemptHour.shard)
    old = (
        select(AttemptHour.subscription_id, AttemptHour.hour_start, AttemptHour.outcome,
               AttemptHour.shard)
        .where(AttemptHour.account_id == account_id, AttemptHour.hour_start < floor_hour(cutoff))
        .limit(batch)
    )
    deleted = connection.execute(delete(AttemptHour).where(key.in_(old))).rowcount
    # Deleted rows no longer match, so each batch starts from the beginning again.
    return Purged(attempt_hours=deleted), deleted == batch, None, 0


# pg_advisory_lock key held by a scheduled run ("whpurge" as a number).
RUN_LOCK_KEY = 0x77687075726765


@contextlib.contextmanager
def _alone(engine: Engine):
    """True if no other scheduled purge runs now (PostgreSQL advisory lock; SQLite: always).

    The lock is a session lock on a connection in autocommit mode: it holds
    no transaction open (which would keep vacuum from cleaning up behind the
    purge), and a process that dies releases it with its connection.
    """
    with backend_of(engine).alone(engine, RUN_LOCK_KEY) as taken:
        yield taken


def run_scheduled(engine: Engine, *, retention_days: int, batch: int, seconds: float,
                  slot: scheduled_runs.Slot | None = None,
                  audit_retention_days: int = 0) -> Purged:
    """The scheduler's purge: at most ``seconds`` of batches, resting between them; logs a line.

    A run that finds another one still going does nothing: overlapping runs
    would only add load. Nor does one sent for a ``slot`` that another run has
    claimed (webhooks/storage/scheduled_runs.py); its own retries keep the slot.
    """
    if slot is not None:
        with engine.begin() as connection:
            if not scheduled_runs.claim(connection, slot):
                return Purged()
    with _alone(engine) as alone:
        if not alone:
            return Purged()
        started = time.monotonic()
        purged = purge(engine, retention_days=retention_days, batch=batch,
                       deadline=started + seconds, rest=True,
                       audit_retention_days=audit_retention_days)
    if purged.rows:
        log.info("retention purged %d events, %d deliveries, %d attempts, %d rollup rows, "
                 "%d ordering keys, %d audit entries in %.2f s", purged.events,
                 purged.deliveries, purged.attempts, purged.attempt_hours,
                 purged.ordering_keys, purged.audit_entries, time.monotonic() - started)
    return purged
