"""The OAuth2 client-credentials grant (RFC 6749 section 4.4): the request and its answer.

Pure: the token request of a subscription's ``oauth2`` settings (a form POST,
the client authenticated by HTTP Basic, RFC 6749 2.3.1), and what the token
URL's answer means. The POST itself goes through the sender's guarded
connections (post.py), under the attempt's deadline and read limit.

Nothing here quotes a client secret, a token or the token URL's body in a
message: a failure names the token URL's status and, for an RFC 6749 5.2
error answer, its ``error`` code.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import quote, urlencode

from webhooks.lifecycle.failure_kinds import ErrorKind, Failure, failure

__all__ = ["Granted", "TokenFailure", "token_request", "granted", "token_failure",
           "TOKEN_LIMIT", "DEFAULT_LIFETIME", "REFRESH_EARLY"]

TOKEN_LIMIT = 16 * 1024  # characters of an access token accepted (it travels in a header)
DEFAULT_LIFETIME = 300.0  # seconds a token without expires_in is used (CONTRACT 10.3)
REFRESH_EARLY = 30.0  # seconds before expires_in runs out that a new token is fetched

_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")  # RFC 6750 2.1
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


@dataclass(frozen=True)
class Granted:
    """A token the token URL granted; ``expires_in`` in seconds (None: not said)."""

    access_token: str
    expires_in: float | None = None

    def __repr__(self) -> str:  # never print the token
        return f"Granted(expires_in={self.expires_in!r})"

    def lifetimes(self, now: float) -> tuple[float, float]:
        """(refresh at, expires at), unix seconds, for a token granted at ``now``: reused
        until ``expires_in`` minus 30 s (300 s when not said), usable until it expires."""
        lifetime = DEFAULT_LIFETIME if self.expires_in is None else self.expires_in
        return now + max(lifetime - REFRESH_EARLY, 0.0), now + lifetime


class TokenFailure(Exception):
    """No token: the attempt records ``failure`` (kind ``oauth2``) and the endpoint is not
    called."""

    def __init__(self, failure: Failure):
        super().__init__(failure.text)
        self.failure = failure


def token_failure(detail: str) -> TokenFailure:
    """No token, for the reason ``detail`` gives: the endpoint is not called."""
    return TokenFailure(failure(ErrorKind.OAUTH2, f"{detail}; the endpoint was not called"))


def token_request(oauth2: Mapping[str, str], user_agent: str) -> tuple[bytes, dict[str, str]]:
    """The body and headers of the grant's POST to ``oauth2["token_url"]``."""
    form = {"grant_type": "client_credentials"}
    for name in ("scope", "audience"):
        if oauth2.get(name):
            form[name] = oauth2[name]
    # RFC 6749 2.3.1: each part form-urlencoded, then joined by ":" and base64-encoded.
    pair = f"{quote(oauth2['client_id'], safe='')}:{quote(oauth2['client_secret'], safe='')}"
    headers = {
        "Authorization": "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii"),
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
        "Accept-Encoding": "identity",
        "User-Agent": user_agent,
    }
    return urlencode(form).encode("ascii"), headers


def granted(status: int, body: bytes, complete: bool) -> Granted:
    """The token in the token URL's answer (``status``, its ``body`` as read, ``complete``
    when it ended within the read limit); TokenFailure when there is none."""
    if not complete:
        raise token_failure("the token URL's answer is over 64 KiB")
    answer = _json_object(body)
    if not 200 <= status < 300:
        code = answer.get("error") if answer is not None else None
        said = f" {code}" if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else ""
        raise token_failure(f"the token URL answered {status}{said}")
    if answer is None:
        raise token_failure(f"the token URL answered {status} without a JSON object")
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise token_failure(f"the token URL answered {status} without an access_token")
    if len(token) > TOKEN_LIMIT or not _B64TOKEN.fullmatch(token):
        raise token_failure("the token URL's access_token cannot be sent as a Bearer token")
    token_type = answer.get("token_type")
    if isinstance(token_type, str) and token_type.lower() != "bearer":
        raise token_failure("the token URL granted a token of another type than Bearer")
    return Granted(token, _expires_in(answer.get("expires_in")))


def _json_object(body: bytes) -> dict | None:
    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def _expires_in(value) -> float | None:
    """``expires_in`` in seconds: a positive number (or a string of digits, as some servers
    send); anything else counts as not said."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None
