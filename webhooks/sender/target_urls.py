"""Which endpoint URLs are accepted: well-formed http(s), and public unless allowed.

Checked when a subscription (or an operational endpoint) is created or its
URL changed, so a typo or an internal address is refused at once with a
clear message instead of failing every delivery. This is a courtesy, not the
guard: a host *name* is not resolved here (its DNS answer may change later),
and the transport checks every address it actually connects to
(webhooks.sender.post, netguard). Pure rules, no HTTP: the API's and the
dashboard's answers are web/targets.py's.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import SplitResult, unquote, urlsplit

import idna
from requests.exceptions import RequestException
from requests.models import PreparedRequest
from urllib3.util import parse_url

from webhooks.config import get_settings
from webhooks.config.redaction import mask_url_passwords
from webhooks.sender.netguard import is_public_address

__all__ = ["MAX_URL_LENGTH", "url_problem", "as_sent", "target_refusal", "shown_url",
           "url_to_store"]

MAX_URL_LENGTH = 2048
_SCHEMES = ("http", "https")
_LOCAL_NAMES = ("localhost", "localhost.localdomain")


def as_sent(url: str) -> SplitResult:
    """``url`` read exactly as the transport will read it when it sends.

    requests prepares the URL (urllib3's ``parse_url``, IDNA, re-quoting) and
    its adapter then takes the host and port to connect to from the prepared
    URL with ``urlparse``: so do we. Raises ValueError (or RequestException,
    UnicodeError) for a URL requests would refuse.
    """
    prepared = PreparedRequest()
    prepared.prepare_url(url, None)
    return urlsplit(prepared.url)


def _host_and_port(host: str | None, port: int | None) -> tuple[str, int | None]:
    """A host as one reading gives it, brought to one form: no brackets, unquoted, IDNA, lower case."""
    host = unquote((host or "").strip("[]")).lower()
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")  # as requests encodes it
        except idna.IDNAError:
            pass
    return host, port


def _readings_disagree(url: str, parts: SplitResult, sent: SplitResult) -> str | None:
    """The readings of ``url``'s host and port, if URL parsers differ about them, else None.

    Three readings: ``urlsplit`` of the URL as given (what people and most
    tools read), ``urlparse`` of the prepared URL (what requests connects to)
    and urllib3's ``parse_url`` of it (what urllib3 reads).
    """
    urllib3_reading = parse_url(sent.geturl())
    readings = {
        _host_and_port(parts.hostname, parts.port),
        _host_and_port(sent.hostname, sent.port),
        _host_and_port(urllib3_reading.host, urllib3_reading.port),
    }
    if len(readings) == 1:
        return None
    return ", ".join(sorted(f"{host}:{port or 'default'}" for host, port in readings))


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a subscription endpoint, or None if it can.

    The URL is judged as the transport will send it (:func:`as_sent`), and
    refused when URL parsers read its host or port differently: what is
    checked here is then what will be connected to.
    """
    if not 0 < len(url) <= MAX_URL_LENGTH:
        return f"Must be 1 to {MAX_URL_LENGTH} characters long."
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "Must not contain spaces or control characters."
    if "\\" in url:
        # http://127.0.0.1\@example.com/ : urlsplit reads the host example.com,
        # urllib3 (which sends) reads 127.0.0.1.
        return "Must not contain a backslash: URL parsers disagree about where its host ends."
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not 0-65535
    except ValueError:
        return "Not a valid URL."
    if parts.scheme.lower() not in _SCHEMES:
        return "Must be an http or https URL."
    if not parts.hostname:
        return "Must name a host."
    if port == 0:
        return "Port 0 cannot be connected to."
    try:
        # Whatever requests cannot prepare (an IDNA label it cannot encode, a
        # malformed IPv6 literal) is refused now, not at every attempt.
        sent = as_sent(url)
        disagreement = _readings_disagree(url, parts, sent)
    except (RequestException, ValueError, UnicodeError):
        return "Not a valid URL."
    if disagreement:
        return ("Not a valid URL: URL parsers read its host and port differently "
                f"({disagreement}).")
    return None


def _literal_address(host: str):
    """The IP address ``host`` spells, in any form a resolver accepts, or None."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:
        # Legacy IPv4 spellings that resolvers still accept: 127.1, 0x7f000001, 2130706433.
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def target_refusal(url: str) -> str | None:
    """Why a URL (one :func:`url_problem` accepts) on a non-public address is refused, or
    None if it is not: WEBHOOKS_ALLOW_PRIVATE_TARGETS=true (development, tests) allows
    every host. The reason names only what the caller wrote (a literal address or a
    local name): no name is resolved here, so no internal address is revealed.
    """
    if get_settings().allow_private_targets:
        return None
    host = (as_sent(url).hostname or "").rstrip(".")  # the host that will be connected to
    address = _literal_address(host)
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        reason = f"{host} is a local host name"
    elif address is not None and not is_public_address(address):
        reason = f"{address} is not a public address"
    else:
        return None
    return (f"The url is refused because {reason}; deliveries go only to public "
            "addresses unless WEBHOOKS_ALLOW_PRIVATE_TARGETS is true.")


def shown_url(url: str) -> str:
    """``url`` as every answer shows it: its password, if any, masked (``user:***@``).

    The stored URL keeps the password: it is sent with every delivery.
    """
    return mask_url_passwords(url)


def url_to_store(submitted: str, stored: str) -> str:
    """The URL to keep when ``submitted`` replaces ``stored``.

    A client (or the dashboard's edit form) that sends back the URL as it was
    shown, password masked, means "unchanged": the stored password stays.
    """
    return stored if submitted == shown_url(stored) else submitted
