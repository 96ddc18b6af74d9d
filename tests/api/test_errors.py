"""Every error is the JSON shape with the right 4xx: never HTML, never a stack trace."""

from __future__ import annotations

import pytest

from webhooks.config import reset_settings_cache

from web import create_app
from web.errors import ApiError

SUBSCRIPTIONS = "/api/webhooks/subscriptions"


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.data
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    message = body["error"]["message"]
    assert message and message[0].isupper() and message.endswith(".")
    text = response.get_data(as_text=True)
    assert "Traceback" not in text and "<html" not in text.lower()
    return body["error"]


# --- 401 --------------------------------------------------------------------------------

PROTECTED = [
    ("get", SUBSCRIPTIONS),
    ("post", SUBSCRIPTIONS),
    ("get", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000"),
    ("patch", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000"),
    ("delete", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000"),
    ("post", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000/test"),
    ("post", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000/resume"),
    ("post", f"{SUBSCRIPTIONS}/00000000-0000-4000-8000-000000000000/rotate-secret"),
    ("get", "/api/webhooks/deliveries"),
    ("get", "/api/webhooks/deliveries/00000000-0000-4000-8000-000000000000"),
    ("post", "/api/webhooks/deliveries/00000000-0000-4000-8000-000000000000/replay"),
]


@pytest.mark.parametrize("method, path", PROTECTED)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer whk_not-a-real-key"},
        {"Authorization": "Bearer not-even-our-prefix"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Token whk_abc"},
    ],
    ids=["none", "empty", "no-key", "unknown-key", "foreign-key", "basic", "token"],
)
def test_protected_routes_need_a_valid_key(client, alice, method, path, headers):
    response = getattr(client, method)(path, headers=headers, json={"url": "https://x.example"})
    _error(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_bearer_scheme_is_case_insensitive(client, alice):
    key = alice.headers["Authorization"].split(" ", 1)[1]
    assert client.get(SUBSCRIPTIONS, headers={"Authorization": f"bearer {key}"}).status_code == 200


# --- 400 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"   ", b"{", b"{'url': 'x'}", b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000],
    ids=["empty", "blank", "truncated", "single-quotes", "not-utf8", "deep"],
)
def test_a_body_that_is_not_json_is_400_invalid_json(data, alice):
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 1_000_000})
    response = app.test_client().post(
        SUBSCRIPTIONS, data=data, content_type="application/json", headers=alice.headers
    )
    _error(response, 400, "invalid_json")


@pytest.mark.parametrize("body", [[], "x", 1, None, [{"url": "https://x.example"}]])
def test_a_json_body_that_is_not_an_object_is_400(client, alice, body):
    import json

    response = client.post(
        SUBSCRIPTIONS, data=json.dumps(body), content_type="application/json", headers=alice.headers
    )
    _error(response, 400, "validation_error")


def test_a_validation_error_names_every_bad_field(client, alice):
    response = client.post(
        SUBSCRIPTIONS, json={"url": "nope", "description": 1, "extra": True}, headers=alice.headers
    )
    message = _error(response, 400, "validation_error")["message"]
    for field in ("url", "description", "extra"):
        assert field in message


def test_a_body_without_a_json_content_type_is_still_read_as_json(client, alice):
    response = client.post(
        SUBSCRIPTIONS, data='{"url": "https://hooks.example.com/x"}', content_type="text/plain",
        headers=alice.headers,
    )
    assert response.status_code == 201


# --- 404 and 405 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/api/webhooks/nothing", "/api/webhooks/subscriptions/", "/nowhere", "/api/webhooks"]
)
def test_unknown_paths_are_404_json(client, path):
    _error(client.get(path), 404, "not_found")


@pytest.mark.parametrize(
    "method, path, allowed",
    [
        ("put", SUBSCRIPTIONS, {"GET", "POST"}),
        ("delete", SUBSCRIPTIONS, {"GET", "POST"}),
        ("post", f"{SUBSCRIPTIONS}/x", {"GET", "PATCH", "DELETE"}),
        ("get", f"{SUBSCRIPTIONS}/x/resume", {"POST"}),
        ("patch", "/api/webhooks/deliveries", {"GET"}),
        ("get", "/api/webhooks/deliveries/x/replay", {"POST"}),
        ("post", "/api/webhooks/events/samples", {"GET"}),
        ("delete", "/api/webhooks/event-types", {"GET"}),
        ("post", "/api/webhooks/openapi.json", {"GET"}),
    ],
)
def test_wrong_methods_are_405_with_allow(client, method, path, allowed):
    response = getattr(client, method)(path)
    _error(response, 405, "method_not_allowed")
    assert allowed <= {m.strip() for m in response.headers["Allow"].split(",")}


# --- 413 --------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413(client, alice):
    big = {"url": "https://hooks.example.com/x", "description": "x" * (70 * 1024)}
    message = _error(client.post(SUBSCRIPTIONS, json=big, headers=alice.headers), 413,
                     "payload_too_large")["message"]
    assert "65536" in message


def test_the_limit_is_configurable(db, redis_broker, alice):
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 100})
    body = {"url": "https://hooks.example.com/x", "description": "x" * 200}
    response = app.test_client().post(SUBSCRIPTIONS, json=body, headers=alice.headers)
    _error(response, 413, "payload_too_large")


def test_the_limit_can_come_from_the_environment(db, monkeypatch, alice):
    monkeypatch.setenv("WEBHOOKS_MAX_REQUEST_BYTES", "50")
    reset_settings_cache()
    app = create_app({"TESTING": True})
    assert app.config["MAX_CONTENT_LENGTH"] == 50
    response = app.test_client().post(
        SUBSCRIPTIONS, json={"url": "https://hooks.example.com/" + "x" * 60}, headers=alice.headers
    )
    _error(response, 413, "payload_too_large")


def test_a_malformed_limit_stops_the_app_at_start(monkeypatch):
    from webhooks.errors import ConfigError

    monkeypatch.setenv("WEBHOOKS_MAX_REQUEST_BYTES", "lots")
    reset_settings_cache()
    with pytest.raises(ConfigError, match="WEBHOOKS_MAX_REQUEST_BYTES"):
        create_app()


# --- 500 --------------------------------------------------------------------------------


def test_an_unexpected_error_is_a_bare_json_500(db):
    app = create_app({"TESTING": True})

    @app.get("/boom")
    def boom():
        raise RuntimeError("secret internals: password=hunter2")

    response = app.test_client().get("/boom")
    error = _error(response, 500, "internal_error")
    assert "hunter2" not in response.get_data(as_text=True)
    assert "RuntimeError" not in error["message"]


def test_a_database_outage_is_a_json_500(db, monkeypatch, alice):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv(
        "WEBHOOKS_DATABASE_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/none?connect_timeout=1"
    )
    reset_settings_cache()
    app = create_app({"TESTING": True})
    response = app.test_client().get(SUBSCRIPTIONS, headers=alice.headers)
    _error(response, 500, "internal_error")
    assert "127.0.0.1" not in response.get_data(as_text=True)


def test_api_error_keeps_its_own_status_and_headers(db):
    app = create_app({"TESTING": True})

    @app.get("/teapot")
    def teapot():
        raise ApiError(418, "teapot", "I am a teapot.", {"X-Why": "tea"})

    response = app.test_client().get("/teapot")
    _error(response, 418, "teapot")
    assert response.headers["X-Why"] == "tea"
