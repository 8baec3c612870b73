"""Shared test fixtures: the committed real-Flink fixtures and a read-only guard for inputs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

#: Every committed fixture (a directory with fixture.json), by name.
FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json"))


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below ``path`` (or of ``path`` itself), by relative name."""
    path = Path(path)
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def read_only_guard():
    """Call ``guard(path)`` before a command; at teardown the test fails if anything below changed."""
    watched: list[tuple[Path, dict[str, str]]] = []

    def guard(path: Path) -> Path:
        watched.append((Path(path), tree_digest(path)))
        return path

    yield guard
    for path, before in watched:
        assert tree_digest(path) == before, f"a command modified its input {path}"


@pytest.fixture(params=FIXTURE_NAMES)
def fixture_dir(request) -> Path:
    """Each committed fixture directory in turn."""
    return FIXTURES / request.param


def fixture_info(path: Path) -> dict:
    return json.loads((path / "fixture.json").read_text())


@pytest.fixture
def copied_fixture(tmp_path):
    """``copied_fixture(name)`` copies a committed fixture into a temp dir and returns the copy."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(FIXTURES / name, target)
        return target

    return copy
