"""Names the service keeps for itself: the operator account's id.

Shared vocabulary (docs/architecture.md, "Layers"): the checks of emit's input
(events/inputs.py) refuse the operator account's events, and /metrics counts
its endpoints apart, without either knowing operational webhooks
(webhooks/operational, above them). The account's row is made by
operational/operator.py.
"""

from __future__ import annotations

__all__ = ["OPERATOR_ACCOUNT_ID", "is_operator"]

# The reserved operator account whose subscriptions are the operational endpoints.
OPERATOR_ACCOUNT_ID = "00000000-0000-0000-0000-000000000000"


def is_operator(account_id: str | None) -> bool:
    """True for the operator account (whose own deliveries never raise a notice)."""
    return account_id == OPERATOR_ACCOUNT_ID
