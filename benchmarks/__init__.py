"""The benchmark of the webhook service: ``python -m benchmarks`` (see docs/performance.md).

It runs against the PostgreSQL and Redis it is pointed at, starts its own
Celery workers (and beat where the sweep matters) and its own fast local
receiver, and measures its scenarios against the stack's own ceiling: a
bare Celery task that only signs and POSTs.

Layout: ``cli`` (options, the run), ``context`` (sizes, what scenarios get),
``processes`` (starting and stopping workers, memory), ``receiver`` (the
asyncio receiver and its client), ``ceiling_app`` (the bare task), ``seed``
(bulk rows and messages), ``pacing`` (steady-rate calls), ``resources`` and
``meter`` (what a window costs per delivery), ``mix`` (slow receivers'
delays), ``emitter`` and ``backpressure`` (emitting processes), ``dw2`` and
``dw2_project`` (django-webhook2, for comparison), ``stats`` and
``report``; one module per scenario under ``scenarios/``.
"""
