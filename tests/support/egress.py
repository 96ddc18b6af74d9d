"""Real components on loopback for the egress and receiver-credential tests (issue 39).

- :class:`TinyProxy`: Debian's tinyproxy (scripts/install-proxy.sh), a real
  CONNECT proxy, started with a configuration of the test's own (any port
  tunnelled, optional Basic credentials, connections logged), stopped and
  started again on the same port.
- :class:`TokenServer`: an OAuth2 token endpoint (client-credentials grant,
  RFC 6749 4.4) that counts what it granted and can fail on purpose.
- :func:`tls_receiver_context`: a server context from a trustme CA that
  requires a client certificate from the same CA.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

__all__ = ["TinyProxy", "TokenServer", "tls_receiver_context", "require_tinyproxy", "free_port",
           "localhost_resolver", "client_certificate"]


def require_tinyproxy() -> str:
    """tinyproxy's path; skip (fail under CI) without it: scripts/install-proxy.sh installs it."""
    path = shutil.which("tinyproxy")
    if path is None:
        message = "tinyproxy is not installed (bash scripts/install-proxy.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so this test must not be skipped", pytrace=False)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TinyProxy:
    """tinyproxy on 127.0.0.1:``port`` in the foreground, logging every connection."""

    def __init__(self, *, user: str | None = None, password: str | None = None):
        self.binary = require_tinyproxy()
        self.port = free_port()
        self.user, self.password = user, password
        self.folder = Path(tempfile.mkdtemp(prefix="webhooks-tinyproxy-"))
        self.log_path = self.folder / "tinyproxy.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """WEBHOOKS_EGRESS_PROXY for this proxy (with its credentials, if any)."""
        credentials = f"{self.user}:{self.password}@" if self.user else ""
        return f"http://{credentials}127.0.0.1:{self.port}"

    def _config(self) -> str:
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 30", "LogLevel Connect",
                 "MaxClients 200", "Allow 127.0.0.1"]  # no ConnectPort line: every port
        if self.user:
            lines.append(f"BasicAuth {self.user} {self.password}")
        return "\n".join(lines) + "\n"

    def start(self) -> "TinyProxy":
        config = self.folder / "tinyproxy.conf"
        config.write_text(self._config())
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen([self.binary, "-d", "-c", str(config)], stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"tinyproxy exited:\n{self.log()}")
                time.sleep(0.05)
        raise RuntimeError(f"tinyproxy did not listen within 10 s:\n{self.log()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def connects(self) -> list[str]:
        """The targets of the CONNECT requests it logged (``127.0.0.1:8443``), in order."""
        found = []
        for line in self.log().splitlines():
            _, marker, request = line.partition("Request (file descriptor")
            if marker and "CONNECT " in request:
                found.append(request.split("CONNECT ", 1)[1].split(" ", 1)[0])
        return found


class TokenServer:
    """An OAuth2 token endpoint on 127.0.0.1: ``POST /token`` with ``grant_type=
    client_credentials`` and the client in HTTP Basic. Tokens are random; ``valid(header)``
    says if an ``Authorization: Bearer`` header holds one that was granted and not revoked."""

    def __init__(self, client_id: str = "webhooks-client", client_secret: str | None = None,
                 expires_in: int | None = 3600):
        self.client_id = client_id
        self.client_secret = client_secret or "cs_" + secrets.token_urlsafe(24)
        self.expires_in = expires_in
        self.fail_with: int | None = None  # answer this status instead of a token
        self.granted: list[str] = []
        self.forms: list[dict] = []
        self.revoked: set[str] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def settings(self, **extra) -> dict:
        """The subscription's ``oauth2`` for this server."""
        return {"token_url": self.url, "client_id": self.client_id,
                "client_secret": self.client_secret, **extra}

    def start(self) -> "TokenServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def valid(self, authorization: str) -> bool:
        token = authorization.removeprefix("Bearer ")
        with self._lock:
            return token in self.granted and token not in self.revoked

    def revoke_all(self) -> None:
        with self._lock:
            self.revoked.update(self.granted)

    def _grant(self, authorization: str, form: dict) -> tuple[int, dict]:
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        with self._lock:
            self.forms.append(form)
            if self.fail_with is not None:
                return self.fail_with, {"error": "temporarily_unavailable"}
            granted = form.get("grant_type") == ["client_credentials"]
            if authorization != f"Basic {expected}" or not granted:
                return 401, {"error": "invalid_client"}
            token = "at_" + secrets.token_urlsafe(24)
            self.granted.append(token)
        answer = {"access_token": token, "token_type": "Bearer"}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        return 200, answer

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode("ascii"))
                status, answer = server._grant(self.headers.get("Authorization", ""), form)
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler


def tls_receiver_context(ca, server_name: str = "localhost") -> ssl.SSLContext:
    """A server context for ``server_name`` from the trustme ``ca``, requiring a client
    certificate issued by the same CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(server_name).configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def localhost_resolver(host: str, port: int) -> list:
    """A resolver (getaddrinfo-shaped) that knows one name, ``localhost``, as 127.0.0.1;
    an address is itself."""
    address = "127.0.0.1" if host == "localhost" else host
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


def client_certificate(ca, name: str = "webhooks-client@example.com", **options) -> dict:
    """A subscription's ``client_certificate`` issued by the trustme ``ca``."""
    leaf = ca.issue_cert(name, **options)
    return {"certificate": "".join(blob.bytes().decode() for blob in leaf.cert_chain_pems),
            "private_key": leaf.private_key_pem.bytes().decode()}
