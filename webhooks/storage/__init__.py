"""Storage: engines and sessions, the models and migrations, and the statements kept per engine.

It knows tables, not rules (docs/architecture.md, "Layers"): the statements of the
claim and the record are the lifecycle's, handed to the backends with each call.
"""
