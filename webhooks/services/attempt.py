"""Run one delivery attempt: claim, send, decide, record, publish.

This is the orchestration a worker task calls, a service: it uses the rules
below it (lifecycle/), the sender and the broker beside each other. It owns
two short transactions per attempt (lifecycle/claim.py, lifecycle/record.py)
and holds none while the POST is in flight. Claims, and records of plain
successes, that the process's threads make at the same moment share their
statement and commit (lifecycle/group_commit.py); each still gets what it
would get alone. What happens next is decided in ``policy.next_step``; the
POST itself is in webhooks/sender/post.py.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import NamedTuple

from sqlalchemy.exc import OperationalError

from webhooks.broker.countdowns import CountdownBudget
from webhooks.broker.outbox import publish_now
from webhooks.config import Settings, get_settings, tracing
from webhooks.config.egress import EgressProxy
from webhooks.events.envelope import MODE
from webhooks.lifecycle import adaptive_pace, group_commit, pacing, policy
from webhooks.lifecycle.claim import Caps, Claim, claim, claim_many
from webhooks.lifecycle.failure_kinds import internal_error
from webhooks.lifecycle.record import Recorded, groups, record, record_many
from webhooks.lifecycle.retry_after import retry_after_seconds
from webhooks.sender.post import (LOCATION_LIMIT, AttemptResult, HttpSender, ReceiverCredentials,
                                  Sender)
from webhooks.signing import key_id, public_key_of, sign, standard_headers
from webhooks.storage import clock
from webhooks.storage.conflicts import CONFLICT_TRIES, rolled_back_by_conflict
from webhooks.storage.db import attempt_transaction, get_attempt_engine
from webhooks.storage.receiver_text import storable_text
from webhooks.tenants import custom_headers
from webhooks.tenants.schemes import sends_standard_headers, signs_with_key_pair

__all__ = ["run_attempt", "delivery_headers", "default_sender", "rules_of"]

log = logging.getLogger("webhooks.delivery")  # its name from before the move: log searches use it

ERROR_TEXT_LIMIT = 500  # characters of an attempt's error kept (ours are far shorter)


class _Finished(NamedTuple):
    """A recorded attempt: what the sender gave, what was decided, what the record led to."""

    result: AttemptResult
    step: policy.Step
    record: Recorded


@functools.lru_cache(maxsize=4)
def _budget(maximum: int) -> CountdownBudget:
    return CountdownBudget(maximum)


@functools.lru_cache(maxsize=4)
def _sender(timeout: float, allow_private: bool, ca_bundle: str | None,
            proxy: EgressProxy | None, user_agent: str) -> HttpSender:
    return HttpSender(timeout=timeout, allow_private=allow_private, ca_bundle=ca_bundle,
                      proxy=proxy, user_agent=user_agent)


def default_sender(settings: Settings) -> Sender:
    """The process's HTTP sender for these settings (connection pools are reused)."""
    return _sender(settings.timeout, settings.allow_private_targets, settings.ca_bundle,
                   settings.egress_proxy, f"{settings.service_name}-Webhooks")


def rules_of(settings: Settings) -> policy.Rules:
    """The policy's rules from the settings."""
    return policy.Rules(settings.retry_delays, settings.countdown_limit, settings.pause_after,
                        settings.retry_after_max)


def delivery_headers(claim: Claim, settings: Settings, timestamp: int) -> dict[str, str]:
    """The delivery headers (docs/events.md, "Headers and signature"), signed with ``timestamp``
    (unix seconds, taken at send time) in the subscription's scheme, and the subscription's
    custom headers (custom_headers.py: ours always win).

    The ``service`` scheme signs with the one secret that signs now
    (X-<Service>-Signature); ``standard`` sends the three Standard Webhooks
    headers instead, with a second signature from a staged secret, if any;
    ``standard-ed25519`` the same with ``v1a`` signatures of its private keys,
    and X-<Service>-Key-Id naming their public keys (the ``kid`` of each, in the
    signatures' order) so that a receiver picks its key from the account's key set.
    """
    header = settings.header
    ours = {
        "Content-Type": "application/json",
        "User-Agent": f"{settings.service_name}-Webhooks/{claim.version}",
        "Accept-Encoding": "identity",
        header("Version"): claim.version,
        **_signature_headers(claim, settings, timestamp),
        header("Event"): claim.event_type,
        header("Mode"): MODE,
        header("Event-Id"): claim.event_id,
        header("Delivery-Id"): claim.delivery_id,
        header("Attempt"): str(claim.attempt_number),
    }
    return custom_headers.merged(ours, claim.headers, settings.service_name)


def _signature_headers(claim: Claim, settings: Settings, timestamp: int) -> dict[str, str]:
    """The signature headers of the subscription's scheme (tenants/schemes.py)."""
    if not sends_standard_headers(claim.signature_scheme):
        return {settings.header("Signature"): sign(claim.secret, claim.body, timestamp)}
    keys = [claim.secret, *([claim.staged_secret] if claim.staged_secret else [])]
    headers = standard_headers(keys, claim.event_id, claim.body, timestamp)
    if signs_with_key_pair(claim.signature_scheme):
        headers[settings.header("Key-Id")] = " ".join(key_id(public_key_of(key)) for key in keys)
    return headers


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
    # The attempt engine (db.get_attempt_engine): no pre-ping (a dropped connection
    # is retried once instead, see _in_transaction), BEGIN in the first round trip.
    engine = get_attempt_engine()
    claimed = _claims()((delivery_id, attempt_count, settings))
    if claimed is not None:
        claimed = _admit(engine, claimed, settings)
    if isinstance(claimed, pacing.Paced):  # over its rate limit: it waits for its slot
        publish_now([claimed.dispatch] if claimed.dispatch is not None else [])
        return None
    if isinstance(claimed, pacing.Held):  # its slot is near: it keeps the claim till then
        claimed = _hold_to_slot(claimed)
    if claimed is None:
        return None
    if not tracing.on():
        return _attempt(engine, claimed, sender, settings)
    with tracing.attempt_span(claimed.trace_context, delivery_id=claimed.delivery_id,
                              subscription_id=claimed.subscription_id,
                              attempt=claimed.attempt_number, url=claimed.url) as span:
        return _attempt(engine, claimed, sender, settings, span)


def _attempt(engine, claimed: Claim, sender: Sender | None, settings: Settings,
             span=None) -> str | None:
    """Send the claimed attempt, record it, log it, publish what follows; its new status
    (None if its claim was taken back meanwhile). ``span``: its webhooks.attempt span,
    given the outcome (tracing on)."""
    started_at = clock.now()
    result = _send(sender or default_sender(settings), claimed, settings)
    recorded = _record_or_internal_error(engine, claimed, result, started_at, settings)
    if recorded is None:
        log.warning("attempt %d of delivery %s finished after its claim was taken back",
                    claimed.attempt_number, claimed.delivery_id)
        return None
    if span is not None:
        outcome = recorded.step.outcome
        tracing.attempted(span, outcome.value, recorded.result.status_code, recorded.result.error,
                          succeeded=outcome is policy.Outcome.SUCCESS)
    _log_attempt(claimed, recorded, settings)
    done = recorded.record
    publish_now([*([done.dispatch] if done.dispatch is not None else []), *done.released,
                 *done.notices])
    return done.status


def _claims() -> group_commit.Group:
    """This process's claims, grouped (group_commit.py): each item is (delivery id,
    attempt count, settings), each answer its Claim or None."""
    return group_commit.group("claims", lambda: group_commit.Group(
        "claims", _claim_batch, _claim_alone, lambda: get_settings().batch_max,
        lambda: get_settings().batch_wait))


def _claim_alone(item) -> Claim | None:
    delivery_id, attempt_count, settings = item
    return _in_transaction(
        get_attempt_engine(),
        lambda connection: claim(connection, delivery_id, attempt_count, clock.now(),
                                 Caps.of(settings)),
        f"claiming delivery {delivery_id}")


def _claim_batch(items) -> list[Claim | None]:
    wanted = [(delivery_id, count, Caps.of(settings)) for delivery_id, count, settings in items]
    return _in_transaction(
        get_attempt_engine(), lambda connection: claim_many(connection, wanted, clock.now()),
        f"claiming {len(items)} deliveries")


def _admit(engine, claimed: Claim, settings: Settings) -> Claim | pacing.Held | pacing.Paced:
    """Let the claim through the rate in force (pacing.py): its subscription's rate limit,
    or the adaptive pace's rate (pace_rate.py), if it has either. The
    claim has committed before the rate limit's check runs; if that check fails, the sweep
    takes the claim back."""
    now, pace = clock.now(), adaptive_pace.Pace.of(settings)
    if not pacing.limited(claimed, now, pace):
        return claimed  # no round trip
    return _in_transaction(
        engine,
        lambda connection: pacing.admit(
            connection, claimed, now, rules_of(settings),
            countdown_room=lambda: _budget(settings.countdown_max).take(connection, now),
            pace=pace, hold_max=slot_hold(settings)),
        f"pacing delivery {claimed.delivery_id}")


def slot_hold(settings: Settings) -> float:
    """The longest wait (seconds) for a rate slot that an attempt holds its claim through:
    ``WEBHOOKS_SLOT_HOLD_MS``, and never more than half of ``WEBHOOKS_RECOVER_AFTER``, so
    that the sweep never takes a held claim for an abandoned one (it takes claims older
    than the time-out plus that)."""
    return min(settings.slot_hold, settings.recover_after / 2)


def _hold_to_slot(held: pacing.Held) -> Claim:
    """Wait (this thread, no transaction open) until the held claim's slot; its claim."""
    wait = (held.slot - clock.now()).total_seconds()
    if wait > 0:
        time.sleep(wait)
    return held.claim


def _in_transaction(engine, work, doing: str):
    """``work(connection)`` in a transaction; once more on a fresh connection if it was
    dropped, and again (up to conflicts.CONFLICT_TRIES runs) while PostgreSQL rolls it
    back as a deadlock's victim or a serialization failure.

    Safe to repeat for both steps of an attempt. The record is conditional on
    the claim (status sending, this attempt count), so it applies at most
    once; without the retry, a database restart between POST and record costs
    a duplicate attempt. A claim whose commit reached the database before the
    connection dropped finds itself already claimed the second time and sends
    nothing; the sweep takes that claim back after WEBHOOKS_RECOVER_AFTER. A
    conflict's victim was rolled back whole: its next run starts from nothing
    applied (a record that gave up on it used to become an internal error, and
    the receiver got a 2xx-answered attempt again).
    """
    dropped = rolled_back = 0
    while True:
        try:
            with attempt_transaction(engine) as connection:
                return work(connection)
        except OperationalError as exc:
            if exc.connection_invalidated and dropped == 0:
                dropped += 1
                log.warning("database connection lost while %s; retrying once", doing)
            elif rolled_back_by_conflict(exc) and rolled_back < CONFLICT_TRIES - 1:
                rolled_back += 1
                log.warning("PostgreSQL rolled back the transaction of %s (%s); running it again",
                            doing, exc.orig.pgcode)
            else:
                raise


def _send(sender: Sender, claim: Claim, settings: Settings) -> AttemptResult:
    """The sender's result, signed now, with the credentials its receiver requires (only
    then: a sender for tests needs no such argument). A sender that raises is a fault of
    ours, never the receiver's: it becomes a failed attempt ("internal error: <type>"), not
    an abandoned claim."""
    started = time.monotonic()
    try:
        headers = delivery_headers(claim, settings, int(time.time()))
        if settings.trace_receivers:
            _add_traceparent(headers)
        if claim.client_certificate is None and claim.oauth2 is None:
            return sender(claim.url, claim.body, headers)
        credentials = ReceiverCredentials(claim.subscription_id, claim.client_certificate,
                                          claim.oauth2)
        return sender(claim.url, claim.body, headers, credentials=credentials)
    except Exception as exc:  # noqa: BLE001 - defence in depth: the claim must end recorded
        log.exception("the sender raised on attempt %d of delivery %s",
                      claim.attempt_number, claim.delivery_id)
        return AttemptResult.failed(internal_error(exc), int((time.monotonic() - started) * 1000))


def _add_traceparent(headers: dict[str, str]) -> None:
    """WEBHOOKS_TRACE_RECEIVERS: the attempt span's W3C traceparent, so that a receiver's own
    spans join the event's trace (nothing while tracing is off)."""
    traceparent = tracing.traceparent_header()
    if traceparent is not None:
        headers["traceparent"] = traceparent


def _record_or_internal_error(engine, claim, result, started_at, settings):
    """Record the attempt; if that raises, record it as a failed attempt ("internal error:
    <type>") instead, so the delivery moves on the ladder. Raises only if that fails too
    (the database is unreachable: the sweep recovers the claim).

    A record that lost its connection (twice: _in_transaction retries once) is tried
    again as it was, not as an internal error: the attempt's answer is known, and a
    false failure would send the receiver the delivery again. For the same reason a
    record rolled back as a deadlock's victim or a serialization failure never gets here
    until it has been one conflicts.CONFLICT_TRIES times (_in_transaction runs it again)."""
    try:
        return _record(engine, claim, result, started_at, settings)
    except OperationalError as exc:
        if not exc.connection_invalidated:
            return _record_internal_error(engine, claim, result, started_at, settings, exc)
        log.warning("recording attempt %d of delivery %s lost its connection again; "
                    "recording it once more", claim.attempt_number, claim.delivery_id)
        return _record(engine, claim, result, started_at, settings)
    except Exception as exc:  # noqa: BLE001 - defence in depth, as in _send
        return _record_internal_error(engine, claim, result, started_at, settings, exc)


def _record_internal_error(engine, claim, result, started_at, settings, exc):
    """Record the attempt as a failed one of ours ("internal error: <type>"), after its
    record raised ``exc``."""
    log.error("recording attempt %d of delivery %s failed; recording an internal error",
              claim.attempt_number, claim.delivery_id, exc_info=exc)
    fallback = AttemptResult.failed(internal_error(exc), result.duration_ms)
    return _record(engine, claim, fallback, started_at, settings)


def _record(engine, claim, result, started_at, settings) -> _Finished | None:
    """Decide the next step (policy.next_step, with the wait a 429's or 503's Retry-After
    asks for) and record it: with the records of concurrent attempts if it is a plain
    success (record.groups, group_commit.py), else alone. A short retry rides a countdown
    only while the deployment's countdown budget has room. Text from the receiver is made
    storable first."""
    now = clock.now()
    rules = rules_of(settings)
    step = policy.next_step(
        claim.attempt_number, result.status_code, claim.event_type, rules,
        countdown_room=lambda: _in_transaction(
            engine, lambda connection: _budget(settings.countdown_max).take(connection, now),
            "reading the countdown budget"),
        error_kind=result.error_kind,
        requested_wait=retry_after_seconds(result.retry_after, now),
        schedule=claim.retry_schedule)
    attempt = dict(
        claim=claim, step=step, rules=rules, started_at=started_at, now=now,
        duration_ms=result.duration_ms, status_code=result.status_code,
        error=storable_text(result.error, ERROR_TEXT_LIMIT), excerpt=storable_text(result.excerpt),
        location=storable_text(result.location, LOCATION_LIMIT), error_kind=result.error_kind,
        pace=adaptive_pace.Pace.of(settings),
    )
    done = _records()(attempt) if groups(claim, step) else _record_alone(attempt)
    return None if done is None else _Finished(result, step, done)


def _records() -> group_commit.Group:
    """This process's records of plain successes, grouped (group_commit.py): each item is
    record()'s keyword arguments, each answer its Recorded or None."""
    return group_commit.group("records", lambda: group_commit.Group(
        "records", _record_batch, _record_alone, lambda: get_settings().batch_max,
        lambda: get_settings().batch_wait))


def _record_alone(attempt: dict) -> Recorded | None:
    return _in_transaction(get_attempt_engine(), lambda connection: record(connection, **attempt),
                           f"recording delivery {attempt['claim'].delivery_id}")


def _record_batch(attempts: list[dict]) -> list[Recorded | None]:
    """The records of a batch, committed; the deliveries they released (each waited for the
    slot its record freed) are published here, after the commit, in one pipelined round
    trip (outbox.send_to_broker), rather than by each attempt on its own."""
    done = _in_transaction(get_attempt_engine(),
                           lambda connection: record_many(connection, attempts),
                           f"recording {len(attempts)} attempts")
    publish_now([dispatch for one in done if one is not None for dispatch in one.released])
    return [one if one is None else dataclasses.replace(one, released=()) for one in done]


def _log_attempt(claim, recorded: _Finished, settings) -> None:
    """One structured line per attempt: ids and outcome, never the secret or the body."""
    result, step = recorded.result, recorded.step
    log.info(
        "delivery attempt %d of %s: %s",
        claim.attempt_number,
        claim.delivery_id,
        step.outcome.value,
        extra={
            "delivery_id": claim.delivery_id,
            "event_id": claim.event_id,
            "subscription_id": claim.subscription_id,
            "attempt": claim.attempt_number,
            "status_code": result.status_code,
            "error_kind": result.error_kind.value if result.error_kind else None,
            "outcome": step.outcome.value,
        },
    )
    if recorded.record.paused_subscription:
        if step.pause_reason is not None:
            log.warning("subscription %s paused: its endpoint answered %s (%s)",
                        claim.subscription_id, result.status_code, step.pause_reason.value)
        else:
            log.warning("subscription %s paused after %d consecutive failures",
                        claim.subscription_id, settings.pause_after)
