"""Why an attempt got no usable response: a closed set of kinds, each with its sentence.

The sentence is what the attempt's ``error`` shows to the tenant and the
operator (README, "Attempt errors"); the kind is what code branches on. Both
come from one table, so a text never drifts from its kind.

Exceptions are mapped here and nowhere else, from a closed set of types
(as httpx does in ``_transports/default.py``); the seams of the connection
(connections.py) record the kind of what failed there, because by the time
requests raises, urllib3 has wrapped the real cause, sometimes as a string.
"""

from __future__ import annotations

import enum
import http.client
import ssl
from dataclasses import dataclass

import requests
import urllib3.exceptions

__all__ = ["ErrorKind", "Failure", "failure", "tls_failure", "from_exception", "internal_error"]


class ErrorKind(str, enum.Enum):
    """What went wrong in an attempt that got no usable HTTP response."""

    TIMEOUT = "timeout"
    DNS = "dns"
    REFUSED = "connection_refused"
    CONNECTION = "connection"
    DESTINATION = "destination_refused"
    TLS_UNTRUSTED = "tls_untrusted"
    TLS_EXPIRED = "tls_expired"
    TLS_HOSTNAME = "tls_hostname"
    TLS = "tls"
    PROTOCOL = "protocol"
    INTERNAL = "internal"
    PROXY = "proxy"  # the egress proxy could not be reached or refused the tunnel
    OAUTH2 = "oauth2"  # no token from the subscription's OAuth2 token URL: not sent


@dataclass(frozen=True)
class Failure:
    """One failed attempt's kind and its sentence (never holds a secret or a body)."""

    kind: ErrorKind
    text: str


# The phases of an attempt, named in time-out sentences.
PHASE_WORDS = {
    "dns": "the DNS look-up of the endpoint's host took longer than {t:g} s",
    "connect": "no TCP connection to the endpoint within {t:g} s",
    "tls": "the TLS handshake did not complete within {t:g} s",
    "response": "no complete response within {t:g} s",
}


def timeout(phase: str, seconds: float) -> Failure:
    """The attempt's deadline passed during ``phase`` (one of PHASE_WORDS)."""
    return Failure(ErrorKind.TIMEOUT, "timeout: " + PHASE_WORDS[phase].format(t=seconds))


def failure(kind: ErrorKind, detail: str = "") -> Failure:
    """A Failure of ``kind`` with its standard sentence, ``detail`` appended in parentheses
    (after a colon for the proxy's and the token URL's, whose details are sentences)."""
    if kind in (ErrorKind.PROXY, ErrorKind.OAUTH2):
        return Failure(kind, f"{_SENTENCES[kind]}: {detail}" if detail else _SENTENCES[kind])
    text = _SENTENCES[kind] + (f" ({detail})" if detail else "")
    return Failure(kind, text)


_SENTENCES = {
    ErrorKind.DNS: "DNS lookup failed: the endpoint's host name does not resolve",
    ErrorKind.REFUSED: "connection refused",
    ErrorKind.CONNECTION: "connection error: the endpoint closed the connection or could not be reached",
    ErrorKind.DESTINATION: "refused",
    ErrorKind.TLS_UNTRUSTED: "TLS error: certificate not trusted",
    ErrorKind.TLS_EXPIRED: "TLS error: certificate expired or not yet valid",
    ErrorKind.TLS_HOSTNAME: "TLS error: certificate is for another host name",
    ErrorKind.TLS: "TLS error: handshake failed",
    ErrorKind.PROTOCOL: "protocol error: the endpoint's answer is not valid HTTP",
    ErrorKind.INTERNAL: "internal error",
    ErrorKind.PROXY: "proxy error",
    ErrorKind.OAUTH2: "oauth2 error",
}

# OpenSSL's X509_V_ERR_* codes (x509_vfy.h) as ssl.SSLCertVerificationError.verify_code.
_EXPIRED_CODES = {9, 10, 13, 14}  # not yet valid, expired, bad notBefore / notAfter field
_HOSTNAME_CODES = {62, 63, 64}  # host name, e-mail or IP address mismatch


def tls_failure(exc: ssl.SSLError) -> Failure:
    """Which TLS check failed: untrusted, expired, another host name, or the handshake."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = getattr(exc, "verify_code", None)
        reason = (getattr(exc, "verify_message", None) or "").strip()
        if code in _EXPIRED_CODES:
            return failure(ErrorKind.TLS_EXPIRED, reason)
        if code in _HOSTNAME_CODES or "hostname" in str(exc).lower():
            return failure(ErrorKind.TLS_HOSTNAME)
        return failure(ErrorKind.TLS_UNTRUSTED, reason)
    return failure(ErrorKind.TLS, getattr(exc, "reason", None) or type(exc).__name__)


def internal_error(exc: BaseException) -> Failure:
    """A fault of ours (a bug, the database refusing the record): never the receiver's."""
    return Failure(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}")


# The exceptions requests and urllib3 raise once a connection exists, most
# specific first. Anything else from the sender is an internal error.
_PROTOCOL_ERRORS = (
    http.client.HTTPException,  # bad status line, too many headers, a line too long
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.DecodeError,
    urllib3.exceptions.HeaderParsingError,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
    requests.exceptions.InvalidHeader,
)


def from_exception(exc: BaseException) -> Failure:
    """Map an exception raised after the connection's seams recorded nothing of their own."""
    protocol_cause = _protocol_cause(exc)
    if protocol_cause is not None:
        return failure(ErrorKind.PROTOCOL, _protocol_detail(protocol_cause))
    if isinstance(exc, (requests.exceptions.SSLError, urllib3.exceptions.SSLError, ssl.SSLError)):
        return failure(ErrorKind.TLS)
    if isinstance(exc, (requests.exceptions.ConnectionError, urllib3.exceptions.HTTPError,
                        ConnectionError)):
        return failure(ErrorKind.CONNECTION)
    if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                        requests.exceptions.InvalidSchema, urllib3.exceptions.LocationParseError)):
        return failure(ErrorKind.CONNECTION, "the endpoint URL cannot be used")
    return internal_error(exc)


def _protocol_cause(exc: BaseException) -> BaseException | None:
    """The HTTP-level parse error inside ``exc``'s explicit chain (args and __cause__), if any.

    requests wraps urllib3's ProtocolError, which carries http.client's
    exception as its second argument: only exception objects are followed.
    """
    seen, todo = [], [exc]
    while todo and len(seen) < 8:
        current = todo.pop(0)
        if not isinstance(current, BaseException) or any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, http.client.HTTPException) and not _is_disconnect(current):
            return current
        todo += [arg for arg in current.args if isinstance(arg, BaseException)]
        todo.append(current.__cause__)
    return next((e for e in seen if isinstance(e, _PROTOCOL_ERRORS)
                 and not _is_disconnect(e)), None)


_HUNG_UP = (ConnectionError, http.client.RemoteDisconnected, http.client.IncompleteRead,
            urllib3.exceptions.IncompleteRead)


def _is_disconnect(exc: BaseException) -> bool:
    """The peer hung up (before or during the answer): a connection error, not bad HTTP."""
    return isinstance(exc, _HUNG_UP) or any(
        isinstance(arg, _HUNG_UP) for arg in getattr(exc, "args", ()))


def _protocol_detail(exc: BaseException) -> str:
    """A short, fixed phrase for the parse error (never the receiver's bytes)."""
    if isinstance(exc, http.client.BadStatusLine):
        return "bad status line"
    if isinstance(exc, http.client.LineTooLong):
        return "a header line is too long"
    if "headers" in str(exc):
        return "too many headers"
    if isinstance(exc, (requests.exceptions.ChunkedEncodingError,
                        urllib3.exceptions.ProtocolError)):
        return "the body ended early or is malformed"
    return type(exc).__name__
