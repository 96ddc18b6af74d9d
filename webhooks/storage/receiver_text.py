"""Text taken from a receiver, made storable on both databases.

PostgreSQL's ``text`` cannot hold NUL (SQLite can), and a receiver may
answer any bytes at all: everything that reaches an attempt row from the
wire passes through :func:`storable_text` first.
"""

from __future__ import annotations

__all__ = ["storable_text", "REPLACEMENT"]

REPLACEMENT = "\ufffd"  # what undecodable bytes become too


def storable_text(text: str | None, limit: int | None = None) -> str | None:
    """``text`` with NUL and lone surrogates replaced, cut to ``limit`` characters."""
    if text is None:
        return None
    cleaned = text.replace("\x00", REPLACEMENT)
    # A lone surrogate (from a decoder that let one through) cannot be encoded as UTF-8.
    cleaned = cleaned.encode("utf-8", "surrogatepass").decode("utf-8", errors="replace")
    return cleaned if limit is None else cleaned[:limit]
