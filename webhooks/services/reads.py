"""Read queries the API and the dashboard share: what an account owns, and its attempts.

Every look-up is scoped to the account: another account's id, one that
never existed and an id that is not a UUID all answer None (the last one
without a query). The page queries are in web/delivery_list.py and
web/dashboard/queries.py, written on these and on the models.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from webhooks.lifecycle.failure_kinds import ErrorKind
from webhooks.lifecycle.policy import Outcome
from webhooks.services.subscriptions import canonical_id, owned as owned_subscription
from webhooks.states import PUBLIC_STATUSES, REPLAYABLE, STORED_STATUSES, public_status
from webhooks.storage.attempt_window import earliest_start, started_since_creation
from webhooks.storage.models import Attempt, Delivery, Subscription, utcnow

__all__ = ["ERROR_KINDS", "Outcome", "PUBLIC_STATUSES", "REPLAYABLE", "STORED_STATUSES", "public_status", "owned_subscription",
           "owned_delivery", "attempts_by_delivery", "live_subscriptions", "utcnow",
           "started_since_creation"]

# The kinds of failure an attempt without a response is recorded with (attempts.error_kind).
ERROR_KINDS = tuple(kind.value for kind in ErrorKind)

# started_since_creation (re-exported) bounds a subquery of a delivery's attempts by its
# creation (web/delivery_list.py's error_kind filter).
# utcnow (re-exported) is the store's clock: "now" on a page is the now its rows are compared with.

# Every read of a delivery's page runs these: built once, the request's values bound per call.
_OWNED_DELIVERY = select(Delivery).where(Delivery.id == bindparam("delivery_id"),
                                         Delivery.account_id == bindparam("account_id"))
# The lower bound on started_at lets PostgreSQL scan the day partitions from it on only.
_ATTEMPTS = (select(Attempt)
             .where(Attempt.delivery_id.in_(bindparam("delivery_ids", expanding=True)),
                    Attempt.started_at >= bindparam("earliest"))
             .order_by(Attempt.delivery_id, Attempt.number))


def owned_delivery(session: Session, account_id: str, delivery_id: str) -> Delivery | None:
    """The account's delivery with this id (its subscription may be deleted), or None."""
    canonical = canonical_id(delivery_id)
    if canonical is None:
        return None
    return session.scalars(_OWNED_DELIVERY,
                           {"delivery_id": canonical, "account_id": account_id}).first()


def attempts_by_delivery(session: Session,
                         deliveries: Sequence[Delivery]) -> dict[str, list[Attempt]]:
    """The attempts of these deliveries, in one query, by delivery id, in attempt order.

    Read from the oldest delivery's creation less the clocks' margin
    (storage/attempt_window.py): no attempt of theirs started before."""
    by_delivery: dict[str, list[Attempt]] = defaultdict(list)
    if deliveries:
        values = {"delivery_ids": [delivery.id for delivery in deliveries],
                  "earliest": earliest_start(min(d.created_at for d in deliveries))}
        for attempt in session.scalars(_ATTEMPTS, values):
            by_delivery[attempt.delivery_id].append(attempt)
    return by_delivery


def live_subscriptions(account_id: str) -> Select:
    """The statement of the account's subscriptions not deleted (for a keyset page)."""
    return select(Subscription).where(
        Subscription.account_id == account_id,
        Subscription.deleted_at.is_(None),
    )
