"""Structured log lines: one JSON object per line, with the ids an operator searches by.

::

    {"timestamp": "2026-07-30T09:41:07.123Z", "level": "INFO", "logger": "webhooks.delivery",
     "message": "delivery attempt 1 of 8d2e…: success", "delivery_id": "8d2e…",
     "event_id": "3f0c…", "subscription_id": "a1b2…", "attempt": 1, "status_code": 200,
     "outcome": "success"}

While tracing is on and a span is current (webhooks/config/tracing.py), a line
also carries ``trace_id`` and ``span_id`` (hex), so a trace viewer's span and
its log lines find each other.

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
import sys
from typing import TextIO

from webhooks.config import get_settings, tracing
# Used below and re-exported; it lives apart so that what only masks (the CLI's messages, the
# audit log) does not import OpenTelemetry with the log lines' trace ids.
from webhooks.config.redaction import mask_url_passwords, redact

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

_HANDLER_MARK = "_webhooks_json_handler"


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
        span_ids = tracing.log_ids()
        if span_ids is not None:
            line.update(span_ids)
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
