"""The delivery row's life: the rules (the pure policy after an attempt, pacing, ordering,
the sweep's finding, retention) and the transitions, its one writer.

Below the broker, the sender and operational webhooks (docs/architecture.md,
"Layers"): a change returns the Dispatch items to publish, and tells the layers
above it through the listeners they register at start-up (listeners.py).
"""
