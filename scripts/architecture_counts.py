"""Count the architecture's boundaries (issue 23), from the source alone.

Run from the checkout: ``python scripts/architecture_counts.py``. It prints
three counts and the sites behind each:

- writes to ``deliveries`` outside the transitions module: SQLAlchemy
  ``update``/``insert``/``delete`` of the deliveries table, ``Delivery(...)``
  rows built for the ORM, and raw SQL that writes the table;
- dialect branches outside the storage backends: every ``dialect.name``;
- core modules imported by ``web/``: the distinct ``webhooks.*`` modules
  that web code imports.

The counts are syntactic (ast and a regular expression), so they are cheap to
re-run after a merge; a site a helper hides (a table passed in a variable of
another name) is not seen, which is why the lifecycle keeps the writes in one
module rather than relying on this count.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ROOT / "webhooks"
WEB = ROOT / "web"
WORKER = ROOT / "worker"

# Where writes and dialect branches are allowed after issue 23.
TRANSITIONS = {"webhooks/lifecycle/transitions.py"}
BACKENDS_PREFIX = "webhooks/storage/backends/"

_WRITERS = {"update", "insert", "delete", "pg_insert", "sqlite_insert", "dialect_insert"}
_RAW_WRITE = re.compile(r"\b(UPDATE\s+deliveries|INSERT\s+INTO\s+deliveries|DELETE\s+FROM\s+deliveries)\b", re.I)


def _sources(*folders: pathlib.Path):
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def _names_deliveries(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "Delivery" in text or "deliveries" in text


def delivery_writes() -> list[str]:
    """``path:line`` of every write to the deliveries table outside the transitions module."""
    sites = []
    for name, text in _sources(CORE, WEB, WORKER):
        if name in TRANSITIONS:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if called in _WRITERS and node.args and _names_deliveries(node.args[0]):
                    sites.append(f"{name}:{node.lineno}")
                elif called == "Delivery":
                    sites.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _RAW_WRITE.search(node.value):
                sites.append(f"{name}:{node.lineno}")
    return sites


def dialect_branches() -> list[str]:
    """``path:line`` of every ``dialect.name`` outside the storage backends."""
    sites = []
    for name, text in _sources(CORE, WEB, WORKER):
        if name.startswith(BACKENDS_PREFIX):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if "dialect.name" in line and not line.lstrip().startswith("#"):
                sites.append(f"{name}:{number}")
    return sites


def _module_of(package: str, name: str) -> str:
    """``package.name`` if that is a module (``from webhooks.services import reads``), else
    ``package`` (``from webhooks.services.reads import utcnow``)."""
    candidate = ROOT.joinpath(*package.split("."), name)
    if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
        return f"{package}.{name}"
    return package


def _imports_of(folder: pathlib.Path, package: str) -> dict[str, list[str]]:
    """The ``package.*`` modules the files of ``folder`` import, each with the files that do."""
    found: dict[str, list[str]] = {}
    for name, text in _sources(folder):
        for node in ast.walk(ast.parse(text)):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == package or node.module.startswith(f"{package}."):
                    modules = [_module_of(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names
                           if alias.name.startswith(f"{package}.")]
            for module in modules:
                found.setdefault(module, []).append(name)
    return found


def web_core_imports() -> dict[str, list[str]]:
    """The ``webhooks.*`` modules web/ imports, each with the web files that do."""
    return _imports_of(WEB, "webhooks")


def core_web_imports() -> dict[str, list[str]]:
    """The ``web.*`` modules the core (webhooks/) imports: none, the core is below the web."""
    return _imports_of(CORE, "web")


def main() -> int:
    writes, branches, imports = delivery_writes(), dialect_branches(), web_core_imports()
    print(f"writes to deliveries outside {', '.join(sorted(TRANSITIONS))}: {len(writes)}")
    for site in writes:
        print(f"    {site}")
    print(f"dialect branches outside {BACKENDS_PREFIX}: {len(branches)}")
    for site in branches:
        print(f"    {site}")
    upward = core_web_imports()
    print(f"web modules imported by the core (webhooks/): {len(upward)}")
    for module in sorted(upward):
        print(f"    {module}  ({', '.join(sorted(set(upward[module])))})")
    print(f"core modules imported by web/: {len(imports)}")
    for module in sorted(imports):
        print(f"    {module}  ({len(set(imports[module]))} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
