"""Helpers for the portal link tests: make a link as the API does, read rows back."""

from __future__ import annotations

from sqlalchemy import select

from tests.factories import AUDIT_ACTOR
from webhooks.storage.db import session_scope
from webhooks.storage.models import DashboardSession, PortalLink, utcnow
from webhooks.services.portal_links import create_link

__all__ = ["COOKIE", "new_link", "link_path", "session_rows", "link_rows"]

COOKIE = "webhooks_session"


def new_link(account_id: str, *, expires_in: int = 3600, read_only: bool = False) -> str:
    """A fresh link's token for ``account_id``."""
    with session_scope() as session:
        token, _ = create_link(session, account_id, utcnow(), expires_in, actor=AUDIT_ACTOR,
                               read_only=read_only)
    return token


def link_path(token: str) -> str:
    return f"/dashboard/portal/{token}"


def session_rows() -> list[DashboardSession]:
    with session_scope() as session:
        rows = list(session.scalars(select(DashboardSession)))
        session.expunge_all()
        return rows


def link_rows() -> list[PortalLink]:
    with session_scope() as session:
        rows = list(session.scalars(select(PortalLink)))
        session.expunge_all()
        return rows
