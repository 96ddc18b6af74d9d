"""Sphinx configuration of the Python API reference (``make docs``).

Built from the docstrings with autodoc; every warning fails the build
(``make docs`` runs sphinx-build with ``-W``), so a docstring that does not
render, or a module that no longer imports, is caught. The ``webhooks-options``
directive renders the per-subscription options from their declarations
(``webhooks.tenants.option_reference``), so the page follows each new option; the
``webhooks-event-schemas`` directive renders each event type's JSON Schema.
"""

import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

project = "webhooks"
author = "webhooks"
copyright = "the webhooks authors"  # noqa: A001  (Sphinx's own name for it)

extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode"]

# Members in the order the module declares them: the order in which they are read.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}

# Double back-quotes are the docstrings' literal text, as in the rest of the code.
default_role = "literal"
html_theme = "alabaster"
html_title = "webhooks: Python API reference"
html_static_path: list[str] = []
exclude_patterns = ["_build"]


class _OptionsDirective(Directive):
    """``.. webhooks-options::``: the reference of every declared option, at build time."""

    def run(self):
        from webhooks.tenants.option_reference import reference_lines

        section = nodes.container()
        lines = StringList(reference_lines(), source="webhooks.tenants.options.OPTIONS")
        self.state.nested_parse(lines, self.content_offset, section)
        return section.children


class _EventSchemasDirective(Directive):
    """``.. webhooks-event-schemas::``: each event type's JSON Schema, generated at build time
    from the schemas emit_event validates with (``webhooks.events.json_schemas``)."""

    def run(self):
        import json

        from webhooks.events.json_schemas import data_schemas

        lines = []
        for event_type, schema in data_schemas().items():
            lines += [f".. rubric:: ``{event_type}``", "", ".. code-block:: json", ""]
            lines += ["   " + line for line in json.dumps(schema, indent=2).splitlines()]
            lines.append("")
        section = nodes.container()
        self.state.nested_parse(StringList(lines, source="webhooks.events.json_schemas"),
                                self.content_offset, section)
        return section.children


def setup(app):
    app.add_directive("webhooks-options", _OptionsDirective)
    app.add_directive("webhooks-event-schemas", _EventSchemasDirective)
    return {"parallel_read_safe": True}
