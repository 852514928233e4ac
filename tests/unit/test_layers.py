"""The package's layers import downward only, with no cycles and no borrowed private names.

The layers, lowest first (``docs/architecture.md``, "The map"):

    seglog._native  <-  seglog.errors, seglog.util  <-  seglog.config  <-  seglog.storage
        <-  seglog.client  <-  seglog.kafka  <-  seglog.cluster (same layer; one direction)
        <-  seglog (the package's front), seglog.bindings, seglog.cli, seglog.benchmarks,
            seglog.testing

A module may import from its own layer or a lower one. Every import counts, module-level or
inside a function; only imports under ``if TYPE_CHECKING:`` (never executed) may form a cycle,
and they too must point downward or sideways. No module imports a name starting with ``_`` from a
module outside its own package.

The walk reads the source files (``engine/``, ``bindings/``, ``_native/``) through the package
mapping in ``pyproject.toml``; it imports nothing.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Source folder -> import name (pyproject.toml, [tool.setuptools] package-dir).
PACKAGE_DIRS = {"engine": "seglog", "_native": "seglog._native", "bindings": "seglog.bindings"}

# Layer of each top-level part of the package, lowest first. The longest matching prefix wins.
LAYERS: dict[str, int] = {
    "seglog._native": 0,
    "seglog.errors": 1,
    "seglog.util": 1,
    "seglog.config": 2,
    "seglog.storage": 3,
    "seglog.client": 4,
    "seglog.cluster": 5,
    "seglog.kafka": 5,
    "seglog": 6,
    "seglog.store": 6,
    "seglog.bindings": 6,
    "seglog.cli": 6,
    "seglog.benchmarks": 6,
    "seglog.testing": 6,
}


def layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module
    names: tuple[str, ...]  # names imported from it (from-imports)
    line: int
    type_only: bool


def modules() -> dict[str, str]:
    """Every Python module of the package: import name -> file."""
    found: dict[str, str] = {}
    for folder, package in PACKAGE_DIRS.items():
        base = os.path.join(ROOT, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__pycache__")) and d != "include"]
            for filename in filenames:
                if not filename.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, filename), base)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                found[".".join([package, *rel])] = os.path.join(dirpath, filename)
            # native modules (.pyx) are modules too: imports of them resolve to the native layer
            for filename in filenames:
                if filename.endswith(".pyx"):
                    rel = os.path.relpath(os.path.join(dirpath, filename), base)[:-4].split(os.sep)
                    found.setdefault(".".join([package, *rel]), os.path.join(dirpath, filename))
    return found


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def imports(module: str, path: str, known: dict[str, str]) -> Iterator[Import]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = path.endswith("__init__.py")

    def visit(node: ast.AST, type_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                assert isinstance(child, ast.If)
                for stmt in child.body:
                    yield from visit_stmt(stmt, True)
                for stmt in child.orelse:
                    yield from visit_stmt(stmt, type_only)
            else:
                yield from visit_stmt(child, type_only)

    def visit_stmt(node: ast.AST, type_only: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "seglog":
                    yield Import(module, alias.name, (), node.lineno, type_only)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                if not is_package:
                    parts = parts[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "seglog":
                return
            plain = tuple(a.name for a in node.names if f"{base}.{a.name}" not in known)
            yield Import(module, base, plain, node.lineno, type_only)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield Import(module, f"{base}.{alias.name}", (), node.lineno, type_only)
        else:
            yield from visit(node, type_only)

    yield from visit(tree, False)


def all_imports() -> list[Import]:
    known = modules()
    found: list[Import] = []
    for module, path in sorted(known.items()):
        if path.endswith(".py"):
            found.extend(imports(module, path, known))
    return found


def _where(imp: Import) -> str:
    return f"{modules()[imp.source]}:{imp.line}".removeprefix(ROOT + os.sep)


def test_the_walk_sees_the_package() -> None:
    known = modules()
    for name in ("seglog", "seglog.storage.log", "seglog._native.records", "seglog.bindings"):
        assert any(m == name or m.startswith(name + ".") for m in known), name
    edges = all_imports()
    assert len(edges) > 100
    # the walk finds a function-level import and a TYPE_CHECKING one
    assert any(not e.type_only for e in edges) and any(e.type_only for e in edges)


def test_layers_import_downward_only() -> None:
    upward = [
        f"{_where(e)}: {e.source} (layer {layer(e.source)}) imports {e.target} (layer {layer(e.target)})"
        for e in all_imports()
        if layer(e.target) > layer(e.source)
    ]
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_the_kafka_protocol_does_not_know_the_cluster() -> None:
    """Within layer 5 one direction only: a cluster node serves Kafka's protocol with
    ``seglog.kafka`` (its listener, codec, fetch sessions); ``seglog.kafka`` never imports
    ``seglog.cluster``, not even for type checking."""
    bad = [
        f"{_where(e)}: {e.source} imports {e.target}"
        for e in all_imports()
        if layer(e.source) == 5
        and e.source.startswith("seglog.kafka")
        and (e.target == "seglog.cluster" or e.target.startswith("seglog.cluster."))
    ]
    assert not bad, "seglog.kafka imports seglog.cluster:\n" + "\n".join(bad)
    assert any(
        e.source.startswith("seglog.cluster.") and e.target.startswith("seglog.kafka.") for e in all_imports()
    ), "the walk should see seglog.cluster using seglog.kafka"


def test_no_import_cycles() -> None:
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for e in all_imports():
        if e.type_only or e.target == e.source:
            continue
        # importing a.b.c runs a/__init__ and a.b/__init__ first
        parts = e.target.split(".")
        for i in range(2, len(parts) + 1):
            t = ".".join(parts[:i])
            if t in known and t != e.source and not e.source.startswith(t + "."):
                graph[e.source].add(t)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert not cycles, "modules that import each other (directly or round a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_private_names_from_other_packages() -> None:
    known = modules()
    bad = []
    for e in all_imports():
        own_package = (
            e.source.rsplit(".", 1)[0]
            if e.source in known and not known[e.source].endswith("__init__.py")
            else e.source
        )
        target_package = e.target.rsplit(".", 1)[0]
        for name in e.names:
            if (
                name.startswith("_")
                and not name.startswith("__")
                and target_package != own_package
                and e.target != own_package
            ):
                bad.append(f"{_where(e)}: {e.source} imports {name} from {e.target}")
        # a private module of another package (seglog._native is the native layer's own name)
        tail = e.target.split(".")
        private = [p for p in tail[1:] if p.startswith("_") and p != "_native"]
        if private and not e.target.startswith(own_package + ".") and target_package != own_package:
            bad.append(f"{_where(e)}: {e.source} imports the private module {e.target}")
    assert not bad, "private names used outside their package:\n" + "\n".join(sorted(set(bad)))


@pytest.mark.parametrize("rule", ["upward", "cycle", "private"])
def test_the_checks_catch_a_violation(rule: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check fails on a planted violation (so it can fail at all)."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        eng = os.path.join(root, "engine")
        os.makedirs(os.path.join(eng, "storage"))
        os.makedirs(os.path.join(eng, "cli"))
        open(os.path.join(eng, "__init__.py"), "w").close()
        open(os.path.join(eng, "storage", "__init__.py"), "w").close()
        open(os.path.join(eng, "cli", "__init__.py"), "w").close()
        with open(os.path.join(eng, "storage", "a.py"), "w") as f:
            if rule == "upward":
                f.write("def f():\n    from seglog.cli import main\n")
            elif rule == "cycle":
                f.write("from seglog.storage import b\n")
            else:
                f.write("from seglog.cli.c import _helper\n")
        with open(os.path.join(eng, "storage", "b.py"), "w") as f:
            f.write("def g():\n    from seglog.storage import a\n")
        with open(os.path.join(eng, "cli", "c.py"), "w") as f:
            f.write("_helper = 1\n")
        monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", root)
        monkeypatch.setitem(PACKAGE_DIRS, "engine", "seglog")
        monkeypatch.delitem(PACKAGE_DIRS, "_native")
        monkeypatch.delitem(PACKAGE_DIRS, "bindings")
        check = {
            "upward": test_layers_import_downward_only,
            "cycle": test_no_import_cycles,
            "private": test_no_private_names_from_other_packages,
        }[rule]
        with pytest.raises(AssertionError):
            check()
