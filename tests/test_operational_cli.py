"""`webhooks operational add|list|resume|remove` (CONTRACT 9.3) on PostgreSQL: what they
print, and that bad input answers a clear error and changes nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from click.testing import CliRunner

from tests.operational_helpers import add_endpoint, cli
from webhooks.cli import main
from webhooks.errors import InvalidEvent
from webhooks.operational.catalogue import OPERATIONAL_TYPES
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.storage.db import session_scope
from webhooks.storage.models import Account, Subscription


@pytest.fixture
def operator_db(db, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "false")
    reset_settings_cache()
    return db


def rows() -> tuple[int, int]:
    """(accounts, subscriptions) stored."""
    with session_scope() as session:
        return (session.scalar(select(func.count()).select_from(Account)),
                session.scalar(select(func.count()).select_from(Subscription)))


def test_add_prints_the_four_keys_and_list_and_remove_follow(operator_db):
    first = add_endpoint("https://ops.example.com/hooks")
    assert list(first) == ["id", "url", "secret", "event_types"]
    assert first["url"] == "https://ops.example.com/hooks"
    assert first["secret"].startswith("whsec_")
    assert first["event_types"] == list(OPERATIONAL_TYPES)  # all four unless --types
    second = add_endpoint("https://ops.example.com/dead", "delivery.dead, delivery.failed")
    assert second["event_types"] == ["delivery.dead", "delivery.failed"]

    listed = json.loads(cli("operational", "list").output)
    assert [row["id"] for row in listed["data"]] == [first["id"], second["id"]]
    assert all("secret" not in row for row in listed["data"])
    assert listed["data"][0]["deliveries"] == {
        "pending": 0, "paused": 0, "done": 0, "failed": 0, "dead": 0}
    assert listed["data"][0]["status"] == "active"

    removed = cli("operational", "remove", first["id"])
    assert removed.exit_code == 0 and json.loads(removed.output)["removed"] is True
    listed = json.loads(cli("operational", "list").output)
    assert [row["id"] for row in listed["data"]] == [second["id"]]
    again = cli("operational", "remove", first["id"])
    assert again.exit_code == 2 and f"no operational endpoint {first['id']}" in again.output


def test_the_operator_account_has_no_api_key_and_caps_its_endpoints(operator_db):
    from webhooks.tenants.accounts import account_for_key

    add_endpoint("https://ops.example.com/hooks")
    with session_scope() as session:
        operator = session.get(Account, OPERATOR_ACCOUNT_ID)
        assert len(operator.api_key_hash) != 64  # no SHA-256 digest: no key matches it
        assert account_for_key(session, "whk_" + operator.api_key_hash) is None
        endpoint = session.scalars(select(Subscription)).one()
        assert endpoint.max_in_flight == 1  # WEBHOOKS_OPERATIONAL_MAX_IN_FLIGHT


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1/hooks", "127.0.0.1 is not a public address"),
    ("http://localhost:8080/hooks", "localhost is a local host name"),
    ("ftp://ops.example.com/hooks", "Must be an http or https URL"),
    ("not a url", "the url is refused"),
])
def test_a_refused_url_answers_why_and_changes_nothing(operator_db, url, reason):
    result = cli("operational", "add", url)
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and reason in result.output
    assert rows() == (0, 0)  # not even the operator account


def test_an_unknown_type_answers_the_valid_ones_and_changes_nothing(operator_db):
    result = cli("operational", "add", "https://ops.example.com/hooks",
                 "--types", "subscription.paused,email.sent")
    assert result.exit_code == 2
    assert "unknown operational event type(s): email.sent" in result.output
    assert all(name in result.output for name in OPERATIONAL_TYPES)
    assert rows() == (0, 0)


def test_emit_event_refuses_the_operational_types(operator_db):
    from tests.factories import make_account
    from webhooks import emit_event

    account_id, _ = make_account()
    for event_type in OPERATIONAL_TYPES:
        with pytest.raises(InvalidEvent):
            emit_event(account_id, event_type, {})


def test_resume_of_an_unknown_endpoint_is_an_error(operator_db):
    result = cli("operational", "resume", "00000000-0000-0000-0000-000000000001")
    assert result.exit_code == 2 and "no operational endpoint" in result.output


@pytest.mark.parametrize("event_type", OPERATIONAL_TYPES)
def test_docs_list_every_field_and_a_valid_example(event_type):
    import re
    from pathlib import Path

    from webhooks.operational.catalogue import _SCHEMAS, data_errors

    text = (Path(__file__).resolve().parent.parent / "docs" / "events.md").read_text("utf-8")
    sections = {part.split("\n", 1)[0].strip(): part
                for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]}
    section = sections[event_type]
    for name in _SCHEMAS[event_type].fields:
        assert f"\n| {name} |" in section, name
    example = re.search(r"```json\n(.*?)\n```", section, re.DOTALL).group(1)
    assert data_errors(event_type, json.loads(example)) == {}


def test_emit_event_refuses_the_operator_account(operator_db):
    from webhooks import emit_event

    add_endpoint("https://ops.example.com/hooks")
    with pytest.raises(InvalidEvent, match="operator account"):
        emit_event(OPERATOR_ACCOUNT_ID, "email.sent", {})
    result = cli("emit", OPERATOR_ACCOUNT_ID, "test.ping", "--data", "{}")
    assert result.exit_code == 2 and "operator account" in result.output


def test_add_takes_a_client_certificate_and_oauth2_and_shows_neither_key_nor_secret(
        operator_db, tmp_path, monkeypatch):
    import trustme

    leaf = trustme.CA().issue_cert("operator-client.example.com")
    certificate, key = tmp_path / "client.pem", tmp_path / "client.key"
    certificate.write_text("".join(b.bytes().decode() for b in leaf.cert_chain_pems))
    key.write_text(leaf.private_key_pem.bytes().decode())
    monkeypatch.setenv("WEBHOOKS_OAUTH2_CLIENT_SECRET", "cli-secret-Kq2-not-printed")

    result = cli("operational", "add", "https://ops.example.com/notices",
                 "--client-certificate", str(certificate), "--client-key", str(key),
                 "--oauth2-token-url", "https://id.example.com/token",
                 "--oauth2-client-id", "ops", "--oauth2-scope", "notices")

    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert set(shown["client_certificate"]) == {"fingerprint_sha256", "subject", "not_after"}
    assert shown["oauth2"] == {"token_url": "https://id.example.com/token", "client_id": "ops",
                               "scope": "notices"}
    assert "cli-secret-Kq2-not-printed" not in result.output
    assert "PRIVATE KEY" not in result.output
    with session_scope() as session:
        stored = session.get(Subscription, shown["id"])
        assert stored.oauth2["client_secret"] == "cli-secret-Kq2-not-printed"
        assert stored.client_certificate["private_key"] == key.read_text()


def test_add_refuses_a_certificate_for_an_http_endpoint_and_stores_nothing(operator_db, tmp_path):
    import trustme

    leaf = trustme.CA().issue_cert("operator-client.example.com")
    certificate, key = tmp_path / "client.pem", tmp_path / "client.key"
    leaf.cert_chain_pems[0].write_to_path(str(certificate))
    leaf.private_key_pem.write_to_path(str(key))
    before = rows()

    result = CliRunner().invoke(main, ["operational", "add", "http://ops.example.com/notices",
                                       "--client-certificate", str(certificate),
                                       "--client-key", str(key)])

    assert result.exit_code == 2
    assert "client_certificate needs an https endpoint" in result.output
    assert rows() == before
