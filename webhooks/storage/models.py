"""SQLAlchemy models and state enums; the database is the source of truth.

Models never commit: the caller owns the transaction (see webhooks/lifecycle/changes.py).
Ids are UUID strings so the same schema runs on PostgreSQL and SQLite.
"""

from __future__ import annotations

import datetime as dt
import uuid

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from webhooks.states import DeliveryStatus, SubscriptionStatus  # re-exported: the models' states

__all__ = [
    "Base",
    "Account",
    "Subscription",
    "Event",
    "Delivery",
    "Attempt",
    "OrderingKey",
    "AttemptHour",
    "AttemptTotal",
    "WaitingCount",
    "DashboardSession",
    "PortalLink",
    "ScheduledRun",
    "OAuth2Token",
    "NoticeBudget",
    "AuditEntry",
    "Publisher",
    "SubscriptionStatus",
    "DeliveryStatus",
    "new_id",
    "utcnow",
]


def new_id() -> str:
    """A fresh random UUID as a lowercase hyphenated string."""
    return str(uuid.uuid4())


def utcnow() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on both databases (SQLite has no time zones)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=dt.timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dt.datetime: UTCDateTime}


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    # SHA-256 of the API key: the key itself is shown once and never stored.
    api_key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Set by DELETE /accounts/<id> (services/accounts.py): the account is gone for every
    # route and its subscriptions stopped at once; retention deletes its rows in batches.
    deleted_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class Publisher(Base):
    """A publisher key: the operator's credential for the publisher API (CONTRACT 10.7).

    The key (``whpub_…``) is shown once; only its SHA-256 is stored, as an
    account's. ``last_used_at`` is written at most once a minute per key
    (services/publishers.py); a revoked key (``revoked_at`` set) never works again.
    """

    __tablename__ = "publishers"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class Subscription(Base):
    __tablename__ = "subscriptions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    secret: Mapped[str] = mapped_column(String(128))
    # None: every event type; otherwise a list of catalogue names.
    event_types: Mapped[list | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default=SubscriptionStatus.ACTIVE.value)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    paused_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # Why it is paused (states.PauseReason: failures, manual, gone); None while active.
    paused_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # How deliveries are signed (tenants/schemes.py): "service" (SPEC 2.4), "standard" or
    # "standard-ed25519" (whose secret columns hold private keys: tenants/keypairs.py).
    signature_scheme: Mapped[str] = mapped_column(String(16), default="service",
                                                  server_default="service")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Soft delete: history stays readable, no further attempts are made.
    deleted_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # A staged rotation (rotation.py): next_secret signs from next_secret_active_at on.
    next_secret: Mapped[str | None] = mapped_column(String(128), nullable=True)
    next_secret_active_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # Extra request headers sent with every delivery (custom_headers.py); None: none.
    headers: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # Attempts in flight at once; None: WEBHOOKS_MAX_IN_FLIGHT.
    max_in_flight: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Attempts per second (pacing.py); None: no limit.
    rate_limit: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The rate limit's next free slot, in unix seconds (pacing.py).
    rate_next_slot: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The adaptive pace's current limit on attempts in flight (adaptive_pace.py): lowered
    # by half on a 429, a 503 or a time-out, raised by one after a run of successes;
    # None: not lowered, the cap (max_in_flight, else WEBHOOKS_MAX_IN_FLIGHT) applies.
    in_flight_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Successes since the current limit last moved (the run that raises it by one).
    pace_successes: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # The adaptive pace's rate (pace_rate.py): attempts/s set from what the receiver
    # accepted when it last answered 429 or 503, at pace_rate_at (unix seconds), climbing
    # from then on; None: never set.
    pace_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    pace_rate_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Credentials the receiver requires (tenants/credentials.py), stored as the signing
    # secret is; write-only: answers show the certificate's fingerprint, subject and
    # expiry, and oauth2 without its client_secret. None: not set.
    client_certificate: Mapped[dict | None] = mapped_column(JSON(none_as_null=True),
                                                            nullable=True)
    oauth2: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # When the release task of this subscription (lifecycle/release.py), which sends what a
    # resume released batch by batch, was last sent or ran; None: none is running.
    releasing_since: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # The payload filter an event must pass to be delivered here (events/filters.py), as
    # given; None: every event of its types.
    filter: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # Its retry delays in seconds (tenants/retry_schedules.py); None: WEBHOOKS_RETRY_DELAYS.
    retry_schedule: Mapped[list | None] = mapped_column(JSON(none_as_null=True), nullable=True)

    def wants(self, event_type: str) -> bool:
        """True when this subscription receives events of ``event_type``."""
        return self.event_types is None or event_type in self.event_types


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("account_id", "idempotency_key"),
        # An account's events by age: retention finds old events that lost their deliveries.
        Index("ix_events_account_created", "account_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    type: Mapped[str] = mapped_column(String(64))
    # The envelope's version, sent again as the version header on every attempt.
    version: Mapped[str] = mapped_column(String(10))
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # The serialised envelope: the exact bytes of every attempt's body.
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Delivery(Base):
    __tablename__ = "deliveries"
    __table_args__ = (
        # The sweep's scans: due or overdue pending rows, and stale claims.
        Index(
            "ix_deliveries_pending_due",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
        Index(
            "ix_deliveries_sending_claimed",
            "claimed_at",
            postgresql_where=text("status = 'sending'"),
            sqlite_where=text("status = 'sending'"),
        ),
        # The delivery list, newest first by (created_at, id) (web/delivery_list.py): each
        # filter's columns, then status, then the keyset order. A page is one short scan per
        # stored status, merged: all six without a status filter, one or two with it.
        # The first two also serve the claim's counts of the attempts in flight of a
        # subscription and of an account (claim.py).
        Index("ix_deliveries_by_subscription", "subscription_id", "status", "created_at", "id"),
        Index("ix_deliveries_by_account", "account_id", "status", "created_at", "id"),
        Index("ix_deliveries_by_type", "account_id", "event_type", "status", "created_at", "id"),
        # Replays of a delivery (few): its page lists them, and retention keeps an original
        # while a replay refers to it.
        Index(
            "ix_deliveries_replay_of",
            "replay_of",
            postgresql_where=text("replay_of IS NOT NULL"),
            sqlite_where=text("replay_of IS NOT NULL"),
        ),
        # Deliveries waiting for a free slot of their subscription, oldest first (claim.py,
        # record.py).
        Index(
            "ix_deliveries_waiting",
            "subscription_id",
            "created_at",
            postgresql_where=text("status = 'pending' AND parked AND next_attempt_at IS NULL"),
            sqlite_where=text("status = 'pending' AND parked = 1 AND next_attempt_at IS NULL"),
        ),
        # Unfinished deliveries with an ordering key, in emit order per subscription and key:
        # the claim looks up a delivery's unfinished predecessor here, and the record of a
        # finished one its successor (ordering.py), each one index probe.
        Index(
            "ix_deliveries_ordering",
            "subscription_id",
            "ordering_key",
            "key_sequence",
            postgresql_where=text(
                "ordering_key IS NOT NULL AND status IN ('pending', 'sending', 'paused')"),
            sqlite_where=text(
                "ordering_key IS NOT NULL AND status IN ('pending', 'sending', 'paused')"),
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    event_id: Mapped[str] = mapped_column(ForeignKey("events.id"), index=True)
    subscription_id: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"))
    event_type: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.PENDING.value)
    # Attempts started so far; the next attempt's number is attempt_count + 1.
    attempt_count: Mapped[int] = mapped_column(Integer, default=0)
    # When the next attempt is due (pending), or was due when it was held (paused).
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    # True when no broker message carries the next attempt: the sweep sends it when due.
    parked: Mapped[bool] = mapped_column(Boolean, default=False)
    # When the attempt in flight was claimed (status sending).
    claimed_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    replay_of: Mapped[str | None] = mapped_column(ForeignKey("deliveries.id"), nullable=True)
    # True while the delivery holds a slot of its subscription's rate limit, reserved
    # for its next_attempt_at (pacing.py): its next claim takes no second slot.
    paced: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The ordering key given at emit (CONTRACT 9.4), and the event's place among the
    # account's events with that key (OrderingKey.last_sequence); None without a key.
    ordering_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    key_sequence: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # True while it waits for its key's predecessor to finish (states.behind_its_key).
    behind_key: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # The W3C traceparent its attempts' spans are children of (webhooks/config/tracing.py):
    # its event's webhooks.emit span, or a replay's webhooks.replay span; None: tracing off.
    trace_context: Mapped[str | None] = mapped_column(String(55), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class OrderingKey(Base):
    """The last sequence number given to an account's events with one ordering key.

    emit takes the next number with an upsert in the event's transaction: the
    row stays locked until that transaction ends, so two emitters of one key
    take turns and the numbers follow the order in which the events commit.
    """

    __tablename__ = "ordering_keys"

    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), primary_key=True)
    ordering_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_sequence: Mapped[int] = mapped_column(BigInteger)


class Attempt(Base):
    __tablename__ = "attempts"
    __table_args__ = (
        # One row per attempt number: a duplicate attempt is never recorded twice. On
        # PostgreSQL the table is partitioned by day of started_at (migration 0029,
        # storage/partitions.py), whose unique keys must hold it: there the record's own
        # condition keeps a number once (docs/architecture.md, "Attempts by day").
        UniqueConstraint("delivery_id", "number").ddl_if(dialect="sqlite"),
        UniqueConstraint("delivery_id", "number", "started_at",
                         name="attempts_delivery_id_number_started_at_key"
                         ).ddl_if(dialect="postgresql"),
        # /metrics and the dashboard's chart read recent attempts by time.
        Index("ix_attempts_started_at", "started_at"),
    )

    # 64-bit on PostgreSQL (a 32-bit id runs out after 2.1 billion attempts); SQLite's
    # INTEGER PRIMARY KEY is 64-bit already and must stay spelled INTEGER to be the rowid.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    delivery_id: Mapped[str] = mapped_column(ForeignKey("deliveries.id"))
    number: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = mapped_column()
    duration_ms: Mapped[int] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Why no response came (failure_kinds.ErrorKind value: "timeout", "dns", ...); else null.
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    outcome: Mapped[str] = mapped_column(String(20))
    # The first KiB of the response body, decoded leniently, for the dashboard.
    response_excerpt: Mapped[str | None] = mapped_column(Text, nullable=True)
    # A 3xx answer's Location header (at most 1,000 characters), never followed.
    location: Mapped[str | None] = mapped_column(Text, nullable=True)


class AttemptHour(Base):
    """Attempts per subscription, hour and outcome, kept as they are recorded (rollup.py)."""

    __tablename__ = "attempt_hours"
    __table_args__ = (
        # An account's chart and counts read its hours across its subscriptions.
        Index("ix_attempt_hours_account_hour", "account_id", "hour_start"),
    )

    subscription_id: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"), primary_key=True)
    hour_start: Mapped[dt.datetime] = mapped_column(primary_key=True)
    outcome: Mapped[str] = mapped_column(String(20), primary_key=True)
    # Spreads one key over a few rows so that concurrent records do not queue on one row lock.
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    attempts: Mapped[int] = mapped_column(BigInteger)


class AttemptTotal(Base):
    """Attempts and their summed duration per outcome and duration bucket, since the start.

    The counters of /metrics (rollup.py); a handful of rows, never purged.
    """

    __tablename__ = "attempt_totals"

    outcome: Mapped[str] = mapped_column(String(20), primary_key=True)
    # Index into rollup.DURATION_BUCKETS_MS (its length: longer than the last bound).
    duration_bucket: Mapped[int] = mapped_column(SmallInteger, primary_key=True,
                                                 autoincrement=False)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    attempts: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(BigInteger)


class WaitingCount(Base):
    """Deliveries pending, sending and paused, as the last sweep counted them (row 0;
    webhooks/storage/waiting_counts.py): the gauges of /metrics, a row whatever the backlog.

    Until migration 0028 triggers kept a row per backend exact at every commit (issue 43
    took them off the hot path).
    """

    __tablename__ = "waiting_counts"

    # 0: the sweep's counts. Until 0028 also a row per PostgreSQL backend (its pid), which
    # the first sweep after the upgrade deletes.
    backend: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    pending: Mapped[int] = mapped_column(BigInteger)
    sending: Mapped[int] = mapped_column(BigInteger)
    paused: Mapped[int] = mapped_column(BigInteger)


class DashboardSession(Base):
    """A signed-in dashboard session, kept on the server (web/dashboard/sessions.py).

    The browser's signed cookie holds a random token; the row holds its
    SHA-256, so signing out (deleting the row) ends the session for every
    copy of the cookie, and a row read from the database cannot be used as a
    cookie. A session ends at ``expires_at`` at the latest. ``read_only``
    is for sessions that may look but not act (portal links, CONTRACT 9.3);
    sign-in with an API key makes full sessions.
    """

    __tablename__ = "dashboard_sessions"

    # SHA-256 (hex) of the cookie's token.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    account_id: Mapped[str] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Expired rows are deleted in bounded batches at each sign-in (sessions.py).
    expires_at: Mapped[dt.datetime] = mapped_column(index=True)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class PortalLink(Base):
    """A single-use sign-in link to an account's dashboard (CONTRACT 9.3).

    Made and spent by webhooks/services/portal_links.py.

    The link's URL carries a random token; the row holds its SHA-256, so a
    row read from the database cannot be used as a link. Opening the link
    sets ``used_at`` (once: a conditional UPDATE) and starts a dashboard
    session that ends at ``expires_at`` and is ``read_only`` if the link is.
    """

    __tablename__ = "portal_links"

    # SHA-256 (hex) of the link's token.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    account_id: Mapped[str] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # Spent links (expired or used) are deleted in bounded batches at each new link.
    expires_at: Mapped[dt.datetime] = mapped_column(index=True)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    used_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)


class ScheduledRun(Base):
    """The run of a periodic task (the sweep, the purge) for one slot of its interval.

    Claimed by the run itself before it works (webhooks/storage/scheduled_runs.py):
    one row per (task, slot), so beat's second send for a slot (a restarted or a
    second beat) finds the row and does nothing but count itself in ``refused``.
    """

    __tablename__ = "scheduled_runs"

    # The Celery task's name (webhooks.sweep, webhooks.purge).
    task: Mapped[str] = mapped_column(String(64), primary_key=True)
    # The slot's start, by the database's clock (webhooks/broker/slots.py).
    slot_start: Mapped[dt.datetime] = mapped_column(primary_key=True)
    # The Celery task id of the run that has the slot: its retries keep it.
    run_id: Mapped[str] = mapped_column(String(64))
    claimed_at: Mapped[dt.datetime]
    # Sends of the same slot by others than run_id, each refused.
    refused: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))


class OAuth2Token(Base):
    """The OAuth2 access token of a subscription, shared by every worker
    (webhooks/storage/oauth2_tokens.py, webhooks/sender/oauth2_tokens.py).

    Times are unix seconds by the database's clock. ``config_hash`` names the
    subscription's ``oauth2`` settings the token was granted for: a token of
    older settings is never used. A worker that fetches a token holds the
    lease (``lease_owner`` until ``lease_until``), so one fetch serves all.
    """

    __tablename__ = "oauth2_tokens"

    subscription_id: Mapped[str] = mapped_column(
        ForeignKey("subscriptions.id", ondelete="CASCADE"), primary_key=True)
    config_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    access_token: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Refreshed from refresh_at on (expires_in - 30 s); still usable until expires_at.
    refresh_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(36), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)


class NoticeBudget(Base):
    """The budget of pause and resume notices of one account, or of one subscription
    (webhooks/operational/budget.py): both kinds of id are UUIDs, so one table holds both.

    ``due_after`` is the budget's theoretical arrival time (GCRA): a notice may go out at
    once while it is within the burst of now. A subscription's row also names its notice
    that waits for the budget (``deferred_event_id``, an event of the operator account,
    unsent) and how many of its notices that one replaced (``suppressed``).
    """

    __tablename__ = "notice_budgets"

    subject_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    due_after: Mapped[dt.datetime]
    deferred_event_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    suppressed: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))


class AuditEntry(Base):
    """One entry of an account's audit log (webhooks/audit, CONTRACT 10.5): who did what to
    what, and the fields it changed (redacted). Written in the transaction of its change;
    never updated, and deleted only by retention (triggers refuse anything else: UPDATE,
    DELETE and TRUNCATE on PostgreSQL, UPDATE and DELETE on SQLite; migrations 0024,
    0030)."""

    __tablename__ = "audit_log"
    __table_args__ = (
        # An account's entries newest first (the API's and the Activity page's keyset pages).
        Index("ix_audit_log_account_created", "account_id", "created_at", "id"),
        # Retention deletes the oldest entries of every account.
        Index("ix_audit_log_created", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    # No foreign key: an entry outlives what it names (a deleted subscription, an account).
    account_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[dt.datetime]  # the entry's "at": when the change was made
    actor_kind: Mapped[str] = mapped_column(String(16))
    actor_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    target_kind: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str] = mapped_column(String(64))
    changes: Mapped[dict] = mapped_column(JSON)


class AuditPurge(Base):
    """A row present only inside a transaction that retention lets delete audit entries
    (SQLite's guard, migration 0030: SQLite has no per-transaction setting, so its
    trigger asks whether this table holds a row). Never committed; unused on PostgreSQL,
    whose guard reads ``webhooks.audit_purge``."""

    __tablename__ = "audit_purges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
