"""Credentials a subscription's receiver requires (CONTRACT 10.3): which are accepted, how
they are stored, and what answers and pages show of them.

Two write-only options, each a JSON object on create and PATCH (``null``
removes it), stored in its own column as the signing secret is:

- ``client_certificate``: ``{"certificate": PEM (the chain, leaf first),
  "private_key": PEM (unencrypted)}``, presented on every attempt to an
  ``https`` endpoint (sender/client_tls.py). Stored with the leaf's SHA-256
  fingerprint, subject and expiry, which are all that is ever shown.
- ``oauth2``: ``{"token_url", "client_id", "client_secret", "scope"?,
  "audience"?}``, the client-credentials grant (sender/oauth2.py). Shown
  without ``client_secret``.

Pure rules: the token URL's own checks (well-formed, public, ``https``) are
handed in by the caller (services/credentials.py), which knows the guard's
rules. Every refusal is an :class:`InvalidCredential` whose code names the
option and whose message names the field, never quoting a key or a secret.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Callable, Mapping

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization

from webhooks.errors import InvalidCredential

__all__ = ["CLIENT_CERTIFICATE", "OAUTH2", "CERTIFICATE_ERROR", "OAUTH2_ERROR", "PEM_LIMIT",
           "EXPIRY_WARNING_DAYS", "client_certificate", "oauth2", "shown_certificate",
           "shown_oauth2", "check_endpoint", "check_headers", "expires_soon"]

CLIENT_CERTIFICATE, OAUTH2 = "client_certificate", "oauth2"
CERTIFICATE_ERROR, OAUTH2_ERROR = "invalid_client_certificate", "invalid_oauth2"
PEM_LIMIT = 64 * 1024  # characters of each PEM field accepted
TEXT_LIMIT = 1000  # characters of client_id, client_secret, scope, audience accepted
EXPIRY_WARNING_DAYS = 14  # the dashboard warns this many days before the certificate expires

_CERTIFICATE_FIELDS = frozenset({"certificate", "private_key"})
_OAUTH2_REQUIRED = ("token_url", "client_id", "client_secret")
_OAUTH2_OPTIONAL = ("scope", "audience")
_PRINTABLE = re.compile(r"[\x20-\x7e]+")


def _certificate_error(message: str) -> InvalidCredential:
    return InvalidCredential(CERTIFICATE_ERROR, message)


def _oauth2_error(message: str) -> InvalidCredential:
    return InvalidCredential(OAUTH2_ERROR, message)


def client_certificate(value: object) -> dict | None:
    """The stored form of a ``client_certificate`` as given (None: removed): its PEM and the
    leaf's ``fingerprint_sha256``, ``subject`` and ``not_after``."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != _CERTIFICATE_FIELDS:
        raise _certificate_error("client_certificate must be an object with exactly "
                                 "`certificate` and `private_key` (PEM strings), or null")
    for name in sorted(_CERTIFICATE_FIELDS):
        if not isinstance(value[name], str) or not 0 < len(value[name]) <= PEM_LIMIT:
            raise _certificate_error(f"client_certificate.{name} must be a PEM string of at "
                                     f"most {PEM_LIMIT:,} characters")
    chain = _certificates(value["certificate"])
    key = _private_key(value["private_key"])
    if _public_bytes(key.public_key()) != _public_bytes(chain[0].public_key()):
        raise _certificate_error("client_certificate.private_key does not match the "
                                 "certificate (the first one in client_certificate.certificate)")
    leaf = chain[0]
    return {
        "certificate": value["certificate"],
        "private_key": value["private_key"],
        "fingerprint_sha256": leaf.fingerprint(hashes.SHA256()).hex(),
        "subject": leaf.subject.rfc4514_string(),
        "not_after": _utc_text(leaf.not_valid_after_utc),
    }


def _certificates(pem: str) -> list[x509.Certificate]:
    try:
        chain = x509.load_pem_x509_certificates(pem.encode("utf-8"))
    except (ValueError, UnicodeError):
        raise _certificate_error("client_certificate.certificate is not a PEM certificate "
                                 "chain (-----BEGIN CERTIFICATE-----, the leaf first)") from None
    return chain


def _private_key(pem: str):
    try:
        return serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except TypeError:
        raise _certificate_error("client_certificate.private_key is encrypted; give it "
                                 "unencrypted (it is stored as the signing secret is)") from None
    except (ValueError, UnicodeError, UnsupportedAlgorithm):
        raise _certificate_error("client_certificate.private_key is not a PEM private "
                                 "key") from None


def _public_bytes(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _utc_text(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def oauth2(value: object, token_url_refusal: Callable[[str], str | None]) -> dict | None:
    """The stored form of an ``oauth2`` as given (None: removed). ``token_url_refusal``
    says why a token URL cannot be used (the guard's rules for an endpoint), or None."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _oauth2_error("oauth2 must be an object {token_url, client_id, client_secret, "
                            "scope?, audience?}, or null")
    unknown = sorted(set(value) - {*_OAUTH2_REQUIRED, *_OAUTH2_OPTIONAL})
    if unknown:
        raise _oauth2_error(f"oauth2 has unknown fields: {', '.join(unknown)}")
    missing = [name for name in _OAUTH2_REQUIRED if value.get(name) in (None, "")]
    if missing:
        raise _oauth2_error(f"oauth2 needs {', '.join(missing)}")
    stored = {}
    for name in (*_OAUTH2_REQUIRED, *_OAUTH2_OPTIONAL):
        given = value.get(name)
        if given is None or (name in _OAUTH2_OPTIONAL and given == ""):
            continue
        if name != "token_url" and (not isinstance(given, str) or len(given) > TEXT_LIMIT
                                    or not _PRINTABLE.fullmatch(given)):
            raise _oauth2_error(f"oauth2.{name} must be printable ASCII text of 1 to "
                                f"{TEXT_LIMIT:,} characters")
        stored[name] = given
    if not isinstance(stored["token_url"], str):
        raise _oauth2_error("oauth2.token_url must be a URL")
    refusal = token_url_refusal(stored["token_url"])
    if refusal:
        raise _oauth2_error(f"oauth2.token_url is refused: {refusal}")
    return stored


def check_endpoint(url: str, certificate: Mapping | None) -> None:
    """A client certificate is presented on ``https`` alone: refuse it for an ``http`` url."""
    if certificate is not None and not url.lower().startswith("https:"):
        raise _certificate_error("client_certificate needs an https endpoint; the url is not "
                                 "https")


def check_headers(headers: Mapping[str, str] | None, settings: Mapping | None) -> None:
    """``oauth2`` sets the Authorization header: refuse it beside a custom one."""
    if settings is not None and any(name.lower() == "authorization" for name in headers or {}):
        raise _oauth2_error("oauth2 sends the Authorization header itself: remove "
                            "headers.Authorization, or oauth2")


def shown_certificate(stored: Mapping | None) -> dict | None:
    """What answers and pages show of a stored client certificate: never the key."""
    if stored is None:
        return None
    return {name: stored[name] for name in ("fingerprint_sha256", "subject", "not_after")}


def shown_oauth2(stored: Mapping | None) -> dict | None:
    """What answers and pages show of stored ``oauth2`` settings: never the client secret."""
    if stored is None:
        return None
    return {name: value for name, value in stored.items() if name != "client_secret"}


def expires_soon(stored: Mapping | None, now: dt.datetime) -> bool:
    """True when the client certificate expires within EXPIRY_WARNING_DAYS of ``now`` (or
    has expired): the dashboard warns."""
    if stored is None:
        return False
    not_after = dt.datetime.strptime(stored["not_after"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=dt.timezone.utc)
    return not_after - now <= dt.timedelta(days=EXPIRY_WARNING_DAYS)
