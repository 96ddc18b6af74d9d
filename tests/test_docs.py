"""The README and the guides in docs/ say what this version does: the schema revisions they
name are this version's. Fast: reads files, needs no server."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from webhooks.storage.migrate import alembic_config
from webhooks.tenants.options import OPTIONS

ROOT = Path(__file__).resolve().parent.parent


def _revisions() -> list[str]:
    """Every revision of the migrations, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


def test_the_readme_names_no_revision_so_a_migration_leaves_it_alone():
    """The README shows `webhooks db upgrade`'s answers with N for the revision and sends the
    reader to docs/upgrade.md, the one file that names each migration (below)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"revision (\d{4})", text) == [], "docs/upgrade.md names the revisions"
    assert "[docs/upgrade.md](docs/upgrade.md)" in text
    said = (ROOT / "webhooks" / "cli" / "commands.py").read_text(encoding="utf-8")
    flowing = " ".join(text.split())
    for answer in ("created the schema at revision {after}",
                   "upgraded the schema from revision {before} to {after}",
                   "the schema is already at revision {after}, the newest this version knows"):
        assert answer in said, "the README quotes what `webhooks db upgrade` prints"
        assert answer.format(before="M", after="N") in flowing, answer


@pytest.mark.process
def test_the_api_reference_builds_without_a_warning(tmp_path):
    """What `make docs` runs: Sphinx autodoc over the docstrings, warnings as errors."""
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]') is missing")
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         str(ROOT / "docs" / "reference"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert built.returncode == 0, built.stderr
    emitting = (tmp_path / "html" / "emitting.html").read_text(encoding="utf-8")
    assert "emit_event" in emitting and "scoped_session" in emitting
    assert "verify" in (tmp_path / "html" / "receiving.html").read_text(encoding="utf-8")
    options = (tmp_path / "html" / "options.html").read_text(encoding="utf-8")
    terms = re.findall(r'<dt><code[^>]*><span class="pre">(\w+)</span>', options)
    assert terms == [option.name for option in OPTIONS], "one term per option, from OPTIONS"


def test_the_upgrade_guide_says_of_every_revision_whether_it_is_safe_during_a_rolling_deploy():
    text = (ROOT / "docs" / "upgrade.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d{4}) \| (.+)$", text, re.MULTILINE))
    assert list(rows) == _revisions(), "one row per migration, in order, in docs/upgrade.md"
    assert all(cells.count("|") >= 4 for cells in rows.values()), "every column of each row"


def test_the_guides_link_to_files_that_exist():
    for guide in ("deploy.md", "upgrade.md", "integrate.md"):
        text = (ROOT / "docs" / guide).read_text(encoding="utf-8")
        for path in re.findall(r"`(deploy/[\w@./-]+)`", text):
            assert (ROOT / path).exists() or list(ROOT.glob(path)), (guide, path)
        for link in re.findall(r"\]\(([\w./-]+\.md)\)", text):
            assert (ROOT / "docs" / link).exists(), (guide, link)


def test_the_alert_rules_parse_and_name_only_metrics_that_metrics_exposes():
    yaml = pytest.importorskip("yaml")
    rules = (ROOT / "deploy" / "prometheus" / "webhooks.rules.yml").read_text(encoding="utf-8")
    groups = yaml.safe_load(rules)["groups"]
    assert all(rule["alert"] and rule["expr"] for group in groups for rule in group["rules"])
    exposed = (ROOT / "web" / "metrics.py").read_text(encoding="utf-8")
    named = {re.sub(r"_(bucket|count|sum)$", "", name)
             for name in re.findall(r"\b(webhooks_[a-z_]+)", rules)}
    assert named and all(f"``{name}" in exposed for name in named), named


# ------------------------------------------------ what the docs show runs (issue 36, item 15)

GUIDES = ("deploy.md", "upgrade.md", "integrate.md")
EXAMPLE_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                 *sorted((ROOT / "docs" / "reference").glob("*.rst")))
_EVENT_TYPE = re.compile(r"^[a-z]+(_[a-z]+)*\.[a-z]+(_[a-z]+)*$")


def _head() -> str:
    return _revisions()[-1]


def _python_blocks(path: Path) -> list[str]:
    """The Python examples of a Markdown (```python) or reStructuredText (code-block) file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)
    blocks = re.findall(r"^\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text, re.M)
    return [textwrap.dedent(block) for block in blocks]


def _emitted_types(node: ast.AST) -> list[str]:
    """The event types an example passes to emit_event or emit_events (directly, through
    functools.partial, or as the "type" of the mappings it gives emit_events)."""
    found = []
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
        args = call.args
        if name == "partial" and args and getattr(args[0], "id", None) == "emit_event":
            name, args = "emit_event", args[1:]
        if name == "emit_event" and len(args) >= 2 and isinstance(args[1], ast.Constant):
            found.append(args[1].value)
        if name == "emit_events":
            for mapping in (n for n in ast.walk(call) if isinstance(n, ast.Dict)):
                for key, value in zip(mapping.keys, mapping.values):
                    if getattr(key, "value", None) == "type" and isinstance(value, ast.Constant):
                        found.append(value.value)
    return found


def test_every_example_emits_event_types_of_the_catalogue():
    """The README's (and `make docs`') ordering-key example emitted `contact.updated`, which
    is no event type: every example of emit_event, emit_events and `webhooks emit`, in the
    README, docs/ and the reference, names a catalogue type."""
    from webhooks.events.catalogue import EVENT_TYPE_NAMES

    named = []
    for path in EXAMPLE_FILES:
        for block in _python_blocks(path):
            named += [(path.name, t) for t in _emitted_types(ast.parse(block))]
        text = path.read_text(encoding="utf-8")
        named += [(path.name, t) for t in re.findall(r"webhooks emit \S+ ([\w.]+)", text)
                  if _EVENT_TYPE.match(t)]
    assert len(named) >= 15, named  # the scan finds the examples it is meant to check
    assert [(where, t) for where, t in named if t not in EVENT_TYPE_NAMES] == []


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "docs" / "reference" / "emitting.rst"],
                         ids=lambda p: p.name)
def test_the_emit_examples_run(path, sqlite_db, published):
    """The Python examples of emitting run as written, statement by statement, with
    ``account_id`` an account, ``db_session`` a session, and ``data`` a valid sample of the
    type the statement emits (the one thing a reader fills in)."""
    from webhooks.events.samples import sample_data
    from webhooks.storage.db import get_sessionmaker
    from tests.factories import make_account

    [block] = [b for b in _python_blocks(path) if "emit_event(" in b]
    session = get_sessionmaker()()
    namespace = {"account_id": make_account()[0], "db_session": session}
    ran = 0
    for statement in ast.parse(block).body:
        types = set(_emitted_types(statement))
        assert len(types) <= 1, f"one statement emits several types: {ast.unparse(statement)}"
        if types:
            namespace["data"] = sample_data(types.pop())
            ran += 1
        exec(compile(ast.Module([statement], []), str(path), "exec"), namespace)
        session.commit()  # "sent after you commit"; SQLite: the next emit needs the lock
    session.close()
    assert ran >= 5


def _without_tried_on(text: str) -> str:
    """A guide without its "Tried on" section (dated runs at named commits: history)."""
    return re.sub(r"^## Tried on\n.*?(?=^## |\Z)", "", text, flags=re.S | re.M)


# What `webhooks db upgrade` and the refusal of the other commands say about revisions.
_ANSWERS = re.compile(r"(created the schema at revision|from revision \S+ to|already at\s+"
                      r"revision|this version needs)\s+(\w+)")


@pytest.mark.parametrize("guide", GUIDES)
def test_the_guides_quote_the_newest_revision_as_n_not_a_number(guide):
    """deploy.md said `db upgrade` prints revision 0008 (it printed 0018): outside "Tried
    on", an answer of the CLI names the newest revision N (the last row of upgrade.md's
    table), never a number that the next migration makes wrong."""
    text = " ".join(_without_tried_on((ROOT / "docs" / guide).read_text(encoding="utf-8")).split())
    quoted = _ANSWERS.findall(text)
    assert [target for _, target in quoted if target not in ("N", _head())] == [], quoted


def test_the_changelog_headings_name_the_schemas_up_to_the_newest():
    """The changelog's top heading said "schema 0014" above migrations 0015 to 0018: the
    headings' revisions run without a gap from 0001 to the newest, and each migration a
    section names is within its heading's."""
    text = (ROOT / "docs" / "upgrade.md").read_text(encoding="utf-8")
    changelog = text.split("\n## Changelog\n", 1)[1]
    sections = re.split(r"^### ", changelog, flags=re.M)[1:]
    ranges = []
    for section in sections:
        heading, body = section.split("\n", 1)
        low, high = re.search(r"\(schema (\d{4})(?: to (\d{4}))?\)", heading).groups()
        high = high or low
        named = re.findall(r"(?:migration|revision) (\d{4})", body)
        assert all(low <= n <= high for n in named), (heading, named)
        ranges.append((low, high))
    revisions = _revisions()
    assert ranges[0][1] == revisions[-1], "the newest heading names the newest revision"
    assert ranges[-1][0] == revisions[0]
    for (newer_low, _), (_, older_high) in zip(ranges, ranges[1:]):
        assert revisions.index(newer_low) == revisions.index(older_high) + 1, ranges


def test_no_guide_calls_an_older_schema_this_checkout():
    """upgrade.md's "Tried on" said "0.2.0 = this checkout (schema 0016)" at 0018."""
    for path in (ROOT / "README.md", *(ROOT / "docs" / g for g in GUIDES)):
        text = " ".join(path.read_text(encoding="utf-8").split())
        for schema in re.findall(r"this checkout[^()]{0,40}\(schema (\d{4})", text):
            assert schema == _head(), (path.name, schema)


def _signatures_sent_while_staged(scheme: str) -> int:
    """How many signatures a delivery of ``scheme`` carries while a rotation is staged,
    from the headers an attempt sends (services/attempt.py)."""
    from webhooks.config import get_settings
    from webhooks.lifecycle.claim import Claim
    from webhooks.services.attempt import delivery_headers
    from webhooks.tenants.schemes import new_secret

    claim = Claim("d1", 1, "e1", "email.sent", "s1", "https://example.com/", new_secret(scheme),
                  b"{}", "2026-07-30", signature_scheme=scheme, staged_secret=new_secret(scheme))
    headers = delivery_headers(claim, get_settings(), 1_800_000_000)
    signature = headers.get("webhook-signature") or headers[get_settings().header("Signature")]
    return len(signature.split())


@pytest.mark.parametrize("scheme", ["service", "standard"])
def test_secret_rotation_says_how_many_signatures_each_scheme_sends(scheme):
    """secret-rotation.md said a delivery is always signed with exactly one secret; a staged
    Standard Webhooks rotation sends two (receivers.md)."""
    text = " ".join((ROOT / "docs" / "secret-rotation.md").read_text(encoding="utf-8").split())
    said = re.search(rf"- `{scheme}` scheme \([^)]*\): (exactly one|two) signatures?", text)
    assert said, f"secret-rotation.md does not say what a `{scheme}` delivery carries"
    assert {"exactly one": 1, "two": 2}[said.group(1)] == _signatures_sent_while_staged(scheme)


def test_the_readmes_local_operational_endpoint_lines_work(sqlite_db, monkeypatch):
    """The README's operational webhooks did not say that a local endpoint needs
    WEBHOOKS_ALLOW_PRIVATE_TARGETS (and a worker that allows it, as `webhooks dev`'s): its
    `add` line for one runs as written, and without the variable it is refused."""
    from click.testing import CliRunner

    from webhooks.cli import main
    from webhooks.config import reset_settings_cache

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Operational webhooks\n", 1)[1].split("\n## ", 1)[0]
    assert "`webhooks dev`" in section
    lines = re.findall(r"^((?:\w+=\S+ )*)webhooks operational add (http://127\.0\.0\.1\S+)",
                       section, re.M)
    assert lines, "no line adds an endpoint on this machine"
    for assignments, url in lines:
        refused = CliRunner().invoke(main, ["operational", "add", url])
        assert refused.exit_code == 2 and "WEBHOOKS_ALLOW_PRIVATE_TARGETS" in refused.stderr
        for assignment in assignments.split():
            monkeypatch.setenv(*assignment.split("=", 1))
        reset_settings_cache()
        added = CliRunner().invoke(main, ["operational", "add", url])
        assert added.exit_code == 0, added.output
        assert json.loads(added.stdout)["url"] == url
