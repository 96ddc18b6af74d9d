"""CONTRACT 9.2: a body over 64 KiB answers 413 in the error shape on every route, also a
route that never reads its body (issue 22: /test and /resume took 70 KB), also chunked."""

from __future__ import annotations

import io
import json

import pytest

from .helpers import make_subscription

LIMIT = 64 * 1024
ID = "00000000-0000-4000-8000-000000000000"
OVER = b"x" * (70 * 1000)


def _api_routes(app) -> list[tuple[str, str, bytes, int]]:
    """(method, path, a body over its limit, the limit) of every API route, with a made-up id where
    the path takes one. A view with a limit of its own (web/body_limit.py: the publisher
    API's event routes take 256 KiB) gets a body over that one."""
    routes = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/webhooks"):
            continue
        path = rule.rule
        for argument in rule.arguments:
            path = path.replace(f"<{argument}>", ID)
        own = getattr(app.view_functions[rule.endpoint], "body_limit_bytes", None)
        with app.app_context():
            limit = LIMIT if own is None else own()
        over = OVER if own is None else b"x" * (limit + 1000)
        routes += [(method, path, over, limit)
                   for method in sorted(rule.methods - {"HEAD", "OPTIONS"})]
    return routes


def _chunked(body: bytes) -> dict:
    """Client arguments for a body sent without a length, as a chunked request arrives."""
    return {"input_stream": io.BytesIO(body), "content_type": "application/json",
            "environ_overrides": {"wsgi.input_terminated": True,
                                  "HTTP_TRANSFER_ENCODING": "chunked"}}


def _is_413(response, limit: int = LIMIT) -> None:
    """The 413 in the error shape, naming the ``limit`` (bytes) the route holds to."""
    assert response.status_code == 413, (response.status_code, response.get_data(as_text=True))
    error = response.get_json()["error"]
    assert error["code"] == "payload_too_large"
    assert str(limit) in error["message"]


def test_every_api_route_refuses_a_body_over_the_limit(app, client, alice):
    subscription_id = make_subscription(alice.account_id, status="paused")
    routes = _api_routes(app)
    assert ("POST", f"/api/webhooks/subscriptions/{ID}/test", OVER, LIMIT) in routes
    assert len(routes) >= 14
    for method, path, over, limit in routes:
        path = path.replace(ID, subscription_id) if "subscriptions/" in path else path
        _is_413(client.open(path, method=method, data=over, headers=alice.headers,
                            content_type="application/json"), limit)


@pytest.mark.parametrize("action", ["/test", "/resume", ""])
def test_a_chunked_body_over_the_limit_is_refused_too(client, alice, action):
    """Also where the view reads the body: Werkzeug's stream stopped quietly at the limit, so
    the view saw a body cut short (400 invalid_json), not a 413."""
    subscription_id = make_subscription(alice.account_id, status="paused")
    path = f"/api/webhooks/subscriptions/{subscription_id}{action}" if action else \
        "/api/webhooks/subscriptions"
    body = json.dumps({"url": "https://hooks.example.com/in", "description": "d" * LIMIT})
    _is_413(client.post(path, headers=alice.headers, **_chunked(body.encode())))


def test_a_chunked_body_under_the_limit_reaches_the_view(client, alice):
    body = json.dumps({"url": "https://hooks.example.com/in",
                       "description": "d" * 500}).encode()
    response = client.post("/api/webhooks/subscriptions", headers=alice.headers,
                           **_chunked(body))
    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.get_json()["description"] == "d" * 500


def test_the_dashboard_refuses_it_with_its_own_page(client):
    response = client.post("/dashboard/sign-in", data=OVER,
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413
    assert response.mimetype == "text/html"
