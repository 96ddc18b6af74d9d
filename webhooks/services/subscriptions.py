"""Subscribe, change, delete, and the look-up of a subscription its account owns.

The look-up answers None alike for another account's id, a deleted
subscription, one that never existed and an id that is not a UUID (asked
without a query), so callers answer them all with the same 404.
"""

from __future__ import annotations

import json
import uuid
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from webhooks.config import get_settings
from webhooks.events.filters import parse_filter, parse_stored
from webhooks.lifecycle import adaptive_pace, changes
from webhooks.services import audit
from webhooks.services.audit import Action, Actor
from webhooks.services.credentials import (EXPIRY_WARNING_DAYS, certificate_expires_soon,
                                           credential_changes, shown_credentials)
from webhooks.storage.models import Subscription, utcnow
from webhooks.tenants import custom_headers  # the rules of a subscription's headers
from webhooks.tenants import retry_schedules, rotation
from webhooks.tenants.options import BY_NAME, OPTIONS, Kind, Option, value_of
from webhooks.tenants.schemes import DEFAULT_SCHEME, SCHEMES, scheme_problem

__all__ = ["SETTINGS", "OPTIONS", "Kind", "Option", "SCHEMES", "DEFAULT_SCHEME", "scheme_problem",
           "custom_headers", "canonical_id", "owned", "create", "change", "change_scheme",
           "delete", "option_values", "in_flight_limit", "credential_changes",
           "shown_credentials", "certificate_expires_soon", "EXPIRY_WARNING_DAYS",
           "check_filter", "retry_schedules", "retry_schedule_in_force", "FilterVerdict",
           "filter_verdict"]

SETTINGS = changes.SETTINGS  # the settable fields, with their defaults


def canonical_id(value: str) -> str | None:
    """``value`` as a canonical (lowercase, hyphenated) UUID string, or None if it is not one."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        return None


def owned(session: Session, account_id: str, subscription_id: str) -> Subscription | None:
    """The account's live (not deleted) subscription with this id, or None."""
    canonical = canonical_id(subscription_id)
    if canonical is None:
        return None
    return session.scalars(
        select(Subscription).where(
            Subscription.id == canonical,
            Subscription.account_id == account_id,
            Subscription.deleted_at.is_(None),
        )
    ).first()


def create(session: Session, account_id: str, url: str, *, actor: Actor,
           **settings) -> Subscription:
    """A new subscription of the account (Conflict past WEBHOOKS_MAX_SUBSCRIPTIONS), with its
    ``subscription.created`` entry by ``actor``."""
    subscription = changes.create_subscription(session, account_id, url, now=utcnow(),
                                               **settings)
    audit.subscription_created(session, subscription, actor)
    return subscription


def change(session: Session, subscription: Subscription, *, actor: Actor,
           signature_scheme: str | None = None, **new_values) -> bool:
    """Change the given settings (``url`` among them) and, if ``signature_scheme`` is given
    and differs, the scheme (with a new secret of its format, a staged rotation dropped);
    one ``subscription.updated`` entry by ``actor`` for all of it, none if nothing changed.
    ``subscription`` is refreshed; True when it has a new secret (its scheme changed)."""
    before = audit.snapshot(subscription)
    changes.change_subscription(session, subscription.id, **new_values)
    switched = (signature_scheme is not None and rotation.switch_scheme(
        session, subscription.id, utcnow(), signature_scheme) is not None)
    audit.subscription_changed(session, subscription, before, Action.SUBSCRIPTION_UPDATED, actor)
    return switched


def change_scheme(session: Session, subscription: Subscription, scheme: str, *,
                  actor: Actor) -> bool:
    """Sign its deliveries with ``scheme`` from the next attempt on, with a new secret of that
    scheme's format (a staged rotation is dropped); False if it already used ``scheme``."""
    return change(session, subscription, actor=actor, signature_scheme=scheme)


def delete(session: Session, subscription: Subscription, *, actor: Actor) -> None:
    """Soft-delete: no further attempts; its waiting deliveries end ``failed``. Its
    ``subscription.deleted`` entry by ``actor``."""
    before = audit.snapshot(subscription)
    changes.delete_subscription(session, subscription.id, utcnow())
    audit.subscription_changed(session, subscription, before, Action.SUBSCRIPTION_DELETED, actor)


def option_values(subscription: Subscription) -> dict[str, object]:
    """Every option of the subscription (tenants/options.py) as answers and pages show it, by
    name: its stored value, its default, or what the option computes (``in_flight_limit``)."""
    settings = get_settings()
    return {option.name: value_of(option, subscription, settings, adaptive_pace.READINGS)
            for option in OPTIONS}


def in_flight_limit(subscription: Subscription) -> int | None:
    """The attempts this subscription may have in flight now (None: no limit): its cap
    (``max_in_flight``, else WEBHOOKS_MAX_IN_FLIGHT), or lower while the adaptive pace has
    lowered it (lifecycle/adaptive_pace.py). Shown as ``in_flight_limit``."""
    return value_of(BY_NAME["in_flight_limit"], subscription, get_settings(),
                    adaptive_pace.READINGS)


def check_filter(value: object) -> None:
    """InvalidFilter (API: 400 ``invalid_filter``) naming where ``value`` cannot be a
    subscription's filter (events/filters.py); None (every event) is one."""
    if value is not None:
        parse_filter(value)


def retry_schedule_in_force(subscription: Subscription) -> tuple[int, ...]:
    """The retry delays (seconds) its deliveries follow: its ``retry_schedule``, or the
    service's ladder (WEBHOOKS_RETRY_DELAYS)."""
    return retry_schedules.in_force(subscription.retry_schedule, get_settings().retry_delays)


class FilterVerdict(NamedTuple):
    """Whether an event would be delivered to a subscription (None: the sample could not be
    read), and a sentence saying why."""

    delivered: bool | None
    reason: str


def filter_verdict(subscription: Subscription, envelope_text: str) -> FilterVerdict:
    """Would an event with this envelope (JSON text, as a delivery's body) create a delivery
    for ``subscription``? Its type must be one it takes, and its filter accept it: the two
    checks emit makes (the dashboard's tester; nothing is emitted)."""
    try:
        envelope = json.loads(envelope_text)
    except ValueError as error:
        return FilterVerdict(None, f"The sample is not JSON: {error}.")
    if not isinstance(envelope, dict) or not isinstance(envelope.get("type"), str):
        return FilterVerdict(None, "The sample must be an event envelope: a JSON object with "
                                   "its type in \"type\" and its data in \"data\".")
    if not subscription.wants(envelope["type"]):
        return FilterVerdict(False, f"Not delivered: this subscription does not take "
                                    f"{envelope['type']} events.")
    if subscription.filter is None:
        return FilterVerdict(True, "Delivered: it has no filter, so it takes every event of "
                                   "its types.")
    if parse_stored(subscription.filter).accepts(envelope):
        return FilterVerdict(True, "Delivered: the filter accepts this event.")
    return FilterVerdict(False, "Not delivered: the filter refuses this event (no delivery, "
                                "no attempt).")
