"""One session per request: commit on success, roll back on error, after-commit actions."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from web import create_app
from web.errors import ApiError
from web.transaction import after_commit, db_session
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription, new_id, utcnow
from webhooks.tenants.accounts import new_signing_secret


def _subscription(account_id: str, url: str) -> Subscription:
    return Subscription(
        id=new_id(), account_id=account_id, url=url, secret=new_signing_secret(),
        event_types=None, status="active", consecutive_failures=0, created_at=utcnow(),
    )


def _urls() -> list[str]:
    with session_scope() as session:
        return sorted(session.scalars(select(Subscription.url)))


@pytest.fixture
def app(db, alice):
    """The real app plus routes that write and then succeed or fail in several ways."""
    app = create_app({"TESTING": True})
    app.seen_after_commit = []

    def write(url: str) -> None:
        db_session().add(_subscription(alice.account_id, url))
        db_session().flush()
        after_commit(lambda: app.seen_after_commit.append(_urls()))

    @app.post("/t/ok")
    def ok():
        write("https://ok.example")
        return {"ok": True}, 201

    @app.post("/t/api-error")
    def api_error():
        write("https://api-error.example")
        raise ApiError(409, "conflict", "No.")

    @app.post("/t/crash")
    def crash():
        write("https://crash.example")
        raise RuntimeError("boom")

    @app.post("/t/bad-commit")
    def bad_commit():
        # Not flushed: the foreign key fails only at commit.
        db_session().add(_subscription(new_id(), "https://orphan.example"))
        after_commit(lambda: app.seen_after_commit.append("never"))
        return {"ok": True}

    @app.post("/t/callback-fails")
    def callback_fails():
        write("https://callback.example")
        after_commit(lambda: 1 / 0)
        return {"ok": True}

    return app


def test_a_successful_request_commits_then_runs_its_after_commit_actions(app):
    assert app.test_client().post("/t/ok").status_code == 201
    assert _urls() == ["https://ok.example"]
    # The action saw the committed row from another session.
    assert app.seen_after_commit == [["https://ok.example"]]


@pytest.mark.parametrize("route, status", [("/t/api-error", 409), ("/t/crash", 500)])
def test_a_failed_request_rolls_back_and_runs_no_action(app, route, status):
    response = app.test_client().post(route)
    assert response.status_code == status
    assert set(response.get_json()["error"]) == {"code", "message"}
    assert _urls() == []
    assert app.seen_after_commit == []


def test_a_failed_commit_is_a_json_500_and_runs_no_action(app):
    response = app.test_client().post("/t/bad-commit")
    assert response.status_code == 500
    assert response.get_json()["error"]["code"] == "internal_error"
    assert _urls() == []
    assert app.seen_after_commit == []


def test_a_failing_action_does_not_undo_the_committed_request(app):
    response = app.test_client().post("/t/callback-fails")
    assert response.status_code == 200
    assert _urls() == ["https://callback.example"]


def test_routes_that_need_no_database_open_no_session(db, monkeypatch):
    import web.transaction as transaction

    def refuse():
        raise AssertionError("a session was opened")

    monkeypatch.setattr(transaction, "get_sessionmaker", refuse)
    client = create_app({"TESTING": True}).test_client()
    assert client.get("/api/webhooks/events/samples").status_code == 200
    assert client.get("/api/webhooks/event-types").status_code == 200
    assert client.get("/api/webhooks/openapi.json").status_code == 200
