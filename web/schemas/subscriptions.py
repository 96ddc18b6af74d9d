"""Subscription resources: the request bodies of create, update, rotate-secret and
recover, and the responses. The fields of the per-subscription options (``max_in_flight``,
``rate_limit``, ``signature_scheme``, …) come from their declarations (options.py).

A subscription is shown without its ``secret`` (and ``next_secret``) except
where docs/api.md says so (create, get one, rotate-secret): lists and other
answers leave it out. Answers are dumped from :func:`subscription_resource`,
which computes the secrets as of the answer's moment (rotation.py). A
``standard-ed25519`` subscription has no ``secret`` in any answer (its private
key never leaves the service): every answer shows its ``public_key`` and, while
a rotation is staged, ``next_public_key`` instead (tenants/keypairs.py).
"""

from __future__ import annotations

import datetime as dt

from marshmallow import Schema, ValidationError, fields, validate

from webhooks.events.catalogue import EVENT_TYPE_NAMES
from webhooks.events.filters import MAX_BYTES as FILTER_MAX_BYTES
from webhooks.events.filters import MAX_DEPTH as FILTER_MAX_DEPTH
from webhooks.events.fields import StrictInteger
from webhooks.services.rotation import ACTIVATE_IN_MAX, public_keys_at, shown_secrets
from webhooks.services.pausing import PauseReason
from webhooks.services.subscriptions import (custom_headers, option_values,
                                             retry_schedule_in_force, retry_schedules,
                                             shown_credentials)
from webhooks.storage.models import Subscription, SubscriptionStatus, utcnow

from ..targets import MAX_URL_LENGTH, shown_url, url_problem
from .common import PageQuerySchema, Text, UTCMoment, UTCTimestamp, next_cursor_field
from .options import with_answer_options, with_request_options

__all__ = [
    "MAX_DESCRIPTION_LENGTH",
    "SubscriptionCreateSchema",
    "SubscriptionUpdateSchema",
    "SubscriptionSchema",
    "SubscriptionWithSecretSchema",
    "SubscriptionChangedSchema",
    "SubscriptionListSchema",
    "TestSentSchema",
    "RotateSecretSchema",
    "RecoverSchema",
    "RecoveredSchema",
    "subscription_resource",
]

MAX_DESCRIPTION_LENGTH = 1000


class TargetURL(Text):
    """The endpoint: http or https, with a host, at most 2,048 characters."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "metadata",
            {"format": "uri", "minLength": 1, "maxLength": MAX_URL_LENGTH,
             "description": "http or https URL with a host; at most 2,048 characters"},
        )
        super().__init__(**kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        problem = url_problem(value)
        if problem:
            raise ValidationError(problem)
        return value


class ShownURL(fields.String):
    """The endpoint as answers show it: a password in it is masked (``user:***@host``)."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else shown_url(value)


def _no_duplicates(names: list) -> None:
    if len(set(names)) != len(names):
        raise ValidationError("Must not name an event type twice.")


def _event_types(**kwargs) -> fields.List:
    """null (every type) or a non-empty list of distinct catalogue names.

    Whether each name is in the catalogue is checked by the view, which
    answers ``unknown_event_type``; the enum here documents the names.
    """
    item = Text(metadata={"enum": list(EVENT_TYPE_NAMES)})
    return fields.List(
        item,
        allow_none=True,
        validate=[validate.Length(min=1), _no_duplicates],
        metadata={
            "uniqueItems": True,
            "maxItems": len(EVENT_TYPE_NAMES),
            "description": "event types to receive; null (or left out on create) means all",
        },
        **kwargs,
    )


def _description(**kwargs) -> Text:
    return Text(allow_none=True, validate=validate.Length(max=MAX_DESCRIPTION_LENGTH), **kwargs)


class HeadersField(fields.Dict):
    """Custom request headers: names (HTTP tokens) to printable ASCII values
    (webhooks/tenants/custom_headers.py). Reserved names are refused by the view, which
    answers ``reserved_header`` naming them. No message quotes a value."""

    def __init__(self, **kwargs):
        kwargs.setdefault("metadata", {
            "maxProperties": custom_headers.MAX_HEADERS,
            "description": "extra request headers sent with every delivery; at most "
                           f"{custom_headers.MAX_HEADERS}, names and values printable ASCII, "
                           f"values at most {custom_headers.MAX_VALUE_LENGTH:,} characters. The "
                           "delivery headers (`X-Service-*`), `Content-Type`, `Content-Length`, "
                           "`Content-Encoding`, `Accept-Encoding`, `Host`, `User-Agent` and the "
                           "hop-by-hop headers (`Connection`, `Keep-Alive`, `Proxy-*`, `TE`, "
                           "`Trailer`, `Transfer-Encoding`, `Upgrade`) cannot be set",
        })
        # The values field documents them; _deserialize checks them (custom_headers.problems).
        values = fields.String(validate=validate.Length(max=custom_headers.MAX_VALUE_LENGTH),
                               metadata={"pattern": "^[\\x20-\\x7e]*$"})
        super().__init__(keys=fields.String(), values=values, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        problems = custom_headers.problems(value)
        if problems:
            raise ValidationError("; ".join(problems))
        return dict(value)


def _headers(**kwargs) -> HeadersField:
    return HeadersField(**kwargs)


class CredentialField(fields.Raw):
    """A write-only credential object (webhooks/tenants/credentials.py), or null to remove
    it. Checked by the view (400 ``invalid_client_certificate``, ``invalid_oauth2``) with
    the url and headers it goes with; its OpenAPI description is ``properties``."""

    def __init__(self, description: str, properties: dict, required: list[str], **kwargs):
        super().__init__(allow_none=True, metadata={
            "type": "object", "description": description, "properties": properties,
            "required": required, "additionalProperties": False}, **kwargs)


_PEM = {"type": "string", "maxLength": 65536}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 1000}


def _client_certificate(**kwargs) -> CredentialField:
    return CredentialField(
        "a client certificate presented on every attempt to an https endpoint (mutual TLS); "
        "write-only: answers show its fingerprint, subject and expiry; null removes it",
        {"certificate": {**_PEM, "description": "PEM: the chain, leaf first"},
         "private_key": {**_PEM, "description": "PEM, unencrypted"}},
        ["certificate", "private_key"], **kwargs)


def _oauth2(**kwargs) -> CredentialField:
    return CredentialField(
        "an OAuth2 client-credentials grant: every attempt carries `Authorization: Bearer "
        "<token>` from `token_url`; write-only: answers leave out `client_secret`; null "
        "removes it",
        {"token_url": {"type": "string", "format": "uri",
                       "description": "https (unless private targets are allowed), under the "
                                      "same address guard as an endpoint"},
         "client_id": _TEXT, "client_secret": _TEXT, "scope": _TEXT, "audience": _TEXT},
        ["token_url", "client_id", "client_secret"], **kwargs)


_CERTIFICATE_SHOWN = fields.Dict(
    required=True, allow_none=True,
    metadata={"description": "null, or `{\"fingerprint_sha256\", \"subject\", "
                            "\"not_after\"}` of the client certificate (never its key)"})
_OAUTH2_SHOWN = fields.Dict(
    required=True, allow_none=True,
    metadata={"description": "null, or `oauth2` as set, without `client_secret`"})


_FILTER_DESCRIPTION = (
    "a payload filter: the events of its types this subscription receives (the others "
    "create no delivery for it); null (the default) receives every one. Keys are dotted "
    "paths into the envelope (`type`, `data.to_email`, `data.a.b`; a whole number indexes a "
    "list) whose value is a literal (equal to it) or an object with one operator of `$eq`, "
    "`$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin` (lists), `$exists` (boolean), "
    "`$prefix` (string); or `$and`, `$or` (lists of filters), `$not` (a filter). All keys "
    f"must hold. At most {FILTER_MAX_BYTES} bytes as JSON and {FILTER_MAX_DEPTH} levels "
    "deep; anything else answers `invalid_filter` naming where. docs/filters.md")


def _filter(**kwargs) -> fields.Raw:
    """A filter (webhooks/events/filters.py), checked by the view: 400 ``invalid_filter``."""
    return fields.Raw(allow_none=True, metadata={"type": "object",
                                                 "description": _FILTER_DESCRIPTION}, **kwargs)


def _retry_schedule(**kwargs) -> fields.List:
    """1 to MAX_STEPS whole seconds, each 1 to MAX_DELAY, or null (the service's ladder)."""
    return fields.List(
        StrictInteger(validate=validate.Range(min=1, max=retry_schedules.MAX_DELAY)),
        allow_none=True, validate=validate.Length(min=1, max=retry_schedules.MAX_STEPS),
        metadata={"description": "its own retry delays in seconds (1 to "
                                 f"{retry_schedules.MAX_STEPS} of them, each 1 to "
                                 f"{retry_schedules.MAX_DELAY:,}): after failed attempt n the "
                                 "next waits the n-th; a delivery is `dead` after one "
                                 "attempt more than the list is long. null (the default): the "
                                 "service's ladder, WEBHOOKS_RETRY_DELAYS. Applies from each "
                                 "delivery's next attempt on"},
        **kwargs)


@with_request_options(create=True)
class SubscriptionCreateSchema(Schema):
    """Body of ``POST /subscriptions``; unknown fields are refused."""

    url = TargetURL(required=True)
    event_types = _event_types(load_default=None)
    description = _description(load_default=None)
    headers = _headers(load_default=dict)
    client_certificate = _client_certificate()
    oauth2 = _oauth2()
    filter = _filter(load_default=None)
    retry_schedule = _retry_schedule(load_default=None)


@with_request_options(create=False)
class SubscriptionUpdateSchema(Schema):
    """Body of ``PATCH /subscriptions/<id>``: only the fields given change."""

    url = TargetURL()
    event_types = _event_types()
    description = _description()
    headers = _headers()
    client_certificate = _client_certificate()
    oauth2 = _oauth2()
    filter = _filter()
    retry_schedule = _retry_schedule()


@with_answer_options
class SubscriptionSchema(Schema):
    """A subscription as the API shows it (docs/api.md), without its secret."""

    id = fields.UUID(required=True)
    url = ShownURL(
        required=True,
        metadata={"description": "the endpoint; a password in it is shown as `***` (sending it "
                                 "back unchanged in a PATCH keeps the stored one)"},
    )
    event_types = fields.List(fields.String(), required=True, allow_none=True)
    description = fields.String(required=True, allow_none=True)
    status = fields.String(
        required=True, validate=validate.OneOf([status.value for status in SubscriptionStatus])
    )
    consecutive_failures = fields.Integer(required=True)
    paused_at = UTCTimestamp(required=True, allow_none=True)
    paused_reason = fields.String(
        required=True, allow_none=True,
        # null among the values: OpenAPI 3.0 takes a nullable enum's null only from its list
        metadata={"enum": [*(reason.value for reason in PauseReason), None], "description":
                  "null while active; else why it is paused: `failures` (WEBHOOKS_PAUSE_AFTER "
                  "consecutive failures), `manual` (the pause route or the dashboard) or "
                  "`gone` (the endpoint answered 410 Gone)"})
    created_at = UTCTimestamp(required=True)
    headers = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                          metadata={"description": "extra request headers of every delivery"})
    next_secret_active_at = UTCTimestamp(
        required=True, allow_none=True,
        metadata={"description": "when a staged secret (or key pair) takes over (signs, and "
                                 "becomes `secret`, or `public_key`); null when none is staged"})
    public_key = fields.String(
        required=True, allow_none=True,
        metadata={"description": "`standard-ed25519`: the Ed25519 public key that verifies "
                                 "its deliveries now, `whpk_` and the standard base64 of its "
                                 "32 bytes (also in `GET /public-keys/<account_id>`); null "
                                 "under the other schemes"})
    next_public_key = fields.String(
        required=True, allow_none=True,
        metadata={"description": "`standard-ed25519`: the staged key pair's public key, "
                                 "whose signature every delivery carries too until it takes "
                                 "over at `next_secret_active_at`; null when none is staged"})
    client_certificate = _CERTIFICATE_SHOWN
    oauth2 = _OAUTH2_SHOWN
    filter = fields.Raw(required=True, allow_none=True, metadata={
        "type": "object", "description": "its payload filter as set; null: every event of "
                                         "its types"})
    retry_schedule = fields.List(fields.Integer(), required=True, allow_none=True, metadata={
        "description": "its retry delays in seconds as set; null: the service's ladder"})
    retry_schedule_in_force = fields.List(fields.Integer(), required=True, metadata={
        "description": "the retry delays in seconds its deliveries follow now: "
                       "`retry_schedule`, or the service's ladder (WEBHOOKS_RETRY_DELAYS) "
                       "when that is null; a delivery is `dead` after one attempt more than "
                       "there are delays. Read-only"})


class SubscriptionWithSecretSchema(SubscriptionSchema):
    """A subscription with its signing ``secret`` (``service``: the HMAC key, used as UTF-8;
    ``standard``: ``whsec_`` and the base64 of the key) and the staged ``next_secret``, if
    any; neither under ``standard-ed25519``, whose private keys are never shown."""

    secret = fields.String(metadata={
        "description": "the secret that signs now; absent under `standard-ed25519` (the "
                       "service keeps the private key: `public_key` verifies)"})
    next_secret = fields.String(
        allow_none=True,
        metadata={"description": "a staged secret, signing from `next_secret_active_at` on; "
                                 "null when none is staged; absent under `standard-ed25519`"})


class SubscriptionChangedSchema(SubscriptionSchema):
    """Answer of ``PATCH /subscriptions/<id>``: a subscription, with ``secret`` and
    ``next_secret`` only when the change of ``signature_scheme`` gave it a new secret (a
    change to ``standard-ed25519`` gives it a new key pair: its new ``public_key``)."""

    secret = fields.String(metadata={"description": "the new secret, which signs from now on; "
                                                    "only when `signature_scheme` changed to "
                                                    "`service` or `standard`"})
    next_secret = fields.String(allow_none=True, metadata={
        "description": "null (a change of scheme drops a staged secret); only when "
                       "`signature_scheme` changed"})


def _paused_reason(subscription: Subscription) -> str | None:
    """Null while active; a paused one's reason, ``failures`` when none was stored (a worker
    of the release before 0013 paused it, and that one paused only for failures)."""
    if subscription.status != SubscriptionStatus.PAUSED.value:
        return None
    return subscription.paused_reason or PauseReason.FAILURES.value


def subscription_resource(subscription: Subscription, now: dt.datetime | None = None) -> dict:
    """What the subscription schemas dump: the row, with its secrets (or public keys) as of
    ``now``. A key-pair scheme's secrets are private keys: they are never put here, so no
    schema can show them."""
    now = now or utcnow()
    resource = {
        "id": subscription.id,
        "url": subscription.url,
        "event_types": subscription.event_types,
        "description": subscription.description,
        "status": subscription.status,
        "consecutive_failures": subscription.consecutive_failures,
        "paused_at": subscription.paused_at,
        "paused_reason": _paused_reason(subscription),
        "created_at": subscription.created_at,
        "headers": subscription.headers or {},
        **option_values(subscription),
        **shown_credentials(subscription),
        "filter": subscription.filter,
        "retry_schedule": subscription.retry_schedule,
        "retry_schedule_in_force": list(retry_schedule_in_force(subscription)),
        "public_key": None,
        "next_public_key": None,
    }
    keys = public_keys_at(subscription, now)
    if keys is not None:
        resource.update(public_key=keys.public_key, next_public_key=keys.next_public_key,
                        next_secret_active_at=keys.next_public_key_active_at)
        return resource
    secrets = shown_secrets(subscription, now)
    resource.update(secret=secrets.secret, next_secret=secrets.next_secret,
                    next_secret_active_at=secrets.next_secret_active_at)
    return resource


class RotateSecretSchema(Schema):
    """Body of ``POST /subscriptions/<id>/rotate-secret`` (optional: no body rotates at once)."""

    activate_in = StrictInteger(
        required=False, validate=validate.Range(min=1, max=ACTIVATE_IN_MAX),
        metadata={"description": "seconds (1 to 604,800) from now until the new secret signs: "
                                 "a staged rotation; left out, the new secret signs from the "
                                 "next attempt"})


class RecoverSchema(Schema):
    """Body of ``POST /subscriptions/<id>/recover``: the window ``[since, until)``."""

    since = UTCMoment(
        required=True,
        metadata={"description": "ISO 8601; deliveries created at or after this moment "
                                 "(without an offset: UTC); not in the future"})
    until = UTCMoment(
        load_default=None, allow_none=True,
        metadata={"description": "ISO 8601; deliveries created before this moment; left out "
                                 "or null: up to now"})


class RecoveredSchema(Schema):
    """Answer of ``POST /subscriptions/<id>/recover``."""

    replayed = fields.Integer(required=True, metadata={"description": "replays made"})
    held = fields.Integer(
        required=True,
        metadata={"description": "how many of the replays wait in `paused` because the "
                                 "subscription is paused: they go out when it is resumed "
                                 "(0 while it is active)"})
    more = fields.Boolean(
        required=True,
        metadata={"description": "true when the window holds more deliveries to replay than "
                                 "one call replays (WEBHOOKS_RECOVER_MAX): call again with the "
                                 "same window to continue; nothing is replayed twice"})


class SubscriptionQuerySchema(PageQuerySchema):
    """Query string of ``GET /subscriptions``: ``limit`` and ``cursor``."""


class SubscriptionListSchema(Schema):
    data = fields.List(fields.Nested(SubscriptionSchema), required=True)
    next_cursor = next_cursor_field()


class TestSentSchema(Schema):
    """Answer of ``POST /subscriptions/<id>/test``: the test.ping event and its delivery."""

    __test__ = False  # not a pytest test class, despite the name
    event_id = fields.UUID(required=True)
    delivery_id = fields.UUID(required=True)
