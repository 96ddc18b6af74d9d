"""Issue 36, finding 7: /metrics refuses clients elsewhere than this host by default, unless
WEBHOOKS_METRICS_TOKEN or WEBHOOKS_METRICS_ALLOWED_NETWORKS says who else may scrape, and
counts the operator's operational endpoints apart from the customers' subscriptions."""

from __future__ import annotations

import pytest

from web.metrics_access import ScrapeRule, load_scrape_rule
from webhooks.errors import ConfigError

TOKEN = "m3trics-t0ken-for-tests"
BEARER = f"Bearer {TOKEN}"
FAR = "203.0.113.5"


# ---------------------------------------------------------------- the rule (no server)

@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_by_default_this_host_may_scrape(address):
    assert ScrapeRule().refusal(address, "", None) is None


@pytest.mark.parametrize("address", [FAR, "10.0.0.7", "::ffff:10.0.0.7", "2001:db8::1", "",
                                     None, "not-an-address"])
def test_by_default_any_other_client_is_refused_with_403(address):
    refusal = ScrapeRule().refusal(address, "", None)
    assert refusal is not None and refusal.status == 403
    assert "WEBHOOKS_METRICS_TOKEN" in refusal.message


def test_a_token_lets_any_address_scrape_with_it_and_none_without():
    rule = ScrapeRule()
    assert rule.refusal(FAR, BEARER, TOKEN) is None
    assert rule.refusal("127.0.0.1", "", TOKEN).status == 401  # this host needs it too
    assert rule.refusal(FAR, "Bearer nope", TOKEN).status == 401


def test_an_allow_list_replaces_this_host():
    rule = load_scrape_rule({"WEBHOOKS_METRICS_ALLOWED_NETWORKS": "10.0.0.0/8, 2001:db8::/32 192.0.2.7"})
    for address in ("10.1.2.3", "2001:db8::5", "192.0.2.7", "::ffff:10.9.9.9"):
        assert rule.refusal(address, "", None) is None, address
    for address in ("127.0.0.1", "192.0.2.8", FAR):
        assert rule.refusal(address, "", None).status == 403, address


def test_with_both_a_client_must_be_listed_and_send_the_token():
    rule = load_scrape_rule({"WEBHOOKS_METRICS_ALLOWED_NETWORKS": "10.0.0.0/8"})
    assert rule.refusal("10.0.0.1", BEARER, TOKEN) is None
    assert rule.refusal("10.0.0.1", "", TOKEN).status == 401
    assert rule.refusal(FAR, BEARER, TOKEN).status == 403


@pytest.mark.parametrize("value", ["", "  ", ", ,"])
def test_an_empty_allow_list_is_unset(value):
    assert load_scrape_rule({"WEBHOOKS_METRICS_ALLOWED_NETWORKS": value}) == ScrapeRule()


@pytest.mark.parametrize("value", ["10.0.0.0/33", "localhost", "10.0.0.0/8;", "*"])
def test_a_malformed_allow_list_names_the_variable(value):
    with pytest.raises(ConfigError, match="WEBHOOKS_METRICS_ALLOWED_NETWORKS"):
        load_scrape_rule({"WEBHOOKS_METRICS_ALLOWED_NETWORKS": value})


# ---------------------------------------------------------------- through the app

@pytest.fixture
def make_app(db, redis_broker, tmp_path, monkeypatch):
    """``make_app(**env)``: the app with these WEBHOOKS_* variables."""
    from webhooks.config import reset_settings_cache

    def make(**env):
        monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path))
        for name, value in env.items():
            monkeypatch.setenv(f"WEBHOOKS_{name}", value)
        reset_settings_cache()
        from web import create_app

        return create_app({"TESTING": True})

    return make


def _scrape(app, address: str, **headers):
    return app.test_client().get("/metrics", headers=headers,
                                 environ_base={"REMOTE_ADDR": address})


@pytest.mark.database
def test_by_default_another_host_gets_403_in_the_error_shape(make_app):
    app = make_app()
    refused = _scrape(app, FAR)
    assert refused.status_code == 403
    assert refused.get_json()["error"]["code"] == "forbidden"
    assert "webhooks_" not in refused.get_data(as_text=True)
    assert _scrape(app, "127.0.0.1").status_code == 200


@pytest.mark.database
def test_an_allow_list_opens_the_metrics_to_the_networks_it_names(make_app):
    listed = make_app(METRICS_ALLOWED_NETWORKS="203.0.113.0/24")
    assert _scrape(listed, FAR).status_code == 200
    assert _scrape(listed, "127.0.0.1").status_code == 403


@pytest.mark.database
def test_a_token_opens_the_metrics_to_whoever_sends_it(make_app):
    app = make_app(METRICS_TOKEN=TOKEN)
    assert _scrape(app, FAR, Authorization=BEARER).status_code == 200
    assert _scrape(app, FAR).status_code == 401


@pytest.mark.database
def test_behind_a_trusted_proxy_the_client_s_address_counts(make_app):
    """A local proxy (nginx on the host) would make every client look local, unless the app
    believes its X-Forwarded-For (WEBHOOKS_TRUSTED_PROXIES)."""
    app = make_app(TRUSTED_PROXIES="1")
    assert _scrape(app, "127.0.0.1", **{"X-Forwarded-For": FAR}).status_code == 403
    assert _scrape(app, "127.0.0.1", **{"X-Forwarded-For": "127.0.0.1"}).status_code == 200


@pytest.mark.database
def test_a_malformed_allow_list_stops_the_app_at_start(make_app):
    with pytest.raises(ConfigError, match="WEBHOOKS_METRICS_ALLOWED_NETWORKS"):
        make_app(METRICS_ALLOWED_NETWORKS="everyone")


@pytest.mark.database
def test_operational_endpoints_are_counted_apart_from_the_customers_subscriptions(make_app):
    from tests.api.helpers import make_subscription, new_caller
    from tests.dashboard.rows import pause_subscription
    from webhooks.operational.operator import operator_account
    from webhooks.reserved import OPERATOR_ACCOUNT_ID
    from webhooks.storage.db import session_scope

    from tests.test_metrics_health import scrape

    with session_scope() as session:
        operator_account(session)
    pause_subscription(make_subscription(OPERATOR_ACCOUNT_ID, "https://ops.example.com/in"))
    make_subscription(OPERATOR_ACCOUNT_ID, "https://ops.example.com/dead")
    customer = new_caller("acme").account_id
    make_subscription(customer, "https://a.example.com/in")
    samples = scrape(make_app().test_client())
    assert samples["webhooks_subscriptions"][()] == 1
    assert samples["webhooks_subscriptions_paused"][()] == 0  # the operator's pause is not theirs
    assert samples["webhooks_operational_endpoints"][()] == 2
    assert samples["webhooks_operational_endpoints_paused"][()] == 1
