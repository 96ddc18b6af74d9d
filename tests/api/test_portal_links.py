"""CONTRACT 9.3, ``POST /api/webhooks/portal-links``: 201 {"url", "expires_at"}; bad input 400
with a reason and nothing stored; no key 401; the link's base (WEBHOOKS_PUBLIC_URL)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select

from webhooks.storage.db import session_scope
from webhooks.storage.models import PortalLink, utcnow

pytestmark = pytest.mark.database

ROUTE = "/api/webhooks/portal-links"


def _links() -> list[PortalLink]:
    with session_scope() as session:
        rows = list(session.scalars(select(PortalLink)))
        session.expunge_all()
        return rows


def _expires_at(answer: dict) -> dt.datetime:
    return dt.datetime.fromisoformat(answer["expires_at"].replace("Z", "+00:00"))


def test_a_link_without_a_body_lasts_an_hour_and_is_not_read_only(client, alice):
    before = utcnow()
    response = client.post(ROUTE, headers=alice.headers)
    assert response.status_code == 201
    answer = response.get_json()
    assert set(answer) == {"url", "expires_at"}
    assert answer["url"].startswith("http://localhost/dashboard/portal/")
    assert answer["expires_at"].endswith("Z")
    assert dt.timedelta(seconds=3600) <= _expires_at(answer) - before < dt.timedelta(seconds=3610)
    (link,) = _links()
    assert link.account_id == alice.account_id and not link.read_only and link.used_at is None
    assert link.expires_at == _expires_at(answer)
    token = answer["url"].rsplit("/", 1)[1]
    assert token not in link.id  # the row keeps a hash, never the token


@pytest.mark.parametrize("expires_in", [60, 86400])
def test_expires_in_and_read_only_are_kept(client, alice, expires_in):
    before = utcnow()
    response = client.post(ROUTE, headers=alice.headers,
                           json={"expires_in": expires_in, "read_only": True})
    assert response.status_code == 201
    lasts = _expires_at(response.get_json()) - before
    assert dt.timedelta(seconds=expires_in) <= lasts < dt.timedelta(seconds=expires_in + 10)
    (link,) = _links()
    assert link.read_only


@pytest.mark.parametrize("body, reason", [
    ({"expires_in": 59}, "expires_in"),
    ({"expires_in": 86401}, "expires_in"),
    ({"expires_in": 0}, "expires_in"),
    ({"expires_in": -60}, "expires_in"),
    ({"expires_in": 3600.5}, "expires_in"),
    ({"expires_in": "3600"}, "expires_in"),
    ({"expires_in": True}, "expires_in"),
    ({"expires_in": None}, "expires_in"),
    ({"expires_in": 10**30}, "expires_in"),
    ({"read_only": "true"}, "read_only"),
    ({"read_only": 1}, "read_only"),
    ({"read_only": None}, "read_only"),
    ({"url": "https://elsewhere.example"}, "url"),
])
def test_bad_input_answers_400_with_a_reason_and_stores_nothing(client, alice, body, reason):
    response = client.post(ROUTE, headers=alice.headers, json=body)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "validation_error" and reason in error["message"]
    assert _links() == []


@pytest.mark.parametrize("raw", [b"[]", b"not json", b'"x"', b"{"])
def test_a_body_that_is_not_an_object_answers_400(client, alice, raw):
    response = client.post(ROUTE, headers={**alice.headers, "Content-Type": "application/json"},
                           data=raw)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] in {"invalid_json", "validation_error"}
    assert _links() == []


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-key"},
                                     {"Authorization": "Basic abc"}])
def test_without_a_valid_key_answers_401(client, db, headers):
    response = client.post(ROUTE, headers=headers, json={})
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "unauthorized"
    assert _links() == []


def test_other_methods_answer_405(client, alice):
    response = client.get(ROUTE, headers=alice.headers)
    assert response.status_code == 405


def test_the_public_url_is_the_link_s_base(db, redis_broker, alice, monkeypatch):
    from web import create_app

    monkeypatch.setenv("WEBHOOKS_PUBLIC_URL", "https://hooks.example.com/base/")
    client = create_app({"TESTING": True}).test_client()
    response = client.post(ROUTE, headers=alice.headers, base_url="http://10.0.0.5:8000")
    assert response.status_code == 201
    assert response.get_json()["url"].startswith("https://hooks.example.com/base/dashboard/portal/")


def test_without_a_public_url_the_request_s_own_scheme_and_host(client, alice):
    response = client.post(ROUTE, headers=alice.headers, base_url="https://api.example.org:8443")
    assert response.get_json()["url"].startswith("https://api.example.org:8443/dashboard/portal/")


def test_each_new_link_deletes_a_bounded_batch_of_spent_links(client, alice):
    from webhooks.services.portal_links import CLEANUP_BATCH

    past = utcnow() - dt.timedelta(seconds=1)
    with session_scope() as session:
        for number in range(CLEANUP_BATCH + 5):
            session.add(PortalLink(id=f"{number:064x}", account_id=alice.account_id,
                                   created_at=past, expires_at=past, read_only=False))
        session.add(PortalLink(id="f" * 64, account_id=alice.account_id, created_at=past,
                               expires_at=past + dt.timedelta(hours=1), used_at=past))
    assert client.post(ROUTE, headers=alice.headers).status_code == 201
    with session_scope() as session:
        left = session.scalar(select(func.count()).select_from(PortalLink))
    assert left == 5 + 1 + 1  # the batch went, oldest first; the rest go with the next links
    assert client.post(ROUTE, headers=alice.headers).status_code == 201
    assert len(_links()) == 2  # every spent one (the used one too) is gone; two live links
