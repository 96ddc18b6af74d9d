"""The API's and the dashboard's answer to an endpoint URL it refuses (the rules themselves
are webhooks/sender/target_urls.py)."""

from __future__ import annotations

from webhooks.sender.target_urls import (MAX_URL_LENGTH, as_sent, shown_url, target_refusal,
                                          url_problem, url_to_store)

from .errors import ApiError

__all__ = ["MAX_URL_LENGTH", "url_problem", "as_sent", "check_target_allowed", "shown_url",
           "url_to_store"]


def check_target_allowed(url: str) -> None:
    """Refuse (400 ``target_not_allowed``) a URL on a non-public address, unless allowed
    (target_urls.target_refusal)."""
    refusal = target_refusal(url)
    if refusal is not None:
        raise ApiError(400, "target_not_allowed", refusal)
