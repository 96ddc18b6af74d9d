"""Use cases, one module per group, called by the HTTP API and the dashboard alike, and by
the worker and the CLI for theirs (docs/architecture.md, "Layers": above the lifecycle,
the broker, the sender and operational webhooks, below the entrances).

Each function runs in the caller's session (the web request's transaction)
and takes ``now`` only where a test needs to choose it. Web code imports
these modules and the read queries (webhooks/services/reads.py), never the
lifecycle, storage or broker modules under them:

- subscriptions: the owned-subscription look-up, subscribe, change, delete
- pausing: resume (and the sweep that sends what it released)
- replay: replay one delivery, with the one replay check
- recovery: replay a window of failed and dead deliveries
- rotation: rotate the signing secret (or key pair), activate or cancel a staged one,
  and what answers and pages may show of them
- public_keys: an account's public keys as a JWKS, for its receivers
- testing: send a test.ping
- accounts: who an API key belongs to
- portal_links: single-use links that sign a browser in to an account's dashboard
- attempt: one delivery attempt, as a worker runs it: claim, send, decide, record, publish
- sweep: the sweep's run, what lifecycle/sweep.py finds published after its commit
- operational_endpoints: add, list, resume, remove the operator's endpoints (the CLI's)
"""
