"""The subscription's page shows its client certificate's expiry, and warns 14 days before
(CONTRACT 10.3); no page shows a key or a client secret."""

from __future__ import annotations

import datetime as dt

import trustme

BASE = "/api/webhooks/subscriptions"
CLIENT_SECRET = "cs_live_Pq7-never-on-a-page"


def _certificate(days: int) -> dict:
    leaf = trustme.CA().issue_cert(
        "client.example.com", not_after=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days))
    return {"certificate": "".join(b.bytes().decode() for b in leaf.cert_chain_pems),
            "private_key": leaf.private_key_pem.bytes().decode()}


def test_the_page_shows_the_expiry_and_warns_14_days_before(app, alice, alice_client):
    api = app.test_client()
    shown = {}
    for name, days in (("soon", 10), ("later", 40)):
        certificate = _certificate(days)
        created = api.post(BASE, headers=alice.headers, json={
            "url": "https://hooks.example.com/in", "client_certificate": certificate,
            "oauth2": {"token_url": "https://id.example.com/token", "client_id": "webhooks",
                       "client_secret": CLIENT_SECRET}}).get_json()
        page = alice_client.get(f"/dashboard/subscriptions/{created['id']}")
        assert page.status_code == 200
        html = page.get_data(as_text=True)
        assert created["client_certificate"]["not_after"] in html
        assert created["client_certificate"]["fingerprint_sha256"] in html
        assert certificate["private_key"].splitlines()[1] not in html
        assert "PRIVATE KEY" not in html and CLIENT_SECRET not in html
        edit = alice_client.get(f"/dashboard/subscriptions/{created['id']}/edit")
        assert CLIENT_SECRET not in edit.get_data(as_text=True)
        shown[name] = html

    assert 'id="certificate-expiry-warning"' in shown["soon"]
    assert 'id="certificate-expiry-warning"' not in shown["later"]
