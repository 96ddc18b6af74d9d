"""Generated requests over the OpenAPI document, against the app in-process and the real database.

Schemathesis reads ``/api/webhooks/openapi.json`` from the app and drives
every operation over WSGI with requests generated from the document (valid
and invalid ones), as an account that owns subscriptions and deliveries in
every state. Each response must be no 5xx, have a documented status code,
content type and headers, and match the documented schema; a request that
violates the document must be refused with a 4xx. Half of the requests to a
route with an id use one of the account's real ids, so the success paths
are exercised too, not only the 404s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

try:
    import schemathesis
except ImportError:  # like a missing server: skipped locally, a failure in CI
    if os.environ.get("CI"):
        raise
    pytest.skip("schemathesis is not installed", allow_module_level=True)

from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from web import create_app  # noqa: E402

from .helpers import emit, make_subscription, new_caller, set_delivery  # noqa: E402

# About 450 requests in 30 s here; the time-out only stops a run that hangs.
pytestmark = [pytest.mark.schemathesis, pytest.mark.timeout(300)]

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    response_headers_conformance,
]


@dataclass
class World:
    """An account with subscriptions (active and paused) and deliveries in every state."""

    headers: dict
    subscription_ids: list[str]
    delivery_ids: list[str]


@pytest.fixture
def world(db) -> World:
    caller = new_caller("schemathesis")
    subscriptions = [
        make_subscription(caller.account_id),
        make_subscription(caller.account_id, event_types=["email.sent", "test.ping"]),
        make_subscription(caller.account_id, status="paused"),
    ]
    deliveries = []
    for event_type in ("email.sent", "reply.received", "email.sent"):
        deliveries += emit(caller.account_id, event_type)[1]
    for delivery_id, status in zip(deliveries, ["done", "failed", "dead", "sending"]):
        set_delivery(delivery_id, status=status, attempt_count=1)
    return World(caller.headers, subscriptions, deliveries)


# Loaded at import (building the document needs no database); every request
# then reads the settings, and so the database of the running test.
# (schemathesis.pytest.from_fixture would defer this, but schemathesis 4.32
# sets Node._nodeid there, which pytest 9.2 no longer has.)
# schemathesis leaves out the operation that served the document (GET
# /openapi.json) unless a filter names it; this one names every operation,
# so the document's own route is checked like the others.
# A negative body may grow past the API's 64 KiB body limit (a string far over
# its maxLength): the app then refuses it with 413, which is a rejection too.
REJECTION_STATUSES = [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": REJECTION_STATUSES}}})
schema = schemathesis.openapi.from_wsgi(
    "/api/webhooks/openapi.json", create_app(), config=CONFIG).include(path_regex=r"^/api/webhooks/")


def _use_real_ids(case, world: World, pick: int) -> None:
    """Put one of the account's own ids into the path parameters of ``case``.

    Assigned as a new dict (not edited in place) so that schemathesis
    re-validates the case and knows the path is valid now.
    """
    parameters = dict(case.path_parameters or {})
    for name in parameters:
        ids = world.subscription_ids if name == "subscription_id" else world.delivery_ids
        parameters[name] = ids[pick % len(ids)]
    case.path_parameters = parameters


def _authenticate(case, world: World) -> None:
    """Send the account's key, unless the case is about a missing or malformed header."""
    if case.meta is not None and case.meta.is_negative_at("header"):
        return  # the app must answer 401, which negative_data_rejection checks
    case.headers = {**(case.headers or {}), **world.headers}


@schema.parametrize()
@schema.given(pick=st.one_of(st.none(), st.integers(min_value=0, max_value=50)))
@settings(
    max_examples=30,  # per operation: 15 operations, about 450 requests in all
    deadline=None,  # a request's time depends on the database, not on the example
    # The fixtures are function-scoped on purpose (one clean database per
    # operation), and slow or filtered generation is expected for bodies.
    suppress_health_check=list(HealthCheck),
    database=None,  # no .hypothesis folder: every run draws afresh
)
def test_every_operation_conforms(case, pick, world, allow_private, redis_broker):
    if pick is not None:
        _use_real_ids(case, world, pick)
    _authenticate(case, world)
    response = case.call()
    case.validate_response(response, checks=CHECKS)


HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _documented_operations() -> set[str]:
    """``"METHOD /path"`` for every operation of the OpenAPI document the app serves."""
    document = create_app().test_client().get("/api/webhooks/openapi.json").get_json()
    return {f"{method.upper()} {path}" for path, item in document["paths"].items()
            for method in item if method in HTTP_METHODS}


def _generated_checks(request) -> list:
    """The items ``@schema.parametrize()`` makes of test_every_operation_conforms, collected
    afresh through the same hook pytest uses: whatever this run selected, on any worker."""
    module = request.node.getparent(pytest.Module)
    collector = module.ihook.pytest_pycollect_makeitem(
        collector=module, name="test_every_operation_conforms", obj=test_every_operation_conforms)
    return list(collector.collect())


def test_every_documented_operation_has_a_generated_check_that_runs(request):
    """One generated check per operation, each with a node id of its own.

    pytest-xdist (``make test``: ``-n 2 --dist loadfile``) schedules items by
    node id, and a check that shares its id with another never runs: with one
    id for all, 1 of 13 ran. So: as many distinct ids as the document has
    operations, one for each. The items this session collected are checked
    too (under xdist every worker collects them all), when it collected them.
    """
    operations = _documented_operations()
    checks = _generated_checks(request)
    ids = [item.nodeid for item in checks]
    assert len(set(ids)) == len(ids), f"generated checks share node ids: {sorted(ids)}"
    assert sorted(item.operation_label for item in checks) == sorted(operations)
    assert len(operations) >= 13  # the document is read, not empty

    collected = [item.nodeid for item in request.session.items
                 if item.nodeid.split("[")[0] == ids[0].split("[")[0]]
    assert len(set(collected)) == len(collected), f"this session's checks share ids: {collected}"
