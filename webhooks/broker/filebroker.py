"""kombu's filesystem transport (the embedded broker), with message files that appear whole.

kombu writes a message straight into its final file name. A worker that lists
the folder in that moment moves the file away and reads it before the writer
has finished: it reads nothing, the JSON error escapes the consumer, and
Celery stops the worker ("Unrecoverable error: JSONDecodeError", seen once in
CI while beat sent a sweep every second). Here each message is written under a
name the reader skips (``….msg.part``) and renamed into place when complete;
a rename within one folder is atomic, so a reader sees all of a message or
nothing of it. A file that cannot be parsed anyway is skipped, not fatal.

celeryconfig.py selects this transport for ``filesystem://`` URLs.
"""

from __future__ import annotations

import logging
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

from webhooks.config.datadir import PRIVATE_FILE_MODE

__all__ = ["Transport", "PARTIAL_SUFFIX"]

# kombu's reader takes a file only if the name after its first dot is exactly
# "<queue>.msg", so a name with this suffix is never read.
PARTIAL_SUFFIX = ".part"


log = logging.getLogger("webhooks.filebroker")  # its name from before the move: log searches use it


def _private(path: str, flags: int) -> int:
    """Open a new message file mode 0600: the data folder is its owner's alone (datadir.py)."""
    return os.open(path, flags, PRIVATE_FILE_MODE)


class Channel(filesystem.Channel):
    """The filesystem channel with an atomic ``_put`` and a ``_get`` that skips garbage."""

    def _get(self, queue):
        """The next readable message of ``queue``.

        A file that is not a message (left by an older version, or written by
        hand) would otherwise stop the worker at every start. kombu has
        already removed it when it fails to parse; losing a message is safe
        here, because the sweep re-sends any delivery that is overdue.
        """
        while True:
            try:
                return super()._get(queue)
            except ValueError as exc:  # JSON or text decoding
                log.warning("embedded broker: skipped a message file that could not be read "
                            "(%s); the sweep re-sends its delivery", type(exc).__name__)

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: write it aside, then rename it into the queue."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb", opener=_private) as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """``filesystem://`` with whole messages only."""

    Channel = Channel

    # The URL is shown as given (as_uri), not parsed into host, user and password: a folder
    # has none, and kombu's own rendering masked a password that is not there
    # ("webhooks.broker.filebroker:Transport://:**@localhost//" in the worker's banner and
    # its "Connected to" line, which the JSON log turned into ":[redacted]@").
    can_parse_url = True

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        """How Celery and kombu show this broker: ``filesystem://``, the URL it was given."""
        return uri if "://" in (uri or "") else "filesystem://"

    @property
    def default_connection_params(self):
        """No default host: a folder has none.

        kombu's virtual transports default to "localhost", and a connection
        without a host then logs the WARNING "No hostname was supplied.
        Reverting to default 'localhost'" each time it is made (every worker
        and web process, every publish). Without the default, nothing is
        logged; kombu still shows the URL as ``…@localhost//``.
        """
        return {"port": self.default_port}
