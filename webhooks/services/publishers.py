"""Publisher keys as the web and the CLI use them: create, list, revoke, and verify a
request's key quickly (CONTRACT 10.7).

Verifying a key against the database on every request was a large part of the
cost of an event sent over HTTP (issue 38: 3.4 ms an event). A web process
therefore keeps the keys it verified in memory, each with the *revocation
epoch* it was verified under: a counter in the storage every web process
shares for its rate limits (WEBHOOKS_RATE_LIMIT_STORAGE_URL, by default the
broker's Redis). Revoking a key commits, then bumps the epoch; every process
reads the epoch on each request (one GET, no database) and drops what it
verified under another. So a revoked key answers 401 at once on every web
process. When the storage is each process's memory (``webhooks dev``) or
cannot be read, nothing is cached: every request asks the database. A
cached key is asked again after :data:`CACHE_SECONDS` in any case.

``last_used_at`` is written at most once a minute per key: each process tries
at most once per :data:`TOUCH_INTERVAL` per key, and the UPDATE itself is
conditional on the stored time being older, so several processes write once.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass

from limits.storage import Storage, storage_from_string
from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.storage.db import get_autocommit_engine
from webhooks.storage.models import Publisher, utcnow
from webhooks.tenants import publishers as keys
from webhooks.tenants.publishers import PUBLISHER_KEY_PREFIX

__all__ = ["PUBLISHER_KEY_PREFIX", "CACHE_SECONDS", "TOUCH_INTERVAL", "create", "listing",
           "revoke", "tell_web_processes", "verified_publisher_id", "forget_verified",
           "EpochUnavailable"]

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0  # a verified key is asked again after this long, epoch or not
TOUCH_INTERVAL = dt.timedelta(minutes=1)  # last_used_at is at most this stale
_EPOCH_KEY = "publisher-revocation-epoch"
_EPOCH_EXPIRY_S = 400 * 24 * 3600  # the counter outlives any cache; a reset to 0 is a change too
_STORAGE_TIMEOUT_S = 1.0


class EpochUnavailable(Exception):
    """The shared storage could not be told of a revocation (web processes may trust the
    key for up to CACHE_SECONDS more)."""


@dataclass(frozen=True)
class _Verified:
    publisher_id: str
    epoch: int
    at: float  # time.monotonic() when verified


_verified: dict[str, _Verified] = {}  # key hash -> what the database said, under which epoch
_touched: dict[str, float] = {}  # publisher id -> time.monotonic() of this process's last try
_storage_lock = threading.Lock()
_storage: dict[str, Storage] = {}


def create(session: Session, name: str) -> tuple[Publisher, str]:
    """A new publisher and its key (shown once); ValueError for a bad name."""
    return keys.create_publisher(session, name)


def listing(session: Session) -> list[dict]:
    """The publishers that are not revoked (``webhooks publishers list``)."""
    return keys.listing(session)


def revoke(session: Session, publisher_id: str) -> None:
    """Revoke in the caller's transaction; NotFound if there is no such live publisher.
    After the commit, call :func:`tell_web_processes`."""
    keys.revoke(session, publisher_id, utcnow())


def _shared_storage() -> Storage | None:
    """The storage the web processes share (None: each process's memory, shared by none)."""
    url = get_settings().rate_limit_storage_url
    if url.startswith("memory"):
        return None
    with _storage_lock:
        if url not in _storage:
            _storage[url] = storage_from_string(
                url, socket_connect_timeout=_STORAGE_TIMEOUT_S, socket_timeout=_STORAGE_TIMEOUT_S)
        return _storage[url]


def tell_web_processes() -> None:
    """Bump the revocation epoch, after a revocation committed: every web process drops the
    keys it verified. EpochUnavailable if the shared storage did not answer."""
    _verified.clear()
    storage = _shared_storage()
    if storage is None:
        return  # nothing is cached anywhere (see _current_epoch)
    try:
        storage.incr(_EPOCH_KEY, _EPOCH_EXPIRY_S)
    except Exception as exc:  # noqa: BLE001  (any failure of the storage's client)
        raise EpochUnavailable(f"the rate-limit storage did not answer: {exc}") from exc


def _current_epoch() -> int | None:
    """The revocation epoch now, or None when no cached answer may be trusted."""
    storage = _shared_storage()
    if storage is None:
        return None
    try:
        return int(storage.get(_EPOCH_KEY))
    except Exception:  # noqa: BLE001  (as the rate limiter: an outage must not stop the API)
        log.warning("the publisher revocation epoch is unreadable; keys are checked in the "
                    "database", exc_info=True)
        return None


def verified_publisher_id(key: str) -> str | None:
    """The id of the live publisher whose key ``key`` is, else None: from this process's
    cache while the revocation epoch has not moved, else from the database."""
    if not key.startswith(PUBLISHER_KEY_PREFIX):
        return None
    key_hash = keys.hash_key(key)
    epoch = _current_epoch()
    now = time.monotonic()
    cached = _verified.get(key_hash)
    if (cached is not None and epoch is not None and cached.epoch == epoch
            and now - cached.at < CACHE_SECONDS):
        publisher_id = cached.publisher_id
    else:
        _verified.pop(key_hash, None)
        with get_autocommit_engine().connect() as connection:
            publisher_id = keys.live_publisher_id(connection, key)
        if publisher_id is None:
            return None
        if epoch is not None:
            _verified[key_hash] = _Verified(publisher_id, epoch, now)
    _note_use(publisher_id, now)
    return publisher_id


def _note_use(publisher_id: str, now: float) -> None:
    """Write ``last_used_at`` if this process has not tried for TOUCH_INTERVAL."""
    last = _touched.get(publisher_id)
    if last is not None and now - last < TOUCH_INTERVAL.total_seconds():
        return
    _touched[publisher_id] = now
    try:
        with get_autocommit_engine().connect() as connection:
            keys.touch(connection, publisher_id, utcnow(), TOUCH_INTERVAL)
            connection.commit()
    except Exception:  # noqa: BLE001  (a bookkeeping write must not fail the request)
        log.warning("last_used_at of publisher %s not written", publisher_id, exc_info=True)


def forget_verified() -> None:
    """Forget every key this process verified, and when it last wrote ``last_used_at``
    (tests; a process that changes its settings)."""
    _verified.clear()
    _touched.clear()
