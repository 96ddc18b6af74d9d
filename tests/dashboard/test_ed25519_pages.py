"""A ``standard-ed25519`` subscription's page (CONTRACT 10.2, issue 40): its public key, its
kid and the account's key set URL, shown to every session (a read-only portal session too);
a staged key pair with its time, Activate now and Cancel; and its private keys on no page,
whoever asks and however."""

from __future__ import annotations

import pytest

from tests.factories import AUDIT_ACTOR
from webhooks.config import reset_settings_cache
from webhooks.services import subscriptions
from webhooks.signing import key_id, public_key_of
from webhooks.storage.db import session_scope
from webhooks.storage.models import Subscription

from .helpers import post_form
from .portal_helpers import link_path, new_link
from .rows import dead_delivery

ED25519 = "standard-ed25519"


def _subscription(account_id: str) -> str:
    with session_scope() as session:
        return subscriptions.create(session, account_id, "https://hooks.example.com/in",
                                    actor=AUDIT_ACTOR, signature_scheme=ED25519).id


def _row(subscription_id: str) -> Subscription:
    with session_scope() as session:
        return session.get(Subscription, subscription_id)


def _page(subscription_id: str) -> str:
    return f"/dashboard/subscriptions/{subscription_id}"


def _private_parts(subscription_id: str) -> list[str]:
    """The base64 of each private key of the subscription (the part a page could leak)."""
    row = _row(subscription_id)
    return [key[len("whsk_"):] for key in (row.secret, row.next_secret) if key]


def _pages(app, subscription_id: str) -> list[tuple[str, str]]:
    """(method, path) of every page that shows or could show this subscription's secrets."""
    page = _page(subscription_id)
    paths = ["/dashboard/", "/dashboard/subscriptions", page, f"{page}/edit",
             f"{page}/secret", f"/dashboard/deliveries?subscription_id={subscription_id}"]
    methods = {rule.rule: rule.methods for rule in app.url_map.iter_rules()}
    secret_methods = methods["/dashboard/subscriptions/<subscription_id>/secret"]
    shown = [("GET", path) for path in paths]
    if "POST" in secret_methods:  # "Show secret" as a CSRF-checked form (issue 36)
        shown.append(("POST", f"{page}/secret"))
    return shown


def _open(client, method: str, path: str, page: str):
    if method == "POST":
        return post_form(client, page, path)
    return client.get(path)


def test_the_page_shows_the_public_key_kid_and_key_set_url(alice_client, alice):
    subscription_id = _subscription(alice.account_id)
    html = alice_client.get(_page(subscription_id)).get_data(as_text=True)
    public_key = public_key_of(_row(subscription_id).secret)
    assert f'<code class="public-key">{public_key}</code>' in html
    assert f'id="key-id">{key_id(public_key)}<' in html
    key_set = f"http://localhost/api/webhooks/public-keys/{alice.account_id}"
    assert f'id="key-set-url">{key_set}<' in html
    assert "Signing secret" not in html and "Show secret" not in html
    assert "Rotate key pair</button>" in html


def test_the_key_set_url_is_under_the_public_url(db, redis_broker, data_dir, monkeypatch, alice):
    from web import create_app

    from .helpers import sign_in

    monkeypatch.setenv("WEBHOOKS_PUBLIC_URL", "https://hooks.example.com/svc")
    reset_settings_cache()
    client = create_app({"TESTING": True}).test_client()
    sign_in(client, alice.api_key)
    html = client.get(_page(_subscription(alice.account_id))).get_data(as_text=True)
    assert (f'id="key-set-url">https://hooks.example.com/svc/api/webhooks/public-keys/'
            f'{alice.account_id}<') in html


def test_a_staged_key_pair_shows_its_public_key_and_time_then_activates(alice_client, alice):
    subscription_id = _subscription(alice.account_id)
    page = _page(subscription_id)
    current = public_key_of(_row(subscription_id).secret)
    response = post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "3600"},
                         follow_redirects=True)
    html = response.get_data(as_text=True)
    following = public_key_of(_row(subscription_id).next_secret)
    assert f'id="next-public-key">{following}<' in html
    assert f'id="next-key-id">{key_id(following)}<' in html
    assert "(in 1 hour)" in html and "Activate now</button>" in html
    assert f'<code class="public-key">{current}</code>' in html
    assert all(part not in html for part in _private_parts(subscription_id))

    activated = post_form(alice_client, page, f"{page}/next-secret/activate",
                          follow_redirects=True).get_data(as_text=True)
    assert f'<code class="public-key">{following}</code>' in activated
    assert 'id="next-public-key"' not in activated


def test_no_page_shows_a_private_key_to_a_full_session(app, alice_client, alice):
    subscription_id = _subscription(alice.account_id)
    dead_delivery(alice.account_id, subscription_id)
    page = _page(subscription_id)
    post_form(alice_client, page, f"{page}/rotate-secret", {"activate_in": "3600"})
    private = _private_parts(subscription_id)
    assert len(private) == 2
    for method, path in _pages(app, subscription_id):
        response = _open(alice_client, method, path, page)
        assert response.status_code == 200, (method, path)
        html = response.get_data(as_text=True)
        assert all(part not in html for part in private), (method, path)


def test_a_read_only_portal_session_sees_the_public_key_and_never_a_private_one(app, alice):
    subscription_id = _subscription(alice.account_id)
    client = app.test_client()
    assert client.get(link_path(new_link(alice.account_id, read_only=True))).status_code == 302
    html = client.get(_page(subscription_id)).get_data(as_text=True)
    assert public_key_of(_row(subscription_id).secret) in html
    assert f"/api/webhooks/public-keys/{alice.account_id}" in html
    assert "Rotate key pair" not in html  # no action in a read-only session
    private = _private_parts(subscription_id)
    for method, path in _pages(app, subscription_id):
        if method == "POST":
            continue  # refused (403) before any view runs: tests/dashboard/test_read_only.py
        response = client.get(path)
        assert response.status_code in (200, 403), path
        assert all(part not in response.get_data(as_text=True) for part in private), path


@pytest.mark.parametrize("scheme", ["service", "standard"])
def test_an_hmac_subscription_shows_no_key_set(alice_client, alice, scheme):
    with session_scope() as session:
        subscription_id = subscriptions.create(session, alice.account_id,
                                               "https://hooks.example.com/in",
                                               actor=AUDIT_ACTOR, signature_scheme=scheme).id
    html = alice_client.get(_page(subscription_id)).get_data(as_text=True)
    assert "Signing secret" in html and 'id="key-set-url"' not in html


def test_header_values_of_a_key_pair_subscription_are_revealed_as_for_any(app, alice_client,
                                                                          alice):
    with session_scope() as session:
        subscription_id = subscriptions.create(
            session, alice.account_id, "https://hooks.example.com/in", signature_scheme=ED25519,
            actor=AUDIT_ACTOR, headers={"Authorization": "Bearer receiver-token"}).id
    page = _page(subscription_id)
    hidden = alice_client.get(page).get_data(as_text=True)
    assert "receiver-token" not in hidden and "Show header values</button>" in hidden
    shown = post_form(alice_client, page, f"{page}/secret").get_data(as_text=True)
    assert "Bearer receiver-token" in shown
    assert all(part not in shown for part in _private_parts(subscription_id))
