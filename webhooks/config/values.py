"""Parsers of environment values for webhooks/config/settings.py: each reads one variable, checks it, and
raises ConfigError naming the variable when it is malformed."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Mapping

from webhooks.errors import ConfigError

__all__ = [
    "get", "positive_number", "retry_delays", "boolean", "matching", "version", "secret_key",
    "ca_bundle", "metrics_token", "log_level", "rate_limit", "rate_limit_storage",
    "purge_batch", "purge_seconds", "read_database_url", "SENTINEL_NAME_RE",
    "database_url_of", "supported_database_url", "SUPPORTED_DATABASE_URLS",
]

DEFAULT_RETRY_DELAYS = (60, 300, 1800, 7200, 43200)
DEFAULT_VERSION = "2026-07-30"
_VERSION_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
SERVICE_NAME_RE = re.compile(r"^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$")
SENTINEL_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return None if value is None else value.strip()


# What each number counts, for the message that refuses a value that is no number.
UNITS = {
    "WEBHOOKS_RETENTION_DAYS": "days",
    "WEBHOOKS_AUDIT_RETENTION_DAYS": "days",
    "WEBHOOKS_TIMEOUT": "seconds",
    "WEBHOOKS_SWEEP_INTERVAL": "seconds",
    "WEBHOOKS_RECOVER_AFTER": "seconds",
    "WEBHOOKS_PURGE_INTERVAL": "seconds",
    "WEBHOOKS_PURGE_SECONDS": "seconds",
    "WEBHOOKS_PARTITION_DAYS_AHEAD": "days",
    "WEBHOOKS_PUBLISH_TIMEOUT": "seconds",
    "WEBHOOKS_HSTS_MAX_AGE": "seconds",
    "WEBHOOKS_COUNTDOWN_LIMIT": "seconds",
    "WEBHOOKS_RETRY_AFTER_MAX": "seconds",
    "WEBHOOKS_COUNTDOWN_MAX": "retries",
    "WEBHOOKS_MAX_PAYLOAD_BYTES": "bytes",
    "WEBHOOKS_MAX_REQUEST_BYTES": "bytes",
    "WEBHOOKS_PAUSE_AFTER": "consecutive failures",
    "WEBHOOKS_MAX_IN_FLIGHT": "attempts",
    "WEBHOOKS_TEST_MAX_IN_FLIGHT": "attempts",
    "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": "attempts",
    "WEBHOOKS_PACE_SUCCESS_RUN": "successful attempts",
    "WEBHOOKS_PACE_RATE_CLIMB": "percent per second",
    "WEBHOOKS_SLOT_HOLD_MS": "milliseconds",
    "WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT": "attempts",
    "WEBHOOKS_DNS_THREADS": "threads",
    "WEBHOOKS_SWEEP_BATCH": "deliveries",
    "WEBHOOKS_PURGE_BATCH": "deliveries",
    "WEBHOOKS_RECOVER_BATCH": "deliveries",
    "WEBHOOKS_RECOVER_MAX": "deliveries",
    "WEBHOOKS_EMIT_BATCH_MAX": "events",
    "WEBHOOKS_RELEASE_BATCH": "deliveries",
    "WEBHOOKS_NOTICE_WINDOW": "seconds",
    "WEBHOOKS_NOTICE_BUDGET": "notices",
    "WEBHOOKS_DB_POOL_SIZE": "connections",
    "WEBHOOKS_DB_MAX_OVERFLOW": "connections",
    "WEBHOOKS_BATCH_MAX": "claims or records per statement",
    "WEBHOOKS_BATCH_WAIT_MS": "milliseconds",
    "WEBHOOKS_MAX_SUBSCRIPTIONS": "subscriptions",
    "WEBHOOKS_TRUSTED_PROXIES": "proxies",
    "WEBHOOKS_CLOCK_REFRESH": "seconds",
    "WEBHOOKS_READ_OWN_WRITES_FOR": "seconds",
    "WEBHOOKS_READ_MAX_LAG": "seconds",
}


def positive_number(env, name: str, default: float, *, integer: bool = False, allow_zero=False):
    """The number in ``env[name]`` (``default`` if unset or empty); ConfigError naming the
    variable, what it counts (UNITS) and the bound when it is no number or out of bounds."""
    raw = get(env, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        unit = f" of {UNITS[name]}" if name in UNITS else ""
        raise ConfigError(f"{name} must be {kind}{unit}, got {raw!r}") from None
    if value < 0 or (value == 0 and not allow_zero) or value != value or value == float("inf"):
        bound = "0 or more" if allow_zero else "greater than 0"
        raise ConfigError(f"{name} must be {bound}, got {raw!r}")
    return value


MAX_PURGE_BATCH = 10_000  # ids bound in one statement: SQLite takes at most 32,766


def purge_batch(env) -> int:
    value = positive_number(env, "WEBHOOKS_PURGE_BATCH", 500, integer=True)
    if value > MAX_PURGE_BATCH:
        raise ConfigError(f"WEBHOOKS_PURGE_BATCH must be at most {MAX_PURGE_BATCH}, got {value}")
    return value


MAX_PURGE_SECONDS = 60  # well inside the worker's task time limit (WEBHOOKS_TIMEOUT + 120 s)


def purge_seconds(env) -> float:
    value = positive_number(env, "WEBHOOKS_PURGE_SECONDS", 10.0)
    if value > MAX_PURGE_SECONDS:
        raise ConfigError(f"WEBHOOKS_PURGE_SECONDS must be at most {MAX_PURGE_SECONDS}, got {value}")
    return value


def retry_delays(env) -> tuple[int, ...]:
    name = "WEBHOOKS_RETRY_DELAYS"
    raw = get(env, name)
    if raw is None or raw == "":
        return DEFAULT_RETRY_DELAYS
    parts = [p.strip() for p in raw.split(",")]
    try:
        delays = tuple(int(p) for p in parts)
    except ValueError:
        raise ConfigError(
            f"{name} must be comma-separated whole seconds such as 60,300,1800, got {raw!r}"
        ) from None
    if any(d < 0 for d in delays):
        raise ConfigError(f"{name} must not contain negative delays, got {raw!r}")
    return delays


def boolean(env, name: str, default: bool) -> bool:
    raw = get(env, name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def matching(env, name: str, default: str, pattern: re.Pattern, what: str) -> str:
    raw = get(env, name)
    if raw is None or raw == "":
        return default
    if not pattern.fullmatch(raw):
        raise ConfigError(f"{name} must be {what}, got {raw!r}")
    return raw


def version(env) -> str:
    """WEBHOOKS_VERSION: a real calendar date written YYYY-MM-DD in ASCII digits."""
    name = "WEBHOOKS_VERSION"
    raw = matching(env, name, DEFAULT_VERSION, _VERSION_RE, "a YYYY-MM-DD date in ASCII digits")
    try:
        dt.date.fromisoformat(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a real calendar date (YYYY-MM-DD), got {raw!r}") from None
    return raw


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MIN_SECRET_KEY_LENGTH = 32


def secret_key(env) -> str | None:
    """WEBHOOKS_SECRET_KEY signs the dashboard's cookies; None: one kept in the data dir."""
    raw = get(env, "WEBHOOKS_SECRET_KEY")
    if not raw:
        return None
    if len(raw) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(
            f"WEBHOOKS_SECRET_KEY must be at least {MIN_SECRET_KEY_LENGTH} characters long "
            f"(it signs the dashboard's sign-in cookies); got {len(raw)}"
        )
    return raw


def ca_bundle(env) -> str | None:
    """WEBHOOKS_CA_BUNDLE: a readable PEM file of CA certificates; None: certifi's bundle."""
    raw = get(env, "WEBHOOKS_CA_BUNDLE")
    if not raw:
        return None
    path = Path(raw).expanduser()
    try:
        head = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"WEBHOOKS_CA_BUNDLE must name a readable PEM file of CA certificates, "
            f"got {raw!r} ({exc.strerror or type(exc).__name__})"
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in head:
        raise ConfigError(f"WEBHOOKS_CA_BUNDLE names {raw!r}, which holds no PEM certificate")
    return str(path.absolute())


MIN_METRICS_TOKEN_LENGTH = 16
_TOKEN_RE = re.compile(r"[!-~]+")  # printable ASCII, no space: it travels in a header


def metrics_token(env) -> str | None:
    """WEBHOOKS_METRICS_TOKEN: the bearer token GET /metrics asks for; None leaves it open."""
    name = "WEBHOOKS_METRICS_TOKEN"
    raw = get(env, name)
    if not raw:
        return None
    if not _TOKEN_RE.fullmatch(raw) or len(raw) < MIN_METRICS_TOKEN_LENGTH:
        raise ConfigError(
            f"{name} must be at least {MIN_METRICS_TOKEN_LENGTH} printable ASCII characters "
            f"without spaces (it is sent as 'Authorization: Bearer <token>'); got {len(raw)} "
            "characters"
        )
    return raw


def log_level(env) -> str:
    raw = (get(env, "WEBHOOKS_LOG_LEVEL") or "INFO").upper()
    if raw not in _LOG_LEVELS:
        raise ConfigError(f"WEBHOOKS_LOG_LEVEL must be one of {', '.join(_LOG_LEVELS)}, got {raw!r}")
    return raw


_NO_LIMIT = {"0", "off", "none", "false"}
# Schemes of the ``limits`` library's storages that the web process can use.
_RATE_LIMIT_STORAGES = ("memory", "redis", "rediss", "redis+unix", "redis+sentinel",
                        "redis+cluster")


def rate_limit(env, name: str, default: str) -> str | None:
    """A rate limit such as ``100 per second`` or ``5 per 5 seconds; 60 per hour``.

    ``0`` or ``off`` means no limit (None). Checked with the parser Flask-Limiter uses.
    """
    raw = get(env, name)
    if raw is None or raw == "":
        return default
    if raw.lower() in _NO_LIMIT:
        return None
    from limits import parse_many

    try:
        items = parse_many(raw)
    except ValueError:
        items = []
    if not items or any(item.amount < 1 for item in items):
        raise ConfigError(
            f"{name} must be a rate such as '100 per second' or '5 per 5 seconds' "
            f"(several joined by ';'), or 0 or off for no limit, got {raw!r}"
        )
    return raw


def rate_limit_storage(env, broker_url: str) -> str:
    """WEBHOOKS_RATE_LIMIT_STORAGE_URL, else the broker's Redis, else this process's memory."""
    name = "WEBHOOKS_RATE_LIMIT_STORAGE_URL"
    raw = get(env, name)
    if raw:
        scheme = raw.partition("://")[0].lower()
        if "://" not in raw or scheme not in _RATE_LIMIT_STORAGES:
            raise ConfigError(
                f"{name} must be a URL of one of the schemes {', '.join(_RATE_LIMIT_STORAGES)} "
                f"(such as redis://host:6379/1), got {raw!r}"
            )
        return raw
    if broker_url.startswith(("redis://", "rediss://")):
        return broker_url
    return "memory://"


# The database URLs the service can use. A bare postgresql:// (and Heroku's postgres://)
# goes through psycopg2, the driver setup.cfg installs: SQLAlchemy 2.1 would pick
# psycopg 3 for it, which is not installed, and the process died on a ModuleNotFoundError.
POSTGRESQL_DRIVER = "postgresql+psycopg2"
_POSTGRESQL_SCHEMES = ("postgresql", "postgres", POSTGRESQL_DRIVER)
_SQLITE_SCHEMES = ("sqlite", "sqlite+pysqlite")
SUPPORTED_DATABASE_URLS = ("a PostgreSQL URL (postgresql://, postgres:// or "
                           "postgresql+psycopg2://, used through psycopg2) or a SQLite one "
                           "(sqlite:///<file>)")


def supported_database_url(raw: str, name: str) -> str:
    """``raw`` as the engines take it (PostgreSQL through psycopg2), or ConfigError naming
    ``name`` and the supported forms. The message never repeats the URL: it may hold a
    password."""
    scheme, separator, rest = raw.partition("://")
    scheme = scheme.lower()
    if not separator:
        raise ConfigError(f"{name} must be {SUPPORTED_DATABASE_URLS}; got a value that is "
                          "not a URL")
    if scheme in _POSTGRESQL_SCHEMES:
        url = f"{POSTGRESQL_DRIVER}://{rest}"
    elif scheme in _SQLITE_SCHEMES:
        url = raw
    else:
        raise ConfigError(f"{name} must be {SUPPORTED_DATABASE_URLS}; got a {scheme}:// URL")
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(f"{name} must be {SUPPORTED_DATABASE_URLS}; got a malformed "
                          f"{scheme}:// URL") from None
    if scheme in _SQLITE_SCHEMES and parsed.database in (None, "", ":memory:"):
        raise ConfigError(f"{name} must name a SQLite file (sqlite:///<file>): an in-memory "
                          "database would be a new, empty one in every process and connection")
    return url


def database_url_of(env, name: str) -> str | None:
    """``env[name]``, a database URL the service can use (supported_database_url); None if unset."""
    raw = get(env, name)
    return supported_database_url(raw, name) if raw else None


def read_database_url(env, database_url: str) -> str:
    """WEBHOOKS_READ_DATABASE_URL: a replica of the primary on the same backend ("" = none).

    A SQLite file cannot have a streaming replica, and a replica of another kind than the
    primary would be another database: both are refused."""
    name = "WEBHOOKS_READ_DATABASE_URL"
    raw = get(env, name)
    if not raw:
        return ""
    scheme, separator, _ = raw.partition("://")
    if not separator or scheme.lower() not in _POSTGRESQL_SCHEMES:
        got = f"a {scheme}:// URL" if separator else "a value that is not a URL"
        raise ConfigError(f"{name} must be a postgresql:// URL of a streaming replica, got {got}")
    if not database_url.startswith(POSTGRESQL_DRIVER + "://"):
        raise ConfigError(f"{name} needs WEBHOOKS_DATABASE_URL to be a PostgreSQL primary")
    return supported_database_url(raw, name)
