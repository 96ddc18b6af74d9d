"""The data folder and its files are the owner's alone: folders 0700, files 0600.

``WEBHOOKS_DATA_DIR`` holds the SQLite database (every signing secret is in
it), the dashboard's session key, beat's schedule and the embedded broker's
messages. Created with the default umask (022) they were world-readable, so
any local user could read the secrets. Every place that creates one of them
goes through these helpers; a folder or file that already exists with wider
permissions (made by an older version) is narrowed, if this user owns it.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "private_dir", "private_file",
           "create_private_file", "private_umask"]

log = logging.getLogger("webhooks.datadir")  # its name from before the move: log searches use it

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# Files SQLite keeps beside a database (they copy the database file's mode when created).
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _narrow(path: Path, mode: int) -> None:
    """chmod ``path`` to ``mode`` if it grants more and this user owns it."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return
    if status.st_mode & 0o777 & ~mode == 0 or status.st_uid != os.geteuid():
        return
    try:
        path.chmod(mode)
    except OSError as error:  # a read-only mount: say so, keep running
        log.warning("could not make %s private (%s)", path, type(error).__name__)


def private_dir(folder: Path) -> Path:
    """Create ``folder`` (and its parents) if missing; the folder itself ends mode 0700."""
    folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    _narrow(folder, PRIVATE_DIR_MODE)
    return folder


def private_file(path: Path) -> None:
    """Narrow an existing ``path`` to mode 0600 (nothing if it does not exist)."""
    _narrow(path, PRIVATE_FILE_MODE)


def create_private_file(path: Path) -> None:
    """Make ``path`` exist, empty, with mode 0600; an existing one is narrowed instead.

    For SQLite: an empty file is an empty database, and the ``-wal``/``-shm``
    files SQLite makes later take this file's mode. Existing companions are
    narrowed too.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except FileExistsError:
        private_file(path)
    for suffix in SQLITE_COMPANIONS:
        private_file(path.with_name(path.name + suffix))


@contextmanager
def private_umask() -> Iterator[None]:
    """Files and folders created inside the block are the owner's only (umask 077).

    The umask is process-wide: use it only around a creation that offers no
    mode argument, in a process that is not creating files elsewhere meanwhile.
    """
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)
