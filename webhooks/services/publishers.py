"""Publisher keys as the web and the CLI use them: create, list, revoke, and verify a
request's key quickly (CONTRACT 10.7).

Verifying a key against the database on every request was a large part of the
cost of an event sent over HTTP (issue 38: 3.4 ms an event); so was asking a
shared counter on each request (a Redis round trip, ~0.2 ms idle and several ms
on a loaded host). A web process therefore keeps the keys it verified in
memory, and learns of revocations by being told: it listens on a Redis
channel of the storage every web process shares for its rate limits
(WEBHOOKS_RATE_LIMIT_STORAGE_URL, by default the broker's Redis). Revoking a
key commits, then publishes on that channel; each listening process drops
what it verified. A cached answer is trusted only while this process has been
listening without a break since it was cached (the *generation* it was cached
under: a new message, a lost connection and a new subscription each start a
new one), so a revocation sent while a listener was reconnecting is never
missed. When the storage is each process's memory (``webhooks dev``) or the
listener is not subscribed, nothing is cached: every request asks the
database. A cached key is asked again after :data:`CACHE_SECONDS` in any case.

``last_used_at`` is written at most once a minute per key: each process tries
at most once per :data:`TOUCH_INTERVAL` per key, and the UPDATE itself is
conditional on the stored time being older, so several processes write once.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.storage.db import get_autocommit_engine
from webhooks.storage.models import Publisher, utcnow
from webhooks.tenants import publishers as keys
from webhooks.tenants.publishers import PUBLISHER_KEY_PREFIX

if TYPE_CHECKING:
    from limits.storage import Storage

__all__ = ["PUBLISHER_KEY_PREFIX", "CACHE_SECONDS", "CHANNEL", "TOUCH_INTERVAL", "create", "listing",
           "revoke", "tell_web_processes", "verified_publisher_id", "forget_verified",
           "EpochUnavailable"]

log = logging.getLogger(__name__)

CACHE_SECONDS = 60.0  # a verified key is asked again after this long in any case
TOUCH_INTERVAL = dt.timedelta(minutes=1)  # last_used_at is at most this stale
CHANNEL = "webhooks:publisher-revocations"  # the Redis channel revocations are told on
_STORAGE_TIMEOUT_S = 1.0
_LISTEN_POLL_S = 0.5  # how long the listener waits for a message before checking in
_PING_EVERY_S = 5.0  # a silent connection is pinged this often: a dead one is found
_RECONNECT_AFTER_S = 1.0


class EpochUnavailable(Exception):
    """The web processes could not be told of a revocation (they may trust the key for up
    to CACHE_SECONDS more)."""


@dataclass(frozen=True)
class _Verified:
    publisher_id: str
    generation: int  # the listener's generation it was verified under
    at: float  # time.monotonic() when verified


_verified: dict[str, _Verified] = {}  # key hash -> what the database said, and when
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
    # Imported here, not with the module: `webhooks publishers create` and `list` need no
    # shared storage, and limits costs about 10 ms of each command's start.
    from limits.storage import storage_from_string

    with _storage_lock:
        if url not in _storage:
            _storage[url] = storage_from_string(
                url, socket_connect_timeout=_STORAGE_TIMEOUT_S, socket_timeout=_STORAGE_TIMEOUT_S)
        return _storage[url]


def tell_web_processes() -> None:
    """Tell every web process, after a revocation committed, to drop the keys it verified.
    EpochUnavailable if the shared storage did not answer."""
    _verified.clear()
    storage = _shared_storage()
    if storage is None:
        return  # nothing is cached anywhere (see _Listener.generation)
    try:
        storage.storage.publish(CHANNEL, b"revoked")
    except Exception as exc:  # noqa: BLE001  (any failure of the storage's client)
        raise EpochUnavailable(f"the rate-limit storage did not answer: {exc}") from exc


class _Listener:
    """This process's subscription to the revocation channel, in a daemon thread started
    on first use (again in a forked child: a thread does not cross a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._generation = 0
        self._subscribed = False

    def generation(self) -> int | None:
        """The current generation while subscribed, else None (trust no cached answer)."""
        storage = _shared_storage()
        if storage is None:
            return None
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._pid, self._subscribed = os.getpid(), False
                    threading.Thread(target=self._run, args=(storage,), daemon=True,
                                     name="publisher-revocations").start()
        return self._generation if self._subscribed else None

    def _next(self, subscribed: bool) -> None:
        self._generation += 1
        self._subscribed = subscribed
        _verified.clear()

    def _run(self, storage: Storage) -> None:
        while True:
            try:
                self._listen(storage)
            except Exception:  # noqa: BLE001  (the connection failed: keys are asked again)
                log.warning("publisher revocations not heard; keys are checked in the "
                            "database until the listener is back", exc_info=True)
            self._next(subscribed=False)
            time.sleep(_RECONNECT_AFTER_S)

    def _listen(self, storage: Storage) -> None:
        pubsub = storage.storage.pubsub()
        try:
            pubsub.subscribe(CHANNEL)
            pinged = time.monotonic()
            while True:
                message = pubsub.get_message(timeout=_LISTEN_POLL_S)
                if message is not None:
                    # The subscription confirmed (from now on nothing is missed), or a
                    # revocation: either way a new generation.
                    self._next(subscribed=True)
                elif time.monotonic() - pinged > _PING_EVERY_S:
                    pubsub.ping()
                    pinged = time.monotonic()
        finally:
            pubsub.close()


_listener = _Listener()


def verified_publisher_id(key: str) -> str | None:
    """The id of the live publisher whose key ``key`` is, else None: from this process's
    cache while no revocation was heard since, else from the database."""
    if not key.startswith(PUBLISHER_KEY_PREFIX):
        return None
    key_hash = keys.hash_key(key)
    generation = _listener.generation()
    now = time.monotonic()
    cached = _verified.get(key_hash)
    if (cached is not None and generation is not None and cached.generation == generation
            and now - cached.at < CACHE_SECONDS):
        publisher_id = cached.publisher_id
    else:
        _verified.pop(key_hash, None)
        with get_autocommit_engine().connect() as connection:
            publisher_id = keys.live_publisher_id(connection, key)
        if publisher_id is None:
            return None
        if generation is not None:
            _verified[key_hash] = _Verified(publisher_id, generation, now)
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
