"""The key that signs the dashboard's session cookie (and its CSRF tokens).

``WEBHOOKS_SECRET_KEY`` when it is set. Otherwise a random key is made once
and kept in ``<data dir>/secret_key`` (mode 0600, folder 0700), so a restart keeps people
signed in and the several workers of one gunicorn agree on it. Several web
hosts that do not share a data folder must set ``WEBHOOKS_SECRET_KEY``. The
key is never logged.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from webhooks.config import Settings
from webhooks.config.datadir import private_dir

__all__ = ["ENV_VAR", "FILE_NAME", "session_secret_key"]

log = logging.getLogger(__name__)

ENV_VAR = "WEBHOOKS_SECRET_KEY"
FILE_NAME = "secret_key"
_KEY_BYTES = 48


def _read(path: Path) -> str | None:
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    return key or None


def _persisted_key(folder: Path) -> str:
    """The key kept in ``folder``, made now if there is none yet."""
    path = folder / FILE_NAME
    existing = _read(path)
    if existing:
        return existing
    private_dir(folder)
    # Written whole under a private name, then linked into place: link() fails
    # if another worker got there first, and nobody ever reads a half-written key.
    temporary = folder / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(secrets.token_urlsafe(_KEY_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it: use theirs
    finally:
        temporary.unlink(missing_ok=True)
    key = _read(path)
    if not key:
        raise OSError(f"{path} is empty")
    return key


def session_secret_key(settings: Settings) -> str:
    """The session signing key: WEBHOOKS_SECRET_KEY, the data folder's, or (failing both) a random one."""
    if settings.secret_key:
        return settings.secret_key  # checked for length when the settings were read
    try:
        return _persisted_key(settings.data_dir)
    except OSError as error:
        log.warning(
            "could not keep the dashboard's session key in %s (%s); using a key for this "
            "process only, so sign-ins end when it restarts: set %s",
            settings.data_dir, type(error).__name__, ENV_VAR,
        )
        return secrets.token_urlsafe(_KEY_BYTES)
