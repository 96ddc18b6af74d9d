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

With WEBHOOKS_EGRESS_PROXY the socket is a ``CONNECT`` tunnel of the proxy
(tunnel.py), asked for the address the guard approved (or, in ``name`` mode,
the host name); the proxy's set-up runs under the same deadline. urllib3's
own proxy support does not fit this seam: its ``ProxyManager`` forwards plain
``http`` requests in absolute form instead of tunnelling them, and its tunnel
names the URL's host, so the guard would vet the proxy's address instead of
the endpoint's, and the TLS and ``Host`` of the request would change with the
tunnel target. Here only the socket changes; urllib3 then speaks through it
exactly as on a direct connection.
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

from webhooks.config import get_settings
from webhooks.config.egress import ConnectMode, EgressProxy
from webhooks.errors import DestinationRefused
from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, failure, timeout, tls_failure
from webhooks.sender.deadline import AttemptDeadline
from webhooks.sender.netguard import describe_refusal, is_public_address
from webhooks.sender.tunnel import ProxyRefused, open_tunnel, proxy_failure

__all__ = ["Resolver", "system_resolver", "begin", "end", "pool_classes"]

# The guard's log, where operators read refusals (and which names failed to resolve).
guard_log = logging.getLogger("webhooks.netguard")

# getaddrinfo-shaped: (host, port) -> [(family, type, proto, canonname, sockaddr), ...]
Resolver = Callable[[str, int], list]

log = logging.getLogger("webhooks.egress")

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
        candidates = self._resolved(attempt, self._dns_host.strip("[]"))
        attempt.phase = "connect"
        sock = self._connect_to_first(attempt, candidates)
        attempt.phase = "tls" if self.is_tls else "response"
        return sock

    def _resolved(self, attempt: AttemptDeadline, host: str) -> list:
        """The endpoint host's addresses (getaddrinfo's tuples), looked up within the deadline."""
        attempt.phase = "dns"
        try:
            return _resolve(self.resolver, attempt, host, self.port)
        except concurrent.futures.TimeoutError as exc:
            attempt.failure = timeout("dns", attempt.budget)
            raise ConnectTimeoutError(self, "DNS look-up timed out") from exc
        except OSError as exc:
            guard_log.info("DNS look-up of the endpoint host %s failed: %s", host, exc)
            attempt.failure = failure(ErrorKind.DNS)  # as for private answers: _no_public_address
            raise NameResolutionError(self.host, self, exc) from exc

    def _connect_to_first(self, attempt: AttemptDeadline, candidates: list) -> socket.socket:
        refused_addresses, errors = [], []
        for family, socktype, proto, _, sockaddr in candidates:
            if not self.allow_private and not is_public_address(sockaddr[0]):
                refused_addresses.append(sockaddr[0])
                continue
            try:
                return self._connect_one(attempt, family, socktype, proto, sockaddr)
            except OSError as exc:
                if isinstance(exc, TimeoutError) or attempt.expired:
                    attempt.failure = timeout("connect", attempt.budget)
                    raise ConnectTimeoutError(self, "connect timed out") from exc
                errors.append(exc)
        if errors:
            attempt.failure = _connect_failure(errors)
            raise NewConnectionError(self, "Failed to establish a new connection") from errors[-1]
        _refuse(attempt, self._dns_host.strip("[]"), refused_addresses)

    def _connect_one(self, attempt: AttemptDeadline, family, socktype, proto,
                     sockaddr) -> socket.socket:
        """A socket connected to ``sockaddr`` within the time left, and watched; on OSError
        it is closed (unwatched first) before the error propagates."""
        sock = socket.socket(family, socktype, proto)
        attempt.watch(sock)
        try:
            for level, option, value in self.socket_options or ():
                sock.setsockopt(level, option, value)
            sock.settimeout(attempt.remaining())
            sock.connect(sockaddr)
            return sock
        except OSError:
            attempt.watch(None)  # before close: the number may be reused at once
            sock.close()
            raise

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


def _refuse(attempt: AttemptDeadline, host: str, refused_addresses: list[str]) -> None:
    """Raise DestinationRefused: the guard refused every address of ``host``, or none was
    found (the failure recorded: :func:`_no_public_address`)."""
    attempt.failure = _no_public_address(host, refused_addresses)
    raise DestinationRefused(attempt.failure.text)


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
        guard_log.warning(
            "refused to connect to %s: the endpoint host %s resolves to no public address "
            "(WEBHOOKS_ALLOW_PRIVATE_TARGETS=true allows them); the tenant reads the error of "
            "a name that does not resolve", ", ".join(refused), host)
    else:
        guard_log.info("DNS look-up of the endpoint host %s gave no address", host)
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


class _TunnelledConnectionMixin(_GuardedConnectionMixin):
    """A guarded connection whose socket is a CONNECT tunnel of the egress proxy (tunnel.py).

    ``address`` mode resolves and vets the endpoint's host as a direct
    connection does and asks the proxy for the approved address; ``name``
    mode asks for the host name (only a literal address is vetted: the
    service sees nothing else). The proxy itself is the operator's choice and
    is never vetted. Everything runs under the attempt's deadline; every way
    the proxy fails is recorded as ``ErrorKind.PROXY``.
    """

    # Not ``proxy``: urllib3's connections have an attribute of that name (its own proxies).
    egress_proxy: EgressProxy

    def _new_conn(self) -> socket.socket:
        attempt = _attempt()
        targets = self._tunnel_targets(attempt, self._dns_host.strip("[]"))
        sock = self._tunnel_to_first(attempt, targets)
        attempt.phase = "tls" if self.is_tls else "response"
        return sock

    def _tunnel_targets(self, attempt: AttemptDeadline, host: str) -> list[str]:
        """What the CONNECT line may name: the approved addresses, or (``name`` mode) the
        host name itself."""
        if self.egress_proxy.mode is ConnectMode.NAME and not _is_address(host):
            return [host]  # the proxy resolves it, and its own rules apply
        addresses = list(dict.fromkeys(sockaddr[0] for *_, sockaddr in
                                       self._resolved(attempt, host)))
        approved = [a for a in addresses if self.allow_private or is_public_address(a)]
        if not approved:
            _refuse(attempt, host, addresses)
        return approved

    def _tunnel_to_first(self, attempt: AttemptDeadline, targets: list[str]) -> socket.socket:
        """A tunnel to the first target the proxy reaches; the next target is tried only
        when the proxy answered 5xx (it could not reach that one)."""
        refused: ProxyRefused | None = None
        for target in targets:
            sock = self._connect_to_proxy(attempt)
            try:
                sock.settimeout(attempt.remaining())
                open_tunnel(sock, self.egress_proxy, target, self.port)
                return sock
            except OSError as exc:
                attempt.watch(None)  # before close: the number may be reused at once
                sock.close()
                if attempt.expired or isinstance(exc, TimeoutError):
                    attempt.failure = proxy_failure(
                        f"no answer to CONNECT within {attempt.budget:g} s")
                    raise ConnectTimeoutError(self, "the egress proxy timed out") from exc
                if not isinstance(exc, ProxyRefused):
                    attempt.failure = proxy_failure(
                        f"the connection to the egress proxy broke ({_reason(exc)})")
                    raise NewConnectionError(self, attempt.failure.text) from exc
                attempt.failure, refused = exc.failure, exc
                if exc.status is None or exc.status < 500:
                    break
        raise NewConnectionError(self, attempt.failure.text) from refused

    def _connect_to_proxy(self, attempt: AttemptDeadline) -> socket.socket:
        """A socket connected to the egress proxy, watched, within the deadline."""
        attempt.phase = "proxy"
        proxy = self.egress_proxy
        try:
            candidates = _resolve(self.resolver, attempt, proxy.host, proxy.port)
        except concurrent.futures.TimeoutError as exc:
            attempt.failure = proxy_failure(
                f"its host name did not resolve within {attempt.budget:g} s")
            raise ConnectTimeoutError(self, "the egress proxy's look-up timed out") from exc
        except OSError as exc:
            attempt.failure = proxy_failure("its host name does not resolve")
            raise NewConnectionError(self, attempt.failure.text) from exc
        errors: list[OSError] = []
        for family, socktype, protocol, _, sockaddr in candidates:
            try:
                return self._connect_one(attempt, family, socktype, protocol, sockaddr)
            except OSError as exc:
                if isinstance(exc, TimeoutError) or attempt.expired:
                    attempt.failure = proxy_failure(
                        f"no connection to the egress proxy within {attempt.budget:g} s")
                    raise ConnectTimeoutError(self, "the egress proxy timed out") from exc
                errors.append(exc)
        reason = ("connection refused" if errors and all(
            isinstance(e, ConnectionRefusedError) for e in errors) else
            _reason(errors[-1]) if errors else "no address found")
        log.warning("the egress proxy %s could not be reached: %s", proxy.shown, reason)
        attempt.failure = proxy_failure(f"the egress proxy could not be reached ({reason})")
        raise NewConnectionError(self, attempt.failure.text) from (errors[-1] if errors else None)


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def _connect_failure(errors: list[OSError]) -> Failure:
    """Refused when every address refused; otherwise the operating system's words for the last."""
    if all(isinstance(e, ConnectionRefusedError) for e in errors):
        return failure(ErrorKind.REFUSED)
    last = errors[-1]
    return failure(ErrorKind.CONNECTION, (last.strerror or type(last).__name__).lower())


def pool_classes(allow_private: bool, resolver: Resolver,
                 proxy: EgressProxy | None = None) -> dict[str, type]:
    """urllib3 pool classes, by scheme, whose connections are guarded as above; through
    ``proxy``'s CONNECT tunnels when one is given (WEBHOOKS_EGRESS_PROXY)."""
    options = {"allow_private": allow_private, "resolver": staticmethod(resolver)}
    mixin = _GuardedConnectionMixin
    if proxy is not None:
        mixin, options = _TunnelledConnectionMixin, {**options, "egress_proxy": proxy}
    http_conn = type("GuardedHTTPConnection", (mixin, HTTPConnection), options)
    https_conn = type("GuardedHTTPSConnection", (mixin, HTTPSConnection),
                      {**options, "is_tls": True})
    return {
        "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }
