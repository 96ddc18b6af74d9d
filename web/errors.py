"""Every error the API answers, as one JSON shape: ``{"error": {"code", "message"}}``.

Views raise :class:`ApiError` (or a core error from :mod:`webhooks.errors`);
:func:`register_error_handlers` turns those, every Werkzeug HTTP error (404 for
an unknown path, 405, 413, ...) and any unexpected exception into that shape,
so a client never sees HTML or a stack trace. The codes are listed in
``docs/api.md``.
"""

from __future__ import annotations

import math
import re
import time

from flask import Flask, Response, current_app, has_request_context, jsonify, request
from flask_limiter import RateLimitExceeded
from werkzeug.exceptions import HTTPException

from webhooks.errors import Conflict, InvalidCredential, InvalidEvent, InvalidFilter, NotFound

__all__ = [
    "ApiError", "error_response", "register_error_handlers", "too_many_requests",
    "rate_limit_exceeded",
]


class ApiError(Exception):
    """An error answer: HTTP ``status``, snake_case ``code``, a one-sentence ``message``."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(status: int, code: str, message: str, headers=None) -> Response:
    """The JSON error response; ``headers`` are added (e.g. ``Allow`` on a 405)."""
    response = jsonify(error={"code": code, "message": message})
    response.status_code = status
    for name, value in headers or ():
        response.headers[name] = value
    return response


def too_many_requests(reset_at: float, what: str) -> ApiError:
    """429 ``rate_limited`` with ``Retry-After``: the whole seconds until ``reset_at``
    (a ``time.time()`` value), at least 1. ``what`` names what was too many."""
    seconds = max(1, math.ceil(reset_at - time.time()))
    unit = "second" if seconds == 1 else "seconds"
    return ApiError(
        429, "rate_limited", f"Too many {what}; retry in {seconds} {unit}.",
        {"Retry-After": str(seconds)},
    )


def rate_limit_exceeded(error: RateLimitExceeded) -> ApiError:
    """The answer to a request over its Flask-Limiter limit (WEBHOOKS_API_RATE_LIMIT)."""
    # Flask-Limiter keeps the limit this request broke, with its window, on the limiter.
    reset_at = time.time() + error.limit.limit.get_expiry()
    for limiter in current_app.extensions.get("limiter", ()):
        breached = limiter.current_limit
        if breached is not None and breached.breached:
            try:
                reset_at = breached.window.reset_time
            except Exception:  # noqa: BLE001  (storage gone since the check: keep the full window)
                current_app.logger.warning("rate limit window unreadable", exc_info=True)
    return too_many_requests(reset_at, "requests")


# Werkzeug names its errors in Title Case ("Request Entity Too Large"); the
# API's codes are snake_case, and a few read better under another name.
_CODE_FOR_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}

_MESSAGE_FOR_STATUS = {
    404: "No such resource.",
    405: "This method is not allowed on this resource.",
}


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter and a final full stop."""
    text = text.strip().rstrip(".") or "Error"
    return text[:1].upper() + text[1:] + "."


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "error"


def _http_error(error: HTTPException) -> Response:
    status = error.code or 500
    if status >= 500:
        return _internal_error(error)
    code = _CODE_FOR_STATUS.get(status) or _snake(error.name or "error")
    if status == 413:
        limit = (request.max_content_length if has_request_context()
                 else current_app.config.get("MAX_CONTENT_LENGTH"))
        message = f"The request body is larger than the {limit} bytes this API accepts."
    else:
        message = _sentence(_MESSAGE_FOR_STATUS.get(status) or error.description or error.name)
    # Keep Werkzeug's own headers (``Allow`` on a 405, ``WWW-Authenticate``),
    # but not its HTML content type.
    headers = [
        (name, value) for name, value in error.get_headers() if name.lower() != "content-type"
    ]
    return error_response(status, code, message, headers)


def _internal_error(error: BaseException) -> Response:
    # Logged in full for the operator; the client learns only that it failed.
    current_app.logger.error("unhandled error in a request", exc_info=error)
    return error_response(500, "internal_error", "The server could not complete this request.")


def register_error_handlers(app: Flask) -> None:
    """Answer every error raised while handling a request with the JSON error shape."""

    @app.errorhandler(ApiError)
    def _api_error(error: ApiError):
        return error_response(error.status, error.code, error.message, error.headers.items())

    # Core errors, should a core call raise one past a view's own checks.
    @app.errorhandler(NotFound)
    def _not_found(error: NotFound):
        return error_response(404, "not_found", _sentence(str(error)))

    @app.errorhandler(InvalidCredential)
    def _invalid_credential(error: InvalidCredential):
        # Its message starts with the field's name (client_certificate.private_key): as it is.
        message = str(error).rstrip(".") + "."
        return error_response(400, error.code, message)

    @app.errorhandler(InvalidFilter)
    def _invalid_filter(error: InvalidFilter):
        # Its message starts with where in the filter (filter["data.amount"]["$gt"]): as it is.
        return error_response(400, error.code, str(error).rstrip(".") + ".")

    @app.errorhandler(Conflict)
    def _conflict(error: Conflict):
        return error_response(409, error.code, _sentence(str(error)))

    @app.errorhandler(RateLimitExceeded)
    def _rate_limited(error: RateLimitExceeded):
        return _api_error(rate_limit_exceeded(error))

    @app.errorhandler(InvalidEvent)
    def _invalid_event(error: InvalidEvent):
        return error_response(400, "validation_error", _sentence(str(error)))

    app.register_error_handler(HTTPException, _http_error)
    # The last resort: anything else is a bug or an outage, never the client's input.
    app.register_error_handler(Exception, _internal_error)
