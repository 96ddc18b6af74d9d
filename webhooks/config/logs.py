"""Structured log lines: one JSON object per line, with the ids an operator searches by.

::

    {"timestamp": "2026-07-30T09:41:07.123Z", "level": "INFO", "logger": "webhooks.delivery",
     "message": "delivery attempt 1 of 8d2e…: success", "delivery_id": "8d2e…",
     "event_id": "3f0c…", "subscription_id": "a1b2…", "attempt": 1, "status_code": 200,
     "outcome": "success"}

Only the fields in :data:`CONTEXT_FIELDS` are taken from a record's ``extra``:
anything else passed there (a URL, a body, a secret) never reaches the log.
As a second guard, signing secrets (``whsec_…``), private keys (``whsk_…``),
API keys (``whk_…``) and passwords in URLs are masked in the message and in
tracebacks.

:func:`configure_logging` installs this on the root logger; the web app and
the worker call it at start-up.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from typing import TextIO

from webhooks.config import get_settings

__all__ = ["CONTEXT_FIELDS", "JsonFormatter", "RoutineToDebug", "configure_logging", "redact",
           "mask_url_passwords"]

CONTEXT_FIELDS = (
    "event_id",
    "delivery_id",
    "subscription_id",
    "account_id",
    "attempt",
    "status_code",
    "error_kind",
    "outcome",
)

# The whole of each: URL-safe base64 (API keys, service secrets) or standard base64 with its
# padding (standard secrets, Ed25519 private keys: whsk_).
_SECRETS = re.compile(r"\b(whsec_|whsk_|whk_)[A-Za-z0-9_\-+/]+=*")
# The password runs to the *last* "@" of the authority, as urllib3 and urlsplit read it
# ("https://u:p@ss@host/": the password is "p@ss"); the user part may hold an "@" too.
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/?#\s]*):[^/?#\s]+@"
)
_HANDLER_MARK = "_webhooks_json_handler"


def mask_url_passwords(text: str, placeholder: str = "***") -> str:
    """``text`` with the password of every ``scheme://user:password@`` replaced by ``placeholder``.

    ``https://user:s3cret@host/path`` becomes ``https://user:***@host/path``:
    what API answers and dashboard pages show of a subscription's URL.
    """
    return _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{placeholder}@", text)


def redact(text: str) -> str:
    """``text`` with signing secrets, private keys, API keys and URL passwords masked."""
    text = _SECRETS.sub(lambda m: m.group(1) + "[redacted]", text)
    return mask_url_passwords(text, "[redacted]")


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring for the fields)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = dt.datetime.fromtimestamp(record.created, dt.timezone.utc)
        line: dict[str, object] = {
            "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value if isinstance(value, (int, float, bool)) else str(value)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class RoutineToDebug(logging.Filter):
    """On a logger: its INFO records whose message starts with one of ``prefixes`` become DEBUG.

    For a routine line that repeats every few seconds (beat's "Sending due
    task" every WEBHOOKS_SWEEP_INTERVAL s): it is logged as DEBUG when the
    logger is enabled for DEBUG (WEBHOOKS_LOG_LEVEL=DEBUG), and dropped
    otherwise. Warnings and errors are never touched.
    """

    def __init__(self, *prefixes: str):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not str(record.msg).startswith(self.prefixes):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def configure_logging(level: int | str | None = None, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record of the process, as JSON lines, to ``stream`` (default stderr).

    ``level`` defaults to WEBHOOKS_LOG_LEVEL (INFO). Safe to call again: the
    handler installed before is replaced, never doubled. Returns the handler.
    """
    if level is None:
        level = get_settings().log_level
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_MARK, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
