"""Small helpers that create rows through the core, for tests."""

from __future__ import annotations

from webhooks.storage.db import session_scope
from sqlalchemy import insert

from webhooks.storage.models import Attempt, Delivery, Event, Subscription, new_id, utcnow
from webhooks.services.audit import Actor
from webhooks.tenants.accounts import create_account

#: Who the tests' direct calls of the use cases act as, in the audit log.
AUDIT_ACTOR = Actor.cli("tests")


def make_account(name: str = "acme") -> tuple[str, str]:
    """Create an account; returns (account_id, api_key)."""
    with session_scope() as session:
        account, key = create_account(session, name)
        return account.id, key


def make_subscription(account_id: str, url: str, event_types=None, status="active",
                      signature_scheme: str = "service") -> Subscription:
    """Create a subscription row directly (the HTTP API is tested on its own), with a secret
    of its ``signature_scheme``'s format."""
    from webhooks.tenants.schemes import new_secret

    with session_scope() as session:
        subscription = Subscription(
            id=new_id(), account_id=account_id, url=url, secret=new_secret(signature_scheme),
            event_types=event_types, status=status, consecutive_failures=0,
            created_at=utcnow(), signature_scheme=signature_scheme,
        )
        session.add(subscription)
    return subscription


class Published(list):
    """Deliver messages captured instead of sent; ``settled()`` waits for the background publisher.

    ``sweeps`` counts the sweeps asked for (``request_sweep``), and ``releases`` lists the
    subscriptions whose release task was asked for (``request_release``); neither is sent.
    """

    sweeps = 0

    def __init__(self, *args):
        super().__init__(*args)
        self.releases: list[str] = []

    def request_sweep(self) -> bool:
        """Stands in for queue.request_sweep: counted, and accepted as a reachable broker would."""
        self.sweeps += 1
        return True

    def request_release(self, subscription_id: str) -> bool:
        """Stands in for outbox.request_release: noted, and accepted as a reachable broker would."""
        self.releases.append(subscription_id)
        return True

    def settled(self) -> "Published":
        from webhooks.broker import outbox

        assert outbox.flush(10), "the background publisher did not drain in 10 s"
        return self


def stored_delivery(account_id, subscription_id, created_at, status, starts, replay_of=None,
                    error_kind=None) -> str:
    """A delivery created at ``created_at`` with its own event and one attempt per time in
    ``starts`` (rows inserted as they are, whatever the day: the partitions' tests), the
    first one failed with ``error_kind`` when given; its id."""
    event_id, delivery_id = new_id(), new_id()
    with session_scope() as session:
        session.execute(insert(Event).values(
            id=event_id, account_id=account_id, type="email.sent", version="2026-07-30",
            idempotency_key=None, body=b"{}", created_at=created_at))
        session.execute(insert(Delivery).values(
            id=delivery_id, account_id=account_id, event_id=event_id,
            subscription_id=subscription_id, event_type="email.sent", status=status,
            attempt_count=len(starts), next_attempt_at=None, parked=False, replay_of=replay_of,
            created_at=created_at, updated_at=created_at))
        for number, started in enumerate(starts, start=1):
            failed = error_kind if number == 1 else None
            session.execute(insert(Attempt).values(
                delivery_id=delivery_id, number=number, started_at=started, duration_ms=10,
                status_code=None if failed else 500, outcome="retry", error_kind=failed))
    return delivery_id
