"""Imports run one way: no cycle between modules, none upward between the package's layers.

Read from the source with ``ast`` (every ``import``, including those inside functions, which hide
cycles from a plain import), so nothing is executed. A module's package ``__init__`` counts as a
module of its own: a submodule that imports names from its own package while that package imports
the submodule is a cycle too.

The layers, lowest first (a module may import its own layer and those below it):
``rosetta`` (version), ``errors``, ``safetext`` | ``spec``, ``datasets``, ``runtime`` |
``backends``, ``export`` | ``codegen`` (generated source, below the runner), ``importer`` (ONNX
files read into the spec) | ``runner`` |
``report`` |
``cli`` | ``__main__`` (``python -m rosetta``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rosetta

PACKAGE = Path(rosetta.__file__).resolve().parent

#: each top-level area of the package and its layer (lower may not import higher)
LAYERS = {
    "rosetta": 0,
    "rosetta.errors": 0,
    "rosetta.safetext": 0,
    "rosetta.userfile": 0,  # the one rule for a file written at a path the user names
    "rosetta.spec": 1,
    "rosetta.datasets": 1,
    "rosetta.runtime": 1,
    "rosetta.models": 1,
    "rosetta.backends": 2,
    "rosetta.export": 2,  # the ONNX export: the serving engines (backends) run what it writes
    "rosetta.codegen": 3,
    "rosetta.importer": 3,  # ONNX in: reads into the spec, checks with the reference backend
    "rosetta.runner": 4,
    "rosetta.report": 5,
    "rosetta.serving": 5,  # LoadGen scenarios: a cell of its own kind over the runner's data
    "rosetta.cli": 6,
    "rosetta.__main__": 7,  # ``python -m rosetta``: the command line's entry point
}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("rosetta", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _resolve(target: str, mods: dict[str, Path]) -> str | None:
    """The module a dotted import names (``rosetta.spec.ops.Conv2D`` -> ``rosetta.spec.ops``)."""
    while target not in mods and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in mods else None


def _runtime_nodes(tree: ast.AST):
    """Every node, inside functions too, except the bodies of ``if TYPE_CHECKING:`` (imports for
    type checkers only, never executed)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_edges(mods: dict[str, Path] | None = None) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of modules inside the package."""
    mods = mods or _modules()
    edges = set()
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    up = package[: len(package) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" for a in node.names] or [base]
            else:
                continue
            for t in targets:
                got = _resolve(t, mods) if t.startswith("rosetta") else None
                if got and got != name:
                    edges.add((name, got))
    return edges


def _area(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(graph[v]):
                work.append((v, i + 1))
                w = graph[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return found


def upward(edges: set[tuple[str, str]]) -> list[str]:
    """The imports from a lower layer into a higher one."""
    return sorted(f"{a} -> {b}" for a, b in edges if LAYERS[_area(b)] > LAYERS[_area(a)])


def test_no_import_cycles():
    assert cycles(import_edges()) == []


def test_no_import_runs_upward():
    assert upward(import_edges()) == []


def test_every_area_has_a_layer():
    assert {_area(m) for m in _modules()} <= set(LAYERS)


def test_the_checks_find_a_planted_cycle_and_an_upward_import(tmp_path):
    """A cycle through a function-level import and a package ``__init__``, and an upward import
    written as a relative one, in a planted tree: both are found."""
    files = {
        "rosetta/report/__init__.py": "from rosetta.report.frame import load\n",
        "rosetta/report/frame.py": "def load():\n    from . import groups\n",
        "rosetta/report/groups.py": "from rosetta.report import load\n"
        "if TYPE_CHECKING:\n    from rosetta.cli import main\n",  # type-only: not an edge
        "rosetta/spec/ops.py": "from ..runner import gate\n",
        "rosetta/runner/gate.py": "import rosetta.spec.ops\n",
    }
    mods = {}
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        name = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        mods[name] = path
    edges = import_edges(mods)
    assert sorted(cycles(edges)) == [
        ["rosetta.report", "rosetta.report.frame", "rosetta.report.groups"],
        ["rosetta.runner.gate", "rosetta.spec.ops"],
    ]
    assert upward(edges) == ["rosetta.spec.ops -> rosetta.runner.gate"]
