"""The shape of the code: no module in src/ over 600 lines, no import circle.

Imports are read with ``ast`` from every module under ``src/``: at module level and inside
functions alike (an import hidden in a function is still a dependency), except those under
``if TYPE_CHECKING:``, which never run. ``from package import name`` depends on the
submodule ``package.name`` when there is one, else on the package itself; a package's
``__init__`` running before its submodules is not counted (every tool that draws import
graphs leaves that edge out, and it cannot be avoided).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_LINES = 600

KNOWN_FOREIGN_CYCLES: list[frozenset[str]] = []
"""Cycles the structure check tolerates (none: every circle has been cut)."""

KNOWN_FOREIGN_LONG: set[str] = set()
"""Modules allowed over the limit: none. The five that merging pushed past it (the engine,
jobs, both stores, scores) and the OpenTelemetry export were split by concept since; no
module may join this set."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names) of every import that runs, TYPE_CHECKING blocks left out."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found.append((base, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> modules of src/ it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for target, names in _imports(tree, module, path.name == "__init__.py"):
            if not names:
                if target in modules:
                    graph[module].add(target)
                continue
            for name in names:
                sub = f"{target}.{name}"
                if sub in modules:
                    graph[module].add(sub)
                elif target in modules:
                    graph[module].add(target)
        graph[module].discard(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_checker_finds_circles_and_hidden_imports():
    """The checker itself: a function-level import closes a circle; TYPE_CHECKING does not."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import b\n"
        "def f():\n    from pkg.c import x\n"
        "from . import d\n"
    )
    assert _imports(tree, "pkg.a", False) == [
        ("typing", ["TYPE_CHECKING"]),
        ("pkg.c", ["x"]),
        ("pkg", ["d"]),
    ]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_module_is_over_600_lines():
    plugin = {f"pytest_fxtr.{p.stem}": p for p in (SRC.parent.parent / "pytest_fxtr").glob("*.py")}
    long = {
        module: len(path.read_text().splitlines())
        for module, path in {**_modules(), **plugin}.items()
        if len(path.read_text().splitlines()) > MAX_LINES
    }
    assert set(long) <= KNOWN_FOREIGN_LONG, long


def test_no_import_circle():
    found = [c for c in cycles(import_graph()) if c not in KNOWN_FOREIGN_CYCLES]
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_stores_do_not_import_each_other():
    """Neither store's modules (each store is a module and its records' half) import the other's."""
    graph = import_graph()
    disk = {"fxtr.store._diskcache", "fxtr.store._diskcache_jobs", "fxtr.store._tables"}
    postgres = {"fxtr.store._postgres", "fxtr.store._postgres_jobs", "fxtr.store._postgres_cache"}
    assert disk | postgres <= set(graph), (disk | postgres) - set(graph)
    for module in disk:
        assert not graph[module] & postgres, (module, graph[module] & postgres)
    for module in postgres:
        assert not graph[module] & disk, (module, graph[module] & disk)


def test_integrations_use_only_public_seams():
    """Every module of fxtr.integrations reaches the rest of fxtr through public modules and
    names (``fxtr.experiment.executors``, ``fxtr.tracing``, ...), never a private module or
    helper; its own private modules are its business. TYPE_CHECKING imports never run."""
    private = []
    for module, path in _modules().items():
        if not module.startswith("fxtr.integrations"):
            continue
        tree = ast.parse(path.read_text())
        for target, names in _imports(tree, module, path.name == "__init__.py"):
            if not target.startswith("fxtr") or target.startswith("fxtr.integrations"):
                continue
            hidden = [part for part in target.split(".") if part.startswith("_")]
            hidden += [name for name in names if name.startswith("_")]
            if hidden:
                private.append(f"{module}: {target} {names}")
    assert private == [], "\n".join(private)


def test_the_distribution_is_pytest_fxtr_and_its_import_names_stay():
    """`pip install pytest-fxtr` (the name `fxtr` on PyPI is another project's) gives the
    import names `fxtr` and `pytest_fxtr`, the plugin `fxtr` and the command `fxtr`."""
    from importlib import metadata

    dist = metadata.distribution("pytest-fxtr")
    assert dist.metadata["Name"] == "pytest-fxtr"
    points = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert points[("pytest11", "fxtr")] == "pytest_fxtr.plugin"
    assert points[("console_scripts", "fxtr")] == "fxtr.cli:main"
    extras = set(dist.metadata.get_all("Provides-Extra") or [])
    assert {"postgres", "dask", "langgraph", "otel"} <= extras
    requires = " ".join(dist.metadata.get_all("Requires-Dist") or [])
    assert "fxtr[" not in requires.replace("pytest-fxtr[", "")
