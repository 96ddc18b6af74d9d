"""Settings read once from the environment (README, "Configuration").

Every process (web, worker, scheduler, CLI, and ``emit_event()`` in the
caller's process) calls :func:`get_settings`; the values are parsed and
checked once, and a malformed value raises :class:`ConfigError` naming the
variable instead of failing later somewhere deep in a delivery.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from webhooks.config.values import (
    DEFAULT_RETRY_DELAYS, DEFAULT_VERSION, SERVICE_NAME_RE, SENTINEL_NAME_RE, read_database_url, purge_batch, purge_seconds, get, positive_number, retry_delays, boolean, matching, version, secret_key, ca_bundle, metrics_token, log_level, rate_limit, rate_limit_storage,
)
from webhooks.config.values import database_url_of
from webhooks.config.egress import EgressProxy, egress_proxy
from webhooks.errors import ConfigError  # noqa: F401 - raised by the parsers; callers catch it from here

__all__ = ["Settings", "get_settings", "load_settings", "reset_settings_cache"]

# ASCII digits only: \d would also take "٢٠٢٦-٠٧-٣٠", which then broke every delivery.


@dataclass(frozen=True)
class Settings:
    """The service configuration; every duration is in seconds."""

    data_dir: Path = Path("webhooks-data")
    database_url: str = ""
    # A streaming replica for the dashboard's pages, the API's lists and /metrics
    # ("" = read the primary too); see web/transaction.py for what stays on the primary.
    read_database_url: str = ""
    broker_url: str = ""
    broker_master_name: str = "mymaster"  # the Sentinel master of a sentinel:// broker URL
    # How long (s) a signed-in dashboard user reads the primary after a change they made.
    read_own_writes_for: float = 10.0
    read_max_lag: float = 10.0  # a replica further behind than this (s) is not read
    retry_delays: tuple[int, ...] = DEFAULT_RETRY_DELAYS
    pause_after: int = 25
    service_name: str = "Service"
    version: str = DEFAULT_VERSION
    timeout: float = 15.0
    allow_private_targets: bool = False
    # Each delivery carries a W3C traceparent header of its attempt's span (tracing on).
    trace_receivers: bool = False
    countdown_limit: int = 300
    # The longest wait a receiver's Retry-After may ask for (429/503); 0: the plain ladder.
    retry_after_max: int = 43200
    countdown_max: int = 2000
    max_in_flight: int = 10
    test_max_in_flight: int = 2
    account_max_in_flight: int = 20
    adaptive_pace: bool = True  # the in-flight limit follows the receiver (adaptive_pace.py)
    pace_success_run: int = 0  # successes that raise the limit by one; 0: the limit's worth
    # The longest wait (s) for a rate slot through which an attempt keeps its claim (pacing.py).
    slot_hold: float = 1.0
    pace_rate_climb: float = 0.2  # percent of itself per second a paced rate climbs (pace_rate.py)
    operational_max_in_flight: int = 1  # per operational endpoint (webhooks/operational)
    dns_threads: int = 128  # DNS look-ups running at once per process (connections.py)
    sweep_interval: float = 5.0
    recover_after: float = 120.0
    clock_refresh: float = 30.0  # how often (s) each process measures its offset to the database's clock
    sweep_batch: int = 5000
    retention_days: int = 30
    audit_retention_days: int = 365  # audit log entries older than this are deleted; 0 keeps all
    purge_batch: int = 500
    purge_interval: float = 60.0
    purge_seconds: float = 10.0
    # Days after today whose attempts' partitions the scheduler keeps created (PostgreSQL).
    partition_days_ahead: int = 3
    recover_batch: int = 500  # replays made per transaction by recover (recover.py)
    recover_max: int = 10000  # replays made by one recover call at most
    emit_batch_max: int = 10000  # events one emit_events call takes at most (emit.py)
    # Held deliveries a resume sends per batch (lifecycle/release.py).
    release_batch: int = 500
    # Operational notices of pause and resume (operational/budget.py): per window (s), at
    # most two of one subscription and notice_budget of one account go out at once.
    notice_window: float = 60.0
    notice_budget: int = 10
    max_payload_bytes: int = 256 * 1024
    max_request_bytes: int = 64 * 1024
    publish_timeout: float = 2.0
    secret_key: str | None = None
    log_level: str = "INFO"
    db_pool_size: int = 5  # PostgreSQL connections each process keeps
    db_max_overflow: int = 10  # and may open beyond them at a peak
    # Claims (or records) of concurrent attempts one worker process runs as one statement
    # at most (lifecycle/group_commit.py); 1: each alone.
    batch_max: int = 32
    # Seconds a batch that forms behind another waits at most for more (0: none).
    batch_wait: float = 0.001
    # Claims and records of attempts commit without waiting for the WAL flush
    # (PostgreSQL's synchronous_commit = off); emit_event and the API never do.
    durable_attempts: bool = False
    ca_bundle: str | None = None  # None: certifi's bundle
    # The operator's CONNECT proxy for every connection to a subscriber (config/egress.py);
    # None: connect directly.
    egress_proxy: EgressProxy | None = None
    # Rate limits in the notation of the ``limits`` library ("100 per second",
    # "5 per 5 seconds; 60 per hour"), counted over a moving window; None: no limit.
    api_rate_limit: str | None = "100 per second"
    test_rate_limit: str | None = "5 per 5 seconds"
    # Requests per second one publisher key may make (CONTRACT 10.7); 0: no limit.
    publisher_rate_limit: int = 1000
    # Where the web processes count those limits together ("memory://": per process).
    rate_limit_storage_url: str = "memory://"
    max_subscriptions: int = 100
    secure_cookies: bool = True
    trusted_proxies: int = 0
    hsts_max_age: int = 365 * 24 * 3600
    metrics_token: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def max_attempts(self) -> int:
        """Attempts a delivery gets before it is dead: one more than the ladder's steps."""
        return len(self.retry_delays) + 1

    @property
    def is_embedded_database(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def is_embedded_broker(self) -> bool:
        return self.broker_url.startswith("filesystem")

    @property
    def is_sentinel_broker(self) -> bool:
        """True for kombu's ``sentinel://h1:26379;sentinel://h2:26379`` broker URLs."""
        return self.broker_url.startswith("sentinel://")

    @property
    def reads_database_url(self) -> str:
        """Where read-only pages read: WEBHOOKS_READ_DATABASE_URL, else the primary."""
        return self.read_database_url or self.database_url

    def header(self, suffix: str) -> str:
        """The delivery header name ``X-<service>-<suffix>``, e.g. ``X-Service-Signature``."""
        return f"X-{self.service_name}-{suffix}"

    @property
    def broker_folder(self) -> Path:
        """Where the embedded (filesystem) broker keeps its message files."""
        return self.data_dir / "broker"


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Parse settings from ``env`` (default: ``os.environ``); raise ConfigError if malformed."""
    env = os.environ if env is None else env
    data_dir = Path(get(env, "WEBHOOKS_DATA_DIR") or "webhooks-data").absolute()
    database_url = (database_url_of(env, "WEBHOOKS_DATABASE_URL")
                    or f"sqlite:///{data_dir / 'webhooks.db'}")
    broker_url = get(env, "WEBHOOKS_BROKER_URL") or "filesystem://"
    countdown_limit = positive_number(
        env, "WEBHOOKS_COUNTDOWN_LIMIT", 300, integer=True, allow_zero=True
    )
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        read_database_url=read_database_url(env, database_url),
        broker_url=broker_url,
        broker_master_name=matching(
            env, "WEBHOOKS_BROKER_MASTER_NAME", "mymaster", SENTINEL_NAME_RE,
            "a Sentinel master name (letters, digits, '.', '_', '-')",
        ),
        read_own_writes_for=positive_number(
            env, "WEBHOOKS_READ_OWN_WRITES_FOR", 10.0, allow_zero=True),
        read_max_lag=positive_number(env, "WEBHOOKS_READ_MAX_LAG", 10.0),
        retry_delays=retry_delays(env),
        pause_after=positive_number(env, "WEBHOOKS_PAUSE_AFTER", 25, integer=True),
        service_name=matching(
            env, "WEBHOOKS_SERVICE_NAME", "Service", SERVICE_NAME_RE,
            "letters and digits, optionally joined by hyphens (it goes into header names)",
        ),
        version=version(env),
        timeout=positive_number(env, "WEBHOOKS_TIMEOUT", 15.0),
        allow_private_targets=boolean(env, "WEBHOOKS_ALLOW_PRIVATE_TARGETS", False),
        trace_receivers=boolean(env, "WEBHOOKS_TRACE_RECEIVERS", False),
        countdown_limit=countdown_limit,
        retry_after_max=positive_number(
            env, "WEBHOOKS_RETRY_AFTER_MAX", 43200, integer=True, allow_zero=True
        ),
        countdown_max=positive_number(
            env, "WEBHOOKS_COUNTDOWN_MAX", 2000, integer=True, allow_zero=True
        ),
        max_in_flight=positive_number(
            env, "WEBHOOKS_MAX_IN_FLIGHT", 10, integer=True, allow_zero=True
        ),
        test_max_in_flight=positive_number(
            env, "WEBHOOKS_TEST_MAX_IN_FLIGHT", 2, integer=True, allow_zero=True
        ),
        account_max_in_flight=positive_number(
            env, "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT", 20, integer=True, allow_zero=True
        ),
        adaptive_pace=boolean(env, "WEBHOOKS_ADAPTIVE_PACE", True),
        pace_success_run=positive_number(
            env, "WEBHOOKS_PACE_SUCCESS_RUN", 0, integer=True, allow_zero=True
        ),
        pace_rate_climb=positive_number(env, "WEBHOOKS_PACE_RATE_CLIMB", 0.2),
        slot_hold=positive_number(env, "WEBHOOKS_SLOT_HOLD_MS", 1000, allow_zero=True) / 1000,
        operational_max_in_flight=positive_number(
            env, "WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT", 1, integer=True
        ),
        dns_threads=positive_number(env, "WEBHOOKS_DNS_THREADS", 128, integer=True),
        sweep_interval=positive_number(env, "WEBHOOKS_SWEEP_INTERVAL", 5.0),
        recover_after=positive_number(env, "WEBHOOKS_RECOVER_AFTER", 120.0),
        clock_refresh=positive_number(env, "WEBHOOKS_CLOCK_REFRESH", 30.0),
        sweep_batch=positive_number(env, "WEBHOOKS_SWEEP_BATCH", 5000, integer=True),
        retention_days=positive_number(
            env, "WEBHOOKS_RETENTION_DAYS", 30, integer=True, allow_zero=True
        ),
        audit_retention_days=positive_number(
            env, "WEBHOOKS_AUDIT_RETENTION_DAYS", 365, integer=True, allow_zero=True
        ),
        purge_batch=purge_batch(env),
        purge_interval=positive_number(env, "WEBHOOKS_PURGE_INTERVAL", 60.0),
        purge_seconds=purge_seconds(env),
        partition_days_ahead=positive_number(env, "WEBHOOKS_PARTITION_DAYS_AHEAD", 3,
                                             integer=True, allow_zero=True),
        recover_batch=positive_number(env, "WEBHOOKS_RECOVER_BATCH", 500, integer=True),
        recover_max=positive_number(env, "WEBHOOKS_RECOVER_MAX", 10000, integer=True),
        emit_batch_max=positive_number(env, "WEBHOOKS_EMIT_BATCH_MAX", 10000, integer=True),
        release_batch=positive_number(env, "WEBHOOKS_RELEASE_BATCH", 500, integer=True),
        notice_window=positive_number(env, "WEBHOOKS_NOTICE_WINDOW", 60.0, allow_zero=True),
        notice_budget=positive_number(env, "WEBHOOKS_NOTICE_BUDGET", 10, integer=True),
        max_payload_bytes=positive_number(
            env, "WEBHOOKS_MAX_PAYLOAD_BYTES", 256 * 1024, integer=True
        ),
        max_request_bytes=positive_number(
            env, "WEBHOOKS_MAX_REQUEST_BYTES", 64 * 1024, integer=True
        ),
        publish_timeout=positive_number(env, "WEBHOOKS_PUBLISH_TIMEOUT", 2.0),
        secret_key=secret_key(env),
        log_level=log_level(env),
        db_pool_size=positive_number(env, "WEBHOOKS_DB_POOL_SIZE", 5, integer=True),
        batch_max=positive_number(env, "WEBHOOKS_BATCH_MAX", 32, integer=True),
        batch_wait=positive_number(env, "WEBHOOKS_BATCH_WAIT_MS", 1.0, allow_zero=True) / 1000,
        db_max_overflow=positive_number(
            env, "WEBHOOKS_DB_MAX_OVERFLOW", 10, integer=True, allow_zero=True),
        durable_attempts=boolean(env, "WEBHOOKS_DURABLE_ATTEMPTS", False),
        ca_bundle=ca_bundle(env),
        egress_proxy=egress_proxy(env),
        api_rate_limit=rate_limit(env, "WEBHOOKS_API_RATE_LIMIT", Settings.api_rate_limit),
        test_rate_limit=rate_limit(env, "WEBHOOKS_TEST_RATE_LIMIT", Settings.test_rate_limit),
        publisher_rate_limit=positive_number(env, "WEBHOOKS_PUBLISHER_RATE_LIMIT", 1000,
                                             integer=True, allow_zero=True),
        rate_limit_storage_url=rate_limit_storage(env, broker_url),
        max_subscriptions=positive_number(
            env, "WEBHOOKS_MAX_SUBSCRIPTIONS", 100, integer=True, allow_zero=True
        ),
        # False only where the web process is served over plain http (webhooks dev).
        secure_cookies=boolean(env, "WEBHOOKS_SECURE_COOKIES", True),
        trusted_proxies=positive_number(
            env, "WEBHOOKS_TRUSTED_PROXIES", 0, integer=True, allow_zero=True
        ),
        hsts_max_age=positive_number(
            env, "WEBHOOKS_HSTS_MAX_AGE", 365 * 24 * 3600, integer=True, allow_zero=True
        ),
        metrics_token=metrics_token(env),
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return load_settings()


def reset_settings_cache() -> None:
    """Forget the parsed settings so the next get_settings() reads the environment again."""
    get_settings.cache_clear()
