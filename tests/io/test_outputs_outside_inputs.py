"""No command writes inside its input: every writing command refuses, with exit 2 and an error naming
itself, an output that is the input, inside it, or reached through a symbolic link into it; and an
output that already exists and is not empty, with the same usage error for every command
(:func:`repair.io.outputs.new_output`), before anything is read or written.

A file written into a checkpoint directory is a file `repair orphans` lists for deletion, so a repaired
copy there would be deleted with the orphans.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.io.storage import is_within
from repair.ops.write_savepoint.job import EXPORT_FILE, EXPORT_FORMAT_VERSIONS
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


def _export_of(chk: Path, tmp_path: Path) -> Path:
    """An export directory as far as write-savepoint reads it before its output is checked: its
    ``_export.json`` naming the checkpoint it was made from (no Parquet needed to reach the check)."""
    export = tmp_path / "export"
    export.mkdir()
    number = int(chk.name.split("-")[1])
    (export / EXPORT_FILE).write_text(json.dumps({"format_version": EXPORT_FORMAT_VERSIONS[-1], "source": str(chk),
                                                  "snapshot": chk.name, "checkpoint_id": number, "operators": []}))
    return export


@pytest.mark.parametrize("command", [
    ["relocate", "{chk}", "--out", "{out}"],
    ["edit", "{chk}", "--out", "{out}", "--rename-uid", "a=b"],
    ["rebuild-manifest", "{chk}", "--to", "{out}"],  # --to accepted as relocate accepts it
    ["rebuild-manifest", "{db}", "--out", "{out}"],
    ["export", "{chk}", "--out", "{out}"],
    ["write-savepoint", "{export}", "--out", "{out}"],
    ["rescale", "{chk}", "--out", "{out}", "--parallelism", "2"],
])
def test_writing_commands_refuse_an_existing_output_with_one_usage_error(job_root, tmp_path, capsys, command):
    """Before: write-savepoint and the RocksDB-directory rebuild met the publisher's storage error (or
    none, when the rebuild stopped first), the others three different messages."""
    chk = job_root / f"chk-{max(damage.checkpoint_ids(job_root))}"
    db = tmp_path / "db"
    db.mkdir()
    (db / "CURRENT").write_text("MANIFEST-000001\n")
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("not ours")
    values = {"chk": str(chk), "db": str(db), "out": str(out)}
    if "{export}" in command:
        values["export"] = str(_export_of(chk, tmp_path))
    before = _listing(job_root)
    assert main([a.format(**values) for a in command]) == 2
    error = capsys.readouterr().err
    assert f"error: {command[0]}: {out}: the output already exists and is not empty; outputs go to a new directory" in error
    assert _listing(out) == ["keep.txt"] and _listing(job_root) == before


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
