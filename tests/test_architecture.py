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


# --- Issue 37: layers that point one way. import-linter (setup.cfg, `lint-imports`, run by
# `make test-fast` and `make test`) checks the layers; these count what it does not state.

def test_no_import_circle_among_the_project_modules_counting_imports_in_functions():
    circles = _counts().import_circles()
    assert circles == [], "\n".join(f"{len(c)} modules: {', '.join(c)}" for c in circles)


def test_imports_in_functions_outside_the_cli_are_only_the_documented_plug_in_points():
    counts = _counts()
    sites = counts.local_imports_outside_cli()
    unlisted = [f"{importer}:{line} -> {imported}" for importer, imported, line in sites
                if (importer, imported) not in counts.PLUG_IN_POINTS]
    assert unlisted == []
    assert len(sites) <= counts.MAX_PLUG_IN_POINTS
    assert len(counts.PLUG_IN_POINTS) <= counts.MAX_PLUG_IN_POINTS
    assert all(reason.strip() for reason in counts.PLUG_IN_POINTS.values())


def test_the_circle_check_sees_a_circle_made_of_an_import_in_a_function(tmp_path, monkeypatch):
    # The check can fail: two modules importing each other, one of them inside a function.
    counts = _counts()
    package = tmp_path / "webhooks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def late():\n    from webhooks import high\n")
    (package / "high.py").write_text("from webhooks.low import late\n")
    monkeypatch.setattr(counts, "ROOT", tmp_path)
    monkeypatch.setattr(counts, "PROJECT_ROOTS", ("webhooks",))
    assert counts.import_circles() == [["webhooks.high", "webhooks.low"]]
    assert counts.local_imports_outside_cli() == [("webhooks.low", "webhooks.high", 2)]
