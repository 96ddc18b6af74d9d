"""urllib3 connections that keep one attempt's deadline and vet where they connect.

Every phase of an attempt runs under its single deadline (deadline.py):

- DNS: the look-up runs in a thread pool and is given up when the deadline
  passes (``getaddrinfo`` cannot be interrupted; a look-up that hangs keeps
  its pool thread until it returns, never the attempt). Attempts that look
  up the same name at once share one look-up, so a name that hangs holds one
  thread however many attempts ask for it, and cannot take the pool from
  other tenants' names (``WEBHOOKS_DNS_THREADS`` threads, 128 by default:
  one per worker thread of the Procfile's pool);
- connect: each socket's time-out is the time left, and the socket is
  watched from the moment it exists;
- TLS handshake and response: the watchdog shuts the socket down at the
  deadline, which wakes any blocked read.

Each seam records what failed there on the attempt (``AttemptDeadline.failure``),
because by the time requests raises, urllib3 has wrapped the cause.
Every resolved address is vetted by the guard (netguard.py) before it is
connected to, so a name that resolves to a private address is refused.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import logging
import os
import socket
import ssl
import threading
from typing import Callable

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family

from webhooks.errors import DestinationRefused
from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, failure, timeout, tls_failure
from webhooks.sender.deadline import AttemptDeadline
from webhooks.sender.netguard import describe_refusal, is_public_address

__all__ = ["Resolver", "system_resolver", "begin", "end", "pool_classes"]

log = logging.getLogger("webhooks.netguard")  # the guard's log, where operators read refusals

# getaddrinfo-shaped: (host, port) -> [(family, type, proto, canonname, sockaddr), ...]
Resolver = Callable[[str, int], list]

_current = threading.local()  # the AttemptDeadline of the attempt this thread is making


def begin(attempt: AttemptDeadline) -> None:
    """This thread's connections belong to ``attempt`` until :func:`end`."""
    _current.attempt = attempt


def end() -> None:
    _current.attempt = None


def _attempt() -> AttemptDeadline:
    attempt = getattr(_current, "attempt", None)
    if attempt is None:  # only HttpSender.post uses these connections, and it always begins one
        raise RuntimeError("a guarded connection was used outside an attempt")
    return attempt


def system_resolver(host: str, port: int) -> list:
    """The operating system's resolver, for the address families urllib3 would use."""
    return socket.getaddrinfo(host, port, allowed_gai_family(), socket.SOCK_STREAM)


class _LookupPool:
    """A thread pool for DNS look-ups, made anew in each process (threads do not survive
    fork), with one look-up in flight per (resolver, host, port): later askers share it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._in_flight: dict[tuple, concurrent.futures.Future] = {}

    def lookup(self, resolver: Resolver, host: str, port: int) -> concurrent.futures.Future:
        """The future of ``resolver(host, port)``: the one in flight, or a new one."""
        key = (resolver, host, port)
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._in_flight = {}
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    _thread_count(), thread_name_prefix="webhooks-dns")
            future = self._in_flight.get(key)
            if future is not None:
                return future
            future = self._in_flight[key] = self._executor.submit(resolver, host, port)
        # Outside the lock: a future already done runs the callback here, at once.
        future.add_done_callback(lambda done: self._forget(key, done))
        return future

    def _forget(self, key: tuple, done: concurrent.futures.Future) -> None:
        with self._lock:
            if self._in_flight.get(key) is done:
                del self._in_flight[key]


def _thread_count() -> int:
    from webhooks.config import get_settings  # the settings of the process that makes the pool

    return get_settings().dns_threads


_lookups = _LookupPool()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        return False


def _resolve(resolver: Resolver, attempt: AttemptDeadline, host: str, port: int) -> list:
    """``resolver(host, port)`` within the attempt's time left; an address needs no look-up."""
    if _is_address(host):
        return resolver(host, port)
    # Given up at the deadline, the look-up runs on for whoever else shares it (never
    # cancelled: another attempt may still wait for it), then leaves its thread.
    return _lookups.lookup(resolver, host, port).result(timeout=attempt.remaining())


class _GuardedConnectionMixin:
    """Resolve within the deadline, vet every address, connect to a vetted one, watch the socket."""

    allow_private = False
    resolver: Resolver = staticmethod(system_resolver)
    is_tls = False

    def _new_conn(self) -> socket.socket:
        attempt = _attempt()
        host = self._dns_host.strip("[]")
        attempt.phase = "dns"
        try:
            candidates = _resolve(self.resolver, attempt, host, self.port)
        except concurrent.futures.TimeoutError as exc:
            attempt.failure = timeout("dns", attempt.budget)
            raise ConnectTimeoutError(self, "DNS look-up timed out") from exc
        except OSError as exc:
            log.info("DNS look-up of the endpoint host %s failed: %s", host, exc)
            attempt.failure = failure(ErrorKind.DNS)  # as for private answers: _no_public_address
            raise NameResolutionError(self.host, self, exc) from exc
        attempt.phase = "connect"
        sock = self._connect_to_first(attempt, candidates)
        attempt.phase = "tls" if self.is_tls else "response"
        return sock

    def _connect_to_first(self, attempt: AttemptDeadline, candidates: list) -> socket.socket:
        refused_addresses, errors = [], []
        for family, socktype, proto, _, sockaddr in candidates:
            if not self.allow_private and not is_public_address(sockaddr[0]):
                refused_addresses.append(sockaddr[0])
                continue
            sock = socket.socket(family, socktype, proto)
            attempt.watch(sock)
            try:
                for level, option, value in self.socket_options or ():
                    sock.setsockopt(level, option, value)
                sock.settimeout(attempt.remaining())
                sock.connect(sockaddr)
                return sock
            except OSError as exc:
                attempt.watch(None)  # before close: the number may be reused at once
                sock.close()
                if isinstance(exc, TimeoutError) or attempt.expired:
                    attempt.failure = timeout("connect", attempt.budget)
                    raise ConnectTimeoutError(self, "connect timed out") from exc
                errors.append(exc)
        if errors:
            attempt.failure = _connect_failure(errors)
            raise NewConnectionError(self, "Failed to establish a new connection") from errors[-1]
        attempt.failure = _no_public_address(self._dns_host.strip("[]"), refused_addresses)
        raise DestinationRefused(attempt.failure.text)

    def connect(self):
        attempt = _attempt()
        try:
            super().connect()
        except ssl.SSLError as exc:
            attempt.failure = attempt.failure or tls_failure(exc)
            attempt.watch(None)
            raise
        except OSError:
            attempt.watch(None)
            raise
        attempt.phase = "response"
        attempt.watch(self.sock)  # after TLS: the wrapped socket

    def request(self, *args, **kwargs):
        if self.sock is not None:  # a kept-alive connection: the new attempt's deadline applies
            attempt = _attempt()
            attempt.phase = "response"
            attempt.watch(self.sock)
        return super().request(*args, **kwargs)


def _no_public_address(host: str, refused: list[str]) -> Failure:
    """Why nothing was connected to, though no connect failed: the guard refused every
    address (``refused``), or the answer was empty.

    A host *name* gets the failure of a name that does not resolve, whichever it was, so
    that subscribing to internal names cannot tell which of them resolve (issue 36): which
    it was, and the addresses, go to the operators' log alone. An address written in the
    URL is refused as such (the tenant learns nothing it did not write).
    """
    if refused and _written_as_address(host):
        return Failure(ErrorKind.DESTINATION, f"refused: {describe_refusal(refused[0])}")
    if refused:
        log.warning("refused to connect to %s: the endpoint host %s resolves to no public "
                    "address (WEBHOOKS_ALLOW_PRIVATE_TARGETS=true allows them); the tenant "
                    "reads the error of a name that does not resolve", ", ".join(refused), host)
    else:
        log.info("DNS look-up of the endpoint host %s gave no address", host)
    return failure(ErrorKind.DNS)


def _written_as_address(host: str) -> bool:
    """An address in any spelling getaddrinfo reads without asking DNS: IPv6, dotted IPv4,
    and the numeric forms inet_aton takes (``127.1``, ``2130706433``, ``0x7f.1``)."""
    if _is_address(host):
        return True
    try:
        socket.inet_aton(host)
        return True
    except OSError:
        return False


def _connect_failure(errors: list[OSError]) -> Failure:
    """Refused when every address refused; otherwise the operating system's words for the last."""
    if all(isinstance(e, ConnectionRefusedError) for e in errors):
        return failure(ErrorKind.REFUSED)
    last = errors[-1]
    return failure(ErrorKind.CONNECTION, (last.strerror or type(last).__name__).lower())


def pool_classes(allow_private: bool, resolver: Resolver) -> dict[str, type]:
    """urllib3 pool classes, by scheme, whose connections are guarded as above."""
    options = {"allow_private": allow_private, "resolver": staticmethod(resolver)}
    http_conn = type("GuardedHTTPConnection", (_GuardedConnectionMixin, HTTPConnection), options)
    https_conn = type("GuardedHTTPSConnection", (_GuardedConnectionMixin, HTTPSConnection),
                      {**options, "is_tls": True})
    return {
        "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }
