"""The OpenAPI document: served, complete (every route and method), errors documented."""

from __future__ import annotations

import re

import pytest

from web import create_app
from web.openapi import build_openapi
from web.schemas import ENVELOPE_SCHEMAS
from webhooks.events.catalogue import CATALOGUE
from webhooks.events.envelope import build_envelope
from webhooks.events.schemas import EnvelopeSchema
from webhooks.tenants.options import OPTIONS

PREFIX = "/api/webhooks/"
ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture(scope="module")
def app():
    return create_app({"TESTING": True})


@pytest.fixture(scope="module")
def document(app):
    response = app.test_client().get("/api/webhooks/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()


def _flask_routes(app) -> dict[str, set[str]]:
    routes: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(PREFIX):
            path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
            routes.setdefault(path, set()).update(
                m.lower() for m in rule.methods - {"HEAD", "OPTIONS"}
            )
    return routes


def test_every_route_is_documented_with_its_methods(app, document):
    routes = _flask_routes(app)
    documented = {path: set(ops) for path, ops in document["paths"].items()}
    assert documented == routes
    assert len(routes) == 23  # the contract's routes, the publisher API's (10.7) and this document


def test_the_document_is_openapi_3(document):
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] and document["info"]["version"]
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": "the account's API key",
    }
    assert document["security"] == [{"bearerAuth": []}]


def _operations(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_every_operation_documents_its_errors(document):
    public = {"/api/webhooks/events/samples", "/api/webhooks/event-types",
              "/api/webhooks/openapi.json", "/api/webhooks/public-keys/{account_id}"}
    for path, method, operation in _operations(document):
        responses = operation["responses"]
        assert any(code.startswith("2") for code in responses), (path, method)
        for code, response in responses.items():
            if not code.startswith("2"):
                assert response["content"]["application/json"]["schema"] == ERROR_REF
        assert "500" in responses
        if path in public:
            assert operation["security"] == [] and "401" not in responses
        elif operation["tags"] == ["publisher"]:  # the publisher API: its own scheme (10.7)
            assert operation["security"] == [{"publisherKey": []}] and "401" in responses
        else:
            assert "security" not in operation and "401" in responses
        if "{" in path and path not in public:  # a public route's id names no own object
            assert "404" in responses
        if "requestBody" in operation:
            assert {"400", "413"} <= set(responses)
    replay = document["paths"]["/api/webhooks/deliveries/{delivery_id}/replay"]["post"]
    assert "not_replayable" in replay["responses"]["409"]["description"]
    samples = document["paths"]["/api/webhooks/events/samples"]["get"]
    assert "unknown_event_type" in samples["responses"]["400"]["description"]


def test_the_headers_that_answers_carry_are_documented(app, document):
    """Location on 201 and 202, WWW-Authenticate on 401, Allow on 405, Retry-After on 429;
    each checked against what the app really answers."""
    for path, method, operation in _operations(document):
        responses = operation["responses"]
        assert set(responses["405"]["headers"]) == {"Allow"}, (path, method)
        assert set(responses["429"]["headers"]) == {"Retry-After"}, (path, method)
        if "401" in responses:
            assert set(responses["401"]["headers"]) == {"WWW-Authenticate"}, (path, method)
    create = document["paths"]["/api/webhooks/subscriptions"]["post"]["responses"]["201"]
    replay = (document["paths"]["/api/webhooks/deliveries/{delivery_id}/replay"]["post"]
              ["responses"]["202"])
    assert create["headers"]["Location"]["required"] and replay["headers"]["Location"]["required"]

    client = app.test_client()
    unauthorized = client.get("/api/webhooks/subscriptions")
    assert unauthorized.status_code == 401
    assert unauthorized.headers["WWW-Authenticate"] == 'Bearer realm="webhooks"'
    not_allowed = client.put("/api/webhooks/event-types")
    assert not_allowed.status_code == 405 and "GET" in not_allowed.headers["Allow"]


def test_info_version_is_a_release_number_python_packaging_accepts(document):
    from packaging.version import Version

    assert document["info"]["x-service-version"] == "2026-07-30"
    assert document["info"]["version"] == "2026.7.30"
    assert str(Version(document["info"]["version"])) == "2026.7.30"


def test_the_resource_schemas_match_the_contract(document):
    schemas = document["components"]["schemas"]
    subscription = schemas["Subscription"]
    # The contract's fields, and one more for each option declared since (tenants/options.py).
    assert set(subscription["required"]) == {
        "id", "url", "event_types", "description", "status", "consecutive_failures",
        "paused_at", "created_at", "headers", "max_in_flight", "in_flight_limit", "rate_limit",
        "next_secret_active_at", "paused_reason", "signature_scheme",
        "public_key", "next_public_key",
        "client_certificate", "oauth2",  # CONTRACT 10.3
        "filter", "retry_schedule", "retry_schedule_in_force",  # CONTRACT 10.4
    } | {option.name for option in OPTIONS}
    # A standard-ed25519 subscription has no secret in any answer (CONTRACT 10.2).
    assert set(schemas["SubscriptionWithSecret"]["required"]) == set(subscription["required"])
    assert {"secret", "next_secret"} <= set(schemas["SubscriptionWithSecret"]["properties"])
    assert set(schemas["Delivery"]["required"]) == {
        "id", "event_id", "event_type", "subscription_id", "status", "attempt_count",
        "next_attempt_at", "replay_of", "ordering_key", "created_at", "attempts",
    }
    assert schemas["Delivery"]["properties"]["status"]["enum"] == [
        "pending", "paused", "done", "failed", "dead",
    ]
    assert {"number", "started_at", "duration_ms", "status_code", "error", "outcome"} <= set(
        schemas["Attempt"]["required"]
    )
    assert set(schemas["Error"]["properties"]) == {"error"}
    assert len(schemas["Envelope"]["oneOf"]) == 15


def test_each_typed_envelope_is_the_core_envelope(document):
    """The document's envelopes say what the core signs and sends: EnvelopeSchema's own fields,
    in its order, with only ``type`` narrowed and ``data`` nested per type."""
    core = EnvelopeSchema._declared_fields
    schemas = document["components"]["schemas"]
    for event_type in CATALOGUE:
        typed = ENVELOPE_SCHEMAS[event_type.name]
        assert list(typed._declared_fields) == list(core), event_type.name
        for name, field in core.items():
            if name not in ("type", "data"):
                assert typed._declared_fields[name] is field, (event_type.name, name)
        component = schemas[typed.__name__]
        assert list(component["properties"]) == list(core)
        assert set(component["required"]) == set(core)
        assert component["properties"]["type"]["enum"] == [event_type.name]
        assert component["properties"]["mode"]["enum"] == ["live"]


def test_a_built_envelope_has_the_schemas_fields_in_their_order():
    """build_envelope (what is serialised and signed) writes exactly EnvelopeSchema's fields."""
    import datetime as dt

    from webhooks.events.samples import sample_data

    for event_type in CATALOGUE:
        body = build_envelope(
            event_id="5f0c8a52-3c1e-4b7e-9a0d-2f7c1b9e4d61", event_type=event_type.name,
            data=sample_data(event_type.name), created_at=dt.datetime.now(dt.timezone.utc),
            version="2026-07-30",
        )
        assert list(body) == list(EnvelopeSchema._declared_fields)
        assert EnvelopeSchema().validate(body) == {}
        assert ENVELOPE_SCHEMAS[event_type.name]().validate(body) == {}


def test_patterns_are_anchored_ecma_regexes(document):
    patterns = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    patterns.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    assert patterns
    for pattern in patterns:
        assert pattern.startswith("^") and r"\Z" not in pattern
        re.compile(pattern)


def test_an_undocumented_route_is_refused():
    app = create_app({"TESTING": True})

    @app.get("/api/webhooks/secret-route")
    def secret_route():
        return {}

    with pytest.raises(RuntimeError, match="secret-route"):
        build_openapi(app)
