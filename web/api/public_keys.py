"""``GET /api/webhooks/public-keys/<account_id>``: an account's public keys, for its receivers.

No API key: receivers, which hold none, fetch it to verify ``standard-ed25519``
deliveries (CONTRACT 10.2). It is counted by the limit of every request without
a key (WEBHOOKS_API_RATE_LIMIT per address, web/ratelimit.py) and may be cached
for :data:`KEY_SET_MAX_AGE` seconds. An id that names no account answers the
same empty set as an account without such keys (webhooks/services/public_keys.py).
"""

from __future__ import annotations

from flask import Blueprint, Response

from webhooks.services import public_keys
from webhooks.services.reads import utcnow

from ..apidoc import documented
from ..responses import json_response
from ..schemas import KeySetSchema
from ..transaction import db_session
from .prefix import API_PREFIX

__all__ = ["bp", "KEY_SET_MAX_AGE"]

bp = Blueprint("public_keys", __name__, url_prefix=f"{API_PREFIX}/public-keys")

# Seconds a receiver (or a cache between) may keep the key set: a key staged by a rotation
# reaches it at most this late, so a rotation staged for longer reaches every receiver first.
KEY_SET_MAX_AGE = 300

_KEY_SET = KeySetSchema()


@bp.get("/<account_id>")
@documented(
    "Public keys of an account",
    description="A JSON Web Key Set (RFC 7517) of the Ed25519 public keys that verify the "
    "account's `standard-ed25519` deliveries: each subscription's current key and, while a "
    "rotation is staged, its next key, each with the `subscription_id` it verifies and a "
    "`kid` that stays the same for the same key. No API key is needed; the answer may be "
    f"cached for {KEY_SET_MAX_AGE} seconds (`Cache-Control`). An unknown account, or an id "
    "that is no account's, answers `{\"keys\": []}`, as an account without such a "
    "subscription does.",
    public=True,
    responses={200: ("The account's key set", KeySetSchema)},
    headers={200: {"Cache-Control": f"`public, max-age={KEY_SET_MAX_AGE}`"}},
)
def key_set(account_id: str) -> Response:
    keys = public_keys.account_key_set(db_session(), account_id, utcnow())
    return json_response(_KEY_SET, {"keys": keys},
                         headers={"Cache-Control": f"public, max-age={KEY_SET_MAX_AGE}"})
