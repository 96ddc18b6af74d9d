"""Run one delivery attempt, and run the sweep: claim, send, decide, record.

This is the orchestration a worker task calls; it owns two short
transactions per attempt (claim, record) and holds none while the POST is in
flight. What happens next is decided in policy.py; the POST itself is in
transport.py.
"""

from __future__ import annotations

import functools
import logging
import time

from sqlalchemy.exc import OperationalError

from . import attempts, policy, store
from .countdowns import CountdownBudget
from .config import Settings, get_settings
from .db import get_engine, session_scope
from .dispatch import dispatch
from .envelope import MODE
from .models import utcnow
from .signing import sign
from .transport import HttpSender, Sender

__all__ = ["run_attempt", "run_sweep", "delivery_headers", "default_sender"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def _budget(maximum: int) -> CountdownBudget:
    return CountdownBudget(maximum)


@functools.lru_cache(maxsize=4)
def _sender(timeout: float, allow_private: bool) -> HttpSender:
    return HttpSender(timeout=timeout, allow_private=allow_private)


def default_sender(settings: Settings) -> Sender:
    """The process's HTTP sender for these settings (connection pools are reused)."""
    return _sender(settings.timeout, settings.allow_private_targets)


def delivery_headers(claim: attempts.Claim, settings: Settings, timestamp: int) -> dict[str, str]:
    """The seven headers of SPEC 2.4, signed with ``timestamp`` (unix seconds, taken at send time)."""
    header = settings.header
    return {
        "Content-Type": "application/json",
        "User-Agent": f"{settings.service_name}-Webhooks/{claim.version}",
        "Accept-Encoding": "identity",
        header("Version"): claim.version,
        header("Signature"): sign(claim.secret, claim.body, timestamp),
        header("Event"): claim.event_type,
        header("Mode"): MODE,
        header("Event-Id"): claim.event_id,
        header("Delivery-Id"): claim.delivery_id,
        header("Attempt"): str(claim.attempt_number),
    }


def run_attempt(
    delivery_id: str,
    attempt_count: int,
    *,
    sender: Sender | None = None,
    settings: Settings | None = None,
) -> str | None:
    """Make the next attempt of a delivery; returns its new status, or None if not claimed.

    Two short transactions (claim, record); none is open while the POST is in flight.
    """
    settings = settings or get_settings()
    # No pre-ping on the hot path (a round trip per transaction): a dropped
    # connection is retried once instead, see _in_transaction.
    engine = get_engine(pre_ping=False)
    claim = _in_transaction(
        engine,
        lambda connection: attempts.claim(connection, delivery_id, attempt_count, utcnow(),
                                          settings.max_in_flight),
        f"claiming delivery {delivery_id}",
    )
    if claim is None:
        return None
    started_at = utcnow()
    sender = sender or default_sender(settings)
    result = sender(claim.url, claim.body, delivery_headers(claim, settings, int(time.time())))
    decision = policy.decide(claim.attempt_number, result.status_code, settings.retry_delays)
    record = _in_transaction(
        engine,
        lambda connection: _record(connection, claim, result, decision, started_at, settings),
        f"recording delivery {delivery_id}",
    )
    if record is None:
        log.warning("attempt %d of delivery %s finished after its claim was taken back",
                    claim.attempt_number, delivery_id)
        return None
    _log_attempt(claim, result, decision, record, settings)
    to_publish = [*([record.dispatch] if record.dispatch is not None else []), *record.released]
    if to_publish:
        dispatch(to_publish)
    return record.status


def _in_transaction(engine, work, doing: str):
    """``work(connection)`` in a transaction; once more on a fresh connection if it was dropped.

    Safe to repeat for both steps of an attempt. The record is conditional on
    the claim (status sending, this attempt count), so it applies at most
    once; without the retry, a database restart between POST and record costs
    a duplicate attempt. A claim whose commit reached the database before the
    connection dropped finds itself already claimed the second time and sends
    nothing; the sweep takes that claim back after WEBHOOKS_RECOVER_AFTER.
    """
    for try_number in (1, 2):
        try:
            with engine.begin() as connection:
                return work(connection)
        except OperationalError as exc:
            if try_number == 2 or not exc.connection_invalidated:
                raise
            log.warning("database connection lost while %s; retrying once", doing)
    return None


def _record(connection, claim, result, decision, started_at, settings) -> attempts.AttemptRecord | None:
    """Record the attempt; a short retry rides a countdown only while the cap has room."""
    now = utcnow()
    wants_countdown = decision.outcome is policy.Outcome.RETRY and policy.rides_countdown(
        decision.retry_after, settings.countdown_limit
    )
    countdown_allowed = not wants_countdown or _budget(settings.countdown_max).take(connection, now)
    return attempts.record_attempt(
        connection,
        claim,
        started_at=started_at,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=result.error,
        excerpt=result.excerpt,
        decision=decision,
        now=now,
        countdown_limit=settings.countdown_limit,
        pause_after=settings.pause_after,
        countdown_allowed=countdown_allowed,
    )


def _log_attempt(claim, result, decision, record, settings) -> None:
    """One structured line per attempt: ids and outcome, never the secret or the body."""
    log.info(
        "delivery attempt %d of %s: %s",
        claim.attempt_number,
        claim.delivery_id,
        decision.outcome.value,
        extra={
            "delivery_id": claim.delivery_id,
            "event_id": claim.event_id,
            "subscription_id": claim.subscription_id,
            "attempt": claim.attempt_number,
            "status_code": result.status_code,
            "outcome": decision.outcome.value,
        },
    )
    if record.paused_subscription:
        log.warning("subscription %s paused after %d consecutive failures",
                    claim.subscription_id, settings.pause_after)


def run_sweep(settings: Settings | None = None) -> int:
    """Publish what the sweep finds (see store.sweep); returns how many messages it sent."""
    settings = settings or get_settings()
    with session_scope() as session:
        found = store.sweep(
            session,
            utcnow(),
            timeout=settings.timeout,
            recover_after=settings.recover_after,
            batch=settings.sweep_batch,
            max_in_flight=settings.max_in_flight,
        )
    parked = dispatch(found)
    return len(found) - parked
