"""One delivery attempt on the wire: a single HTTP POST, errors mapped once.

``HttpSender`` posts through requests' transport adapter alone, never a
``requests.Session``: a session is a browser's client, with a cookie jar
that would carry one tenant's ``Set-Cookie`` into another tenant's request,
and redirect machinery that reads a 3xx body whole (and inflates it) before
any limit applies. Here nothing is kept between attempts but the
connection pool (keep-alive to each endpoint, one adapter per thread); no
redirect is followed; at most ``DRAIN_LIMIT`` bytes of any body are read
(response_body.py); the whole attempt (DNS, connect, TLS handshake,
response) is bounded by one deadline (deadline.py, connections.py); https
trusts the CAs of ``WEBHOOKS_CA_BUNDLE``; and only addresses the guard
allows are connected to, checked on the address actually connected to.
Every exception becomes an ``AttemptResult`` with ``status_code=None``, an
``error_kind`` and a short ``error`` (webhooks/lifecycle/failure_kinds.py) here and nowhere else.
Tests pass any callable with ``HttpSender.post``'s signature.

A subscription whose receiver requires credentials (CONTRACT 10.3) is sent
with them (``ReceiverCredentials``, given only then): its client
certificate on ``https`` (client_tls.py), and an OAuth2 token
(oauth2.py, oauth2_tokens.py) fetched through the same guarded
connections under the same deadline; without a token the endpoint is not
called. With WEBHOOKS_EGRESS_PROXY every connection, token URLs included,
is a tunnel of the proxy (connections.py, tunnel.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict

from webhooks.config.egress import EgressProxy
from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, from_exception, timeout
from webhooks.sender import client_tls, connections, oauth2
from webhooks.sender.connections import Resolver, system_resolver
from webhooks.sender.deadline import AttemptDeadline, watchdog
from webhooks.sender.oauth2_tokens import SharedTokens
from webhooks.sender.response_body import (DRAIN_LIMIT, EXCERPT_BYTES, READ_CHUNK, BoundedBody,
                                           excerpt_of, read_bounded)
from webhooks.lifecycle.retry_after import HONOURED_STATUSES
from webhooks.storage.receiver_text import storable_text

__all__ = ["AttemptResult", "HttpSender", "Sender", "ReceiverCredentials", "EXCERPT_BYTES",
           "DRAIN_LIMIT", "LOCATION_LIMIT"]

LOCATION_LIMIT = 1000  # characters of a 3xx answer's Location kept with the attempt


@dataclass(frozen=True)
class AttemptResult:
    """What one POST produced. ``status_code`` is None when no response arrived; then
    ``error`` says why and ``error_kind`` is its kind. ``location`` is a 3xx answer's
    ``Location`` header (never followed); ``retry_after`` the ``Retry-After`` header of a
    429 or 503, as sent (retry_after.py reads it)."""

    status_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str | None = None
    error_kind: ErrorKind | None = None
    location: str | None = None
    retry_after: str | None = None

    @classmethod
    def failed(cls, failure: Failure, duration_ms: int) -> "AttemptResult":
        return cls(None, failure.text, duration_ms, None, failure.kind)


@dataclass(frozen=True)
class ReceiverCredentials:
    """What a subscription's receiver requires, as stored (tenants/credentials.py): its
    client certificate (``certificate``, ``private_key``, PEM) and its ``oauth2`` settings;
    None where it requires none. Never printed: its repr names the subscription only."""

    subscription_id: str
    client_certificate: Mapping[str, str] | None = None
    oauth2: Mapping[str, str] | None = None

    def __repr__(self) -> str:
        return f"ReceiverCredentials({self.subscription_id!r})"


# post(url, body, headers), and credentials=ReceiverCredentials only when there are any.
Sender = Callable[..., AttemptResult]


class _GuardedAdapter(HTTPAdapter):
    """requests' transport adapter on guarded connection pools (connections.py), with no
    retries of its own and no cookie jar on its answers."""

    def __init__(self, allow_private: bool, resolver: Resolver, proxy: EgressProxy | None):
        self._pool_classes = connections.pool_classes(allow_private, resolver, proxy)
        super().__init__(max_retries=0, pool_connections=32, pool_maxsize=4)

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        """requests' pool key, with the client certificate's context (client_tls.py) when the
        request has one: pools, and so kept-alive connections, are per certificate."""
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        context = getattr(request, "client_tls", None)
        if context is not None:
            pool_kwargs["ssl_context"] = context
        return host_params, pool_kwargs

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pool_classes
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def build_response(self, req, resp) -> requests.Response:
        """The answer as requests would build it, without reading its cookies: nothing an
        endpoint sets is ever kept or sent again (CONTRACT 9.1)."""
        response = requests.Response()
        response.status_code = resp.status
        response.headers = CaseInsensitiveDict(resp.headers)
        response.raw = resp
        response.reason = resp.reason
        response.url = req.url
        response.request = req
        response.connection = self
        return response


def _failure_of(exc: BaseException, attempt: AttemptDeadline) -> Failure:
    """Why the attempt failed: its deadline, what a connection seam saw, or the exception.
    The egress proxy's failure stands whatever followed it (its time-out included)."""
    if attempt.failure is not None and attempt.failure.kind is ErrorKind.PROXY:
        return attempt.failure
    if attempt.expired or isinstance(exc, requests.Timeout):
        return attempt.failure if _is_timeout(attempt.failure) else timeout(attempt.phase, attempt.budget)
    if attempt.failure is not None:
        return attempt.failure
    return from_exception(exc)


def _is_timeout(failure: Failure | None) -> bool:
    return failure is not None and failure.kind is ErrorKind.TIMEOUT


class HttpSender:
    """Posts one attempt; safe to share between threads (one adapter, so one set of
    connection pools, per thread)."""

    def __init__(self, *, timeout: float, allow_private: bool, ca_bundle: str | None = None,
                 resolver: Resolver = system_resolver, proxy: EgressProxy | None = None,
                 tokens: SharedTokens | None = None, user_agent: str = "Webhooks"):
        """``timeout``: seconds for the whole attempt; ``ca_bundle``: a PEM file of trusted
        CAs (None: certifi's); ``resolver``: getaddrinfo-shaped, the seam tests replace;
        ``proxy``: WEBHOOKS_EGRESS_PROXY (None: direct); ``tokens``: where OAuth2 tokens
        are shared (None: their database rows); ``user_agent``: of token requests."""
        self.timeout = timeout
        self.allow_private = allow_private
        # True: requests' context preloaded with certifi's CAs, built once per process.
        self.verify: str | bool = ca_bundle or True
        self.resolver = resolver
        self.proxy = proxy
        self.tokens = tokens or SharedTokens()
        self.user_agent = user_agent
        self._local = threading.local()

    def _adapter(self) -> _GuardedAdapter:
        adapter = getattr(self._local, "adapter", None)
        if adapter is None:
            adapter = self._local.adapter = _GuardedAdapter(self.allow_private, self.resolver,
                                                            self.proxy)
        return adapter

    def post(self, url: str, body: bytes, headers: Mapping[str, str],
             credentials: ReceiverCredentials | None = None) -> AttemptResult:
        """POST ``body`` to ``url``; never raises for anything the endpoint does."""
        started = time.monotonic()
        attempt = AttemptDeadline(started + self.timeout, self.timeout)
        watchdog.add(attempt)
        connections.begin(attempt)
        token = None
        try:
            headers = dict(headers)
            if credentials is not None and credentials.oauth2 is not None:
                token = self._token(credentials, attempt)
                headers["Authorization"] = f"Bearer {token}"
            # A prepared request alone: no session, so no cookies, proxies, netrc or
            # environment; the URL's user and password become basic auth, as before.
            request = requests.Request("POST", url, data=body, headers=headers).prepare()
            if credentials is not None and credentials.client_certificate is not None:
                request.client_tls = client_tls.context_for(credentials.client_certificate)
            response = self._adapter().send(request, stream=True, verify=self.verify,
                                            timeout=(self.timeout, self.timeout), proxies={})
            attempt.phase = "response"
            excerpt = _read_excerpt(response)
            if attempt.expired:
                raise TimeoutError("deadline passed while reading the body")
            if token is not None and response.status_code == 401:
                self.tokens.drop(credentials.subscription_id, token)
            return AttemptResult(response.status_code, None, _ms_since(started), excerpt,
                                 location=_location(response),
                                 retry_after=_retry_after(response))
        except oauth2.TokenFailure as exc:
            return AttemptResult.failed(exc.failure, _ms_since(started))
        except Exception as exc:  # noqa: BLE001 - the one place errors are mapped
            return AttemptResult.failed(_failure_of(exc, attempt), _ms_since(started))
        finally:
            attempt.finish()
            connections.end()

    __call__ = post

    def _token(self, credentials: ReceiverCredentials, attempt: AttemptDeadline) -> str:
        """The subscription's OAuth2 token (oauth2_tokens.py); TokenFailure without one."""
        return self.tokens.token(credentials.subscription_id, credentials.oauth2,
                                 lambda: self._grant(credentials.oauth2, attempt), attempt)

    def _grant(self, settings: Mapping[str, str], attempt: AttemptDeadline) -> oauth2.Granted:
        """POST the client-credentials grant to the token URL through the guarded
        connections, within the attempt's deadline, reading at most DRAIN_LIMIT bytes."""
        body, headers = oauth2.token_request(settings, self.user_agent)
        try:
            request = requests.Request("POST", settings["token_url"], data=body,
                                       headers=headers).prepare()
            response = self._adapter().send(request, stream=True, verify=self.verify,
                                            timeout=(self.timeout, self.timeout), proxies={})
            answer = _read_bounded(response)
            if attempt.expired:
                raise TimeoutError("deadline passed while reading the token")
        except Exception as exc:  # noqa: BLE001 - mapped once, as the endpoint's are
            raise oauth2.token_failure(f"token URL: {_failure_of(exc, attempt).text}") from exc
        finally:
            attempt.failure = None  # what the token's connection saw is not the endpoint's
        return oauth2.granted(response.status_code, answer, answer.complete)


def _read_bounded(response: requests.Response) -> BoundedBody:
    """Read at most DRAIN_LIMIT raw bytes of the body (response_body.py). A small body read
    to its end gives the connection back for reuse; a larger one, or a read that fails,
    closes the connection instead."""
    body = None
    try:
        body = read_bounded(response.raw.stream(READ_CHUNK, decode_content=False))
    finally:
        if body is not None and body.complete:
            response.raw.release_conn()
        else:
            response.close()
    return body


def _read_excerpt(response: requests.Response) -> str:
    """The decoded excerpt of the body, read as :func:`_read_bounded` reads it."""
    body = _read_bounded(response)
    excerpt = excerpt_of(body, response.headers.get("Content-Encoding"))
    return storable_text(excerpt.decode("utf-8", errors="replace"))


def _location(response: requests.Response) -> str | None:
    """A 3xx answer's Location (cut to LOCATION_LIMIT characters), for the attempt's record."""
    if not 300 <= response.status_code < 400:
        return None
    location = response.headers.get("Location")
    return storable_text(location, LOCATION_LIMIT) if location is not None else None


def _retry_after(response: requests.Response) -> str | None:
    """The Retry-After of a 429 or 503 (cut to 100 characters: no valid value is longer)."""
    if response.status_code not in HONOURED_STATUSES:
        return None
    value = response.headers.get("Retry-After")
    return None if value is None else value[:100]


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
