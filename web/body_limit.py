"""The request body limit on every route: a body over MAX_CONTENT_LENGTH answers 413.

Werkzeug enforces MAX_CONTENT_LENGTH (WEBHOOKS_MAX_REQUEST_BYTES, 64 KiB)
only when a view reads the body, so routes that ignore their body (``/test``,
``/resume``, ``replay``, every GET) accepted a body of any size. This check
runs before every view, before authentication and the rate limiter: a
declared ``Content-Length`` over the limit is refused without reading a byte;
a chunked body (no length) is read into memory up to the limit, and refused
as soon as it goes past it. The 413 is the API's JSON error shape (web/errors.py), or
the dashboard's error page under /dashboard/.

A view marked with :func:`accepts_body_up_to` has a limit of its own (the publisher
API's event routes take 256 KiB, CONTRACT 10.7); every other route keeps the app's.
"""

from __future__ import annotations

import io
from typing import Callable

from flask import Flask, current_app, request
from werkzeug.exceptions import BadRequest, RequestEntityTooLarge

__all__ = ["init_app", "refuse_a_body_over_the_limit", "accepts_body_up_to"]

_OWN_LIMIT = "body_limit_bytes"  # the attribute a view's own limit is kept in


def accepts_body_up_to(limit: Callable[[], int]):
    """Mark a view as taking bodies of up to ``limit()`` bytes (read per request, so that a
    setting can name it) instead of the app's MAX_CONTENT_LENGTH."""
    def mark(view):
        setattr(view, _OWN_LIMIT, limit)
        return view
    return mark


def refuse_a_body_over_the_limit() -> None:
    """RequestEntityTooLarge (413) if this request's body is over ``request.max_content_length``
    (the view's own limit when it has one)."""
    view = current_app.view_functions.get(request.endpoint) if request.endpoint else None
    own = getattr(view, _OWN_LIMIT, None)
    if own is not None:
        request.max_content_length = own()
    limit = request.max_content_length
    if limit is None:
        return
    length = request.content_length
    if length is not None:
        if length > limit:
            raise RequestEntityTooLarge()
        return
    if request.environ.get("wsgi.input_terminated"):
        _buffer_an_unsized_body(request.environ, limit)


def _buffer_an_unsized_body(environ: dict, limit: int) -> None:
    """Read a body sent without a length (chunked) into memory, at most ``limit`` bytes.

    Werkzeug's own stream stops quietly at the limit (the view would see the body cut
    short: a 400 ``invalid_json`` instead of a 413), and it cannot tell a body of exactly
    ``limit`` bytes from a longer one; reading one byte more can. The bytes read become the
    request's input with its length, so the view and the form parser read them as usual.
    Called before anything has read the request's stream.
    """
    stream = environ["wsgi.input"]
    chunks, size = [], 0
    while size <= limit:
        try:
            chunk = stream.read(limit + 1 - size)
        except Exception:  # noqa: BLE001  (the server's parse error, e.g. a bad chunk size)
            # Raised by the WSGI server's reader (gunicorn's InvalidChunkSize, ...): the
            # client's malformed body, a 400, not a 500 of the app.
            raise BadRequest("The chunked request body is malformed.") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise RequestEntityTooLarge()
    environ["wsgi.input"] = io.BytesIO(b"".join(chunks))
    environ["CONTENT_LENGTH"] = str(size)


def init_app(app: Flask) -> None:
    """Check the body size before any other ``before_request`` hook registered after this."""
    app.before_request(refuse_a_body_over_the_limit)
