"""Settings read once from the environment (README, "Configuration").

Every process (web, worker, scheduler, CLI, and ``emit_event()`` in the
caller's process) calls :func:`get_settings`; the values are parsed and
checked once, and a malformed value raises :class:`ConfigError` naming the
variable instead of failing later somewhere deep in a delivery.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .errors import ConfigError

__all__ = ["Settings", "get_settings", "load_settings", "reset_settings_cache"]

# ASCII digits only: \d would also take "٢٠٢٦-٠٧-٣٠", which then broke every delivery.
_VERSION_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_SERVICE_NAME_RE = re.compile(r"^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Settings:
    """The service configuration; every duration is in seconds."""

    data_dir: Path = Path("webhooks-data")
    database_url: str = ""
    broker_url: str = ""
    retry_delays: tuple[int, ...] = (60, 300, 1800, 7200, 43200)
    pause_after: int = 25
    service_name: str = "Service"
    version: str = "2026-07-30"
    timeout: float = 15.0
    allow_private_targets: bool = False
    countdown_limit: int = 300
    countdown_max: int = 2000
    max_in_flight: int = 10
    test_max_in_flight: int = 2
    account_max_in_flight: int = 20
    sweep_interval: float = 5.0
    recover_after: float = 120.0
    sweep_batch: int = 5000
    max_payload_bytes: int = 256 * 1024
    max_request_bytes: int = 64 * 1024
    publish_timeout: float = 2.0
    secret_key: str | None = None
    log_level: str = "INFO"
    ca_bundle: str | None = None  # None: certifi's bundle
    # Rate limits in the notation of the ``limits`` library ("100 per second",
    # "5 per 5 seconds; 60 per hour"), counted over a moving window; None: no limit.
    api_rate_limit: str | None = "100 per second"
    test_rate_limit: str | None = "5 per 5 seconds"
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

    def header(self, suffix: str) -> str:
        """The delivery header name ``X-<service>-<suffix>``, e.g. ``X-Service-Signature``."""
        return f"X-{self.service_name}-{suffix}"

    @property
    def broker_folder(self) -> Path:
        """Where the embedded (filesystem) broker keeps its message files."""
        return self.data_dir / "broker"


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return None if value is None else value.strip()


def _positive_number(env, name: str, default: float, *, integer: bool = False, allow_zero=False):
    raw = _get(env, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ConfigError(f"{name} must be {kind} of seconds or items, got {raw!r}") from None
    if value < 0 or (value == 0 and not allow_zero) or value != value or value == float("inf"):
        raise ConfigError(f"{name} must be greater than 0, got {raw!r}")
    return value


def _retry_delays(env) -> tuple[int, ...]:
    name = "WEBHOOKS_RETRY_DELAYS"
    raw = _get(env, name)
    if raw is None or raw == "":
        return Settings.retry_delays
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


def _boolean(env, name: str, default: bool) -> bool:
    raw = _get(env, name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _matching(env, name: str, default: str, pattern: re.Pattern, what: str) -> str:
    raw = _get(env, name)
    if raw is None or raw == "":
        return default
    if not pattern.fullmatch(raw):
        raise ConfigError(f"{name} must be {what}, got {raw!r}")
    return raw


def _version(env) -> str:
    """WEBHOOKS_VERSION: a real calendar date written YYYY-MM-DD in ASCII digits."""
    name = "WEBHOOKS_VERSION"
    raw = _matching(env, name, Settings.version, _VERSION_RE, "a YYYY-MM-DD date in ASCII digits")
    try:
        dt.date.fromisoformat(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a real calendar date (YYYY-MM-DD), got {raw!r}") from None
    return raw


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MIN_SECRET_KEY_LENGTH = 32


def _secret_key(env) -> str | None:
    """WEBHOOKS_SECRET_KEY signs the dashboard's cookies; None: one kept in the data dir."""
    raw = _get(env, "WEBHOOKS_SECRET_KEY")
    if not raw:
        return None
    if len(raw) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(
            f"WEBHOOKS_SECRET_KEY must be at least {MIN_SECRET_KEY_LENGTH} characters long "
            f"(it signs the dashboard's sign-in cookies); got {len(raw)}"
        )
    return raw


def _ca_bundle(env) -> str | None:
    """WEBHOOKS_CA_BUNDLE: a readable PEM file of CA certificates; None: certifi's bundle."""
    raw = _get(env, "WEBHOOKS_CA_BUNDLE")
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


def _metrics_token(env) -> str | None:
    """WEBHOOKS_METRICS_TOKEN: the bearer token GET /metrics asks for; None leaves it open."""
    name = "WEBHOOKS_METRICS_TOKEN"
    raw = _get(env, name)
    if not raw:
        return None
    if not _TOKEN_RE.fullmatch(raw) or len(raw) < MIN_METRICS_TOKEN_LENGTH:
        raise ConfigError(
            f"{name} must be at least {MIN_METRICS_TOKEN_LENGTH} printable ASCII characters "
            f"without spaces (it is sent as 'Authorization: Bearer <token>'); got {len(raw)} "
            "characters"
        )
    return raw


def _log_level(env) -> str:
    raw = (_get(env, "WEBHOOKS_LOG_LEVEL") or "INFO").upper()
    if raw not in _LOG_LEVELS:
        raise ConfigError(f"WEBHOOKS_LOG_LEVEL must be one of {', '.join(_LOG_LEVELS)}, got {raw!r}")
    return raw


_NO_LIMIT = {"0", "off", "none", "false"}
# Schemes of the ``limits`` library's storages that the web process can use.
_RATE_LIMIT_STORAGES = ("memory", "redis", "rediss", "redis+unix", "redis+sentinel",
                        "redis+cluster")


def _rate_limit(env, name: str, default: str) -> str | None:
    """A rate limit such as ``100 per second`` or ``5 per 5 seconds; 60 per hour``.

    ``0`` or ``off`` means no limit (None). Checked with the parser Flask-Limiter uses.
    """
    raw = _get(env, name)
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


def _rate_limit_storage(env, broker_url: str) -> str:
    """WEBHOOKS_RATE_LIMIT_STORAGE_URL, else the broker's Redis, else this process's memory."""
    name = "WEBHOOKS_RATE_LIMIT_STORAGE_URL"
    raw = _get(env, name)
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


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Parse settings from ``env`` (default: ``os.environ``); raise ConfigError if malformed."""
    env = os.environ if env is None else env
    data_dir = Path(_get(env, "WEBHOOKS_DATA_DIR") or "webhooks-data").absolute()
    database_url = _get(env, "WEBHOOKS_DATABASE_URL") or f"sqlite:///{data_dir / 'webhooks.db'}"
    broker_url = _get(env, "WEBHOOKS_BROKER_URL") or "filesystem://"
    countdown_limit = _positive_number(
        env, "WEBHOOKS_COUNTDOWN_LIMIT", 300, integer=True, allow_zero=True
    )
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        broker_url=broker_url,
        retry_delays=_retry_delays(env),
        pause_after=_positive_number(env, "WEBHOOKS_PAUSE_AFTER", 25, integer=True),
        service_name=_matching(
            env, "WEBHOOKS_SERVICE_NAME", "Service", _SERVICE_NAME_RE,
            "letters and digits, optionally joined by hyphens (it goes into header names)",
        ),
        version=_version(env),
        timeout=_positive_number(env, "WEBHOOKS_TIMEOUT", 15.0),
        allow_private_targets=_boolean(env, "WEBHOOKS_ALLOW_PRIVATE_TARGETS", False),
        countdown_limit=countdown_limit,
        countdown_max=_positive_number(
            env, "WEBHOOKS_COUNTDOWN_MAX", 2000, integer=True, allow_zero=True
        ),
        max_in_flight=_positive_number(
            env, "WEBHOOKS_MAX_IN_FLIGHT", 10, integer=True, allow_zero=True
        ),
        test_max_in_flight=_positive_number(
            env, "WEBHOOKS_TEST_MAX_IN_FLIGHT", 2, integer=True, allow_zero=True
        ),
        account_max_in_flight=_positive_number(
            env, "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT", 20, integer=True, allow_zero=True
        ),
        sweep_interval=_positive_number(env, "WEBHOOKS_SWEEP_INTERVAL", 5.0),
        recover_after=_positive_number(env, "WEBHOOKS_RECOVER_AFTER", 120.0),
        sweep_batch=_positive_number(env, "WEBHOOKS_SWEEP_BATCH", 5000, integer=True),
        max_payload_bytes=_positive_number(
            env, "WEBHOOKS_MAX_PAYLOAD_BYTES", 256 * 1024, integer=True
        ),
        max_request_bytes=_positive_number(
            env, "WEBHOOKS_MAX_REQUEST_BYTES", 64 * 1024, integer=True
        ),
        publish_timeout=_positive_number(env, "WEBHOOKS_PUBLISH_TIMEOUT", 2.0),
        secret_key=_secret_key(env),
        log_level=_log_level(env),
        ca_bundle=_ca_bundle(env),
        api_rate_limit=_rate_limit(env, "WEBHOOKS_API_RATE_LIMIT", Settings.api_rate_limit),
        test_rate_limit=_rate_limit(env, "WEBHOOKS_TEST_RATE_LIMIT", Settings.test_rate_limit),
        rate_limit_storage_url=_rate_limit_storage(env, broker_url),
        max_subscriptions=_positive_number(
            env, "WEBHOOKS_MAX_SUBSCRIPTIONS", 100, integer=True, allow_zero=True
        ),
        # False only where the web process is served over plain http (webhooks dev).
        secure_cookies=_boolean(env, "WEBHOOKS_SECURE_COOKIES", True),
        trusted_proxies=_positive_number(
            env, "WEBHOOKS_TRUSTED_PROXIES", 0, integer=True, allow_zero=True
        ),
        hsts_max_age=_positive_number(
            env, "WEBHOOKS_HSTS_MAX_AGE", 365 * 24 * 3600, integer=True, allow_zero=True
        ),
        metrics_token=_metrics_token(env),
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return load_settings()


def reset_settings_cache() -> None:
    """Forget the parsed settings so the next get_settings() reads the environment again."""
    get_settings.cache_clear()
