"""Request rate limits per tenant, so that one account cannot starve the others.

Two limits, both counted over a moving window by Flask-Limiter in one
storage shared by every web process (WEBHOOKS_RATE_LIMIT_STORAGE_URL, by
default the broker's Redis; each process's memory under ``webhooks dev``):

- every request, WEBHOOKS_API_RATE_LIMIT (100 per second) per caller: the
  account of a valid API key on an API route that needs one, the signed-in
  account on the dashboard (a bucket of its own), otherwise the remote
  address. ``/healthz`` and ``/metrics`` are exempt.
- Send test, WEBHOOKS_TEST_RATE_LIMIT (5 per 5 seconds) per subscription,
  shared by the API route and the dashboard's button: :func:`check_send_test`.
- the publisher API, WEBHOOKS_PUBLISHER_RATE_LIMIT (1000 per second) per publisher
  key instead of the first limit: :func:`check_publisher`, counted over fixed
  one-second windows by :class:`LeasedWindows`: each process takes a lease of
  requests (a tenth of the limit, at most 10) from the shared counter with one
  INCRBY and spends it locally, so an event costs a tenth of a round trip to
  Redis, not one (a round trip per request was a large part of what an event
  over HTTP cost, issue 38). No more than the limit is ever granted in a window;
  a lease left unspent at the window's end is lost (under-admission, at most
  ``processes x lease`` a second).

Over a limit the answer is 429 ``rate_limited`` with ``Retry-After``
(web/errors.py). If the storage cannot be reached, requests are let through
and the failure is logged: an outage of the limiter must not become an
outage of the API.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from flask import Blueprint, Flask, current_app, request
from flask_limiter import ApplicationLimit, Limiter
import threading
import time

from limits import RateLimitItem, parse_many
from limits.storage import Storage

from webhooks.config import Settings

from .auth import authenticate, key_account_id
from .errors import too_many_requests

__all__ = ["init_app", "check_send_test", "check_publisher", "caller_key", "LeasedWindows"]

log = logging.getLogger(__name__)

_EXTENSION = "webhooks_rate_limits"
_KEY_PREFIX = "webhooks"
# Seconds a web request waits for the Redis that counts the limits.
STORAGE_TIMEOUT_S = 1.0


# Blueprint name -> the function naming its signed-in account (None: nobody signed in).
SignedIn = dict[str, Callable[[], "str | None"]]


@dataclass(frozen=True)
class _RateLimits:
    limiter: Limiter
    send_test: tuple[RateLimitItem, ...]
    signed_in: SignedIn = field(default_factory=dict)
    publisher: "LeasedWindows | None" = None


def _rate_limits() -> _RateLimits | None:
    return current_app.extensions.get(_EXTENSION)


def _needs_api_key() -> bool:
    """Whether the matched route authenticates with an API key (its blueprint says so)."""
    hooks = current_app.before_request_funcs.get(request.blueprint, ())
    return authenticate in hooks


def caller_key() -> str:
    """Whom this request counts against: ``account:<id>`` or ``address:<remote address>``."""
    signed_in = _rate_limits().signed_in.get(request.blueprint)
    if signed_in is not None:
        account_id = signed_in()
    else:
        account_id = key_account_id() if _needs_api_key() else None
    if account_id is not None:
        return f"account:{account_id}"
    return f"address:{request.remote_addr or 'unknown'}"


def _scope(_endpoint: str) -> str:
    """Each signed-in area (the dashboard) counts apart from the API: a busy script
    does not lock its people out of the pages that show what it did."""
    blueprint = request.blueprint
    return blueprint if blueprint in _rate_limits().signed_in else "api"


def _storage_options(url: str) -> dict:
    if url.startswith("memory"):
        return {}
    return {"socket_connect_timeout": STORAGE_TIMEOUT_S, "socket_timeout": STORAGE_TIMEOUT_S}


def init_app(
    app: Flask, settings: Settings, *, exempt: tuple[Blueprint, ...] = (),
    signed_in: SignedIn | None = None,
) -> Limiter:
    """Install the limits on ``app``; the blueprints in ``exempt`` are never limited.

    ``signed_in`` maps the blueprints that sign people in with a session (the
    dashboard) to the function that names the signed-in account. The setting
    ``RATELIMIT_ENABLED = False`` in the app's config turns every limit off.
    """
    limits = []
    if settings.api_rate_limit:
        limits.append(ApplicationLimit(settings.api_rate_limit, scope=_scope))
    limiter = Limiter(
        caller_key,
        application_limits=limits,
        strategy="moving-window",
        storage_uri=settings.rate_limit_storage_url,
        storage_options=_storage_options(settings.rate_limit_storage_url),
        swallow_errors=True,
        key_prefix=_KEY_PREFIX,
    )
    limiter.init_app(app)
    for blueprint in exempt:
        limiter.exempt(blueprint)
    exempt_names = frozenset(blueprint.name for blueprint in exempt)
    # Checked before Flask-Limiter resolves any limit: an exempt blueprint (the publisher
    # API's events, one request per event) pays nothing for the limits it does not have.
    limiter.request_filter(lambda: request.blueprint in exempt_names)
    if settings.rate_limit_storage_url.startswith("memory") and not settings.is_embedded_broker:
        log.warning("rate limits are counted in each web process's memory: set "
                    "WEBHOOKS_RATE_LIMIT_STORAGE_URL to share them between processes")
    send_test = tuple(parse_many(settings.test_rate_limit)) if settings.test_rate_limit else ()
    publisher = (LeasedWindows(lambda: limiter.storage, settings.publisher_rate_limit)
                 if settings.publisher_rate_limit else None)
    app.extensions[_EXTENSION] = _RateLimits(limiter, send_test, dict(signed_in or {}),
                                             publisher)
    return limiter


def check_send_test(account_id: str, subscription_id: str) -> None:
    """Count one test event for this subscription; 429 (ApiError) when over WEBHOOKS_TEST_RATE_LIMIT.

    Call it once the subscription is known to be the caller's: another
    account's requests must never spend this subscription's budget.
    """
    limits = _rate_limits()
    if limits is None or not limits.limiter.enabled:
        return
    strategy = limits.limiter.limiter
    identifiers = (_KEY_PREFIX, "send-test", account_id, subscription_id)
    for item in limits.send_test:
        try:
            allowed = strategy.hit(item, *identifiers)
            reset_at = None if allowed else strategy.get_window_stats(item, *identifiers).reset_time
        except Exception:  # noqa: BLE001  (as Flask-Limiter's swallow_errors: let it through)
            log.exception("rate limit storage failed; the test event is not limited")
            return
        if reset_at is not None:
            raise too_many_requests(reset_at, "test events for this subscription")


class LeasedWindows:
    """At most ``per_second`` hits of a key in each one-second window, counted in the storage
    ``storage()`` returns (shared by every web process; asked when first needed: a limiter
    turned off has none) a lease at a time."""

    def __init__(self, storage: Callable[[], Storage], per_second: int) -> None:
        self.storage, self.per_second = storage, per_second
        self.lease = max(1, min(10, per_second // 10))
        self._lock = threading.Lock()
        self._left: dict[str, tuple[int, int]] = {}  # key -> (window, hits left of the lease)

    def hit(self, key: str, now: float | None = None) -> float | None:
        """Count one hit of ``key``; None if allowed, else when its window ends (a
        ``time.time()`` value)."""
        window = int(time.time() if now is None else now)
        with self._lock:
            held, left = self._left.get(key, (window, 0))
            if held == window and left > 0:
                self._left[key] = (window, left - 1)
                return None
            if held == window and left < 0:  # the window is spent: no need to ask again
                return window + 1.0
        counted = self.storage().incr(f"publisher/{key}/{window}", 2, amount=self.lease)
        granted = max(0, min(self.lease, self.per_second - (counted - self.lease)))
        with self._lock:
            # Threads that found the lease spent at once each took a new one: what another
            # thread left of its lease meanwhile is added to, not replaced by, this one (a
            # replaced lease was counted and never spent: 4 threads refusing at ~30 % of
            # the limit, seen in the benchmark at 525 events a second against 1000).
            held, left = self._left.get(key, (window, 0))
            available = granted + (left if held == window and left > 0 else 0)
            self._left[key] = (window, available - 1 if available > 0 else -1)
            if len(self._left) > 10000:  # keys of windows long gone
                self._left = {k: v for k, v in self._left.items() if v[0] == window}
        return None if available > 0 else window + 1.0


def check_publisher(publisher_id: str) -> None:
    """Count one request of this publisher key; 429 (ApiError) over WEBHOOKS_PUBLISHER_RATE_LIMIT.
    The storage failing lets the request through (logged), as the other limits do."""
    limits = _rate_limits()
    if limits is None or limits.publisher is None or not limits.limiter.enabled:
        return
    try:
        reset_at = limits.publisher.hit(publisher_id)
    except Exception:  # noqa: BLE001  (as Flask-Limiter's swallow_errors: let it through)
        log.exception("rate limit storage failed; the publisher request is not limited")
        return
    if reset_at is not None:
        raise too_many_requests(reset_at, "requests with this publisher key")
