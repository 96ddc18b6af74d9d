"""Masking secrets in text: signing secrets (``whsec_…``), private keys (``whsk_…``), API keys
(``whk_…``) and passwords in URLs.

Log lines (webhooks/config/logs.py), messages that name a database, audit entries and the
URLs pages show use it. Standard library only: a command that just names a database need
not import what log lines need (OpenTelemetry, for their trace ids).
"""

from __future__ import annotations

import re

__all__ = ["redact", "mask_url_passwords"]

# The whole of each: URL-safe base64 (API keys, service secrets) or standard base64 with its
# padding (standard secrets, Ed25519 private keys: whsk_).
_SECRETS = re.compile(r"\b(whsec_|whsk_|whk_)[A-Za-z0-9_\-+/]+=*")
# The password runs to the *last* "@" of the authority, as urllib3 and urlsplit read it
# ("https://u:p@ss@host/": the password is "p@ss"); the user part may hold an "@" too.
_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/?#\s]*):[^/?#\s]+@"
)


def mask_url_passwords(text: str, placeholder: str = "***") -> str:
    """``text`` with the password of every ``scheme://user:password@`` replaced by ``placeholder``.

    ``https://user:s3cret@host/path`` becomes ``https://user:***@host/path``:
    what API answers and dashboard pages show of a subscription's URL.
    """
    return _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{placeholder}@", text)


def redact(text: str) -> str:
    """``text`` with signing secrets, private keys, API keys and URL passwords masked."""
    text = _SECRETS.sub(lambda m: m.group(1) + "[redacted]", text)
    return mask_url_passwords(text, "[redacted]")
