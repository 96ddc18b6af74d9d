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
from typing import NamedTuple

from sqlalchemy.exc import OperationalError

from . import attempts, policy, store
from .countdowns import CountdownBudget
from .config import Settings, get_settings
from .db import get_engine, session_scope
from .dispatch import dispatch
from .envelope import MODE
from .failures import internal_error
from .models import utcnow
from .signing import sign
from .storable import storable_text
from .transport import AttemptResult, HttpSender, Sender

__all__ = ["run_attempt", "run_sweep", "delivery_headers", "default_sender"]

log = logging.getLogger(__name__)

ERROR_TEXT_LIMIT = 500  # characters of an attempt's error kept (ours are far shorter)


class _Recorded(NamedTuple):
    """A recorded attempt: what the sender gave, what was decided, what the record led to."""

    result: AttemptResult
    decision: policy.Decision
    record: attempts.AttemptRecord


@functools.lru_cache(maxsize=4)
def _budget(maximum: int) -> CountdownBudget:
    return CountdownBudget(maximum)


@functools.lru_cache(maxsize=4)
def _sender(timeout: float, allow_private: bool, ca_bundle: str | None) -> HttpSender:
    return HttpSender(timeout=timeout, allow_private=allow_private, ca_bundle=ca_bundle)


def default_sender(settings: Settings) -> Sender:
    """The process's HTTP sender for these settings (connection pools are reused)."""
    return _sender(settings.timeout, settings.allow_private_targets, settings.ca_bundle)


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
    result = _send(sender or default_sender(settings), claim, settings)
    recorded = _record_or_internal_error(engine, claim, result, started_at, settings)
    if recorded is None:
        log.warning("attempt %d of delivery %s finished after its claim was taken back",
                    claim.attempt_number, delivery_id)
        return None
    _log_attempt(claim, recorded, settings)
    record = recorded.record
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


def _send(sender: Sender, claim: attempts.Claim, settings: Settings) -> AttemptResult:
    """The sender's result, signed now. A sender that raises is a fault of ours, never the
    receiver's: it becomes a failed attempt ("internal error: <type>"), not an abandoned claim."""
    started = time.monotonic()
    try:
        return sender(claim.url, claim.body, delivery_headers(claim, settings, int(time.time())))
    except Exception as exc:  # noqa: BLE001 - defence in depth: the claim must end recorded
        log.exception("the sender raised on attempt %d of delivery %s",
                      claim.attempt_number, claim.delivery_id)
        return AttemptResult.failed(internal_error(exc), int((time.monotonic() - started) * 1000))


def _record_or_internal_error(engine, claim, result, started_at, settings):
    """Record the attempt; if that raises, record it as a failed attempt ("internal error:
    <type>") instead, so the delivery moves on the ladder. Raises only if that fails too
    (the database is unreachable: the sweep recovers the claim)."""
    doing = f"recording delivery {claim.delivery_id}"
    try:
        return _in_transaction(
            engine, lambda connection: _record(connection, claim, result, started_at, settings), doing)
    except Exception as exc:  # noqa: BLE001 - defence in depth, as in _send
        log.exception("recording attempt %d of delivery %s failed; recording an internal error",
                      claim.attempt_number, claim.delivery_id)
        fallback = AttemptResult.failed(internal_error(exc), result.duration_ms)
        return _in_transaction(
            engine, lambda connection: _record(connection, claim, fallback, started_at, settings),
            doing)


def _record(connection, claim, result, started_at, settings) -> _Recorded | None:
    """Decide what comes next and record the attempt; a short retry rides a countdown only
    while the cap has room. Text from the receiver is made storable first."""
    decision = policy.decide(claim.attempt_number, result.status_code, settings.retry_delays)
    now = utcnow()
    wants_countdown = decision.outcome is policy.Outcome.RETRY and policy.rides_countdown(
        decision.retry_after, settings.countdown_limit
    )
    countdown_allowed = not wants_countdown or _budget(settings.countdown_max).take(connection, now)
    record = attempts.record_attempt(
        connection,
        claim,
        started_at=started_at,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=storable_text(result.error, ERROR_TEXT_LIMIT),
        excerpt=storable_text(result.excerpt),
        decision=decision,
        now=now,
        countdown_limit=settings.countdown_limit,
        pause_after=settings.pause_after,
        countdown_allowed=countdown_allowed,
    )
    return None if record is None else _Recorded(result, decision, record)


def _log_attempt(claim, recorded: _Recorded, settings) -> None:
    """One structured line per attempt: ids and outcome, never the secret or the body."""
    result, decision = recorded.result, recorded.decision
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
            "error_kind": result.error_kind.value if result.error_kind else None,
            "outcome": decision.outcome.value,
        },
    )
    if recorded.record.paused_subscription:
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
