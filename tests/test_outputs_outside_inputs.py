"""No command writes inside its input: every writing command refuses, with exit 2 and an error naming
itself, an output that is the input, inside it, or reached through a symbolic link into it.

A file written into a checkpoint directory is a file `repair orphans` lists for deletion, so a repaired
copy there would be deleted with the orphans.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.io.storage import is_within
from tests import damage
from tests.conftest import FIXTURES

EXTERNAL = "flink-2.1-p3-external-xxh3-zstd"


@pytest.fixture
def job_root(tmp_path) -> Path:
    root = tmp_path / "job"
    shutil.copytree(damage.checkpoint_root(FIXTURES / EXTERNAL), root)
    return root


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _outputs(root: Path, tmp_path: Path) -> dict[str, str]:
    """Outputs inside the input: under the job root, under the checkpoint, and a link that points into it."""
    newest = root / f"chk-{max(damage.checkpoint_ids(root))}"
    (tmp_path / "link").symlink_to(root / "shared")
    return {"in-root": str(root / "repaired"), "in-checkpoint": str(newest / "repaired"),
            "the-root": str(root), "through-a-link": str(tmp_path / "link" / "repaired")}


@pytest.mark.parametrize("where", ["in-root", "in-checkpoint", "the-root", "through-a-link"])
@pytest.mark.parametrize("command", [
    ["relocate", "{chk}", "--to", "{out}"],
    ["relocate", "{chk}", "--to", "{out}", "--copy"],
    ["rebuild-manifest", "{chk}", "--out", "{out}"],
    ["export", "{chk}", "--out", "{out}"],
])
def test_writing_commands_refuse_an_output_inside_the_input(job_root, tmp_path, capsys, where, command):
    before = _listing(job_root)
    out = _outputs(job_root, tmp_path)[where]
    chk = str(job_root / f"chk-{max(damage.checkpoint_ids(job_root))}")
    argv = [a.format(chk=chk, out=out) for a in command]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"{command[0]}: " in error and "inside the input" in error
    assert _listing(job_root) == before


def test_rebuild_of_a_rocksdb_directory_refuses_an_output_inside_it(tmp_path, capsys):
    db = tmp_path / "db"
    db.mkdir()
    (db / "CURRENT").write_text("MANIFEST-000001\n")
    assert main(["rebuild-manifest", str(db), "--out", str(db / "new")]) == 2
    error = capsys.readouterr().err
    assert "rebuild-manifest: " in error and "inside the input" in error
    assert not (db / "new").exists()


def test_is_within_resolves_links_and_compares_stores(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "a")
    assert is_within(str(tmp_path / "a" / "b" / "new"), str(tmp_path / "a"))
    assert is_within(str(tmp_path / "alias" / "new"), str(tmp_path / "a"))
    assert is_within(f"file:{tmp_path}/a/x", str(tmp_path / "a"))
    assert not is_within(str(tmp_path / "ab"), str(tmp_path / "a"))
    assert is_within("s3://bucket/ckpt/job/new", "s3a://bucket/ckpt/job")  # one store, two scheme names
    assert is_within("s3://bucket/ckpt/job/new", "s3://bucket/ckpt/job/")
    assert not is_within("s3://other/ckpt/job/new", "s3://bucket/ckpt/job")
    assert not is_within(str(tmp_path / "a"), "s3://bucket" + os.fspath(tmp_path / "a"))
