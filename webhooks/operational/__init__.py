"""Operational webhooks (CONTRACT 9.3): the service tells the operator's own systems what
happened to its customers' endpoints.

Operational endpoints belong to the operator, not to an account. They are the
subscriptions of one reserved account (``operator.py``), created on demand,
that has no API key and that no customer route can reach: so a notice is
delivered, signed, retried, recorded and swept like any delivery. Its four
event types (``catalogue.py``) are outside the customer catalogue, so
``emit_event`` refuses them. ``notices.py`` stores a notice in the transaction
of the change it reports (the lifecycle calls it through its listeners,
lifecycle/listeners.py); services/operational_endpoints.py adds, lists and
removes endpoints (``webhooks operational ...``).
"""
