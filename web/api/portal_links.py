"""``POST /api/webhooks/portal-links``: a single-use link into the caller's dashboard (9.3).

The product calls this with its customer's API key and hands the ``url`` to
the customer's browser (or puts it in an iframe): opening it signs that
browser in to the account's dashboard once (web/dashboard/portal.py). The
link's base is ``WEBHOOKS_PUBLIC_URL``, else the request's own scheme and host.
"""

from __future__ import annotations

from flask import Blueprint, Response

from webhooks.storage.models import utcnow
from webhooks.services.portal_links import create_link

from ..apidoc import documented
from ..auth import authenticate, current_account_id, current_actor
from ..params import load_optional_body
from ..public_url import public_url_for
from ..responses import json_response
from ..schemas import PortalLinkCreateSchema, PortalLinkSchema
from ..transaction import db_session
from .prefix import API_PREFIX

__all__ = ["bp", "link_url"]

bp = Blueprint("portal_links", __name__, url_prefix=f"{API_PREFIX}/portal-links")
bp.before_request(authenticate)

_LINK = PortalLinkSchema()


def link_url(token: str) -> str:
    """The absolute URL that opens the link with ``token``."""
    return public_url_for("dashboard.open_portal_link", token=token)


@bp.post("")
@documented(
    "Create a portal link",
    description="A link that signs one browser in to the caller's dashboard, without an API "
    "key: opened once, it starts a dashboard session that ends at `expires_at`; a second open "
    "signs nothing in and says the link was used or expired; a browser signed in to another "
    "account is asked before the link replaces its session. With `read_only: true` the "
    "session shows every page, hides every action and every secret, and answers 403 to any "
    "state-changing request. The link's base is WEBHOOKS_PUBLIC_URL (default: this request's scheme and "
    "host); WEBHOOKS_PORTAL_FRAME_ANCESTORS lists the origins that may show it in a frame. "
    "Without a body: a full link for 3,600 seconds.",
    body=PortalLinkCreateSchema,
    body_required=False,
    responses={201: ("The link and when it ends", PortalLinkSchema)},
)
def create() -> Response:
    body = load_optional_body(PortalLinkCreateSchema())
    token, link = create_link(db_session(), current_account_id(), utcnow(), body["expires_in"],
                              actor=current_actor(), read_only=body["read_only"])
    return json_response(_LINK, {"url": link_url(token), "expires_at": link.expires_at}, 201)
