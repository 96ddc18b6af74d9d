"""One delivery attempt on the wire: a single HTTP POST, errors mapped once.

``HttpSender`` posts with a per-thread ``requests.Session`` (keep-alive to
each endpoint), never follows redirects, bounds the whole attempt (DNS,
connect, TLS handshake, response) by one deadline (deadline.py,
connections.py), reads at most ``DRAIN_LIMIT`` bytes of the response, trusts
the CAs of ``WEBHOOKS_CA_BUNDLE`` for https, and connects only to addresses
the guard allows, checked on the address actually connected to. Every
exception becomes an ``AttemptResult`` with ``status_code=None``, an
``error_kind`` and a short ``error`` (webhooks/lifecycle/failure_kinds.py) here and nowhere else.
Tests pass any callable with ``HttpSender.post``'s signature.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import requests
from requests.adapters import HTTPAdapter

from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, from_exception, timeout
from webhooks.sender import connections
from webhooks.sender.connections import Resolver, system_resolver
from webhooks.sender.deadline import AttemptDeadline, watchdog
from webhooks.storage.receiver_text import storable_text

__all__ = ["AttemptResult", "HttpSender", "Sender", "EXCERPT_BYTES", "DRAIN_LIMIT"]

EXCERPT_BYTES = 1024  # the part of the response body kept with the attempt
DRAIN_LIMIT = 64 * 1024  # read this much to keep the connection alive; close beyond it


@dataclass(frozen=True)
class AttemptResult:
    """What one POST produced. ``status_code`` is None when no response arrived; then
    ``error`` says why and ``error_kind`` is its kind."""

    status_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str | None = None
    error_kind: ErrorKind | None = None

    @classmethod
    def failed(cls, failure: Failure, duration_ms: int) -> "AttemptResult":
        return cls(None, failure.text, duration_ms, None, failure.kind)


Sender = Callable[[str, bytes, Mapping[str, str]], AttemptResult]


def _adapter(allow_private: bool, resolver: Resolver) -> HTTPAdapter:
    """An HTTPAdapter whose pools use guarded connections; no retries of its own."""
    pools = connections.pool_classes(allow_private, resolver)

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools
            self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    return GuardedAdapter(max_retries=0, pool_connections=32, pool_maxsize=4)


def _failure_of(exc: BaseException, attempt: AttemptDeadline) -> Failure:
    """Why the attempt failed: its deadline, what a connection seam saw, or the exception."""
    if attempt.expired or isinstance(exc, requests.Timeout):
        return attempt.failure if _is_timeout(attempt.failure) else timeout(attempt.phase, attempt.budget)
    if attempt.failure is not None:
        return attempt.failure
    return from_exception(exc)


def _is_timeout(failure: Failure | None) -> bool:
    return failure is not None and failure.kind is ErrorKind.TIMEOUT


class HttpSender:
    """Posts one attempt; safe to share between threads (one Session per thread)."""

    def __init__(self, *, timeout: float, allow_private: bool, ca_bundle: str | None = None,
                 resolver: Resolver = system_resolver):
        """``timeout``: seconds for the whole attempt; ``ca_bundle``: a PEM file of trusted
        CAs (None: certifi's); ``resolver``: getaddrinfo-shaped, the seam tests replace."""
        self.timeout = timeout
        self.allow_private = allow_private
        self.ca_bundle = ca_bundle
        self.resolver = resolver
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # no proxies, netrc or CA variables from the environment
            # True: requests' context preloaded with certifi's CAs, built once per process.
            session.verify = self.ca_bundle or True
            adapter = _adapter(self.allow_private, self.resolver)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> AttemptResult:
        """POST ``body`` to ``url``; never raises for anything the endpoint does."""
        started = time.monotonic()
        attempt = AttemptDeadline(started + self.timeout, self.timeout)
        watchdog.add(attempt)
        connections.begin(attempt)
        try:
            response = self._session().post(
                url,
                data=body,
                headers=dict(headers),
                timeout=(self.timeout, self.timeout),
                allow_redirects=False,
                stream=True,
            )
            attempt.phase = "response"
            excerpt = _read_bounded(response)
            if attempt.expired:
                raise TimeoutError("deadline passed while reading the body")
            return AttemptResult(response.status_code, None, _ms_since(started), excerpt)
        except Exception as exc:  # noqa: BLE001 - the one place errors are mapped
            return AttemptResult.failed(_failure_of(exc, attempt), _ms_since(started))
        finally:
            attempt.finish()
            connections.end()

    __call__ = post


def _read_bounded(response: requests.Response) -> str:
    """Read up to DRAIN_LIMIT bytes, keep the first EXCERPT_BYTES; drop the rest.

    A small body read to its end gives the connection back for reuse; a
    larger one, or a read that fails, closes the connection instead.
    """
    received = bytearray()
    complete = False
    try:
        for chunk in response.raw.stream(16 * 1024, decode_content=False):
            received += chunk
            if len(received) > DRAIN_LIMIT:
                break
        else:
            complete = True
    finally:
        if complete:
            response.raw.release_conn()
        else:
            response.close()
    return storable_text(bytes(received[:EXCERPT_BYTES]).decode("utf-8", errors="replace"))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
