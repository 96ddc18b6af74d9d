"""The boundaries of issue 23 hold: scripts/architecture_counts.py, as a test.

Every write to the deliveries table goes through webhooks/lifecycle/transitions.py,
and web code reaches the core through webhooks/services (and the shared vocabulary:
configuration, errors, the event catalogue), not the lifecycle or the broker.
"""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _counts():
    spec = importlib.util.spec_from_file_location("architecture_counts",
                                                  ROOT / "scripts" / "architecture_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_write_to_deliveries_outside_the_transitions_module():
    assert _counts().delivery_writes() == []


def test_web_reaches_no_lifecycle_or_broker_module_but_through_services():
    imported = _counts().web_core_imports()
    internal = sorted(module for module in imported
                      if module.startswith(("webhooks.lifecycle", "webhooks.tenants", "webhooks.emit")))
    assert internal == []


def test_the_core_imports_nothing_of_the_web_layer():
    assert _counts().core_web_imports() == {}
