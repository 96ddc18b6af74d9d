"""The audit log (CONTRACT 10.5) on both databases: every action of the use cases writes
exactly one entry, with its actor and its changes redacted, in the transaction of its
change; a change that rolls back leaves no entry, an entry that fails leaves no change;
and an entry cannot be changed (a trigger), nor deleted but by retention (PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError

from tests.factories import make_account, make_subscription
from webhooks.audit import log as audit_log
from webhooks.audit.entries import REDACTED, Actor, ActorKind
from webhooks.storage.db import get_engine, session_scope
from webhooks.storage.models import AuditEntry, Delivery, Subscription, utcnow

ALICE = Actor(ActorKind.API_KEY, "0123456789abcdef")
URL = "https://hooks.example.com/in"


@pytest.fixture
def stored(any_db, published, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    reset_settings_cache()
    return any_db


def entries(account_id: str | None = None) -> list[dict]:
    """Every entry (of ``account_id``), oldest first, as the API shows them."""
    with session_scope() as session:
        statement = select(AuditEntry).order_by(AuditEntry.created_at, AuditEntry.id)
        if account_id is not None:
            statement = statement.where(AuditEntry.account_id == account_id)
        return [json.loads(json.dumps(audit_log.resource(row), default=str))
                for row in session.scalars(statement)]


def only_entry(account_id: str) -> dict:
    (entry,) = entries(account_id)
    return entry


def no_secret_in(entry: dict, *secrets: str) -> None:
    shown = json.dumps(entry)
    for secret in secrets:
        assert secret not in shown


def _use(action):
    """Run ``action(session, subscription)`` on a fresh subscription in one transaction."""
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    with session_scope() as session:
        result = action(session, session.get(Subscription, subscription_id))
    return account_id, subscription_id, result


def _with_secret(subscription_id: str) -> str:
    with session_scope() as session:
        return session.get(Subscription, subscription_id).secret


def test_create_writes_every_field_with_secrets_header_values_and_passwords_redacted(stored):
    from webhooks.services import subscriptions

    account_id, _ = make_account()
    certificate = {"certificate": "-----BEGIN CERTIFICATE-----\nMIIB\n", "private_key":
                   "-----BEGIN PRIVATE KEY-----\nTOPKEY\n", "fingerprint_sha256": "ab" * 32,
                   "subject": "CN=acme", "not_after": "2030-01-01T00:00:00Z"}
    oauth2 = {"token_url": "https://auth.example.com/token", "client_id": "acme",
              "client_secret": "CLIENT-SECRET-1"}
    with session_scope() as session:
        subscription = subscriptions.create(
            session, account_id, "https://user:URLPASS@hooks.example.com/in", actor=ALICE,
            headers={"X-Token": "HEADER-VALUE-1"}, client_certificate=certificate,
            oauth2=oauth2, rate_limit=5)
        subscription_id, secret = subscription.id, subscription.secret
    entry = only_entry(account_id)
    assert entry["action"] == "subscription.created"
    assert entry["actor"] == {"kind": "api_key", "id": "0123456789abcdef"}
    assert entry["target"] == {"kind": "subscription", "id": subscription_id}
    changes = entry["changes"]
    assert changes["url"] == {"from": None, "to": f"https://user:{REDACTED}@hooks.example.com/in"}
    assert changes["secret"] == {"from": None, "to": REDACTED}
    assert changes["headers"]["to"] == {"X-Token": REDACTED}
    assert changes["oauth2"]["to"]["client_secret"] == REDACTED
    assert changes["oauth2"]["to"]["client_id"] == "acme"
    assert changes["client_certificate"]["to"]["private_key"] == REDACTED
    assert changes["client_certificate"]["to"]["subject"] == "CN=acme"
    assert changes["rate_limit"] == {"from": None, "to": 5}
    no_secret_in(entry, secret, "URLPASS", "HEADER-VALUE-1", "CLIENT-SECRET-1", "TOPKEY",
                 "MIIB")


def test_an_update_names_only_what_changed_and_a_scheme_change_is_the_same_one_entry(stored):
    from webhooks.services import subscriptions

    def change(session, subscription):
        return subscriptions.change(session, subscription, actor=ALICE,
                                    url="https://hooks.example.com/moved",
                                    description=None, headers={"X-Key": "V2"},
                                    signature_scheme="standard")

    account_id, subscription_id, switched = _use(change)
    assert switched
    entry = only_entry(account_id)
    assert entry["action"] == "subscription.updated"
    assert set(entry["changes"]) == {"url", "headers", "signature_scheme", "secret"}
    assert entry["changes"]["url"] == {"from": URL, "to": "https://hooks.example.com/moved"}
    assert entry["changes"]["headers"] == {"from": None, "to": {"X-Key": REDACTED}}
    assert entry["changes"]["secret"] == {"from": REDACTED, "to": REDACTED}
    no_secret_in(entry, "V2", _with_secret(subscription_id))


def test_a_change_to_the_same_values_writes_nothing(stored):
    from webhooks.services import subscriptions

    account_id, _, switched = _use(lambda session, subscription: subscriptions.change(
        session, subscription, actor=ALICE, url=URL, signature_scheme="service"))
    assert not switched and entries(account_id) == []


@pytest.mark.parametrize("action, expected", [
    ("pause", {"status": {"from": "active", "to": "paused"},
               "paused_reason": {"from": None, "to": "manual"}}),
    ("delete", None),
])
def test_pause_and_delete(stored, action, expected):
    from webhooks.services import pausing, subscriptions

    run = {"pause": lambda s, sub: pausing.pause(s, sub, actor=ALICE),
           "delete": lambda s, sub: subscriptions.delete(s, sub, actor=ALICE)}[action]
    account_id, subscription_id, _ = _use(run)
    entry = only_entry(account_id)
    assert entry["action"] == f"subscription.{action}d"
    assert entry["target"]["id"] == subscription_id
    if expected is not None:
        assert entry["changes"] == expected
    else:
        assert set(entry["changes"]) == {"deleted_at"}
        assert entry["changes"]["deleted_at"]["from"] is None


def test_resume_writes_one_entry_and_pausing_or_resuming_twice_writes_no_second(stored):
    from webhooks.services import pausing

    account_id, subscription_id, _ = _use(lambda s, sub: pausing.pause(s, sub, actor=ALICE))
    for _ in range(2):
        with session_scope() as session:
            pausing.pause(session, session.get(Subscription, subscription_id), actor=ALICE)
    for _ in range(2):
        with session_scope() as session:
            pausing.resume(session, session.get(Subscription, subscription_id), actor=ALICE)
    assert [entry["action"] for entry in entries(account_id)] == [
        "subscription.paused", "subscription.resumed"]
    assert entries(account_id)[1]["changes"] == {
        "status": {"from": "paused", "to": "active"},
        "paused_reason": {"from": "manual", "to": None}}


def test_rotations_each_write_one_entry_and_no_secret(stored):
    from webhooks.services import rotation

    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    secrets = [_with_secret(subscription_id)]

    def act(step):
        with session_scope() as session:
            result = step(session, session.get(Subscription, subscription_id))
            row = session.get(Subscription, subscription_id)
            secrets.extend(filter(None, (row.secret, row.next_secret)))
            return result

    act(lambda s, sub: rotation.rotate(s, sub, actor=ALICE))
    act(lambda s, sub: rotation.rotate(s, sub, 3600, actor=ALICE))
    assert act(lambda s, sub: rotation.activate_now(s, sub, actor=ALICE))
    assert not act(lambda s, sub: rotation.cancel(s, sub, actor=ALICE))  # nothing staged
    act(lambda s, sub: rotation.rotate(s, sub, 3600, actor=ALICE))
    assert act(lambda s, sub: rotation.cancel(s, sub, actor=ALICE))
    written = entries(account_id)
    assert [entry["action"] for entry in written] == [
        "secret.rotated", "secret.rotated", "secret.rotation_activated", "secret.rotated",
        "secret.rotation_cancelled"]
    assert written[0]["changes"] == {"secret": {"from": REDACTED, "to": REDACTED}}
    assert written[1]["changes"]["next_secret"] == {"from": None, "to": REDACTED}
    assert written[1]["changes"]["next_secret_active_at"]["from"] is None
    assert written[4]["changes"]["next_secret"] == {"from": REDACTED, "to": None}
    for entry in written:
        no_secret_in(entry, *secrets)


def test_a_staged_secret_taking_over_is_an_entry_of_the_service_once(stored):
    """The sweep writes a due swap down (tenants/rotation.settle_due) with one
    ``secret.rotation_activated`` entry by ``service``, naming when it took over; a second
    sweep writes none."""
    from webhooks.lifecycle.sweep import sweep
    from webhooks.services import rotation

    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    with session_scope() as session:
        rotation.rotate(session, session.get(Subscription, subscription_id), 1, actor=ALICE)
    with session_scope() as session:
        row = session.get(Subscription, subscription_id)
        secrets, active_at = (row.secret, row.next_secret), row.next_secret_active_at
    for _ in range(2):
        with session_scope() as session:
            sweep(session, active_at + dt.timedelta(seconds=1), timeout=15, recover_after=120,
                  batch=100)
    staged, took_over = entries(account_id)
    assert staged["action"] == "secret.rotated" and staged["actor"]["kind"] == "api_key"
    assert took_over["actor"] == {"kind": "service", "id": None}
    assert (took_over["action"], took_over["target"]) == (
        "secret.rotation_activated", {"kind": "subscription", "id": subscription_id})
    assert took_over["changes"] == {
        "secret": {"from": REDACTED, "to": REDACTED},
        "next_secret": {"from": REDACTED, "to": None},
        "next_secret_active_at": {"from": active_at.isoformat(), "to": None}}
    no_secret_in(took_over, *secrets)
    with session_scope() as session:
        assert session.get(Subscription, subscription_id).secret == secrets[1]


def test_an_ed25519_subscription_s_private_key_is_redacted(stored):
    from webhooks.services import rotation, subscriptions

    account_id, _ = make_account()
    with session_scope() as session:
        subscription = subscriptions.create(session, account_id, URL, actor=ALICE,
                                            signature_scheme="standard-ed25519")
        rotation.rotate(session, subscription, actor=ALICE)
        private_key = subscription.secret
    for entry in entries(account_id):
        assert entry["changes"]["secret"]["to"] == REDACTED
        no_secret_in(entry, private_key)


def _dead_delivery(account_id: str, subscription_id: str) -> str:
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data

    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    with session_scope() as session:
        session.execute(update(Delivery).where(Delivery.id == delivery_id)
                        .values(status="dead", attempt_count=6))
    return delivery_id


def test_replay_and_recover(stored):
    from webhooks.services import recovery, replay

    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    first = _dead_delivery(account_id, subscription_id)
    others = [_dead_delivery(account_id, subscription_id) for _ in range(2)]
    with session_scope() as session:
        replayed = replay.replay(session, session.get(Delivery, first), actor=ALICE)
        replay_id = replayed.id
    since = utcnow() - dt.timedelta(hours=1)
    with session_scope() as session:
        recovered = recovery.recover(session, session.get(Subscription, subscription_id),
                                     since, None, actor=ALICE)
    assert recovered.replayed == len(others)
    with session_scope() as session:  # nothing left to replay: no change, no entry
        assert recovery.recover(session, session.get(Subscription, subscription_id),
                                since, None, actor=ALICE).replayed == 0
    replay_entry, recover_entry = entries(account_id)
    assert replay_entry["action"] == "delivery.replayed"
    assert replay_entry["target"] == {"kind": "delivery", "id": first}
    assert replay_entry["changes"] == {"replay_id": {"from": None, "to": replay_id}}
    assert recover_entry["action"] == "subscription.recovered"
    assert recover_entry["target"] == {"kind": "subscription", "id": subscription_id}
    assert recover_entry["changes"]["replayed"] == {"from": None, "to": 2}
    assert recover_entry["changes"]["window"] == {"from": since.isoformat(), "to": None}


def test_recover_writes_one_entry_per_batch_committed_with_it(stored, monkeypatch):
    from webhooks.config import reset_settings_cache
    from webhooks.services import recovery

    monkeypatch.setenv("WEBHOOKS_RECOVER_BATCH", "2")
    reset_settings_cache()
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    for _ in range(3):
        _dead_delivery(account_id, subscription_id)
    with session_scope() as session:
        recovery.recover(session, session.get(Subscription, subscription_id),
                         utcnow() - dt.timedelta(hours=1), None, actor=ALICE)
    assert [entry["changes"]["replayed"]["to"] for entry in entries(account_id)] == [2, 1]


def test_a_portal_link_entry_names_the_link_but_never_its_token(stored):
    from webhooks.services.portal_links import create_link

    account_id, _ = make_account()
    with session_scope() as session:
        token, link = create_link(session, account_id, utcnow(), 600, actor=ALICE,
                                  read_only=True)
        digest = link.id
    entry = only_entry(account_id)
    assert entry["action"] == "portal_link.created"
    assert entry["target"] == {"kind": "portal_link", "id": digest[:16]}
    assert entry["changes"]["read_only"] == {"from": None, "to": True}
    no_secret_in(entry, token, digest)


@pytest.mark.parametrize("answer, reason, pause_after", [(410, "gone", 25), (500, "failures", 1)])
def test_an_automatic_pause_is_an_entry_of_the_service(stored, answer, reason, pause_after):
    from webhooks.emit import emit_event
    from webhooks.events.samples import sample_data
    from webhooks.lifecycle.claim import claim
    from webhooks.lifecycle.policy import Rules, next_step
    from webhooks.lifecycle.record import record

    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    (delivery_id,) = emit_event(account_id, "email.sent", sample_data("email.sent")).delivery_ids
    now, rules = utcnow(), Rules((60, 300), 300, pause_after)
    with get_engine().begin() as connection:
        claimed = claim(connection, delivery_id, 0, now)
    step = next_step(1, answer, "email.sent", rules)
    with get_engine().begin() as connection:
        recorded = record(connection, claimed, step=step, rules=rules, started_at=now, now=now,
                          duration_ms=5, status_code=answer, error=None, excerpt="no")
    assert recorded.paused_subscription
    entry = only_entry(account_id)
    assert entry["actor"] == {"kind": "service", "id": None}
    assert (entry["action"], entry["target"]) == (
        "subscription.paused", {"kind": "subscription", "id": subscription_id})
    assert entry["changes"] == {"status": {"from": "active", "to": "paused"},
                                "paused_reason": {"from": None, "to": reason}}


def test_a_change_that_rolls_back_leaves_no_entry(stored):
    from webhooks.services import pausing

    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    with pytest.raises(RuntimeError):
        with session_scope() as session:
            assert pausing.pause(session, session.get(Subscription, subscription_id),
                                 actor=ALICE)
            raise RuntimeError("the request fails after the pause")
    assert entries(account_id) == []
    with session_scope() as session:
        assert session.get(Subscription, subscription_id).status == "active"


def test_an_entry_that_cannot_be_written_leaves_no_change(stored, monkeypatch):
    from webhooks.services import audit, pausing

    def refuse(*args, **kwargs):
        raise RuntimeError("the entry's INSERT fails")

    monkeypatch.setattr(audit, "write", refuse)
    account_id, _ = make_account()
    subscription_id = make_subscription(account_id, URL).id
    with pytest.raises(RuntimeError):
        with session_scope() as session:
            pausing.pause(session, session.get(Subscription, subscription_id), actor=ALICE)
    with session_scope() as session:
        assert session.get(Subscription, subscription_id).status == "active"
    assert entries() == []


def test_no_statement_changes_an_entry(stored):
    from webhooks.services import pausing

    account_id, _, _ = _use(lambda s, sub: pausing.pause(s, sub, actor=ALICE))
    with pytest.raises(DBAPIError):
        with get_engine().begin() as connection:
            connection.execute(update(AuditEntry).values(action="subscription.resumed"))
    assert only_entry(account_id)["action"] == "subscription.paused"


def test_no_statement_deletes_an_entry_but_a_purge_s_and_the_purge_leaves_nothing_open(stored):
    from webhooks.services import pausing
    from webhooks.storage.backends import backend_of

    def delete_all(purge: bool) -> None:
        with get_engine().begin() as connection:
            if not purge:
                connection.execute(text("DELETE FROM audit_log"))
                return
            with backend_of(connection).audit_purge(connection):
                connection.execute(text("DELETE FROM audit_log"))

    first, _, _ = _use(lambda s, sub: pausing.pause(s, sub, actor=ALICE))
    with pytest.raises(DBAPIError):
        delete_all(purge=False)
    assert len(entries(first)) == 1
    delete_all(purge=True)
    assert entries(first) == []
    second, _, _ = _use(lambda s, sub: pausing.pause(s, sub, actor=ALICE))
    with pytest.raises(DBAPIError):  # the purge let only its own transaction through
        delete_all(purge=False)
    assert len(entries(second)) == 1
    with get_engine().connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM audit_purges")) == 0


def test_truncate_empties_the_audit_log_only_in_a_purge(db, published, monkeypatch):
    from webhooks.config import reset_settings_cache
    from webhooks.services import pausing
    from webhooks.storage.backends import backend_of

    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "true")
    reset_settings_cache()

    account_id, _, _ = _use(lambda s, sub: pausing.pause(s, sub, actor=ALICE))
    with pytest.raises(DBAPIError, match="never changed or deleted"):
        with get_engine().begin() as connection:
            connection.execute(text("TRUNCATE audit_log"))
    assert len(entries(account_id)) == 1
    with get_engine().begin() as connection, backend_of(connection).audit_purge(connection):
        connection.execute(text("TRUNCATE audit_log"))
    assert entries(account_id) == []


def test_the_operator_s_commands_are_entries_of_the_cli(stored, monkeypatch):
    import getpass

    from tests.operational_helpers import add_endpoint, cli
    from webhooks.operational.operator import OPERATOR_ACCOUNT_ID

    monkeypatch.setattr(getpass, "getuser", lambda: "ops-alice")
    created = cli("accounts", "create", "acme")
    assert created.exit_code == 0, created.output
    account = json.loads(created.output)
    endpoint = add_endpoint("http://127.0.0.1:9/ops")
    with session_scope() as session:
        session.execute(update(Subscription).where(Subscription.id == endpoint["id"])
                        .values(status="paused", paused_reason="failures"))
    assert cli("operational", "resume", endpoint["id"]).exit_code == 0
    assert cli("operational", "remove", endpoint["id"]).exit_code == 0

    account_entry = only_entry(account["id"])
    assert account_entry["action"] == "account.created"
    assert account_entry["actor"] == {"kind": "cli", "id": "ops-alice"}
    assert account_entry["changes"] == {"name": {"from": None, "to": "acme"}}
    no_secret_in(account_entry, account["api_key"])
    operator = entries(OPERATOR_ACCOUNT_ID)
    assert [entry["action"] for entry in operator] == [
        "subscription.created", "subscription.resumed", "subscription.deleted"]
    assert {entry["actor"]["kind"] for entry in operator} == {"cli"}
    assert {entry["target"]["id"] for entry in operator} == {endpoint["id"]}
    no_secret_in(operator[0], endpoint["secret"])


def _entry_at(account_id: str, at: dt.datetime) -> str:
    from webhooks.audit.entries import Action, Target, TargetKind

    with session_scope() as session:
        return audit_log.write(session, account_id, ALICE, Action.SUBSCRIPTION_PAUSED,
                               Target(TargetKind.SUBSCRIPTION, account_id), {}, at=at)


@pytest.mark.parametrize("days", [365, 0])
def test_retention_deletes_the_entries_older_than_its_days_and_0_keeps_them(stored, days):
    from webhooks.lifecycle.retention import purge

    account_id, _ = make_account()
    now = utcnow()
    old = [_entry_at(account_id, now - dt.timedelta(days=400, minutes=n)) for n in range(5)]
    recent = _entry_at(account_id, now - dt.timedelta(days=300))
    # Deliveries' retention off (0): the audit log's applies on its own, in batches of 2.
    purged = purge(get_engine(), retention_days=0, batch=2, audit_retention_days=days)
    left = [entry["id"] for entry in entries(account_id)]
    if days:
        assert purged.audit_entries == len(old) and left == [recent]
    else:
        assert purged.audit_entries == 0 and sorted(left) == sorted([*old, recent])


def test_the_setting_and_the_schedule(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from webhooks.config import load_settings
    from webhooks.errors import ConfigError

    assert load_settings({}).audit_retention_days == 365
    assert load_settings({"WEBHOOKS_AUDIT_RETENTION_DAYS": "0"}).audit_retention_days == 0
    with pytest.raises(ConfigError, match="WEBHOOKS_AUDIT_RETENTION_DAYS"):
        load_settings({"WEBHOOKS_AUDIT_RETENTION_DAYS": "a year"})
    script = "import celeryconfig; print('webhooks-purge' in celeryconfig.beat_schedule)"
    env = {"PATH": "/usr/bin:/bin", "WEBHOOKS_RETENTION_DAYS": "0",
           "WEBHOOKS_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[1],
                         env=env, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "True"  # the audit log's retention alone schedules the purge
