"""No import cycle among rlhealth's own modules (rlhealth/, probes/ as rlhealth.probes, rules/ as
rlhealth.rules), imports inside functions included.

The graph is read from the sources with ``ast``: ``import a.b`` and ``from a.b import name`` are
edges to ``a.b`` (and to ``a.b.name`` when that is a module), so ``from package import submodule``
depends on the package's ``__init__`` as well. Imports under ``if TYPE_CHECKING:`` are not edges
(they never run). The implicit import of a parent package that every ``import a.b.c`` performs
is not an edge either: a package that imports its own submodules is the ordinary layout.
"""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"rlhealth": ROOT / "rlhealth", "rlhealth.probes": ROOT / "probes", "rlhealth.rules": ROOT / "rules"}


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py file below each package directory."""
    found: dict[str, Path] = {}
    nested = {d.resolve() for d in packages.values()}
    for package, directory in packages.items():
        for path in sorted(directory.rglob("*.py")):
            if any(p.resolve() in nested and p.resolve() != directory.resolve() for p in path.parents):
                continue        # belongs to another mapped package (probes/ is not below rlhealth/, but be safe)
            parts = list(path.relative_to(directory).with_suffix("").parts)
            if ".venv" in parts or "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _type_checking(child.test):
            for stmt in child.orelse:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]))
        else:
            yield from _imports(child)


def import_graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, only edges between the given modules."""
    def known(name: str) -> str | None:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in mods:
                return candidate
        return None

    graph: dict[str, dict[str, int]] = {}
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        edges: dict[str, int] = {}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [source] + [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
            for target in targets:
                resolved = known(target)
                if resolved and resolved != module:
                    edges.setdefault(resolved, node.lineno)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph, component: list[str]) -> str:
    members = set(component)
    return "\n".join(f"  {a} -> {b} (line {line})" for a in component
                     for b, line in sorted(graph[a].items()) if b in members)


def test_no_import_cycle_in_rlhealth_and_probes():
    mods = modules(PACKAGES)
    assert "rlhealth.cli" in mods and "rlhealth.probes.bundle" in mods and "rlhealth.observers.job" in mods
    graph = import_graph(mods)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n\n".join(describe(graph, c) for c in found)


JUDGEMENT = ("rlhealth.audit", "rlhealth.first_error", "rlhealth.observers", "rlhealth.diagnose", "rlhealth.engine",
             "rlhealth.rulebook", "rlhealth.report", "rlhealth.cli", "rlhealth.mcp_server")


def test_probes_capture_without_the_diagnosis_or_the_audit():
    """The probes and parsers capture and parse raw evidence; the audit, the observation layer, the
    rule engine and the commands are above them and never imported by them."""
    graph = import_graph(modules(PACKAGES))
    upward = sorted(f"{module} -> {target} (line {line})" for module, edges in graph.items()
                    if module.startswith("rlhealth.probes") for target, line in edges.items()
                    if any(target == j or target.startswith(j + ".") for j in JUDGEMENT))
    assert upward == []


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return modules({"pkg": tmp_path / "pkg"})


@pytest.mark.parametrize("files, expected", [
    # a function-level import closes a cycle too
    ({"__init__.py": "", "a.py": "from pkg.b import x\n", "b.py": "def f():\n    from pkg import a\nx = 1\n"},
     [["pkg.a", "pkg.b"]]),
    # a package that imports a submodule which takes a sibling from the package namespace
    ({"__init__.py": "from pkg import a\n", "a.py": "from pkg import b\n", "b.py": ""},
     [["pkg", "pkg.a"]]),
    # relative imports resolve
    ({"__init__.py": "", "a.py": "from . import b\n", "b.py": "from .a import y\n"}, [["pkg.a", "pkg.b"]]),
    # a package importing its submodules that import siblings by full name: no cycle
    ({"__init__.py": "from pkg import a, b\n", "a.py": "import pkg.b as b\n", "b.py": "from pkg.c import z\n",
      "c.py": ""}, []),
    # TYPE_CHECKING imports never run
    ({"__init__.py": "", "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import x\n",
      "b.py": "from pkg.a import y\n"}, []),
])
def test_cycle_finder_sees_cycles(tmp_path, files, expected):
    graph = import_graph(_package(tmp_path, files))
    assert cycles(graph) == expected
