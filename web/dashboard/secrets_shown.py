"""Who sees a secret on the dashboard's pages (README, "Who sees a secret"), decided here.

A secret is whatever lets its holder act as the service toward a receiver, or
as the receiver's own client: a subscription's signing secret and its staged
next secret, the values of its custom headers (often the receiver's
``Authorization`` credential), and the credentials it presents to its receiver
(CONTRACT 10.3: a client certificate's key, an OAuth2 client secret). The rules:

- No GET page shows a secret, to any session, but one: the page a session is
  sent to right after it made the secret (a new subscription, a rotation)
  shows it once (:func:`show_once`, :func:`take_show_once`).
- Otherwise a secret is shown only in the answer to "Show secret", a POST that
  carries the form's CSRF token: a deliberate act on the session's own page,
  which no link, prefetch, history entry, referrer or other site can make for it.
- A read-only session is shown none: every POST of it is refused (portal.py),
  and so is every view marked :func:`shows_secrets`, whatever its method,
  before the view runs (blueprint.py).
- A form never shows a secret back: the edit form shows header values as
  ``forms.MASK`` and keeps the stored value of a header sent back masked.

A new secret field follows the same rules: rendered only where a view was
asked with ``show_secret`` (the reveal, or the once after making it), never
put back into a form, and the view that shows it marked :func:`shows_secrets`.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from flask import current_app, session

__all__ = ["shows_secrets", "view_shows_secrets", "show_once", "take_show_once"]

View = TypeVar("View", bound=Callable)

_MARK = "shows_secrets"
# In the signed session cookie: the id of the subscription whose secrets the next page shows
# once (an id, never a secret: the cookie is signed, not encrypted).
_SHOW_ONCE_KEY = "show_secret_once"


def shows_secrets(view: View) -> View:
    """Mark a dashboard view as one that shows secrets: a read-only session is refused it."""
    setattr(view, _MARK, True)
    return view


def view_shows_secrets(endpoint: str | None) -> bool:
    """True when the view of ``endpoint`` is marked :func:`shows_secrets`."""
    view = current_app.view_functions.get(endpoint) if endpoint else None
    return bool(getattr(view, _MARK, False))


def show_once(subscription_id: str) -> None:
    """Let the next page of this session that asks show ``subscription_id``'s secrets, once
    (called right after the session made them)."""
    session[_SHOW_ONCE_KEY] = subscription_id


def take_show_once(subscription_id: str) -> bool:
    """True (once) when :func:`show_once` was called for ``subscription_id``; spends it."""
    if session.get(_SHOW_ONCE_KEY) != subscription_id:
        return False
    session.pop(_SHOW_ONCE_KEY)
    return True
