"""What an audit entry says: who acted (:class:`Actor`), what they did (:class:`Action`) to
what (:class:`Target`), and the fields it changed, each ``{"from", "to"}``, redacted.

Pure: no I/O. :func:`changes_between` compares two snapshots of a row (plain dicts,
:func:`subscription_fields`) and keeps the fields that differ; :func:`redacted` is the
one rule of what an entry may hold of a value (CONTRACT 10.5): never a secret, a
private key, a client secret, a custom header's value or a URL's password.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Mapping

from webhooks.config.redaction import mask_url_passwords

__all__ = ["REDACTED", "ActorKind", "Actor", "Action", "TargetKind", "Target", "SERVICE",
           "reference", "redacted", "changes_between", "created", "subscription_fields"]

REDACTED = "[redacted]"


class ActorKind(str, enum.Enum):
    """Who acted: a request with an API key, a dashboard or portal session, the operator's
    command line, a product with a publisher key (the publisher API's account routes), or
    the service itself (a pause by the failure rule or a 410)."""

    API_KEY = "api_key"
    PUBLISHER = "publisher"
    DASHBOARD = "dashboard"
    PORTAL = "portal"
    CLI = "cli"
    SERVICE = "service"


@dataclass(frozen=True)
class Actor:
    """One actor: its kind and an id that names it without being usable as a credential
    (see :func:`reference`); None where there is nothing more to say."""

    kind: ActorKind
    id: str | None = None

    @classmethod
    def api_key(cls, api_key_hash: str) -> "Actor":
        """The holder of the API key whose stored SHA-256 is ``api_key_hash``."""
        return cls(ActorKind.API_KEY, reference(api_key_hash))

    @classmethod
    def session(cls, session_id: str, *, portal: bool) -> "Actor":
        """The dashboard session (or the portal link's session) stored as ``session_id``."""
        return cls(ActorKind.PORTAL if portal else ActorKind.DASHBOARD, reference(session_id))

    @classmethod
    def publisher(cls, publisher_id: str) -> "Actor":
        """The holder of the publisher key ``publisher_id`` (its id, not the key)."""
        return cls(ActorKind.PUBLISHER, publisher_id)

    @classmethod
    def cli(cls, user: str | None) -> "Actor":
        """The operator at the command line, as the operating system names them."""
        return cls(ActorKind.CLI, user or None)


SERVICE = Actor(ActorKind.SERVICE)  # the service pausing a subscription by its own rules


class Action(str, enum.Enum):
    """What was done (CONTRACT 10.5; and the account's own changes: created by ``webhooks
    accounts`` or the publisher API, its key rotated and it deleted by the publisher API)."""

    SUBSCRIPTION_CREATED = "subscription.created"
    SUBSCRIPTION_UPDATED = "subscription.updated"
    SUBSCRIPTION_DELETED = "subscription.deleted"
    SUBSCRIPTION_PAUSED = "subscription.paused"
    SUBSCRIPTION_RESUMED = "subscription.resumed"
    SECRET_ROTATED = "secret.rotated"
    SECRET_ROTATION_ACTIVATED = "secret.rotation_activated"
    SECRET_ROTATION_CANCELLED = "secret.rotation_cancelled"
    DELIVERY_REPLAYED = "delivery.replayed"
    SUBSCRIPTION_RECOVERED = "subscription.recovered"
    PORTAL_LINK_CREATED = "portal_link.created"
    ACCOUNT_CREATED = "account.created"
    ACCOUNT_KEY_ROTATED = "account.key_rotated"
    ACCOUNT_DELETED = "account.deleted"


class TargetKind(str, enum.Enum):
    SUBSCRIPTION = "subscription"
    DELIVERY = "delivery"
    PORTAL_LINK = "portal_link"
    ACCOUNT = "account"


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    id: str


_REFERENCE_HEX = 16  # 64 bits: enough to tell keys or sessions apart, useless as one


def reference(digest: str) -> str:
    """A short name for something stored only as a digest (an API key's SHA-256, a session's
    or a portal link's): the digest's first 16 hex characters. A digest already cannot be
    used as the key, cookie or link; this keeps entries short and says no more."""
    return digest[:_REFERENCE_HEX]


# --------------------------------------------------------------------- redaction

_SECRET_FIELDS = frozenset({"secret", "next_secret"})  # HMAC secrets or Ed25519 private keys
_CERTIFICATE_SHOWN = ("fingerprint_sha256", "subject", "not_after")


def _plain(value: object) -> object:
    """``value`` as JSON holds it (datetimes as ISO 8601 text)."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def redacted(field: str, value: object) -> object:
    """What an entry may hold of ``field``'s ``value``: the value, or with its secret parts
    ``"[redacted]"``. None stays None, so an entry still shows that a secret was set or
    removed."""
    if value is None:
        return None
    if field in _SECRET_FIELDS:
        return REDACTED
    if field == "headers" and isinstance(value, Mapping):  # the names, never the values
        return {name: REDACTED for name in value}
    if field == "client_certificate" and isinstance(value, Mapping):
        return {**{name: value.get(name) for name in _CERTIFICATE_SHOWN},
                "private_key": REDACTED}
    if field == "oauth2" and isinstance(value, Mapping):
        return {name: (REDACTED if name == "client_secret" else
                       mask_url_passwords(item, REDACTED) if isinstance(item, str) else item)
                for name, item in value.items()}
    if isinstance(value, str):  # a url (or any text) with a password in it
        return mask_url_passwords(value, REDACTED)
    return _plain(value)


def changes_between(before: Mapping[str, object], after: Mapping[str, object]) -> dict:
    """``{field: {"from", "to"}}`` for each field whose value differs, redacted; {} when
    nothing changed (and so no entry is written)."""
    changed = {}
    for field in sorted(set(before) | set(after)):
        old, new = before.get(field), after.get(field)
        if old != new:
            changed[field] = {"from": redacted(field, old), "to": redacted(field, new)}
    return changed


def created(fields: Mapping[str, object]) -> dict:
    """The changes of something new: each field it was made with, from null."""
    return changes_between({}, {name: value for name, value in fields.items()
                                if value is not None})


# The columns of a subscription an entry reports: what its owner sets, its state and its
# secrets (redacted); not the counters and timers the service moves on its own.
_SUBSCRIPTION_FIELDS = ("url", "event_types", "description", "headers", "signature_scheme",
                        "client_certificate", "oauth2", "status", "paused_reason",
                        "secret", "next_secret", "next_secret_active_at", "deleted_at")


def subscription_fields(subscription, options: tuple[str, ...] = ()) -> dict[str, object]:
    """A snapshot of a subscription (anything with its columns) for :func:`changes_between`:
    the reported columns and the ``options`` (tenants/options.py's settable ones)."""
    return {name: getattr(subscription, name) for name in (*_SUBSCRIPTION_FIELDS, *options)}
