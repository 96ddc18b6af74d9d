"""Issue 36, finding 1: who sees a secret on the dashboard's pages (README, "Who sees a secret").

A read-only portal session opens every GET route of the dashboard (enumerated from the app's
url_map, so a page added later is checked too) and none shows the signing secret, the staged
secret, a custom header's value or a receiver credential (CONTRACT 10.3: a client
certificate's key, an OAuth2 client secret); the pages that exist to show them answer 403. A
full session sees the first three only in the answer to "Show secret" (a POST with the CSRF
token), or once right after it made them, and the credentials never; the edit form shows
header values masked and keeps them when saved back masked.
"""

from __future__ import annotations

import pytest
import trustme

from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

from web.dashboard.forms import MASK

from .helpers import csrf_token, post_form
from .portal_helpers import link_path, new_link, session_rows
from .rows import dead_delivery

pytestmark = pytest.mark.database

HEADERS = {"X-Receiver-Auth": "Bearer receiver-credential-7f3a", "X-Api-Key": "api-key-91c2e"}
CLIENT_SECRET = "cs_live_never-on-any-page-3e8d"


def text(response) -> str:
    return response.get_data(as_text=True)


def _client_certificate() -> dict:
    leaf = trustme.CA().issue_cert("client.example.com")
    return {"certificate": "".join(b.bytes().decode() for b in leaf.cert_chain_pems),
            "private_key": leaf.private_key_pem.bytes().decode()}


@pytest.fixture
def secret_rows(app, alice):
    """A subscription with custom headers, receiver credentials (CONTRACT 10.3) and a staged
    rotation, made through the API, and a dead delivery to it; its secrets (``shown`` on
    request, ``never`` shown at all) and the values every dashboard route argument takes."""
    api = app.test_client()
    certificate = _client_certificate()
    created = api.post("/api/webhooks/subscriptions", headers=alice.headers, json={
        "url": "https://hooks.example.com/in", "headers": HEADERS,
        "client_certificate": certificate,
        "oauth2": {"token_url": "https://id.example.com/token", "client_id": "webhooks",
                   "client_secret": CLIENT_SECRET}})
    assert created.status_code == 201, created.get_json()
    subscription_id = created.get_json()["id"]
    staged = api.post(f"/api/webhooks/subscriptions/{subscription_id}/rotate-secret",
                      headers=alice.headers, json={"activate_in": 3600}).get_json()
    shown = {"secret": staged["secret"], "next_secret": staged["next_secret"], **HEADERS}
    never = {"private_key": certificate["private_key"].splitlines()[1],
             "client_secret": CLIENT_SECRET}
    delivery_id = dead_delivery(alice.account_id, subscription_id)
    return {"secrets": {**shown, **never}, "shown": shown,
            "arguments": {"subscription_id": subscription_id, "delivery_id": delivery_id,
                          "token": "not-a-link", "_unknown": "no/such/page"}}


def _get_routes(app, arguments: dict) -> list[str]:
    """The path of every GET route of the dashboard, built with ``arguments``."""
    adapter = app.url_map.bind("localhost")
    paths = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("dashboard.") and "GET" in rule.methods:
            paths.append(adapter.build(rule.endpoint,
                                       {name: arguments[name] for name in rule.arguments}))
    return paths


def _shown(html: str, secrets: dict) -> list[str]:
    return [name for name, value in secrets.items() if value in html]


def _read_only_client(app, account_id: str):
    client = app.test_client()
    assert client.get(link_path(new_link(account_id, read_only=True))).status_code == 302
    return client


@pytest.fixture
def read_only_client(app, alice):
    return _read_only_client(app, alice.account_id)


def test_no_page_a_read_only_session_opens_shows_a_secret(app, alice, secret_rows):
    paths = _get_routes(app, secret_rows["arguments"])
    subscription_id = secret_rows["arguments"]["subscription_id"]
    assert f"/dashboard/subscriptions/{subscription_id}/secret" in paths  # the enumeration works
    assert len(paths) >= 10
    shown = {}
    for path in paths:
        # A session of its own for each page: what one page does to the session (ends it,
        # replaces it) cannot hide what the next page shows.
        client = _read_only_client(app, alice.account_id)
        response = client.get(path)
        assert response.status_code != 302 or "sign-in" not in response.headers["Location"], path
        shown[path] = _shown(text(response), secret_rows["secrets"])
    assert {path: names for path, names in shown.items() if names} == {}
    assert all(row.read_only for row in session_rows())
    page = text(_read_only_client(app, alice.account_id).get(
        f"/dashboard/subscriptions/{subscription_id}"))
    assert "X-Receiver-Auth" in page and "X-Api-Key" in page  # header names are shown


def test_the_pages_that_show_secrets_refuse_a_read_only_session(read_only_client, secret_rows):
    subscription_id = secret_rows["arguments"]["subscription_id"]
    for path in (f"/dashboard/subscriptions/{subscription_id}/secret",
                 f"/dashboard/subscriptions/{subscription_id}/edit"):
        response = read_only_client.get(path)
        assert response.status_code == 403, path
        assert "Read-only session" in text(response)
    token = csrf_token(text(read_only_client.get("/dashboard/")))
    revealed = read_only_client.post(f"/dashboard/subscriptions/{subscription_id}/secret",
                                     data={"csrf_token": token})
    assert revealed.status_code == 403
    assert _shown(text(revealed), secret_rows["secrets"]) == []


@pytest.fixture(params=["api_key", "portal"])
def full_client(request, app, alice, alice_client):
    """A full session: signed in with the API key, or by a full portal link."""
    if request.param == "api_key":
        return alice_client
    client = app.test_client()
    assert client.get(link_path(new_link(alice.account_id))).status_code == 302
    return client


def test_a_full_session_sees_secrets_only_when_it_asks_with_a_post(app, full_client,
                                                                    secret_rows):
    for path in _get_routes(app, secret_rows["arguments"]):
        assert _shown(text(full_client.get(path)), secret_rows["secrets"]) == [], path
    subscription_id = secret_rows["arguments"]["subscription_id"]
    page = f"/dashboard/subscriptions/{subscription_id}"
    revealed = post_form(full_client, page, f"{page}/secret")
    assert revealed.status_code == 200
    assert revealed.headers["Cache-Control"] == "no-store"
    # The signing secrets and header values; never the 10.3 credentials (write-only).
    assert _shown(text(revealed), secret_rows["secrets"]) == list(secret_rows["shown"])
    # Without the form's token nothing is shown (no other site can ask for it).
    assert full_client.post(f"{page}/secret").status_code == 400


def test_a_new_subscription_s_secret_is_shown_once(alice_client):
    new = "/dashboard/subscriptions/new"
    created = post_form(alice_client, new, new, {"url": "https://hooks.example.com/in",
                                                 "filter_mode": "all"})
    assert created.status_code == 302
    with session_scope() as session:
        (stored,) = session.query(Subscription).all()
        secret = stored.secret
    first = text(alice_client.get(created.headers["Location"]))
    assert secret in first and "Subscription created" in first
    assert secret not in text(alice_client.get(created.headers["Location"]))


def test_the_edit_form_masks_header_values_and_keeps_them_when_saved_back(alice_client,
                                                                          secret_rows):
    subscription_id = secret_rows["arguments"]["subscription_id"]
    edit = f"/dashboard/subscriptions/{subscription_id}/edit"
    form = text(alice_client.get(edit))
    assert f"X-Receiver-Auth: {MASK}" in form and "receiver-credential" not in form
    saved = post_form(alice_client, edit, edit, {
        "url": "https://hooks.example.com/in", "filter_mode": "all",
        "headers": f"X-Receiver-Auth: {MASK}\nX-Api-Key: changed-value\nX-New: {MASK}"})
    assert saved.status_code == 302
    with session_scope() as session:
        stored = session.get(Subscription, subscription_id).headers
    # A masked value keeps the stored one; a new header takes what was written, even the mask.
    assert stored == {"X-Receiver-Auth": HEADERS["X-Receiver-Auth"],
                      "X-Api-Key": "changed-value", "X-New": MASK}
