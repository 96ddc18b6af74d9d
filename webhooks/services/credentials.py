"""The credentials of a create or PATCH (``client_certificate``, ``oauth2``), checked with
the url and headers they will be used with, as they are to be stored.

The rules are tenants/credentials.py's; this use case adds what they are
handed: the token URL must pass the guard's rules for an endpoint
(sender/target_urls.py), and ``https`` unless private targets are allowed.
The API, the dashboard and ``webhooks operational add`` all call
:func:`credential_changes`; a refusal is an ``InvalidCredential`` (400 with
its code on the API).
"""

from __future__ import annotations

import datetime as dt
from typing import Mapping

from webhooks.config import get_settings
from webhooks.sender.target_urls import target_refusal, url_problem
from webhooks.storage.models import Subscription
from webhooks.tenants import credentials

__all__ = ["credential_changes", "token_url_refusal", "shown_credentials",
           "certificate_expires_soon", "EXPIRY_WARNING_DAYS"]

EXPIRY_WARNING_DAYS = credentials.EXPIRY_WARNING_DAYS


def token_url_refusal(url: str) -> str | None:
    """Why ``url`` cannot be a token URL (as an endpoint's url, and ``https`` unless
    WEBHOOKS_ALLOW_PRIVATE_TARGETS), or None."""
    if not isinstance(url, str):
        return "it must be a URL"
    problem = url_problem(url)
    if problem:
        return problem
    if not url.lower().startswith("https:") and not get_settings().allow_private_targets:
        return "it must be https (the client secret travels in it)"
    return target_refusal(url)


def credential_changes(body: Mapping, current: Subscription | None) -> dict:
    """The stored values of the credentials ``body`` sets (create: ``current`` is None),
    each checked, and checked again with the url and headers the subscription will have."""
    stored = {}
    if credentials.CLIENT_CERTIFICATE in body:
        stored[credentials.CLIENT_CERTIFICATE] = credentials.client_certificate(
            body[credentials.CLIENT_CERTIFICATE])
    if credentials.OAUTH2 in body:
        stored[credentials.OAUTH2] = credentials.oauth2(body[credentials.OAUTH2],
                                                        token_url_refusal)

    def after(name: str):
        if name in stored:
            return stored[name]
        if name in body:
            return body[name]
        return getattr(current, name) if current is not None else None

    credentials.check_endpoint(after("url") or "", after(credentials.CLIENT_CERTIFICATE))
    credentials.check_headers(after("headers"), after(credentials.OAUTH2))
    return stored


def shown_credentials(subscription: Subscription) -> dict:
    """What answers and pages show of the subscription's credentials (no key, no secret)."""
    return {
        credentials.CLIENT_CERTIFICATE:
            credentials.shown_certificate(subscription.client_certificate),
        credentials.OAUTH2: credentials.shown_oauth2(subscription.oauth2),
    }


def certificate_expires_soon(subscription: Subscription, now: dt.datetime) -> bool:
    """True when its client certificate expires within EXPIRY_WARNING_DAYS (or has): the
    dashboard warns."""
    return credentials.expires_soon(subscription.client_certificate, now)
