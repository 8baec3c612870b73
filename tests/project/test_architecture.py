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

from tests.conftest import REPO

PACKAGE = REPO / "repair"
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


# -- what a path is and where an output may go: decided in repair/io only ---------------------------

#: Calls that decide what a user's path is or whether an output may go there. Only repair/io decides
#: (``layout.classify``, ``outputs.new_output``); a command under repair/ops or repair/cli asks them.
#: ``is_dir``/``is_file``/``exists`` count as calls (``Path.is_dir()``, ``os.path.isdir``, ``storage.exists``);
#: ``FileInfo.is_dir`` of a listing's entry is an attribute, not a call, and is not one.
PATH_DECISIONS = {"is_within", "is_new_output", "refuse_output_inside", "is_rocksdb_dir", "classify_path",
                  "isdir", "isfile", "exists", "is_dir", "is_file"}
#: Names of a snapshot's ``_metadata`` file as the code spells it.
METADATA_NAMES = {"METADATA", "METADATA_FILE"}
#: ``stat(...)`` results whose ``is_dir`` is read in a command, and why that is not classifying a user's path:
#: (module, function) -> reason.
STAT_IS_DIR_ALLOWED = {
    ("repair.ops.relocate", "relocated"): "a file the _metadata records: a directory in its place is reported missing",
    ("repair.ops.verify.file_checks", "_open_checked"): "a file the _metadata records: a directory in its place is reported missing",
}


def _own_nodes(function: ast.AST):
    """The nodes of ``function``'s body, not those of the functions defined inside it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _metadata_name(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value == "_metadata") or (
        isinstance(node, ast.Name) and node.id in METADATA_NAMES)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _path_decisions(name: str, path: Path) -> list[str]:
    """Where module ``name`` classifies a path or checks an output itself: a call of :data:`PATH_DECISIONS`;
    a ``stat(join(..., "_metadata"))`` (probing a directory for a snapshot's ``_metadata``); a
    comparison with the ``_metadata`` name; the ``is_dir`` of a ``stat(...)`` result (outside
    :data:`STAT_IS_DIR_ALLOWED`)."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in ast.walk(tree):
        where = f"{_shown(path)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            called = _called_name(node)
            if called in PATH_DECISIONS:
                found.append(f"{where}: calls {called}")
            elif called in ("stat", "exists") and node.args and isinstance(node.args[0], ast.Call) and (
                    _called_name(node.args[0]) == "join" and any(_metadata_name(arg) for arg in node.args[0].args[1:])):
                found.append(f"{where}: probes for a _metadata")
        elif isinstance(node, ast.Compare) and any(_metadata_name(x) for x in [node.left, *node.comparators]):
            found.append(f"{where}: compares a name with _metadata")
    for function in functions:
        if (name, function.name) in STAT_IS_DIR_ALLOWED:
            continue
        stats = {target.id for node in _own_nodes(function) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                 and _called_name(node.value) == "stat" for target in node.targets if isinstance(target, ast.Name)}
        for node in _own_nodes(function):
            if isinstance(node, ast.Attribute) and node.attr == "is_dir" and (
                    (isinstance(node.value, ast.Name) and node.value.id in stats)
                    or (isinstance(node.value, ast.Call) and _called_name(node.value) == "stat")):
                found.append(f"{_shown(path)}:{node.lineno}: reads is_dir of a stat() in {function.name}")
    return sorted(set(found))


def _commands_deciding_paths() -> list[str]:
    return [line for name, path in MODULES.items() if _layer(name) in ("ops", "cli") for line in _path_decisions(name, path)]


def test_no_command_classifies_a_path_or_checks_an_output_itself():
    """ops/ and cli/ ask repair/io/layout.py what a path is and repair/io/outputs.py where an output may go."""
    assert _commands_deciding_paths() == []


@pytest.mark.parametrize("source, problem", [
    ("def f(out, source):\n    return st.is_within(out, source)\n", "calls is_within"),
    ("def f(path):\n    return Path(path).is_dir()\n", "calls is_dir"),
    ("import os\ndef f(path):\n    return os.path.isfile(path)\n", "calls isfile"),
    ("def f(path, storage):\n    return storage.stat(st.join(path, METADATA))\n", "probes for a _metadata"),
    ("def f(path):\n    return st.basename(path) == '_metadata'\n", "compares a name with _metadata"),
    ("def f(path, storage):\n    info = storage.stat(path)\n    return info is not None and info.is_dir\n", "reads is_dir of a stat()"),
])
def test_the_path_checks_catch_a_command_that_decides_itself(tmp_path, source, problem):
    bad = tmp_path / "repair" / "ops" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    assert any(problem in line for line in _path_decisions("repair.ops.bad", bad))


# -- the tests' own layout (docs/testing.md, "Where the tests are") -------------------------------

TESTS_DIR = REPO / "tests"
#: The directories of tests/ that mirror repair/'s layers (formats split as repair/formats is), and
#: tests/project/ for the project itself (docs, install, fixtures, scheduling).
TEST_DIRECTORIES = {"formats/rocksdb", "formats/flink", "io", "readers", "ops", "cli", "project"}


def _test_module_imports(path: Path) -> list[str]:
    """The test modules (``tests....test_*``) that ``path`` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [n for n in names if n.startswith("tests.") and any(part.startswith("test_") for part in n.split(".")[1:])]
    return found


def _misplaced_test_file(path: Path) -> str | None:
    """Why a test file is not where the layout says, or None: in a layer's directory, or at the top
    level when it tests a top-level module of the package (tests/test_results.py: repair/results.py)."""
    where = path.parent.relative_to(TESTS_DIR).as_posix()
    if where in TEST_DIRECTORIES:
        return None
    if where == "." and (PACKAGE / f"{path.stem.removeprefix('test_')}.py").is_file():
        return None
    return f"{path.relative_to(REPO)}: not in one of {sorted(TEST_DIRECTORIES)}"


def test_test_modules_import_helpers_never_other_test_modules():
    """Shared helpers live in tests/'s helper modules; a test module importing another one would run
    the other's module-level set-up and tie two layers' tests together."""
    offenders = {str(p.relative_to(REPO)): imports for p in sorted(TESTS_DIR.rglob("*.py")) if (imports := _test_module_imports(p))}
    assert offenders == {}


def test_test_files_sit_in_the_directory_of_their_layer():
    assert [problem for p in sorted(TESTS_DIR.rglob("test_*.py")) if (problem := _misplaced_test_file(p))] == []


@pytest.mark.parametrize("source", [
    "from tests.ops.test_export import rebuild\n",
    "def f():\n    from tests.readers.test_state_reader import LONG\n",
    "import tests.ops.test_watch\n",
])
def test_the_test_layout_checks_catch_a_test_importing_a_test(tmp_path, source):
    bad = tmp_path / "test_bad.py"
    bad.write_text(source)
    assert _test_module_imports(bad)


def test_the_test_layout_checks_catch_a_misplaced_file(monkeypatch, tmp_path):
    monkeypatch.setattr(f"{__name__}.TESTS_DIR", tmp_path / "tests")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    for relative in ("tests/test_export.py", "tests/misc/test_verify.py", "tests/ops/test_verify.py", "tests/test_errors.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    placed = {p.relative_to(tmp_path).as_posix(): _misplaced_test_file(p) for p in (tmp_path / "tests").rglob("test_*.py")}
    # test_errors.py tests the top-level repair/errors.py; test_export.py names no top-level module
    assert {name for name, problem in placed.items() if problem} == {"tests/test_export.py", "tests/misc/test_verify.py"}
