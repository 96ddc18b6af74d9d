"""What a receiver's ``Retry-After`` header asks for, in seconds (RFC 9110, section 10.2.3).

Pure: no clock of its own (the caller passes ``now``). A value is either
whole seconds (``120``) or an HTTP date (``Wed, 25 Nov 2026 18:00:00 GMT``);
anything else does not parse and is ignored (None), as CONTRACT 9.4 says. A
date in the past asks for no wait (0).
"""

from __future__ import annotations

import datetime as dt
from email.utils import parsedate_to_datetime

__all__ = ["retry_after_seconds", "HONOURED_STATUSES"]

HONOURED_STATUSES = frozenset({429, 503})  # the answers whose Retry-After is followed
_MAX_DIGITS = 12  # past any sensible wait; longer is junk, not a number to trust


def retry_after_seconds(value: str | None, now: dt.datetime) -> float | None:
    """Seconds from ``now`` (an aware datetime) that ``value`` asks to wait; None when it
    does not parse."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS:
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:  # "-0000" or no zone: not an HTTP date
        return None
    return max((when - now).total_seconds(), 0.0)
