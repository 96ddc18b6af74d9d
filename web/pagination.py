"""Keyset pagination: newest first by ``(created_at, id)``, with an opaque cursor.

A cursor names the last row of a page; the next page is every row strictly
older in that order. Unlike an offset, it neither repeats nor skips a row
when rows are inserted between two pages (new rows sort before the cursor),
and each page is one index range scan.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import uuid

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from .errors import ApiError

__all__ = ["encode_cursor", "decode_cursor", "older_than", "keyset_page"]

_VERSION = "1"  # lets the format change later while old cursors are still recognised


def encode_cursor(created_at: dt.datetime, row_id: str) -> str:
    """The cursor that continues after the row ``(created_at, row_id)``."""
    moment = created_at.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")
    raw = f"{_VERSION}|{moment}|{row_id}".encode("ascii")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    """The ``(created_at, id)`` a cursor names; 400 ``invalid_cursor`` if it is not one of ours."""
    try:
        padded = cursor.encode("ascii") + b"=" * (-len(cursor) % 4)
        raw = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
        version, moment, row_id = raw.split("|")
        created_at = dt.datetime.fromisoformat(moment)
        if version != _VERSION or created_at.tzinfo is None:
            raise ValueError(raw)
        return created_at.astimezone(dt.timezone.utc), str(uuid.UUID(row_id))
    except (ValueError, UnicodeError, binascii.Error, OverflowError):
        # OverflowError: a moment in range with its offset (0001-01-01T00:00+14:00) but not in UTC.
        raise ApiError(
            400, "invalid_cursor", "The cursor is not valid; pass next_cursor of a previous page."
        ) from None


def older_than(created_column, id_column, created_at: dt.datetime, row_id: str) -> ColumnElement:
    """Rows after ``(created_at, row_id)`` in newest-first order.

    Spelled as OR/AND rather than a row-value comparison so the column's
    type (UTC datetimes) applies to the bound value on every database. The
    leading ``created_at <=`` repeats what the OR implies so that an index
    on ``(..., created_at, id)`` starts its scan at the cursor: without it,
    page k would read the k - 1 pages before it and throw them away.
    """
    return and_(
        created_column <= created_at,
        or_(created_column < created_at, and_(created_column == created_at, id_column < row_id)),
    )


def keyset_page(
    session: Session, statement: Select, model, cursor: str | None, limit: int
) -> tuple[list, str | None]:
    """One page of ``statement``'s rows of ``model`` (which has ``created_at`` and ``id``),
    newest first, after ``cursor``; and the cursor of the next page, None on the last.

    ``statement`` selects ``model`` with its filters, unordered. An invalid
    cursor raises 400 ``invalid_cursor``.
    """
    if cursor is not None:
        created_at, row_id = decode_cursor(cursor)
        statement = statement.where(older_than(model.created_at, model.id, created_at, row_id))
    # One row more than the page tells whether another page follows.
    rows = list(session.scalars(
        statement.order_by(model.created_at.desc(), model.id.desc()).limit(limit + 1)
    ))
    page = rows[:limit]
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if len(rows) > limit else None
    return page, next_cursor
