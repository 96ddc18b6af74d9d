"""What signing costs the worker per attempt, by scheme, measured in this process.

``attempt.delivery_headers`` (every header of one attempt, signed in the
subscription's scheme) is called ``ATTEMPTS`` times on one claim of a real
envelope; the CPU time it took, per call, in microseconds. The shared
scenario's Ed25519 leg reports it beside the worker's CPU per delivery, which
on a shared machine moves by more than the signature costs.
"""

from __future__ import annotations

import time

__all__ = ["ATTEMPTS", "signing_cpu_us"]

ATTEMPTS = 2_000
_FIRST_TIMESTAMP = 1_790_000_000  # unix seconds; each call signs a later one, as retries do


def signing_cpu_us(scheme: str, attempts: int = ATTEMPTS) -> float:
    """CPU microseconds of one attempt's headers signed in ``scheme`` (the mean of
    ``attempts``), its key loaded once before, as a worker's is after its first attempt."""
    from webhooks.config import get_settings
    from webhooks.lifecycle.claim import Claim
    from webhooks.services.attempt import delivery_headers
    from webhooks.tenants.schemes import new_secret

    from .seed import PLACEHOLDER_ID, sample_body

    claim = Claim(delivery_id=PLACEHOLDER_ID, attempt_number=1, event_id=PLACEHOLDER_ID,
                  event_type="reply.received", subscription_id=PLACEHOLDER_ID,
                  url="http://127.0.0.1/", secret=new_secret(scheme), body=sample_body(),
                  version=get_settings().version, signature_scheme=scheme)
    settings = get_settings()
    delivery_headers(claim, settings, _FIRST_TIMESTAMP)
    started = time.process_time()
    for n in range(attempts):
        delivery_headers(claim, settings, _FIRST_TIMESTAMP + n)
    return (time.process_time() - started) / attempts * 1e6
