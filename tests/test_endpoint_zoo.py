"""Every zoo endpoint (tests/support/zoo.py) against the sender alone: each attempt ends
within its deadline with the error the README lists, and never raises."""

from __future__ import annotations

import time

import pytest

from tests.support.deadlines import SHORT_DEADLINE_S, SLACK_S
from tests.support.zoo import (REDIRECT_STATUSES, SHARED_DOMAIN, Certificates, ZooEndpoint, answer,
                               slow_lookups_held, slow_resolver, url_of, zoo)
from webhooks.sender.post import HttpSender

TIMEOUT_S = 1.0  # endpoints that answer; the real bound is checked through the worker too
BODY = b'{"hello":"world"}'
HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module", autouse=True)
def _slow_lookups():
    """The slow-DNS look-ups hang while this module runs, and end with it (not 30 s later)."""
    with slow_lookups_held():
        yield


@pytest.fixture(scope="module")
def certificates():
    return Certificates()


@pytest.fixture(scope="module")
def endpoints(certificates):
    built = zoo(certificates)
    yield built
    for endpoint, _ in built.values():
        endpoint.close()


def _sender(certificates, timeout: float) -> HttpSender:
    return HttpSender(timeout=timeout, allow_private=True, ca_bundle=str(certificates.ca_bundle),
                      resolver=slow_resolver)


@pytest.fixture(scope="module")
def sender(certificates):
    return _sender(certificates, TIMEOUT_S)


@pytest.fixture(scope="module")
def hasty(certificates):
    """For the endpoints that never finish: they wait out whatever deadline they are given."""
    return _sender(certificates, SHORT_DEADLINE_S)


NAMES = [
    "https-valid", "https-self-signed", "https-expired", "https-other-host",
    "https-handshake-hangs", "tcp-connect-hangs", "tcp-silent", "body-nul", "body-binary", "body-invalid-utf8",
    "body-utf16", "continue-then-status", "header-flood", "header-megabyte",
    "garbage-status-line", "chunked-never-ends", "dns-slow",
    *[f"redirect-{status}-{body}" for status in REDIRECT_STATUSES for body in ("huge", "gzip-bomb")],
    "redirect-location-megabyte", "redirect-location-long", "cookie-flood", "cookie-domain",
    "gzip-bomb-200", "gzip-bomb-500", "deflate-bomb-200", "deflate-bomb-500",
]


@pytest.mark.parametrize("name", NAMES)
def test_each_zoo_endpoint_ends_as_expected_within_its_deadline(sender, hasty, endpoints, name):
    endpoint, expect = endpoints[name]
    chosen = hasty if expect.kind == "timeout" else sender
    started = time.monotonic()
    result = chosen.post(url_of(name, endpoint), BODY, HEADERS)
    elapsed = time.monotonic() - started
    assert elapsed <= chosen.timeout + SLACK_S, (name, elapsed)
    if expect.error is None:
        assert (result.status_code, result.error) == (expect.status_code, None), result
    else:
        assert result.status_code is None, result
        assert result.error.startswith(expect.error), (name, result.error)
        assert result.error_kind.value == expect.kind, (name, result.error_kind)
    if expect.excerpt_has is not None:
        assert expect.excerpt_has in result.excerpt and "\x00" not in result.excerpt, result.excerpt
        assert len(result.excerpt) <= 1024
    assert result.location == expect.location, (name, result.location)


@pytest.fixture
def recorder():
    """An endpoint that answers 200 and keeps the head of every request it gets (its server
    closes after each answer, and says so)."""
    endpoint = ZooEndpoint(answer(200, b"ok", b"Connection: close\r\n"))
    yield endpoint
    endpoint.close()


@pytest.mark.parametrize("name", ["cookie-flood", "cookie-domain"])
def test_a_cookie_an_endpoint_sets_is_never_sent_again(certificates, endpoints, recorder, name):
    """CONTRACT 9.1: one tenant's Set-Cookie (for its host, or with Domain= for a domain that
    another tenant's host shares) never reaches a later request, to it or to anyone. A sender
    of the test's own: no connection kept alive by the module's other tests is reused."""
    sender = _sender(certificates, TIMEOUT_S)
    endpoint, _ = endpoints[name]
    for _ in range(3):
        assert sender.post(url_of(name, endpoint), BODY, HEADERS).status_code == 200
    assert sender.post(recorder.url(host="tenant-b." + SHARED_DOMAIN), BODY, HEADERS).status_code == 200
    assert sender.post(recorder.url(), BODY, HEADERS).status_code == 200
    heads = endpoint.heads[-3:] + recorder.heads
    assert heads and not [head for head in heads if b"\r\ncookie:" in head.lower()], heads


def test_the_zoo_covers_every_endpoint(endpoints):
    assert sorted(endpoints) == sorted(NAMES)


def test_without_the_ca_bundle_a_valid_local_certificate_is_untrusted(endpoints):
    """certifi's bundle is the default, and it does not hold the test CA."""
    endpoint, _ = endpoints["https-valid"]
    result = HttpSender(timeout=TIMEOUT_S, allow_private=True).post(endpoint.url(), BODY, HEADERS)
    assert result.error_kind.value == "tls_untrusted", result


def test_a_tls_error_names_what_the_certificate_lacks(sender, endpoints):
    endpoint, _ = endpoints["https-expired"]
    assert "certificate has expired" in sender.post(endpoint.url(), BODY, HEADERS).error


def test_a_host_name_that_resolves_nowhere_is_a_dns_error(sender):
    result = sender.post("http://no-such-host.invalid/hook", BODY, HEADERS)
    assert (result.error_kind.value, result.error) == (
        "dns", "DNS lookup failed: the endpoint's host name does not resolve to a public address")
