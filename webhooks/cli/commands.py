"""The ``webhooks`` command line (click).

Every refusal ends the command with exit status 2 and, on stderr, one
``error: …`` line per problem saying what is wrong and why (the reason of
each invalid field, the valid choices), never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys

import click

from webhooks.errors import ConfigError, InvalidEvent, NotFound, SchemaNotReady

__all__ = ["main"]


def _operator():
    """The audit log's actor of this command (CONTRACT 10.5): ``cli``, named by the
    operating system's user running it."""
    import getpass

    from webhooks.services.audit import Actor

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = None
    return Actor.cli(user)


def _fail(*messages: str) -> None:
    """Print each message as an ``error:`` line on stderr and exit with status 2."""
    for message in messages:
        click.echo(f"error: {message}", err=True)
    sys.exit(2)


@contextlib.contextmanager
def _database_errors():
    """A database that cannot be reached or used ends the command with one line, never a traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    from webhooks.config.redaction import redact

    try:
        yield
    except (SchemaNotReady, ConfigError) as exc:  # ConfigError: a SQLite file in no folder
        _fail(str(exc))
    except SQLAlchemyError as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""]
        _fail(f"the database could not be used ({type(exc).__name__}): {redact(cause[0])}")


def _needs_schema(command):
    """Run ``command`` only on a database at this version's schema revision (see check_schema)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        from webhooks.storage.migrate import check_schema

        with _database_errors():
            check_schema()
            return command(*args, **kwargs)

    return wrapper


@click.group()
@click.version_option(package_name="webhooks", prog_name="webhooks")
def main() -> None:
    """Outbound webhook delivery service."""
    try:
        from webhooks.config import get_settings

        get_settings()
    except ConfigError as exc:
        _fail(str(exc))


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema (idempotent); says which it did, and the revision."""
    from webhooks.config import get_settings
    from webhooks.config.redaction import redact
    from webhooks.storage.migrate import upgrade

    with _database_errors():
        before, after = upgrade()
    if before is None:
        done = f"created the schema at revision {after}"
    elif before == after:
        done = f"the schema is already at revision {after}, the newest this version knows"
    else:
        done = f"upgraded the schema from revision {before} to {after}"
    click.echo(f"{done} ({redact(get_settings().database_url)})")


@db.command("purge")
@_needs_schema
def db_purge() -> None:
    """Apply the retention rule once, now; prints {"events", "deliveries", "attempts"} deleted.

    Finished deliveries created more than WEBHOOKS_RETENTION_DAYS days ago go
    with their attempts, and events left with no delivery; pending and paused
    ones stay. Works in batches of WEBHOOKS_PURGE_BATCH deliveries, each its
    own short transaction, so workers keep delivering meanwhile. Audit log entries older
    than WEBHOOKS_AUDIT_RETENTION_DAYS (365) go too.
    """
    from webhooks.config import get_settings
    from webhooks.lifecycle.retention import purge
    from webhooks.storage.db import get_engine

    settings = get_settings()
    purged = purge(get_engine(), retention_days=settings.retention_days, batch=settings.purge_batch,
                   audit_retention_days=settings.audit_retention_days)
    click.echo(json.dumps(purged.report()))


@main.group()
def accounts() -> None:
    """Accounts and API keys."""


@accounts.command("create")
@click.argument("name")
@_needs_schema
def accounts_create(name: str) -> None:
    """Create an account; prints {"id", "api_key"} (the key is shown only this once)."""
    from webhooks.services import accounts as account_service
    from webhooks.storage.db import session_scope

    try:
        with session_scope() as session:
            account, api_key = account_service.create(session, name, actor=_operator())
            account_id = account.id
    except ValueError as exc:
        _fail(str(exc))
    click.echo(json.dumps({"id": account_id, "api_key": api_key}))


@accounts.command("list")
@_needs_schema
def accounts_list() -> None:
    """Print {"data": [{"id", "name", "created_at"}, ...]}: every account, oldest first."""
    from webhooks.services import accounts as account_service
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        data = [{"id": row.id, "name": row.name, "created_at": _utc_text(row.created_at)}
                for row in account_service.every_account(session)]
    click.echo(json.dumps({"data": data}))


def _utc_text(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@main.group()
def publishers() -> None:
    """Publisher keys: the operator's credential for the publisher API (events and accounts
    over HTTP, README "The publisher API")."""


@publishers.command("create")
@click.argument("name")
@_needs_schema
def publishers_create(name: str) -> None:
    """Create a publisher key; prints {"id", "name", "key"} (the key is shown only this once)."""
    from webhooks.services import publishers as publisher_service
    from webhooks.storage.db import session_scope

    try:
        with session_scope() as session:
            publisher, key = publisher_service.create(session, name)
            shown = {"id": publisher.id, "name": publisher.name, "key": key}
    except ValueError as exc:
        _fail(str(exc))
    click.echo(json.dumps(shown))


@publishers.command("list")
@_needs_schema
def publishers_list() -> None:
    """Print {"data": [{"id", "name", "created_at", "last_used_at"}, ...]} (never a key)."""
    from webhooks.services import publishers as publisher_service
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        click.echo(json.dumps({"data": publisher_service.listing(session)}))


@publishers.command("revoke")
@click.argument("publisher_id")
@_needs_schema
def publishers_revoke(publisher_id: str) -> None:
    """Revoke a publisher key: it answers 401 at once on every web process; prints
    {"id", "revoked": true}."""
    from webhooks.services import publishers as publisher_service
    from webhooks.storage.db import session_scope

    try:
        with session_scope() as session:
            publisher_service.revoke(session, publisher_id)
    except NotFound as exc:
        _fail(str(exc))
    try:
        publisher_service.tell_web_processes()
    except publisher_service.EpochUnavailable as exc:
        _fail(f"the key is revoked, but the web processes could not be told ({exc}): it may "
              f"keep working for up to {publisher_service.CACHE_SECONDS:.0f} seconds")
    click.echo(json.dumps({"id": publisher_id, "revoked": True}))


@main.command("emit")
@click.argument("account_id")
@click.argument("event_type")
@click.option("--data", "data_json", required=True, help="the event's data as a JSON object")
@click.option("--idempotency-key", default=None, help="the same key returns the same event")
@click.option("--ordering-key", default=None,
              help="events with the same key reach each endpoint one at a time, in emit order")
@_needs_schema
def emit(account_id: str, event_type: str, data_json: str, idempotency_key: str | None,
         ordering_key: str | None) -> None:
    """Emit one event; prints {"event_id"}.

    Every problem is reported at once, one line each: an unknown account, then
    --data that is not JSON, an unknown type (with the valid ones) or each
    invalid field with the reason.
    """
    from webhooks.emit import emit_event

    problems = _emit_problems(account_id, event_type, data_json, idempotency_key, ordering_key)
    if problems:
        _fail(*problems)
    try:
        event = emit_event(account_id, event_type, json.loads(data_json),
                           idempotency_key=idempotency_key, ordering_key=ordering_key)
    except (InvalidEvent, NotFound) as exc:  # the checks above passed; e.g. a payload too large
        _fail(str(exc))
    click.echo(json.dumps({"event_id": event.id}))


def _emit_problems(account_id: str, event_type: str, data_json: str,
                   idempotency_key: str | None, ordering_key: str | None = None) -> list[str]:
    """What is wrong with an ``emit`` command line, the account first; empty when nothing is.

    emit_event stops at the first problem (bad data before an unknown
    account); a person at a terminal wants to fix them all in one go.
    """
    from webhooks.events.inputs import validate_input, validate_ordering_key

    problems = []
    account = _account_problem(account_id)
    if account:
        problems.append(account)
    try:
        validate_ordering_key(ordering_key)
    except InvalidEvent as exc:
        problems.append(f"--ordering-key: {exc}")
    try:
        data = json.loads(data_json)
    except json.JSONDecodeError as exc:
        return problems + [f"--data is not valid JSON: {exc}"]
    try:
        validate_input(account_id, event_type, data, idempotency_key)
    except InvalidEvent as exc:
        if "account_id" not in exc.errors:  # already said, with the reason, above
            problems.append(str(exc))
    return problems


def _account_problem(account_id: str) -> str | None:
    """Why ``account_id`` names no account, or None when it names one."""
    import uuid

    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Account
    from webhooks.tenants.accounts import API_KEY_PREFIX

    hint = "give the id that `webhooks accounts create` printed"
    if account_id.startswith(API_KEY_PREFIX):
        # Not quoted back: a key is a secret, and this line may end up in a log.
        return (f"the account given ({API_KEY_PREFIX}…) looks like an API key, not an account "
                f"id: {hint} as \"id\", not its \"api_key\"")
    try:
        canonical = str(uuid.UUID(account_id))
    except ValueError:
        return f"account id {account_id!r} is not a UUID: {hint}"
    if canonical != account_id:
        return f"account id {account_id!r} is not written as ids are ({canonical}): {hint}"
    with session_scope() as session:
        if session.get(Account, account_id) is None:
            return f"account {account_id} does not exist: {hint}"
    return None


@main.command("options")
def options() -> None:
    """List the per-subscription options: what each takes, its default, what null means, and
    how it works (the reference docs/api.md points to; needs no database)."""
    from webhooks.tenants.option_reference import reference

    click.echo(reference())


@main.group()
def operational() -> None:
    """Operational webhooks: notices to the operator's own systems (docs/events.md)."""
    # An entrance: the services below may change deliveries (resume), whose listeners the
    # composition root registers. Imported here, not at the top: start-up stays fast.
    from webhooks.composition import compose

    compose()


@operational.command("add")
@click.argument("url")
@click.option("--types", "types", default=None,
              help="comma-separated operational event types (default: all four)")
@click.option("--client-certificate", "certificate_file", type=click.File("r"), default=None,
              help="PEM file of the client certificate (the chain, leaf first) presented on an "
                   "https endpoint that requires one; with --client-key")
@click.option("--client-key", "key_file", type=click.File("r"), default=None,
              help="PEM file of its private key, unencrypted")
@click.option("--oauth2-token-url", default=None,
              help="OAuth2 client-credentials grant: the token URL; with --oauth2-client-id "
                   "and the client secret")
@click.option("--oauth2-client-id", default=None)
@click.option("--oauth2-client-secret", default=None, envvar="WEBHOOKS_OAUTH2_CLIENT_SECRET",
              help="the client secret; better read from WEBHOOKS_OAUTH2_CLIENT_SECRET than "
                   "typed where the command line is seen")
@click.option("--oauth2-scope", default=None)
@click.option("--oauth2-audience", default=None)
@_needs_schema
def operational_add(url: str, types: str | None, certificate_file, key_file, **oauth2) -> None:
    """Add an operational endpoint; prints {"id", "url", "secret", "event_types"}
    (the secret that signs its notices is shown only this once), and the credentials it is
    sent with (CONTRACT 10.3), shown as the API shows them."""
    from webhooks.errors import InvalidCredential
    from webhooks.services import operational_endpoints as endpoints
    from webhooks.services.credentials import credential_changes, shown_credentials
    from webhooks.storage.db import session_scope

    try:
        event_types = endpoints.parse_types(types)
        credentials = credential_changes(
            {"url": url, **_credentials_given(certificate_file, key_file, oauth2)}, None)
        with session_scope() as session:
            endpoint = endpoints.add(session, url, event_types, actor=_operator(),
                                     **credentials)
            shown = {"id": endpoint.id, "url": endpoint.url, "secret": endpoint.secret,
                     "event_types": endpoint.event_types}
            if credentials:
                shown.update({name: value for name, value in shown_credentials(endpoint).items()
                              if value is not None})
    except (endpoints.InvalidEndpoint, InvalidCredential) as exc:
        _fail(str(exc))
    click.echo(json.dumps(shown))


def _credentials_given(certificate_file, key_file, oauth2: dict) -> dict:
    """``client_certificate`` and ``oauth2`` as the API takes them, from the add options."""
    given = {}
    if certificate_file is not None or key_file is not None:
        if certificate_file is None or key_file is None:
            _fail("--client-certificate and --client-key go together")
        given["client_certificate"] = {"certificate": certificate_file.read(),
                                       "private_key": key_file.read()}
    settings = {name.removeprefix("oauth2_"): value for name, value in oauth2.items()
                if value is not None}
    if settings:
        given["oauth2"] = settings
    return given


@operational.command("list")
@_needs_schema
def operational_list() -> None:
    """Print {"data": [...]}: each endpoint with its deliveries counted by status."""
    from webhooks.services import operational_endpoints as endpoints
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        click.echo(json.dumps({"data": endpoints.listing(session)}))


@operational.command("resume")
@click.argument("endpoint_id")
@_needs_schema
def operational_resume(endpoint_id: str) -> None:
    """Resume an endpoint that failures paused; prints {"id", "released"}."""
    from webhooks.services import operational_endpoints as endpoints
    from webhooks.storage.db import session_scope

    try:
        with session_scope() as session:
            released = endpoints.resume(session, endpoint_id, actor=_operator())
    except NotFound as exc:
        _fail(str(exc))
    click.echo(json.dumps({"id": endpoint_id, "released": released}))


@operational.command("remove")
@click.argument("endpoint_id")
@_needs_schema
def operational_remove(endpoint_id: str) -> None:
    """Remove an endpoint: no further notice goes to it; prints {"id", "removed": true}."""
    from webhooks.services import operational_endpoints as endpoints
    from webhooks.storage.db import session_scope

    try:
        with session_scope() as session:
            endpoints.remove(session, endpoint_id, actor=_operator())
    except NotFound as exc:
        _fail(str(exc))
    click.echo(json.dumps({"id": endpoint_id, "removed": True}))


@main.command("dev")
@click.option("--port", type=click.IntRange(1, 65535), envvar="PORT", default=5000,
              show_default=True, help="port of the web process (also read from $PORT)")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address the web process binds; 0.0.0.0 exposes it to the network")
def dev(port: int, host: str) -> None:
    """Run web, worker and scheduler on the embedded defaults (SQLite, file broker).

    Creates the data folder (WEBHOOKS_DATA_DIR, default ./webhooks-data),
    migrates, and supervises the three processes; Ctrl-C stops them all.
    """
    from webhooks.cli.devserver import run

    sys.exit(run(host=host, port=port))


@main.command("listen")
@click.option("--secret", "secrets", required=True, multiple=True,
              envvar="WEBHOOKS_LISTEN_SECRET",
              help="the subscription's signing secret (whsec_...), or its public key "
                   "(whpk_..., standard-ed25519); give it twice during a rotation (current "
                   "and next): a delivery verifies with either")
@click.option("--port", type=click.IntRange(0, 65535), default=4242, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--status", type=click.IntRange(100, 599), default=None,
              help="answer this status to every delivery (e.g. 500 to watch retries)")
def listen(secrets: tuple[str, ...], port: int, host: str, status: int | None) -> None:
    """A local receiver: verify (any signature scheme), print and answer every delivery
    (200, or 401 if not verified)."""
    from webhooks.cli.listen import secret_problems, serve
    from webhooks.config import get_settings

    problems = secret_problems(secrets)
    if problems:
        _fail(*problems)

    sys.exit(serve(secret=list(secrets), host=host, port=port, status=status,
                   service_name=get_settings().service_name))


if __name__ == "__main__":
    main()
