"""Transactions PostgreSQL rolled back to end a conflict between transactions: safe to repeat.

A deadlock's victim (SQLSTATE ``40P01``, "deadlock detected") and a
serialization failure (``40001``) are told so with their whole transaction
rolled back: nothing of it was applied, whichever statement it reached, so
running it again from the start is always safe, and it usually succeeds at
once (the transaction it conflicted with went on). The attempt path runs its
claims and records again up to :data:`CONFLICT_TRIES` times
(services/attempt.py); a record that gave up only then becomes a failed
attempt, where it used to at the first deadlock, and the receiver got the
attempt again although it had answered 2xx (docs/reliability.md).
"""

from __future__ import annotations

__all__ = ["ROLLED_BACK_CODES", "CONFLICT_TRIES", "rolled_back_by_conflict"]

#: deadlock_detected, serialization_failure: the transaction was rolled back whole.
ROLLED_BACK_CODES = frozenset({"40P01", "40001"})
#: Runs of one transaction at most, while each ends as a conflict's victim.
CONFLICT_TRIES = 3


def rolled_back_by_conflict(error: BaseException) -> bool:
    """True if ``error`` (SQLAlchemy's, wrapping the driver's) says PostgreSQL rolled the
    transaction back as a deadlock's victim or a serialization failure."""
    return getattr(getattr(error, "orig", None), "pgcode", None) in ROLLED_BACK_CODES
