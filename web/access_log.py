"""Portal link tokens never reach the web server's logs (issue 36, finding 8).

A portal link's token is the last part of its path (``/dashboard/portal/<token>``).
gunicorn's access log (the Procfile's ``--access-logfile -``) writes the request
line, the path and the ``Referer``, also for a HEAD, which leaves the link
unspent: whoever reads the log could open it. :func:`install`, called by
``create_app()``, puts :class:`RedactPortalTokens` on gunicorn's access and error
loggers of the process it runs in, whatever the command line that started it
(the Procfile, the systemd unit, ``webhooks dev``, a deployment's own). The
filter replaces each token with ``[redacted]`` in every value the line is made
of (gunicorn's ``access_log_format`` atoms, headers included) before any
handler formats it; the method, the status and the rest of the path stay.
"""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping

__all__ = ["PLACEHOLDER", "LOGGERS", "redact_portal_tokens", "RedactPortalTokens", "install"]

PLACEHOLDER = "[redacted]"
#: gunicorn's loggers: the access log, and the error log (a malformed request's line).
LOGGERS = ("gunicorn.access", "gunicorn.error")

# The path part after /dashboard/portal/, also where a client encoded the slashes (%2F), up
# to the end of the path: a query, a fragment, a space (the request line's) or a quote.
_TOKEN = re.compile(r"(/dashboard(?:/|%2F)portal(?:/|%2F))[^/?#\s\"']+", re.IGNORECASE)


def redact_portal_tokens(text: str) -> str:
    """``text`` with the token of every portal link path in it replaced by PLACEHOLDER."""
    return _TOKEN.sub(lambda match: match.group(1) + PLACEHOLDER, text)


def _redacted(value: object) -> object:
    return redact_portal_tokens(value) if isinstance(value, str) else value


class RedactPortalTokens(logging.Filter):
    """On a logger: redact portal tokens in each record's message and arguments, in place.

    gunicorn logs an access line as ``info(access_log_format, atoms)``, ``atoms``
    a mapping whose class formats the line; its values are replaced in place, so
    the class (and any handler that reads ``record.args``) keeps working.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _redacted(record.msg)
        if isinstance(record.args, MutableMapping):
            for name, value in list(record.args.items()):
                record.args[name] = _redacted(value)
        elif isinstance(record.args, tuple):
            record.args = tuple(_redacted(value) for value in record.args)
        return True


def install() -> None:
    """Put the filter on gunicorn's loggers in this process (once, however often called)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, RedactPortalTokens) for existing in logger.filters):
            logger.addFilter(RedactPortalTokens())
