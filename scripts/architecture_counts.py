"""Count the architecture's boundaries (issue 23), from the source alone.

Run from the checkout: ``python scripts/architecture_counts.py``. It prints
three counts and the sites behind each:

- writes to ``deliveries`` outside the transitions module: SQLAlchemy
  ``update``/``insert``/``delete`` of the deliveries table, ``Delivery(...)``
  rows built for the ORM, and raw SQL that writes the table;
- dialect branches outside the storage backends: every ``dialect.name``;
- core modules imported by ``web/``: the distinct ``webhooks.*`` modules
  that web code imports;
- import circles among the modules of ``webhooks/``, ``web/`` and ``worker/``,
  counting the imports written inside functions too (issue 37): none;
- imports of project modules written inside functions, outside the CLI
  (``webhooks/cli``, whose lazy imports keep start-up fast): only the documented
  plug-in points of :data:`PLUG_IN_POINTS`, at most 5.

The counts are syntactic (ast and a regular expression), so they are cheap to
re-run after a merge; a site a helper hides (a table passed in a variable of
another name) is not seen, which is why the lifecycle keeps the writes in one
module rather than relying on this count.
"""

from __future__ import annotations

import ast
import collections
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


# --- The import graph (issue 37): circles and imports hidden in functions.

PROJECT_ROOTS = ("webhooks", "web", "worker")
CLI_PREFIX = "webhooks.cli"

# The function-local imports of project modules allowed outside the CLI, each a plug-in
# point: (importing module, imported module) -> why it is imported late. At most 5.
PLUG_IN_POINTS: dict[tuple[str, str], str] = {}
MAX_PLUG_IN_POINTS = 5


def _project_modules() -> dict[str, pathlib.Path]:
    """Every module of webhooks/, web/ and worker/ (migrations aside), by dotted name."""
    modules = {}
    for top in PROJECT_ROOTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _targets(node: ast.AST, module: str, is_package: bool,
             modules: dict[str, pathlib.Path]) -> list[str]:
    """The project modules an import statement of ``module`` imports: ``a.b`` for
    ``import a.b``; for ``from a.b import c``, ``a.b.c`` if that is a module, else ``a.b``."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            package = ".".join(base + ([node.module] if node.module else []))
        else:
            package = node.module or ""
        names = [f"{package}.{alias.name}" if f"{package}.{alias.name}" in modules else package
                 for alias in node.names]
    targets = {_resolve(name, modules) for name in names if name.split(".")[0] in PROJECT_ROOTS}
    return sorted(target for target in targets if target and target != module)


def _resolve(name: str, modules: dict[str, pathlib.Path]) -> str | None:
    """The project module ``name`` stands for: itself, or the nearest package above it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """(module -> the project modules it imports, anywhere in it; and every import of a
    project module written inside a function, as (importer, imported, line))."""
    modules = _project_modules()
    edges: dict[str, set[str]] = collections.defaultdict(set)
    local: list[tuple[str, str, int]] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                           ast.Lambda))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _targets(child, module, is_package, modules):
                        edges[module].add(target)
                        if inside:
                            local.append((module, target, child.lineno))
                visit(child, inside)

        visit(ast.parse(path.read_text()), False)
    return edges, local


def import_circles() -> list[list[str]]:
    """Every circle of imports among the project's modules (a strongly connected set of
    more than one module, Tarjan's algorithm), function-local imports counted."""
    edges, _ = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(_project_modules()):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    return circles


def local_imports_outside_cli() -> list[tuple[str, str, int]]:
    """(importer, imported, line) of each import of a project module written inside a
    function, outside webhooks/cli."""
    _, local = import_graph()
    return [site for site in local
            if site[0] != CLI_PREFIX and not site[0].startswith(CLI_PREFIX + ".")]


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
    circles = import_circles()
    print(f"import circles among webhooks/, web/, worker/ (function-local imports counted): "
          f"{len(circles)}")
    for circle in circles:
        print(f"    {len(circle)} modules: {', '.join(circle)}")
    local = local_imports_outside_cli()
    print(f"function-local imports of project modules outside {CLI_PREFIX}: {len(local)}")
    for importer, imported, line in local:
        allowed = " (plug-in point)" if (importer, imported) in PLUG_IN_POINTS else ""
        print(f"    {importer}:{line} -> {imported}{allowed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
