"""kombu's filesystem transport (the embedded broker), with message files that appear whole.

kombu writes a message straight into its final file name. A worker that lists
the folder in that moment moves the file away and reads it before the writer
has finished: it reads nothing, the JSON error escapes the consumer, and
Celery stops the worker ("Unrecoverable error: JSONDecodeError", seen once in
CI while beat sent a sweep every second). Here each message is written under a
name the reader skips (``….msg.part``) and renamed into place when complete;
a rename within one folder is atomic, so a reader sees all of a message or
nothing of it.

celeryconfig.py selects this transport for ``filesystem://`` URLs.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

__all__ = ["Transport", "PARTIAL_SUFFIX"]

# kombu's reader takes a file only if the name after its first dot is exactly
# "<queue>.msg", so a name with this suffix is never read.
PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
    """The filesystem channel with an atomic ``_put``."""

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: write it aside, then rename it into the queue."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """``filesystem://`` with whole messages only."""

    Channel = Channel
