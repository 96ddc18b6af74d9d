"""Name the part of the service a profiled stack was in (pure; the profile scenario uses it).

A stack is a list of py-spy frames, root first, each written
``function (path/to/file.py:line)``, the path relative to site-packages or
the project (``celery/app/trace.py``, ``webhooks/lifecycle/claim.py``). Read from the leaf up, the first frame
whose file belongs to one of ``PARTS`` names the part: a JSON encoder called
by our log formatter is logging, SQLAlchemy called by our claim is the
database. A stack with no such frame is "other".
"""

from __future__ import annotations

__all__ = ["PARTS", "categorise"]

# (part, fragments of a frame's file path), tried in this order for each frame.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging", ("logging/", "webhooks/config/logs.py")),
    ("database (SQLAlchemy, psycopg2)", ("sqlalchemy/", "psycopg2/", "webhooks/storage/prepared.py")),
    # Not socket.py or ssl.py: redis-py reads through them too; the caller decides.
    ("HTTP (requests, urllib3, sockets)", ("requests/", "urllib3/", "http/client.py",
                                           "webhooks/sender/connections.py",
                                           "webhooks/sender/deadline.py", "webhooks/sender/post.py",
                                           "webhooks/sender/netguard.py")),
    ("signing (HMAC)", ("webhooks/signing.py", "hmac.py", "hashlib.py")),
    ("broker (kombu, redis-py)", ("kombu/", "redis/")),
    ("Celery (task machinery)", ("celery/", "billiard/", "vine/")),
    ("service logic (webhooks/)", ("webhooks/", "worker/")),
)


def _file_of(frame: str) -> str:
    """The file part of ``function (file:line)``."""
    start = frame.rfind("(")
    return frame[start + 1:] if start >= 0 else frame


def categorise(stack: list[str]) -> str:
    """The part the leaf-most recognised frame of ``stack`` belongs to, else "other"."""
    for frame in reversed(stack):
        path = _file_of(frame)
        for part, fragments in PARTS:
            if any(fragment in path for fragment in fragments):
                return part
    return "other"
