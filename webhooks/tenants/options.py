"""A subscription's options, each declared once: the limits and choices its owner sets (or
only reads) beside its url, event types, description and custom headers.

Each :class:`Option` names a column of ``subscriptions`` and carries all that the other
layers derive from it:

- the API's request and answer fields, and so the OpenAPI document
  (web/schemas/options.py), and the settings create and change take
  (``lifecycle/changes.SETTINGS``);
- the dashboard's form field, the form page's rendering of it and the edit form's
  value (web/dashboard/options.py), and its line on the subscription's page;
- whether the claim loads it for the attempt (``claimed``: ``Claim.options``, by name);
- its reference: ``webhooks options`` and the Python reference's "Subscription options"
  page (tenants/option_reference.py), to which docs/api.md points.

Adding an option is 6 files: its column (storage/models.py), its migration (and the
migration's row in docs/upgrade.md), one entry in :data:`OPTIONS`, its use and its test.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from webhooks.config import Settings
from webhooks.storage.models import Subscription
from webhooks.tenants.schemes import DEFAULT_SCHEME, SCHEMES

__all__ = ["Kind", "FormField", "Fact", "Option", "OPTIONS", "BY_NAME", "SETTABLE", "CLAIMED",
           "value_of"]


class Kind(str, enum.Enum):
    """What an option's value is."""

    INTEGER = "integer"  # a whole number from minimum to maximum
    NUMBER = "number"  # an integer or a finite float from minimum to maximum
    CHOICE = "choice"  # one of ``choices``


@dataclass(frozen=True)
class FormField:
    """The option's field on the dashboard's subscription form."""

    label: str
    help: str  # the sentence under the field
    placeholder: str = ""  # shown while it is empty (a nullable option's null)


@dataclass(frozen=True)
class Fact:
    """The option's line on the dashboard's subscription page. ``when_set`` is formatted with
    ``value``; ``when_null`` with ``fallback``, the service's own value (its Settings
    attribute ``Option.fallback``; 0 or none reads "no limit")."""

    label: str
    when_set: str
    when_null: str = "no limit"


@dataclass(frozen=True)
class Option:
    """One per-subscription option (see the module's docstring).

    ``description`` documents it in requests, ``shown_description`` in answers
    (both in the OpenAPI document). ``default`` is stored when create leaves it
    out; a ``nullable`` option also takes null, which means ``fallback`` (the
    name of the Settings attribute that applies instead, if any). An option
    that is not ``editable`` is only shown, with ``value`` computing it from the row,
    or ``reading`` naming what computes it from the subscription's state: a rule
    above this layer (lifecycle/adaptive_pace.READINGS), handed to :func:`value_of`
    by its caller (services/subscriptions.py). One
    that is not ``stored_as_given`` is editable through the API but applied
    by a use case of its own (``signature_scheme``: a new secret with it). A
    ``claimed`` one is loaded by the claim into ``Claim.options``, for the
    attempt (the claim has fields of its own for ``rate_limit`` and
    ``signature_scheme``, which it needs itself). ``form`` and ``fact`` put
    it on the dashboard's form and subscription page. ``details`` is the rest of
    its reference (``webhooks options``, tenants/option_reference.py): what it does
    beyond ``description``, in paragraphs, single back-quotes for literal text.
    """

    name: str
    kind: Kind
    shown_description: str
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    default: object = None
    nullable: bool = True
    fallback: str | None = None
    editable: bool = True
    stored_as_given: bool = True
    claimed: bool = False
    form: FormField | None = None
    fact: Fact | None = None
    value: Callable[[Subscription, Settings], object] | None = None
    reading: str | None = None
    details: str = ""


OPTIONS: tuple[Option, ...] = (
    Option(
        "max_in_flight", Kind.INTEGER, minimum=1, maximum=1000, fallback="max_in_flight",
        description="attempts this subscription may have in flight at once; null: the "
                    "service's WEBHOOKS_MAX_IN_FLIGHT",
        shown_description="null: the service's WEBHOOKS_MAX_IN_FLIGHT",
        form=FormField("Attempts in flight at once (optional)", placeholder="service default",
                       help="At most this many attempts to this endpoint at once (1 to 1,000); "
                            "empty: the service's default. A slow endpoint then holds at most "
                            "this many worker threads."),
        fact=Fact("Attempts in flight", "at most {value} at once",
                  when_null="service default ({fallback})"),
        details="""Attempts to this subscription in flight at once, across all workers,
            instead of the service's number (lower or higher). The per-account cap
            `WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT` still applies. Waiting for a slot: docs/api.md,
            "Per-subscription limits", and the README, "Concurrency per endpoint".""",
    ),
    Option(
        "in_flight_limit", Kind.INTEGER, editable=False, reading="in_flight_now",
        shown_description="the attempts in flight the service lets through now: "
                          "`max_in_flight` (or the service's), lowered while the endpoint "
                          "answers 429, 503 or times out (the adaptive pace); null: no limit. "
                          "Read-only",
        details="""`max_in_flight` (or `WEBHOOKS_MAX_IN_FLIGHT`), lower while the adaptive
            pace has lowered it (the endpoint answered 429 or 503, or timed out: halved, down
            to 1; each run of successes adds one back). With `WEBHOOKS_ADAPTIVE_PACE=false`
            it is always the cap. README, "The adaptive pace".""",
    ),
    Option(
        "rate_limit", Kind.NUMBER, minimum=0.01, maximum=10000,
        description="at most this many attempts per second to this subscription, across all "
                    "workers; deliveries over it wait their turn (not a failure, nothing "
                    "dropped); null: no limit",
        shown_description="attempts per second at most; null: no limit",
        form=FormField("Attempts per second at most (optional)", placeholder="no limit",
                       help="At most this many attempts per second (0.01 to 10,000); empty: no "
                            "limit. Deliveries over the limit wait their turn: not a failure, "
                            "nothing is dropped."),
        fact=Fact("Rate limit", "at most {value:g} attempts per second; the rest wait their turn"),
        details="""`0.5` is one attempt every 2 s. A delivery over the limit waits its turn,
            `pending`, without an attempt: docs/api.md, "Per-subscription limits".""",
    ),
    Option(
        "current_rate_limit", Kind.NUMBER, editable=False, reading="rate_now",
        shown_description="the attempts per second the service lets through now: "
                          "`rate_limit`, or lower while the adaptive pace follows an endpoint "
                          "that answered 429 (a rate set just under what it accepted, "
                          "climbing WEBHOOKS_PACE_RATE_CLIMB percent per second); null: no "
                          "limit. Read-only",
        fact=Fact("Rate now", "{value:.3g} attempts per second"),
        details="""`rate_limit`, or lower while the adaptive pace follows an endpoint that
            answered 429: a rate set 5 % under what it accepted, climbing
            `WEBHOOKS_PACE_RATE_CLIMB` percent of itself per second until it has doubled
            (then it no longer applies). README, "The adaptive pace's rate".""",
    ),
    Option(
        "signature_scheme", Kind.CHOICE, choices=SCHEMES, default=DEFAULT_SCHEME,
        nullable=False, stored_as_given=False,
        description="how deliveries are signed: `service` (the X-Service-Signature header), "
                    "`standard` (Standard Webhooks: `webhook-id`, `webhook-timestamp`, "
                    "`webhook-signature`) or `standard-ed25519` (the same headers, signed with "
                    "an Ed25519 key pair the service keeps: `public_key` verifies). Changing it "
                    "gives the subscription a new secret of that scheme's format (or a new key "
                    "pair)",
        shown_description="`service` (X-Service-Signature), `standard` (Standard Webhooks) or "
                          "`standard-ed25519` (Standard Webhooks, Ed25519)",
        details="""`service` is the `X-<service>-Signature` header (docs/events.md);
            `standard` is Standard Webhooks (https://www.standardwebhooks.com/):
            `webhook-id` (the event id), `webhook-timestamp` (unix seconds) and
            `webhook-signature` instead of `X-<service>-Signature`; the other
            `X-<service>-…` headers stay. Anything else answers `validation_error` naming
            the field, and nothing changes.

            Its secret is `whsec_` and base64 of 32 random bytes: URL-safe and unpadded for
            `service` (the HMAC key is the whole string as UTF-8), standard base64 for
            `standard` (the key is the decoded bytes, as the Standard Webhooks libraries
            expect).

            A PATCH that changes the scheme gives the subscription a new secret of the new
            format, which signs from the next attempt on (a retry of an older delivery too),
            and drops a staged secret: its answer holds the new `secret`. A PATCH naming the
            current scheme changes nothing and shows no secret. `rotate-secret` makes a
            secret of the subscription's scheme. While a rotation is staged a `standard`
            delivery carries two signatures, space-separated (current and next secret); a
            `service` one is signed by the current secret only. Receivers: docs/receivers.md.

            `standard-ed25519` signs with Ed25519 (Standard Webhooks' `v1a`): the service keeps
            the subscription's private key, and no answer, page or log line shows it; answers
            show `public_key` (`whpk_` and the standard base64 of its 32 bytes) instead of
            `secret`, and `next_public_key` while a rotation is staged (both `v1a`
            signatures are sent meanwhile). `GET /public-keys/<account_id>` serves the
            account's public keys as a JWKS. A PATCH to or from it gives the subscription a
            new key pair, or a new secret, exactly as a change between the other two.
            The names `webhook-id`, `webhook-timestamp` and `webhook-signature` are reserved
            (`reserved_header`) in `headers`.""",
    ),
)

BY_NAME = {option.name: option for option in OPTIONS}
# What create and change store as given (lifecycle/changes.py), with the default of each.
SETTABLE = {option.name: option.default for option in OPTIONS
            if option.editable and option.stored_as_given}
# What the claim loads for the attempt, by column name (lifecycle/claim.py).
CLAIMED = tuple(option.name for option in OPTIONS if option.claimed)


def value_of(option: Option, subscription: Subscription, settings: Settings,
             readings: Mapping[str, Callable[[Subscription, Settings], object]]) -> object:
    """What answers and pages show of ``option`` for ``subscription``: its stored value (its
    default where none is stored), what ``option.value`` computes, or what its reading
    among ``readings`` (by name: lifecycle/adaptive_pace.READINGS) computes."""
    if option.reading is not None:
        return readings[option.reading](subscription, settings)
    if option.value is not None:
        return option.value(subscription, settings)
    stored = getattr(subscription, option.name)
    return option.default if stored is None else stored
