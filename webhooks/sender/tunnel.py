"""The ``CONNECT`` handshake with the operator's egress proxy (WEBHOOKS_EGRESS_PROXY).

connections.py connects a socket to the proxy, within the attempt's
deadline and watched by its watchdog, and hands it here with the target:
the address the guard approved (``address`` mode) or the endpoint's host
name (``name`` mode). :func:`open_tunnel` asks for the tunnel and reads the
proxy's answer; on a 2xx the socket is a plain byte pipe to the target, and
urllib3 speaks to it exactly as to a direct connection: the same TLS
handshake (SNI and certificate check against the endpoint's host name), the
same ``Host`` header, the same request bytes.

Every way the proxy fails is a :class:`ProxyRefused` whose text names the
proxy's answer, never its credentials nor its address (the tenant reads the
text: it must not map the operator's network). The operators' log line
names the proxy, its password masked.
"""

from __future__ import annotations

import logging
import socket

from webhooks.config.egress import EgressProxy
from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, failure

__all__ = ["ProxyRefused", "connect_line", "open_tunnel", "proxy_failure", "ANSWER_LIMIT"]

log = logging.getLogger("webhooks.egress")

ANSWER_LIMIT = 16 * 1024  # bytes of the proxy's answer head read at most
_REASON_LIMIT = 100  # characters of the proxy's reason phrase kept in the error


class ProxyRefused(OSError):
    """The proxy could not open the tunnel: ``failure`` is what the attempt records, and
    ``status`` the proxy's answer (None when there was none)."""

    def __init__(self, failure: Failure, status: int | None = None):
        super().__init__(failure.text)
        self.failure = failure
        self.status = status


def proxy_failure(detail: str) -> Failure:
    """The attempt's failure when the egress proxy failed in the way ``detail`` says."""
    return failure(ErrorKind.PROXY, detail)


def connect_line(proxy: EgressProxy, target: str, port: int) -> bytes:
    """The ``CONNECT`` request for ``target`` (an address or a host name) and ``port``."""
    authority = f"[{target}]:{port}" if ":" in target else f"{target}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def open_tunnel(sock: socket.socket, proxy: EgressProxy, target: str, port: int) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``target``:``port``; return once it is
    open. Raises ProxyRefused for an answer other than 2xx, or none; socket time-outs
    (the attempt's deadline) propagate as they are."""
    sock.sendall(connect_line(proxy, target, port))
    status, reason = _read_answer(sock)
    if not 200 <= status < 300:
        log.warning("the egress proxy %s answered CONNECT %s:%s with %s %s",
                    proxy.shown, target, port, status, reason)
        raise ProxyRefused(proxy_failure(f"the egress proxy answered CONNECT with {status} "
                                         f"{reason}".rstrip()), status)


def _read_answer(sock: socket.socket) -> tuple[int, str]:
    """The status and reason of the proxy's answer head. Nothing may follow the head: the
    target speaks only after the client (TLS ClientHello, or the request)."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise ProxyRefused(proxy_failure("the egress proxy closed the connection "
                                             "before answering CONNECT"))
        head += chunk
        if len(head) > ANSWER_LIMIT:
            raise ProxyRefused(proxy_failure("the egress proxy's answer to CONNECT is too long"))
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not (code.isdigit() and len(code) == 3):
        raise ProxyRefused(proxy_failure("the egress proxy's answer to CONNECT is not HTTP"))
    status = int(code)
    if 200 <= status < 300 and not head.endswith(b"\r\n\r\n"):
        raise ProxyRefused(proxy_failure("the egress proxy sent bytes after its answer to "
                                         "CONNECT"), status)
    return status, _printable(reason)


def _printable(text: str) -> str:
    """The reason phrase as an error may quote it: printable ASCII, cut short."""
    kept = "".join(ch for ch in text if " " <= ch <= "~").strip()
    return kept[:_REASON_LIMIT]
