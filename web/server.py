"""The gunicorn worker of the ``web:`` process: gunicorn's own error answers in the API's
JSON error shape.

Some requests never reach the Flask app: gunicorn refuses them while
parsing, with an HTML page. A request line over ``--limit-request-line``
(default 4094 bytes: a long cursor in the query string) answers 414; a
header over ``--limit-request-field_size`` (8190 bytes) or more than
``--limit-request-fields`` headers (100) answers 431; a request that is not
HTTP answers 400. The path of such a request may not even be known, so every
one of these answers is JSON (CONTRACT 9.2), ``{"error": {"code",
"message"}}``, whichever path was asked.

:class:`JsonErrorWorker` is gunicorn's threaded worker (the Procfile's
``--threads 4``) whose ``handle_error``, the worker's hook for these
answers, lets gunicorn decide the status, log the warning and the access
line as usual, then writes the JSON answer instead of the page. The
limits are gunicorn's settings: raise them with its flags, or with
``GUNICORN_CMD_ARGS="--limit-request-line 8190"`` without editing the
Procfile; the messages name the limits in force.
"""

from __future__ import annotations

import json
import sys

from gunicorn import util
from gunicorn.arbiter import Arbiter
from gunicorn.errors import AppImportError
from gunicorn.workers.gthread import ThreadWorker

from webhooks.errors import ConfigError

from .app import check_settings

__all__ = ["JsonErrorWorker", "error_answer"]

# snake_case codes of the statuses gunicorn answers by itself (web/errors.py's style).
_CODES = {
    400: "bad_request",
    403: "forbidden",
    414: "request_line_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    501: "not_implemented",
}


def _message(status: int, cfg) -> str:
    """One sentence for people, naming the limit that was passed."""
    if status == 414:
        return (f"The request line (method, path and query string) is longer than the "
                f"{cfg.limit_request_line} bytes this server accepts.")
    if status == 431:
        return (f"The request headers are over this server's limits: at most "
                f"{cfg.limit_request_fields} headers of at most {cfg.limit_request_field_size} "
                "bytes each.")
    if status == 501:
        return "The request's Transfer-Encoding is not supported."
    if status >= 500:
        return "The server could not complete this request."
    return "The request is not valid HTTP."


def error_answer(status: int, reason: str, cfg) -> bytes:
    """The whole HTTP answer (status line, headers, JSON body) for ``status``; the connection
    is closed after it, as gunicorn closes it after its own error page."""
    code = _CODES.get(status, "internal_error" if status >= 500 else "bad_request")
    body = json.dumps({"error": {"code": code, "message": _message(status, cfg)}}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


class _Captured:
    """A stand-in for the client socket that keeps what gunicorn would have written to it."""

    def __init__(self) -> None:
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0  # already non-blocking: gunicorn writes at once

    def setblocking(self, _flag) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.data += data

    def status(self) -> tuple[int, str] | None:
        """The status code and reason of the captured answer's status line, if any."""
        line = self.data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            return None
        return int(parts[1]), (parts[2] if len(parts) == 3 else "Error")


class JsonErrorWorker(ThreadWorker):
    """gunicorn's gthread worker whose own error answers are the API's JSON error shape,
    and which stops on a malformed setting with one line, not a traceback."""

    @classmethod
    def check_config(cls, cfg, log):
        """Run by gunicorn's master before it starts any worker: a setting the app cannot
        use stops the master here with its one line (and gunicorn's exit status for an app
        that failed to load). Left to the workers, each failed on its own, and when two
        failed at once gunicorn's halt met the second while halting and printed a
        traceback (seen with gunicorn 27)."""
        super().check_config(cfg, log)
        try:
            check_settings()
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr, flush=True)
            sys.exit(Arbiter.APP_LOAD_ERROR)

    def load_wsgi(self):
        """Build the app; a WEBHOOKS_* variable it cannot use (ConfigError) becomes gunicorn's
        AppImportError, which gunicorn prints as one line before it stops ("App failed to
        load"), where any other exception prints a traceback and boots the worker again."""
        try:
            super().load_wsgi()
        except ConfigError as error:
            raise AppImportError(f"error: {error}") from None

    def handle_error(self, req, client, addr, exc):
        captured = _Captured()
        super().handle_error(req, captured, addr, exc)  # logs; decides status and reason
        status = captured.status()
        if status is None:
            return
        try:
            util.write_nonblock(client, error_answer(*status, self.cfg))
        except Exception:  # noqa: BLE001  (the client is gone: as gunicorn does, say so only)
            self.log.debug("Failed to send error message.")
