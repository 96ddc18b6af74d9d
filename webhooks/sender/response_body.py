"""What is read of an answer's body: at most ``DRAIN_LIMIT`` bytes off the wire, whatever
its status or ``Content-Encoding``, and an excerpt of at most ``EXCERPT_BYTES`` decoded.

The body is read raw (never decoded by urllib3, whose decoder may inflate a
small gzip body to gigabytes before any limit applies). The excerpt kept with
the attempt is decoded here with a bound on the *output*: a gzip or deflate
bomb yields its first ``EXCERPT_BYTES`` and nothing more. An encoding that is
not gzip or deflate, or a body that does not inflate, is kept as it came.
"""

from __future__ import annotations

import zlib
from typing import Iterable

__all__ = ["EXCERPT_BYTES", "DRAIN_LIMIT", "READ_CHUNK", "BoundedBody", "read_bounded",
           "excerpt_of"]

EXCERPT_BYTES = 1024  # the part of the response body kept with the attempt
DRAIN_LIMIT = 64 * 1024  # read this much to keep the connection alive; close beyond it
READ_CHUNK = 16 * 1024  # bytes asked of the socket per read

# zlib's window bits: 32 + 15 detects a gzip or zlib header by itself; -15 is raw deflate,
# which some servers send as "deflate".
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS


class BoundedBody(bytes):
    """The bytes read of a body (at most DRAIN_LIMIT + one chunk); ``complete`` when the body
    ended within the limit, so the connection may be kept for the next attempt."""

    complete: bool

    def __new__(cls, data: bytes, complete: bool):
        body = super().__new__(cls, data)
        body.complete = complete
        return body


def read_bounded(chunks: Iterable[bytes]) -> BoundedBody:
    """Read ``chunks`` (raw bytes off the wire) until they end or pass DRAIN_LIMIT bytes."""
    received = bytearray()
    for chunk in chunks:
        received += chunk
        if len(received) > DRAIN_LIMIT:
            return BoundedBody(bytes(received), complete=False)
    return BoundedBody(bytes(received), complete=True)


def excerpt_of(raw: bytes, content_encoding: str | None) -> bytes:
    """The first EXCERPT_BYTES of the body as its sender meant it: inflated for gzip and
    deflate (never more than EXCERPT_BYTES of output), else the raw bytes."""
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        inflated = _inflate(raw, _GZIP_OR_ZLIB)
        if inflated is None and encoding == "deflate":
            inflated = _inflate(raw, _RAW_DEFLATE)
        if inflated is not None:
            return inflated
    return raw[:EXCERPT_BYTES]


def _inflate(raw: bytes, window_bits: int) -> bytes | None:
    """At most EXCERPT_BYTES of ``raw`` inflated; None if it is not of that format."""
    try:
        return zlib.decompressobj(window_bits).decompress(raw, EXCERPT_BYTES)
    except zlib.error:
        return None
