"""Portal link resources (CONTRACT 9.3): the body of ``POST /portal-links`` and its answer."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.events.fields import StrictBoolean, StrictInteger
from webhooks.services.portal_links import EXPIRES_IN_DEFAULT, EXPIRES_IN_RANGE

from .common import UTCTimestamp

__all__ = ["PortalLinkCreateSchema", "PortalLinkSchema"]


class PortalLinkCreateSchema(Schema):
    """Body of ``POST /portal-links`` (optional: no body makes a full link for an hour)."""

    expires_in = StrictInteger(
        required=False, load_default=EXPIRES_IN_DEFAULT,
        validate=validate.Range(min=EXPIRES_IN_RANGE[0], max=EXPIRES_IN_RANGE[1]),
        metadata={"description": "seconds (60 to 86,400) from now until the link, and the "
                                 "session it opens, end; default 3,600"})
    read_only = StrictBoolean(
        required=False, load_default=False,
        metadata={"description": "true: the session shows every page but changes nothing "
                                 "(actions hidden, any state-changing request answers 403); "
                                 "default false"})


class PortalLinkSchema(Schema):
    """Answer of ``POST /portal-links``."""

    url = fields.String(
        required=True,
        metadata={"description": "the link: opened once, it signs a browser in to the "
                                 "caller's dashboard; a second open signs nothing in"})
    expires_at = UTCTimestamp(
        required=True,
        metadata={"description": "when the link stops working and its session ends (UTC)"})
