"""A moment less a fixed span, written in each engine's SQL (:class:`earlier_by`).

For a bound that follows a column rather than a value bound from Python: the
lower bound on ``attempts.started_at`` of a subquery correlated with its
delivery (storage/attempt_window.py). PostgreSQL subtracts an interval
(``timestamp - interval`` is immutable, so the executor can prune the day
partitions on it for each outer row); SQLite keeps times as text and shifts
them with ``datetime()``, whose answer drops the fraction of a second: a bound
at most a second earlier, never later.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, literal_column
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["earlier_by"]


class earlier_by(FunctionElement):  # lower case: an SQL expression, as SQLAlchemy names them
    """``moment`` (a timestamp expression) less ``span`` (whole seconds), as a timestamp."""

    type = DateTime()
    name = "earlier_by"
    inherit_cache = True

    def __init__(self, moment, span: dt.timedelta):
        seconds = int(span.total_seconds())
        if seconds != span.total_seconds() or seconds < 0:
            raise ValueError(f"a span of whole seconds, not negative: {span!r}")
        # A literal (our own integer): the statement's text, and so its plan, carries it.
        super().__init__(moment, literal_column(str(seconds)))


def _parts(element: earlier_by, compiler, **kw) -> tuple[str, str]:
    moment, seconds = element.clauses.clauses
    return compiler.process(moment, **kw), compiler.process(seconds, **kw)


@compiles(earlier_by)  # PostgreSQL (and the default dialect that prints a statement)
def _as_interval(element: earlier_by, compiler, **kw) -> str:
    moment, seconds = _parts(element, compiler, **kw)
    return f"({moment} - INTERVAL '{seconds} seconds')"


@compiles(earlier_by, "sqlite")
def _as_text(element: earlier_by, compiler, **kw) -> str:
    moment, seconds = _parts(element, compiler, **kw)
    return f"datetime({moment}, '-{seconds} seconds')"
