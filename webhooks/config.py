"""Settings read once from the environment (CONTRACT.md section 1).

Every process (web, worker, scheduler, CLI, and ``emit_event()`` in the
caller's process) calls :func:`get_settings`; the values are parsed and
checked once, and a malformed value raises :class:`ConfigError` naming the
variable instead of failing later somewhere deep in a delivery.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .errors import ConfigError

__all__ = ["Settings", "get_settings", "load_settings", "reset_settings_cache"]

_VERSION_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
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
    sweep_interval: float = 5.0
    recover_after: float = 120.0
    sweep_batch: int = 5000
    retention_days: int = 30
    purge_batch: int = 500
    purge_interval: float = 60.0
    purge_seconds: float = 10.0
    max_payload_bytes: int = 256 * 1024
    max_request_bytes: int = 64 * 1024
    publish_timeout: float = 2.0
    secret_key: str | None = None
    log_level: str = "INFO"
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
        bound = "0 or more" if allow_zero else "greater than 0"
        raise ConfigError(f"{name} must be {bound}, got {raw!r}")
    return value


MAX_PURGE_BATCH = 10_000  # ids bound in one statement: SQLite takes at most 32,766


def _purge_batch(env) -> int:
    value = _positive_number(env, "WEBHOOKS_PURGE_BATCH", 500, integer=True)
    if value > MAX_PURGE_BATCH:
        raise ConfigError(f"WEBHOOKS_PURGE_BATCH must be at most {MAX_PURGE_BATCH}, got {value}")
    return value


MAX_PURGE_SECONDS = 60  # well inside the worker's task time limit (WEBHOOKS_TIMEOUT + 120 s)


def _purge_seconds(env) -> float:
    value = _positive_number(env, "WEBHOOKS_PURGE_SECONDS", 10.0)
    if value > MAX_PURGE_SECONDS:
        raise ConfigError(f"WEBHOOKS_PURGE_SECONDS must be at most {MAX_PURGE_SECONDS}, got {value}")
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
    if not pattern.match(raw):
        raise ConfigError(f"{name} must be {what}, got {raw!r}")
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


def _log_level(env) -> str:
    raw = (_get(env, "WEBHOOKS_LOG_LEVEL") or "INFO").upper()
    if raw not in _LOG_LEVELS:
        raise ConfigError(f"WEBHOOKS_LOG_LEVEL must be one of {', '.join(_LOG_LEVELS)}, got {raw!r}")
    return raw


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
        version=_matching(env, "WEBHOOKS_VERSION", "2026-07-30", _VERSION_RE, "a YYYY-MM-DD date"),
        timeout=_positive_number(env, "WEBHOOKS_TIMEOUT", 15.0),
        allow_private_targets=_boolean(env, "WEBHOOKS_ALLOW_PRIVATE_TARGETS", False),
        countdown_limit=countdown_limit,
        countdown_max=_positive_number(
            env, "WEBHOOKS_COUNTDOWN_MAX", 2000, integer=True, allow_zero=True
        ),
        max_in_flight=_positive_number(
            env, "WEBHOOKS_MAX_IN_FLIGHT", 10, integer=True, allow_zero=True
        ),
        sweep_interval=_positive_number(env, "WEBHOOKS_SWEEP_INTERVAL", 5.0),
        recover_after=_positive_number(env, "WEBHOOKS_RECOVER_AFTER", 120.0),
        sweep_batch=_positive_number(env, "WEBHOOKS_SWEEP_BATCH", 5000, integer=True),
        retention_days=_positive_number(
            env, "WEBHOOKS_RETENTION_DAYS", 30, integer=True, allow_zero=True
        ),
        purge_batch=_purge_batch(env),
        purge_interval=_positive_number(env, "WEBHOOKS_PURGE_INTERVAL", 60.0),
        purge_seconds=_purge_seconds(env),
        max_payload_bytes=_positive_number(
            env, "WEBHOOKS_MAX_PAYLOAD_BYTES", 256 * 1024, integer=True
        ),
        max_request_bytes=_positive_number(
            env, "WEBHOOKS_MAX_REQUEST_BYTES", 64 * 1024, integer=True
        ),
        publish_timeout=_positive_number(env, "WEBHOOKS_PUBLISH_TIMEOUT", 2.0),
        secret_key=_secret_key(env),
        log_level=_log_level(env),
    )


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, parsed on first use."""
    return load_settings()


def reset_settings_cache() -> None:
    """Forget the parsed settings so the next get_settings() reads the environment again."""
    get_settings.cache_clear()
