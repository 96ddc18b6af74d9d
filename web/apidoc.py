"""What each API view documents about itself, for the OpenAPI document.

A view is decorated with :func:`documented`: its summary, its success
responses, its body and query schemas, whether it needs an API key, and any
error it answers beyond the ones every route of its kind can answer. The
error responses that follow from the route's shape are added by
:func:`error_responses`, so they cannot be forgotten: 400 for a body or a
query string, 401 for a route that needs a key, 404 for a route with an id,
413 for a body, 405 (another method of the path), 429 and 500 for every route.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from marshmallow import Schema

__all__ = ["ApiDoc", "PUBLISHER_SECURITY", "documented", "doc_of", "error_responses"]

# The OpenAPI security scheme of the publisher API's routes (CONTRACT 10.7).
PUBLISHER_SECURITY = "publisherKey"

# A response schema: a marshmallow Schema class, the name of a component
# registered by web.openapi (a str), or None for an empty body.
ResponseSchema = type[Schema] | str | None


@dataclass(frozen=True)
class ApiDoc:
    summary: str
    responses: dict[int, tuple[str, ResponseSchema]]
    description: str = ""
    body: type[Schema] | None = None
    # False when the body may be left out (an empty body loads as {}).
    body_required: bool = True
    query: type[Schema] | None = None
    public: bool = False
    errors: dict[int, str] = field(default_factory=dict)
    # False when the view reports its own query errors (listed in ``errors``).
    query_errors: bool = True
    # Headers of a success response: {status: {header name: description}}.
    headers: dict[int, dict[str, str]] = field(default_factory=dict)
    # The security scheme of the route's key when it is not the account's API key
    # (the publisher API's ``publisherKey``); its blueprint's name is its tag.
    security: str | None = None


def documented(
    summary: str,
    *,
    responses: dict[int, tuple[str, ResponseSchema]],
    description: str = "",
    body: type[Schema] | None = None,
    body_required: bool = True,
    query: type[Schema] | None = None,
    public: bool = False,
    errors: dict[int, str] | None = None,
    query_errors: bool = True,
    headers: dict[int, dict[str, str]] | None = None,
    security: str | None = None,
) -> Callable:
    """Attach an :class:`ApiDoc` to a view; ``errors`` maps extra statuses to their codes,
    ``headers`` a success status to the headers its answer carries (name: description)."""

    def decorate(view: Callable) -> Callable:
        view.api_doc = ApiDoc(
            summary=summary, responses=responses, description=description, body=body,
            body_required=body_required, query=query, public=public, errors=dict(errors or {}),
            query_errors=query_errors, headers=dict(headers or {}), security=security,
        )
        return view

    return decorate


def doc_of(view: Callable) -> ApiDoc | None:
    """The view's ApiDoc, or None when it has none (web.openapi refuses that)."""
    return getattr(view, "api_doc", None)


def error_responses(doc: ApiDoc, has_path_id: bool) -> dict[int, str]:
    """Every error status the route can answer, with a description naming the codes."""
    errors: dict[int, list[str]] = {}

    def add(status: int, text: str) -> None:
        errors.setdefault(status, []).append(text)

    if doc.body is not None:
        add(400, "`invalid_json`: the body is empty or not JSON; "
                 "`validation_error`: a field is missing, unknown or wrong")
        add(413, "`payload_too_large`: the body is over the size limit")
    if doc.query is not None and doc.query_errors:
        add(400, "`invalid_parameter`: a query parameter has a wrong value")
    if doc.security is not None:
        add(401, "`unauthorized`: no publisher key, or not a valid one (revoked)")
        add(403, "`publisher_key_required`: an account's API key was sent")
    elif not doc.public:
        add(401, "`unauthorized`: no API key, or not a valid one")
        add(403, "`account_key_required`: a publisher key was sent; it acts on accounts "
                 "through /api/webhooks/accounts, not as one")
    if has_path_id:
        add(404, "`not_found`: no such object among the caller's own")
    add(405, "`method_not_allowed`: the path does not support the request's method (not this "
             "operation's: another one); `Allow` lists the methods it supports")
    if doc.security is not None:
        add(429, "`rate_limited`: over WEBHOOKS_PUBLISHER_RATE_LIMIT (by default 1,000 "
                 "requests per second) for this publisher key")
    else:
        add(429, "`rate_limited`: over WEBHOOKS_API_RATE_LIMIT (by default 100 per second) "
                 "for this API key's account, or for this address on a route without a key")
    for status, text in doc.errors.items():
        add(status, text)
    add(500, "`internal_error`: an unexpected failure; no details are given")
    return {status: "; ".join(texts) for status, texts in sorted(errors.items())}
