"""A subscription's OAuth2 token, shared by every thread of every worker process.

The token lives in its ``oauth2_tokens`` row (storage/oauth2_tokens.py), not
in a process: an attempt reads it (one primary-key read), and only when it
is missing, of older ``oauth2`` settings or due for refresh does one worker
fetch a new one, holding the row's lease meanwhile. The others wait for it
(polling the row within their deadline), or use the current token while it
is still valid (a refresh starts 30 s before it expires). A lease whose
holder died ends with that holder's deadline. An endpoint's 401 drops the
token it was given, once however many attempts got that 401, so exactly one
new token follows.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Callable, Mapping

from webhooks.sender.deadline import AttemptDeadline
from webhooks.sender.oauth2 import Granted, token_failure
from webhooks.storage import clock
from webhooks.storage import oauth2_tokens as rows
from webhooks.storage.db import attempt_transaction, get_attempt_engine

__all__ = ["SharedTokens", "settings_hash"]

POLL_S = 0.05  # how often a waiting attempt reads the row again while another fetches
LEASE_MARGIN_S = 1.0  # a lease outlives its holder's deadline by this much


def settings_hash(oauth2: Mapping[str, str]) -> str:
    """The name of a subscription's ``oauth2`` settings: a token of other settings is never
    used (a PATCH that changes them takes effect at the next attempt)."""
    return hashlib.sha256(json.dumps(dict(oauth2), sort_keys=True).encode("utf-8")).hexdigest()


def _in_transaction(work):
    with attempt_transaction(get_attempt_engine()) as connection:
        return work(connection)


def _now() -> float:
    return clock.now().timestamp()


class SharedTokens:
    """The tokens of every subscription, through their rows; ``run(work)`` runs
    ``work(connection)`` in a transaction (the seam tests replace)."""

    def __init__(self, run: Callable = _in_transaction, now: Callable[[], float] = _now):
        self._run = run
        self._now = now

    def token(self, subscription_id: str, oauth2: Mapping[str, str],
              grant: Callable[[], Granted], attempt: AttemptDeadline) -> str:
        """The subscription's current token; fetched with ``grant()`` by this attempt if it
        wins the lease. TokenFailure when the grant fails or no token comes in time."""
        wanted = settings_hash(oauth2)
        while True:
            now = self._now()
            row = self._run(lambda c: rows.read(c, subscription_id))
            current = row if row is not None and row.config_hash == wanted else None
            if current is not None and current.access_token and now < current.refresh_at:
                return current.access_token
            owner = str(uuid.uuid4())
            until = now + attempt.remaining() + LEASE_MARGIN_S
            if self._run(lambda c: rows.lease(c, subscription_id, owner, now, until, wanted)):
                return self._fetch(subscription_id, owner, wanted, grant)
            if current is not None and current.access_token and now < current.expires_at:
                return current.access_token  # another worker refreshes it; still valid
            if attempt.expired or attempt.remaining() <= POLL_S:
                raise token_failure("another worker's token request did not finish within "
                                    f"{attempt.budget:g} s")
            time.sleep(POLL_S)

    def _fetch(self, subscription_id: str, owner: str, wanted: str,
               grant: Callable[[], Granted]) -> str:
        """Fetch a token under ``owner``'s lease, keep it for everyone, end the lease."""
        try:
            granted = grant()
        except BaseException:
            self._run(lambda c: rows.release(c, subscription_id, owner))
            raise
        refresh_at, expires_at = granted.lifetimes(self._now())
        self._run(lambda c: rows.store(
            c, subscription_id, owner, config_hash=wanted, access_token=granted.access_token,
            refresh_at=refresh_at, expires_at=expires_at))
        return granted.access_token

    def drop(self, subscription_id: str, access_token: str) -> None:
        """The endpoint answered 401 to ``access_token``: the next attempt fetches anew."""
        self._run(lambda c: rows.drop(c, subscription_id, access_token))

