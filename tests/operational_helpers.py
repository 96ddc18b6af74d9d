"""Shared by the operational webhook tests: the CLI, and reading notices as they arrived."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlalchemy import func, select

from webhooks.cli.commands import main
from webhooks.reserved import OPERATOR_ACCOUNT_ID
from webhooks.signing import verify
from webhooks.storage.db import session_scope
from webhooks.storage.models import Delivery, Event


def cli(*args: str):
    """Run ``webhooks <args>`` in this process; the click Result."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def add_endpoint(url: str, types: str | None = None) -> dict:
    """``webhooks operational add``; its printed JSON."""
    result = cli("operational", "add", url, *(["--types", types] if types else []))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def notices(requests, secret: str) -> list[dict]:
    """The envelopes of ``requests``, each checked to be signed with ``secret`` and to carry
    its type in the event header."""
    envelopes = []
    for request in requests:
        verify(secret, request.body, request.headers["X-Service-Signature"])
        envelope = json.loads(request.body)
        assert request.headers["X-Service-Event"] == envelope["type"]
        assert list(envelope) == ["version", "id", "type", "mode", "created_at", "data"]
        envelopes.append(envelope)
    return envelopes


def operator_events() -> int:
    """How many notices were stored (events of the operator account)."""
    with session_scope() as session:
        return session.scalar(select(func.count()).select_from(Event)
                              .where(Event.account_id == OPERATOR_ACCOUNT_ID))


def operator_deliveries() -> list[tuple[str, str]]:
    """(event type, status) of every notice's delivery."""
    with session_scope() as session:
        return [(d.event_type, d.status) for d in session.scalars(
            select(Delivery).where(Delivery.account_id == OPERATOR_ACCOUNT_ID))]
