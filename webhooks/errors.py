"""The one tree of exceptions raised by the webhooks core.

::

    WebhooksError
     ├── ConfigError          a WEBHOOKS_* variable has a value that cannot be used
 ├── SchemaNotReady       the database's schema is missing, older or newer than this code's
     ├── InvalidEvent         (also ValueError) unknown event type or data that fails its schema
     ├── NotFound             an object does not exist or belongs to another account
     ├── Conflict             a state transition that the object's state does not allow
     ├── InvalidWindow        (also ValueError) a time window that cannot be used (recover)
     ├── InvalidCredential    (also ValueError) a client certificate or OAuth2 setting that
     │                        cannot be used; ``code`` names the field (API: 400 with it)
     ├── InvalidFilter        (also ValueError) a subscription's filter that cannot be parsed;
     │                        the message names where in it (API: 400 ``invalid_filter``)
     └── TransportError       one delivery attempt could not get a response (raised and
          │                   caught inside webhooks.sender.post; recorded as the attempt's error)
          ├── DestinationRefused  the endpoint resolves to an address the guard refuses
          └── AttemptTimeout      the attempt ran past WEBHOOKS_TIMEOUT

``InvalidSignature`` lives in :mod:`webhooks.signing` (standard library only, so
receivers can vendor that one module) and is re-exported here.
"""

from __future__ import annotations

__all__ = [
    "WebhooksError",
    "ConfigError",
    "SchemaNotReady",
    "InvalidEvent",
    "NotFound",
    "Conflict",
    "InvalidWindow",
    "InvalidCredential",
    "InvalidFilter",
    "TransportError",
    "DestinationRefused",
    "AttemptTimeout",
]


class WebhooksError(Exception):
    """Base of every error the webhooks core raises on purpose."""


class ConfigError(WebhooksError):
    """A configuration variable is malformed; the message names the variable."""


class SchemaNotReady(WebhooksError):
    """The database is not at this version's schema revision; the message says what to run."""


class InvalidEvent(WebhooksError, ValueError):
    """emit_event() was given an unknown type or data that fails the type's schema.

    ``errors`` maps each offending field (dotted path) to a list of messages.
    """

    def __init__(self, message: str, errors: dict | None = None):
        super().__init__(message)
        self.errors = errors or {}


class NotFound(WebhooksError):
    """The object does not exist, or is not visible to the calling account."""


class Conflict(WebhooksError):
    """The requested transition is not allowed in the object's current state."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class InvalidWindow(WebhooksError, ValueError):
    """A time window starts after it ends, or in the future; the message says which."""


class TransportError(WebhooksError):
    """An attempt ended without an HTTP response (network error, time-out, refusal)."""


class DestinationRefused(TransportError):
    """The endpoint's address is not public and private targets are not allowed."""


class AttemptTimeout(TransportError):
    """The attempt did not complete within its deadline (WEBHOOKS_TIMEOUT seconds)."""


class InvalidCredential(WebhooksError, ValueError):
    """A subscription's ``client_certificate`` or ``oauth2`` cannot be used (CONTRACT 10.3):
    ``code`` is the API's error code (``invalid_client_certificate``, ``invalid_oauth2``),
    the message names the field and never quotes a key or a secret."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class InvalidFilter(WebhooksError, ValueError):
    """A subscription's ``filter`` cannot be used (CONTRACT 10.4, events/filters.py): the
    message begins with where in the filter (``filter["data.amount"]["$gt"]: ...``), which
    ``path`` holds alone. The API answers 400 ``invalid_filter``."""

    code = "invalid_filter"

    def __init__(self, message: str, path: str = "filter"):
        super().__init__(message)
        self.path = path
