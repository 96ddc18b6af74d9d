"""``/api/webhooks/subscriptions``: register endpoints, change them, test, pause, resume, rotate
(at once or staged, then activate or cancel the staged secret), recover.

Every query is scoped to the calling account and skips deleted
subscriptions, so another account's id, a deleted one and one that never
existed all answer the same 404.
"""

from __future__ import annotations

from flask import Blueprint, Response, url_for

from webhooks.errors import InvalidWindow
from webhooks.services import pausing, reads, recovery, rotation, subscriptions, testing
from webhooks.services.reads import utcnow
from webhooks.storage.models import Subscription

from ..apidoc import documented
from ..auth import authenticate, current_account_id, current_actor
from ..errors import ApiError
from ..pagination import keyset_page
from ..params import (
    load_body,
    load_optional_body,
    load_query,
    require_known_event_types,
    require_settable_headers,
)
from ..ratelimit import check_send_test
from ..responses import json_response
from ..schemas import (
    RecoveredSchema,
    RecoverSchema,
    RotateSecretSchema,
    SubscriptionChangedSchema,
    SubscriptionCreateSchema,
    SubscriptionListSchema,
    SubscriptionQuerySchema,
    SubscriptionSchema,
    SubscriptionUpdateSchema,
    SubscriptionWithSecretSchema,
    TestSentSchema,
    subscription_resource,
)
from ..targets import check_target_allowed, url_to_store
from ..transaction import db_session
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("subscriptions", __name__, url_prefix=f"{API_PREFIX}/subscriptions")
bp.before_request(authenticate)

_PUBLIC = SubscriptionSchema()
_WITH_SECRET = SubscriptionWithSecretSchema()
_LIST = SubscriptionListSchema()
_TEST_SENT = TestSentSchema()
_RECOVERED = RecoveredSchema()

# The options a body may set (webhooks/tenants/options.py), as the routes' descriptions name them.
_EDITABLE = [option for option in subscriptions.OPTIONS if option.editable]


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]]))


def _with_default(option: subscriptions.Option) -> str:
    shown = f"`{option.name}`"
    return shown if option.default is None else f"{shown} (default `{option.default}`)"


_OPTIONAL_ON_CREATE = _listed(["`headers`", "`client_certificate`", "`oauth2`", "`filter`",
                               "`retry_schedule`",
                               *(_with_default(option) for option in _EDITABLE)])
_PATCHABLE = ", ".join(f"`{name}`" for name in ("url", "event_types", "description", "headers",
                                                "client_certificate", "oauth2", "filter",
                                                "retry_schedule",
                                                *(option.name for option in _EDITABLE)))
_BACK_TO_DEFAULTS = _listed([f"`{option.name}: null`" for option in _EDITABLE if option.nullable])

_SETTINGS_ERRORS = {400: "`unknown_event_type`: event_types names a type not in the catalogue; "
                         "`target_not_allowed`: the url's host is local or not public; "
                         "`reserved_header`: headers names a header only the service sets "
                         "(the message names each); `invalid_client_certificate`: not PEM, a "
                         "key that does not match the certificate, or an http endpoint; "
                         "`invalid_oauth2`: a missing or malformed field, a refused token_url, "
                         "or an Authorization entry in headers beside oauth2; "
                         "`invalid_filter`: a filter that cannot be parsed (the message "
                         "names where in it, `filter[\"data.amount\"][\"$gt\"]`)"}


def _answer(schema, subscription: Subscription, status: int = 200, headers=None) -> Response:
    return json_response(schema, subscription_resource(subscription), status, headers)


def _settings_of(body: dict) -> dict:
    """The subscription settings in a create or PATCH body, checked beyond their schema."""
    if "event_types" in body:
        require_known_event_types(body["event_types"])
    if "headers" in body:
        require_settable_headers(body["headers"])
    if "filter" in body:
        subscriptions.check_filter(body["filter"])  # 400 invalid_filter naming where
    return {name: body[name] for name in subscriptions.SETTINGS if name in body}


def _own(subscription_id: str) -> Subscription:
    """The caller's live subscription with this id, or 404."""
    found = subscriptions.owned(db_session(), current_account_id(), subscription_id)
    if found is None:
        raise ApiError(404, "not_found", "Subscription not found.")
    return found


@bp.post("")
@documented(
    "Create a subscription",
    description="Registers an endpoint. Without `event_types` (or with null) it receives "
    f"every event type. {_OPTIONAL_ON_CREATE} are optional. The answer holds the signing "
    "secret, in the format of its scheme; under `standard-ed25519` the service keeps the "
    "private key and the answer holds `public_key` instead. Deleted subscriptions do not "
    "count toward the account's limit.",
    body=SubscriptionCreateSchema,
    responses={201: ("The new subscription, with its secret", SubscriptionWithSecretSchema)},
    headers={201: {"Location": "the new subscription's path, "
                               "`/api/webhooks/subscriptions/{id}`"}},
    errors={**_SETTINGS_ERRORS,
            409: "`subscription_limit`: the account already has WEBHOOKS_MAX_SUBSCRIPTIONS "
                 "(by default 100) subscriptions; delete one first"},
)
def create() -> Response:
    body = load_body(SubscriptionCreateSchema())
    settings = _settings_of(body)
    check_target_allowed(body["url"])
    settings.update(subscriptions.credential_changes(body, None))
    subscription = subscriptions.create(db_session(), current_account_id(), body["url"],
                                        actor=current_actor(),
                                        signature_scheme=body["signature_scheme"], **settings)
    location = url_for(".get", subscription_id=subscription.id)
    return _answer(_WITH_SECRET, subscription, 201, {"Location": location})


@bp.get("")
@documented(
    "List subscriptions",
    description="The caller's subscriptions, newest first by (created_at, id), without their "
    "secrets. Pass `next_cursor` as `cursor` for the next page; it is null on the last page.",
    query=SubscriptionQuerySchema,
    responses={200: ("A page of subscriptions", SubscriptionListSchema)},
    errors={400: "`invalid_cursor`: the cursor is not one this API gave out"},
)
def list_all() -> Response:
    query = load_query(SubscriptionQuerySchema())
    statement = reads.live_subscriptions(current_account_id())
    page, next_cursor = keyset_page(
        db_session(), statement, Subscription, query.get("cursor"), query["limit"]
    )
    now = utcnow()
    data = [subscription_resource(subscription, now) for subscription in page]
    return json_response(_LIST, {"data": data, "next_cursor": next_cursor})


@bp.get("/<subscription_id>")
@documented(
    "Get a subscription",
    responses={200: ("The subscription, with its secret", SubscriptionWithSecretSchema)},
)
def get(subscription_id: str) -> Response:
    return _answer(_WITH_SECRET, _own(subscription_id))


@bp.patch("/<subscription_id>")
@documented(
    "Change a subscription",
    description=f"Changes the fields given ({_PATCHABLE}); the others stay. `event_types: null` "
    "means every type; `description: null` clears it; `headers` replaces every custom header "
    f"(`{{}}` removes them); {_BACK_TO_DEFAULTS} go back to the "
    "defaults. A `signature_scheme` other than the current one gives the subscription a new "
    "secret of that scheme's format, which signs from the next attempt on (a staged secret "
    "is dropped): the answer then holds `secret`; a change to `standard-ed25519` gives it a "
    "new key pair instead, whose `public_key` the answer holds (no `secret`).",
    body=SubscriptionUpdateSchema,
    responses={200: ("The changed subscription; with `secret` (and `next_secret`) when "
                     "`signature_scheme` changed", SubscriptionChangedSchema)},
    errors=_SETTINGS_ERRORS,
)
def update(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    body = load_body(SubscriptionUpdateSchema())
    changes = _settings_of(body)
    if "url" in body:
        check_target_allowed(body["url"])
        changes["url"] = url_to_store(body["url"], subscription.url)
    changes.update(subscriptions.credential_changes(body, subscription))
    if subscriptions.change(db_session(), subscription, actor=current_actor(),
                            signature_scheme=body.get("signature_scheme"), **changes):
        return _answer(_WITH_SECRET, subscription)  # the new scheme's secret signs from now on
    return _answer(_PUBLIC, subscription)


@bp.delete("/<subscription_id>")
@documented(
    "Delete a subscription",
    description="No further attempts are made to it; its waiting deliveries end `failed`. "
    "Its delivery history stays readable.",
    responses={204: ("Deleted", None)},
)
def delete(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    subscriptions.delete(db_session(), subscription, actor=current_actor())
    return Response(status=204)


@bp.post("/<subscription_id>/rotate-secret")
@documented(
    "Rotate the signing secret",
    description="Without a body (or with `{}`) the secret is replaced at once: the next "
    "attempt is signed with the new one, and a staged secret is dropped. With "
    "`{\"activate_in\": seconds}` the rotation is staged: `secret` still signs, and the "
    "answer also holds `next_secret` and `next_secret_active_at`; from that moment on "
    "`next_secret` signs and becomes `secret`. Receivers verify with both meanwhile. A second "
    "staged rotation replaces the staged secret. Under `standard-ed25519` the same is done "
    "with key pairs: the answer holds `public_key` and, while staged, `next_public_key` "
    "(never a secret), and every delivery carries both signatures until the staged key "
    "takes over.",
    body=RotateSecretSchema,
    body_required=False,
    responses={200: ("The subscription, with its secrets", SubscriptionWithSecretSchema)},
)
def rotate_secret(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    body = load_optional_body(RotateSecretSchema())
    rotation.rotate(db_session(), subscription, body.get("activate_in"), actor=current_actor())
    return _answer(_WITH_SECRET, subscription)


_NOTHING_STAGED = {409: "`nothing_staged`: no secret is staged (none was, it was cancelled, or "
                       "its time came and it already signs)"}


def _nothing_staged() -> ApiError:
    return ApiError(409, "nothing_staged", "No secret is staged for this subscription.")


@bp.post("/<subscription_id>/rotate-secret/activate")
@documented(
    "Activate the staged secret now",
    description="The secret staged by `rotate-secret` with `activate_in` signs from the next "
    "attempt on, without waiting for `next_secret_active_at`: it becomes `secret`, and the "
    "old secret no longer signs. The dashboard's \"Activate now\" does the same.",
    responses={200: ("The subscription, with its new secret", SubscriptionWithSecretSchema)},
    errors=_NOTHING_STAGED,
)
def activate_staged_secret(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    session = db_session()
    if not rotation.activate_now(session, subscription, actor=current_actor()):
        raise _nothing_staged()
    session.refresh(subscription)
    return _answer(_WITH_SECRET, subscription)


@bp.post("/<subscription_id>/rotate-secret/cancel")
@documented(
    "Cancel the staged secret",
    description="Drops the secret staged by `rotate-secret` with `activate_in`: it never "
    "signs, and `secret` keeps signing. The dashboard's \"Cancel\" does the same.",
    responses={200: ("The subscription", SubscriptionSchema)},
    errors=_NOTHING_STAGED,
)
def cancel_staged_secret(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    session = db_session()
    if not rotation.cancel(session, subscription, actor=current_actor()):
        raise _nothing_staged()
    session.refresh(subscription)
    return _answer(_PUBLIC, subscription)


@bp.post("/<subscription_id>/recover")
@documented(
    "Recover failed deliveries",
    description="Replays (as `POST /deliveries/<id>/replay` does) every `failed` or `dead` "
    "delivery of this subscription created in `[since, until)` that was not replayed before, "
    "oldest first; calling it again replays nothing twice. The work is done in transactions "
    "of WEBHOOKS_RECOVER_BATCH (500) deliveries, and one call replays at most "
    "WEBHOOKS_RECOVER_MAX (10,000): `more` says the window holds more, and the same call "
    "again continues. The replays go out through the sweep within seconds; while the "
    "subscription is paused they wait in `paused` until it is resumed, and `held` counts "
    "them.",
    body=RecoverSchema,
    responses={202: ("How many deliveries were replayed", RecoveredSchema)},
    errors={400: "`invalid_window`: `since` is in the future or after `until`"},
)
def recover(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    body = load_body(RecoverSchema())
    try:
        # Commits the request's session after each batch (only the key was read so far).
        recovered = recovery.recover(db_session(), subscription, body["since"], body["until"],
                                     actor=current_actor())
    except InvalidWindow as error:
        raise ApiError(400, "invalid_window", f"The window is not valid: {error}.") from None
    return json_response(_RECOVERED, recovered, 202)


@bp.post("/<subscription_id>/test")
@documented(
    "Send a test event",
    description="Emits a `test.ping` event to this subscription only, even while it is paused. "
    "At most WEBHOOKS_TEST_RATE_LIMIT (by default 5 in any 5 seconds) per subscription.",
    responses={202: ("The test event and its delivery", TestSentSchema)},
    errors={429: "`rate_limited`: this subscription's test events are over their limit; "
                 "`Retry-After` says when to try again"},
)
def send_test_event(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    check_send_test(subscription.account_id, subscription.id)
    # Published when the request's transaction commits.
    emitted = testing.send_test_event(db_session(), subscription)
    sent = {"event_id": emitted.id, "delivery_id": emitted.delivery_ids[0]}
    return json_response(_TEST_SENT, sent, 202)


@bp.post("/<subscription_id>/pause")
@documented(
    "Pause a subscription",
    description="Sets it paused with `paused_reason` `manual`: its deliveries wait in "
    "`paused` (test.ping excepted) exactly as when it pauses itself, until it is resumed. "
    "Pausing a paused one changes nothing (its reason stays).",
    responses={200: ("The paused subscription", SubscriptionSchema)},
)
def pause(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    pausing.pause(db_session(), subscription, actor=current_actor())
    return _answer(_PUBLIC, subscription)


@bp.post("/<subscription_id>/resume")
@documented(
    "Resume a subscription",
    description="Sets it active with its failure counter at 0 and `paused_reason` null, "
    "whatever paused it; its held (`paused`) deliveries become pending and go out at once. "
    "Resuming an active one only resets the counter.",
    responses={200: ("The resumed subscription", SubscriptionSchema)},
)
def resume(subscription_id: str) -> Response:
    subscription = _own(subscription_id)
    pausing.resume(db_session(), subscription, actor=current_actor())  # what it released goes out after commit
    return _answer(_PUBLIC, subscription)
