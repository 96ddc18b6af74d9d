"""webhooks/services/portal_links.py on both databases: a link is spent once, never after its expiry,
and spent links are deleted in bounded batches."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from tests.factories import AUDIT_ACTOR
from webhooks.tenants.accounts import create_account
from webhooks.storage.db import session_scope
from webhooks.storage.models import PortalLink, utcnow
from webhooks.services.portal_links import consume_link, create_link, delete_spent


@pytest.fixture
def account_id(any_db):
    with session_scope() as session:
        account, _ = create_account(session, "acme")
        return account.id


def _create(account_id: str, now: dt.datetime, expires_in: int = 600, **kwargs) -> str:
    with session_scope() as session:
        token, _ = create_link(session, account_id, now, expires_in, actor=AUDIT_ACTOR, **kwargs)
    return token


def _consume(token, now: dt.datetime):
    with session_scope() as session:
        return consume_link(session, token, now)


def test_a_link_is_spent_once(account_id):
    now = utcnow()
    token = _create(account_id, now, 600, read_only=True)
    opened = _consume(token, now)
    assert opened is not None
    assert (opened.account_id, opened.read_only) == (account_id, True)
    assert opened.expires_at == now + dt.timedelta(seconds=600)
    assert _consume(token, now) is None
    with session_scope() as session:
        (link,) = session.scalars(select(PortalLink))
        assert link.used_at == now and link.id != token


def test_a_link_opens_nothing_from_its_expiry_on(account_id):
    now = utcnow()
    token = _create(account_id, now, 60)
    assert _consume(token, now + dt.timedelta(seconds=60)) is None
    assert _consume(token, now + dt.timedelta(seconds=59)) is not None


@pytest.mark.parametrize("token", [None, "", 42, "unknown"])
def test_what_names_no_link_opens_nothing(account_id, token):
    _create(account_id, utcnow())
    assert _consume(token, utcnow()) is None


@pytest.mark.parametrize("expires_in", [59, 86401, 0, -1, 60.0, True, "600"])
def test_create_refuses_an_expiry_outside_the_contract_s_range(account_id, expires_in):
    with session_scope() as session, pytest.raises(ValueError, match="expires_in"):
        create_link(session, account_id, utcnow(), expires_in, actor=AUDIT_ACTOR)


def test_spent_links_are_deleted_oldest_first_in_bounded_batches(account_id):
    now = utcnow()
    rows = {"used": (now + dt.timedelta(hours=1), now), "live": (now + dt.timedelta(hours=1), None)}
    rows |= {f"expired-{n}": (now - dt.timedelta(minutes=n), None) for n in (1, 2, 3)}
    with session_scope() as session:
        for name, (expires_at, used_at) in rows.items():
            session.add(PortalLink(id=name, account_id=account_id, created_at=now,
                                   expires_at=expires_at, used_at=used_at))
    with session_scope() as session:
        assert delete_spent(session, now, limit=2) == 2
    with session_scope() as session:
        assert set(session.scalars(select(PortalLink.id))) == {"used", "live", "expired-1"}
        assert delete_spent(session, now, limit=10) == 2
        assert delete_spent(session, now, limit=10) == 0
        assert list(session.scalars(select(PortalLink.id))) == ["live"]
