"""The library's documentation runs: every Python example in docs/library.md, in order, in one
namespace (as a reader would paste them), from the repository's root, and the README's claim that
``import repair`` offers every command as a function."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

import repair
from tests.conftest import REPO

LIBRARY_DOC = REPO / "docs" / "library.md"
EXAMPLE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
COMMANDS = ("triage", "inspect", "verify", "fallback", "orphans", "size", "diff", "compat", "relocate", "rebuild_manifest", "export", "write_savepoint", "edit",
            "upgrade", "diagnose", "doctor", "watch")


def _examples() -> list[str]:
    return EXAMPLE.findall(LIBRARY_DOC.read_text())


def test_every_example_in_the_library_doc_runs(monkeypatch, read_only_guard):
    monkeypatch.chdir(REPO)
    read_only_guard(REPO / "fixtures" / "flink-1.20-default")
    namespace: dict = {}
    printed = io.StringIO()
    for number, source in enumerate(_examples(), 1):
        with contextlib.redirect_stdout(printed):
            try:
                exec(compile(source, f"docs/library.md example {number}", "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - name the failing example
                pytest.fail(f"example {number} of docs/library.md failed: {type(error).__name__}: {error}\n{source}")
    assert len(_examples()) >= len(COMMANDS)
    # the examples print real results, not placeholders: the newest checkpoint, a healthy verdict, rows
    assert "True" in printed.getvalue() and namespace["table"].num_rows > 0 and namespace["counts"]


def test_every_command_is_a_documented_library_function():
    text = LIBRARY_DOC.read_text()
    for name in COMMANDS:
        assert callable(getattr(repair, name)), name
        assert f"repair.{name}(" in text, f"docs/library.md has no example of repair.{name}"


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        repair.nosuch  # noqa: B018


def test_importing_the_package_loads_no_command_until_used():
    import subprocess
    import sys

    code = "import sys, repair; print(sorted(m for m in sys.modules if m.startswith(('repair.', 'pyarrow', 'pyspark'))))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
