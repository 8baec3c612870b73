"""The layers of docs/architecture.md, held by the import graph of repair/ (lazy imports included).

Each folder under repair/ is a layer and may import only the layers below it:
formats < io < readers < ops < cli. Format decoders do no I/O of their own and know nothing of Spark,
typer or rich; nothing but the CLI renders; Spark is started in one place. No module imports itself
back through others (no import cycles).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "repair"
#: Layers from the bottom up; top-level modules (repair/errors.py, ...) are below them all.
LAYERS = ("formats", "io", "readers", "ops", "cli")
#: Third-party or standard modules a layer must not import (prefix match on the dotted name).
FORBIDDEN_EXTERNAL = {
    "formats": ("os", "pathlib", "shutil", "tempfile", "io", "pyarrow.fs", "pyspark", "typer", "rich", "rocksdict"),
    "io": ("pyspark", "typer", "rich"),
    "readers": ("pyspark", "typer", "rich"),
    "ops": ("typer", "rich"),
}
#: Where Spark may be imported: the one module that runs tasks in-process, in a pool or on Spark.
SPARK_MODULES = {"repair.ops.runner"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed module at ``path``: each file is parsed once per test session, not once per check."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """Every module ``name`` imports, anywhere in the file (function-level imports too), with its line.
    Cached: every check walks the same import graph (a test adding a module adds a new ``(name, path)``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names if f"{module}.{alias.name}" in MODULES]
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent)) if path.is_relative_to(PACKAGE.parent) else str(path)


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


def _violations() -> list[str]:
    problems = []
    for name, path in MODULES.items():
        layer = _layer(name)
        for imported, line in _imports(name, path):
            where = f"{_shown(path)}:{line}"
            if imported.startswith("repair."):
                target = _layer(imported)
                if layer is None and target is not None and name != "repair":
                    problems.append(f"{where}: top-level module {name} imports the {target} layer ({imported})")
                elif layer and target and LAYERS.index(target) > LAYERS.index(layer):
                    problems.append(f"{where}: {layer} imports the {target} layer above it ({imported})")
            else:
                for forbidden in FORBIDDEN_EXTERNAL.get(layer, ()):
                    if imported == forbidden or imported.startswith(forbidden + "."):
                        problems.append(f"{where}: {layer} imports {imported}")
                if imported.split(".")[0] == "pyspark" and name not in SPARK_MODULES and layer != "cli":
                    problems.append(f"{where}: Spark is imported outside {sorted(SPARK_MODULES)}")
    return problems


def _cycles() -> list[list[str]]:
    graph = {name: {m for m, _ in _imports(name, path) if m in MODULES and m != name} for name, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_every_module_is_in_a_layer_folder_or_is_a_shared_base():
    top_level = sorted(name for name in MODULES if name.count(".") == 1 and _layer(name + ".x") is None)
    assert top_level == ["repair.errors", "repair.findings", "repair.results", "repair.runbooks"], top_level


def test_no_layer_imports_a_layer_above_it_or_a_forbidden_library():
    assert _violations() == []


def test_there_are_no_import_cycles():
    assert _cycles() == []


def test_format_decoders_open_no_files():
    calls = []
    for name, path in MODULES.items():
        if _layer(name) == "formats":
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                    calls.append(f"{_shown(path)}:{node.lineno}")
    assert calls == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("from repair.ops.verify.engine import verify\n", "formats imports the ops layer"),
        ("def f():\n    import os\n", "formats imports os"),
        ("import pyspark\n", "Spark is imported outside"),
    ],
)
def test_the_checks_catch_a_violation(tmp_path, monkeypatch, source, problem):
    """The rules above would fail on a decoder that imported upwards, did I/O or started Spark."""
    bad = tmp_path / "repair" / "formats" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    monkeypatch.setitem(MODULES, "repair.formats.bad", bad)
    assert any(problem in line for line in _violations())


def test_every_module_has_a_line_in_the_architecture_doc():
    """A newcomer finds any module's job in docs/architecture.md in one hop."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    missing = [
        _shown(path) for name, path in MODULES.items()
        if path.name != "__init__.py" and f"`{_shown(path)}`" not in doc and f"`{path.name}`" not in doc
    ]
    assert missing == []
