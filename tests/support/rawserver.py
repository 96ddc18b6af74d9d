"""A raw TCP server that reads one HTTP request per connection and then misbehaves as told."""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Callable


def read_request(conn: socket.socket) -> bytes:
    """Read one HTTP request (head and Content-Length body) from ``conn``; returns its head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the client closed before a whole request")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the client closed in the middle of the body")
        rest += chunk
    return head


class RawServer:
    """Calls ``behaviour(conn)`` after reading each request; counts requests received.

    ``tls``: a server-side SSLContext, the connection is TLS. ``read_first=False``:
    the behaviour runs as soon as the TCP connection is accepted (no handshake,
    no request read), for a server that never answers even the TLS hello.
    """

    def __init__(self, behaviour: Callable[[socket.socket], None], host: str = "127.0.0.1", *,
                 tls: ssl.SSLContext | None = None, read_first: bool = True):
        self.behaviour, self.tls, self.read_first = behaviour, tls, read_first
        self.requests = 0
        self.heads: list[bytes] = []  # the head of every request read, in order
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket):
        try:
            if self.read_first:
                conn.settimeout(60)
                if self.tls is not None:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                self.heads.append(read_request(conn))
                self.requests += 1
            self.behaviour(conn)
        except (OSError, ValueError):
            pass  # the client gave up, or refused our certificate: often the point
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def close(self):
        self._closed = True
        self._sock.close()
