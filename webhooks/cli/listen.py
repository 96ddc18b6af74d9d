"""``webhooks listen``: a small local receiver that verifies and prints every delivery.

Like ``stripe listen``: point a subscription at it, and each delivery that
arrives is checked with :func:`webhooks.signing.verify` against the exact raw
body (any signature scheme: the X-<Service>-Signature header, or the
Standard Webhooks headers of a ``standard`` subscription, or of a
``standard-ed25519`` one with its ``whpk_`` public key in place of a secret),
printed as one line, and answered 200 when it verifies and 401 when it
does not. ``status`` makes it answer that status to every delivery instead,
to watch retries, permanent failures and the auto-pause happen.

Standard library only (plus the signing module and the header names from the
settings), so it starts in a fraction of a second.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import signal
import sys
import threading
from typing import Callable, Sequence, TextIO

from webhooks.signing import DEFAULT_TOLERANCE, InvalidSignature, verify

__all__ = ["Listener", "describe", "secret_problems", "serve"]

MAX_BODY_BYTES = 8 * 1024 * 1024  # far above WEBHOOKS_MAX_PAYLOAD_BYTES; bounds a stray upload


def _signature_of(headers, service_name: str) -> dict[str, str]:
    """The headers verify() checks: all of them for a Standard Webhooks delivery (it carries
    ``webhook-signature``), else its X-<Service>-Signature alone (a custom header of another
    X-…-Signature name beside it is not the service's)."""
    if headers.get("webhook-signature"):
        return {name: value for name, value in headers.items()}
    name = f"X-{service_name}-Signature"
    return {name: headers.get(name) or ""}


def describe(
    headers, body: bytes, *, secret: str | Sequence[str], service_name: str,
    tolerance: int = DEFAULT_TOLERANCE, now: float | None = None,
) -> tuple[bool, str]:
    """Verify one delivery with one secret or several (during a rotation); return
    (verified, the line's fields without time and answer)."""

    def header(suffix: str) -> str:
        return headers.get(f"X-{service_name}-{suffix}") or "-"

    try:
        verify(secret, body, _signature_of(headers, service_name), tolerance=tolerance, now=now)
        verified, verdict = True, "verified"
    except InvalidSignature as exc:
        verified, verdict = False, f"NOT verified: {exc}"
    fields = (
        f"{header('Event'):<19}  event={header('Event-Id')}  "
        f"delivery={header('Delivery-Id')}  attempt={header('Attempt')}  {verdict}"
    )
    return verified, fields


class Listener:
    """An HTTP server on ``host:port`` that verifies, prints and answers every POST.

    ``secret`` is one secret or several (a delivery verifies with any of them).
    ``status`` (None: 200 if verified, else 401) forces the answer to every
    delivery. ``out`` receives one line per delivery, flushed at once.
    """

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        service_name: str = "Service",
        host: str = "127.0.0.1",
        port: int = 4242,
        status: int | None = None,
        out: TextIO | None = None,
        clock: Callable[[], dt.datetime] | None = None,
    ):
        self.secret = secret
        self.service_name = service_name
        self.status = status
        self.out = out or sys.stdout
        self.clock = clock or (lambda: dt.datetime.now(dt.timezone.utc))
        self._print_lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer((host, port), self._handler_class())
        self.server.daemon_threads = True

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        host = self.server.server_address[0]
        return f"http://{host}:{self.port}/"

    def echo(self, line: str) -> None:
        with self._print_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def handle(self, headers, body: bytes) -> int:
        """Verify and print one delivery; return the status to answer."""
        verified, fields = describe(
            headers, body, secret=self.secret, service_name=self.service_name
        )
        status = self.status if self.status is not None else (200 if verified else 401)
        stamp = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        self.echo(f"{stamp}  {fields}  -> {status}")
        return status

    def _handler_class(self):
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "webhooks-listen"

            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self._read_body()
                if body is None:
                    return
                status = listener.handle(self.headers, body)
                ok = 200 <= status < 300
                self._answer(status, {"received": True} if ok else {"error": "rejected"})

            def do_GET(self):  # noqa: N802
                self._answer(200, {"listening": True, "hint": "POST deliveries here"})

            def _read_body(self) -> bytes | None:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    return self._read_chunked()
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    self._answer(400, {"error": "bad Content-Length"})
                    return None
                if length > MAX_BODY_BYTES:
                    self._answer(413, {"error": "body too large"})
                    return None
                return self.rfile.read(length)

            def _read_chunked(self) -> bytes | None:
                chunks, total = [], 0
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    total += size
                    if total > MAX_BODY_BYTES:
                        self._answer(413, {"error": "body too large"})
                        return None
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()

            def _answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the sender gave up (its time-out); nothing to answer

            def log_message(self, *args):  # one line per delivery is printed by handle()
                pass

        return Handler

    def serve_forever(self) -> None:
        self.server.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        self.server.server_close()


def secret_problems(secrets: Sequence[str]) -> list[str]:
    """Why each of ``secrets`` cannot be the signing secret it should be; empty when all can.

    A blank one is usually an unset shell variable (``--secret "$SECRET"``);
    an API key (``whk_…``) is the other secret a user holds. With either,
    every delivery would fail to verify, with no hint why.
    """
    problems = []
    for secret in secrets:
        if not secret.strip():
            problems.append("--secret is empty (an unset variable?): give the subscription's "
                            "signing secret, whsec_…, as creating the subscription printed it")
        elif secret.startswith("whk_"):
            problems.append("--secret is an API key (whk_…), not a signing secret: give the "
                            "subscription's secret, whsec_…, as creating the subscription printed it")
    return problems


def _hint(secret: str) -> str:
    """A secret as the start-up line shows it: its first characters only."""
    return secret[:10] + "…" if len(secret) > 14 else "(short secret)"


def serve(
    *, secret: str | Sequence[str], host: str, port: int, status: int | None, service_name: str
) -> int:
    """Run a listener in the foreground until Ctrl-C or SIGTERM; returns the exit status."""
    try:
        listener = Listener(secret=secret, service_name=service_name, host=host, port=port,
                            status=status)
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    answer = f"answering {status} to every delivery" if status is not None else (
        "answering 200 when verified, 401 when not"
    )
    secrets = [secret] if isinstance(secret, str) else list(secret)
    hints = " or ".join(_hint(one) for one in secrets)
    listener.echo(
        f"webhooks listen: ready on {listener.url} (any path), verifying with {hints}, "
        f"{answer}; Ctrl-C stops"
    )

    def _stop(_signum, _frame):
        # shutdown() waits for serve_forever to return, so it must run on another thread.
        threading.Thread(target=listener.server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    try:
        listener.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
    return 0
