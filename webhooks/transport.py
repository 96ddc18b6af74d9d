"""One delivery attempt on the wire: a single HTTP POST, errors mapped once.

``HttpSender`` posts with a per-thread ``requests.Session`` (keep-alive to
each endpoint), never follows redirects, bounds the whole attempt by one
deadline (see deadline.py), reads at most ``DRAIN_LIMIT`` bytes of the
response, and connects only to addresses the guard allows, checked on the
address actually connected to. Every lower-level exception becomes an
``AttemptResult`` with ``status_code=None`` and a short ``error`` here and
nowhere else. Tests pass any callable with ``HttpSender.post``'s signature.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family

from .deadline import AttemptDeadline, watchdog
from .errors import DestinationRefused
from .netguard import describe_refusal, is_public_address

__all__ = ["AttemptResult", "HttpSender", "Sender", "EXCERPT_BYTES", "DRAIN_LIMIT"]

EXCERPT_BYTES = 1024  # the part of the response body kept with the attempt
DRAIN_LIMIT = 64 * 1024  # read this much to keep the connection alive; close beyond it


@dataclass(frozen=True)
class AttemptResult:
    """What one POST produced. ``status_code`` is None when no response arrived."""

    status_code: int | None
    error: str | None
    duration_ms: int
    excerpt: str | None = None


Sender = Callable[[str, bytes, Mapping[str, str]], AttemptResult]

_current = threading.local()  # the AttemptDeadline of the attempt this thread is making


def _watch(sock) -> None:
    attempt: AttemptDeadline | None = getattr(_current, "attempt", None)
    if attempt is not None:
        attempt.watch(sock)


class _GuardedConnectionMixin:
    """Resolve, vet every address, connect to a vetted one; register the socket's deadline."""

    allow_private = False

    def _new_conn(self) -> socket.socket:
        host = self._dns_host.strip("[]")
        try:
            candidates = socket.getaddrinfo(host, self.port, allowed_gai_family(), socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        last_error: OSError | None = None
        refused = []
        for family, socktype, proto, _, sockaddr in candidates:
            if not self.allow_private and not is_public_address(sockaddr[0]):
                refused.append(sockaddr[0])
                continue
            sock = socket.socket(family, socktype, proto)
            try:
                for level, option, value in self.socket_options or ():
                    sock.setsockopt(level, option, value)
                sock.settimeout(self.timeout)
                sock.connect(sockaddr)
                return sock
            except socket.timeout as exc:
                sock.close()
                raise ConnectTimeoutError(self, f"connect timed out after {self.timeout} s") from exc
            except OSError as exc:
                sock.close()
                last_error = exc
        if last_error is not None:
            raise NewConnectionError(
                self, f"Failed to establish a new connection: {last_error}"
            ) from last_error
        raise DestinationRefused(describe_refusal(refused[0]) if refused else "no address found")

    def connect(self):
        super().connect()
        _watch(self.sock)

    def request(self, *args, **kwargs):
        if self.sock is not None:  # a kept-alive connection: the new attempt's deadline applies
            _watch(self.sock)
        return super().request(*args, **kwargs)


def _adapter(allow_private: bool) -> HTTPAdapter:
    """An HTTPAdapter whose pools use guarded connections; no retries of its own."""
    http_conn = type("GuardedHTTPConnection", (_GuardedConnectionMixin, HTTPConnection),
                     {"allow_private": allow_private})
    https_conn = type("GuardedHTTPSConnection", (_GuardedConnectionMixin, HTTPSConnection),
                      {"allow_private": allow_private})
    http_pool = type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn})
    https_pool = type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn})

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}
            self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    return GuardedAdapter(max_retries=0, pool_connections=32, pool_maxsize=4)


def _describe(exc: BaseException, attempt: AttemptDeadline, timeout: float) -> str:
    """A short, secret-free sentence for an exception raised while posting."""
    if attempt.expired or isinstance(exc, requests.Timeout):
        return f"timeout: no complete response within {timeout:g} s"
    if isinstance(exc, DestinationRefused):
        return f"refused: {exc}"
    chain = _causes(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused"
    if any(isinstance(e, NameResolutionError) for e in chain):
        return "DNS lookup failed: the endpoint's host name does not resolve"
    if any(isinstance(e, requests.exceptions.SSLError) for e in chain):
        return "TLS error: the endpoint's certificate or handshake was rejected"
    text = " ".join(type(e).__name__ for e in chain)
    if "BadStatusLine" in text or "ProtocolError" in text or "RemoteDisconnected" in text:
        return "connection error: the endpoint closed the connection or did not answer in HTTP"
    return f"connection error: {type(exc).__name__}"


def _causes(exc: BaseException, limit: int = 12) -> list[BaseException]:
    """The exception and what caused it: __cause__, __context__ and urllib3's ``reason``."""
    chain, todo = [], [exc]
    while todo and len(chain) < limit:
        current = todo.pop(0)
        if current is None or any(current is seen for seen in chain):
            continue
        chain.append(current)
        todo += [current.__cause__, current.__context__, getattr(current, "reason", None)]
        todo += [arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException)]
    return chain


class HttpSender:
    """Posts one attempt; safe to share between threads (one Session per thread)."""

    def __init__(self, *, timeout: float, allow_private: bool):
        self.timeout = timeout
        self.allow_private = allow_private
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # no proxies or netrc from the worker's environment
            adapter = _adapter(self.allow_private)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> AttemptResult:
        """POST ``body`` to ``url``; never raises for anything the endpoint does."""
        started = time.monotonic()
        attempt = AttemptDeadline(started + self.timeout)
        watchdog.add(attempt)
        _current.attempt = attempt
        try:
            response = self._session().post(
                url,
                data=body,
                headers=dict(headers),
                timeout=(self.timeout, self.timeout),
                allow_redirects=False,
                stream=True,
            )
            excerpt = _read_bounded(response)
            if attempt.expired:
                raise TimeoutError("deadline passed while reading the body")
            return AttemptResult(response.status_code, None, _ms_since(started), excerpt)
        except Exception as exc:  # noqa: BLE001 - the one place errors are mapped
            return AttemptResult(None, _describe(exc, attempt, self.timeout), _ms_since(started))
        finally:
            attempt.finish()
            _current.attempt = None

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
    return bytes(received[:EXCERPT_BYTES]).decode("utf-8", errors="replace")


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
