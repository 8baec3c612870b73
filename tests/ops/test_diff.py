"""``repair diff``: the growth between two real-Flink checkpoints of every committed fixture, accounted
for to the byte; files added, removed and shared as ``repair inspect`` (another module) lists them."""

from __future__ import annotations

import json
import os

import pytest

from repair.cli.app import main
from repair.ops.diff import diff
from repair.ops.inspect import inspect
from tests import damage
from tests.conftest import FIXTURES
from tests.size_testlib import expected_bytes


def roots() -> list:
    return [damage.checkpoint_root(p.parent) for p in sorted(FIXTURES.glob("*/fixture.json"))]


def referenced_files(checkpoint) -> set[str]:
    """The files a checkpoint references (inline streams are none), its _metadata included."""
    info = inspect(str(checkpoint))
    files = {os.path.abspath(info.metadata_path)}
    files |= {os.path.abspath(f.path) for op in info.operators for sub in op.subtasks for f in sub.files if not f.inline}
    return files


@pytest.mark.parametrize("root", roots(), ids=lambda p: p.parent.parent.name)
def test_the_growth_between_the_oldest_and_newest_checkpoint_is_accounted_for(root, read_only_guard):
    first, last = damage.checkpoint_ids(root)[0], damage.checkpoint_ids(root)[-1]
    old, new = root / f"chk-{first}", root / f"chk-{last}"
    result = diff(str(read_only_guard(old)), str(new))
    assert result.ok
    assert result.old.bytes == expected_bytes(root, first) and result.new.bytes == expected_bytes(root, last)
    assert sum(s.growth_bytes for s in result.states) == result.growth_bytes == result.new.bytes - result.old.bytes
    before, after = referenced_files(old), referenced_files(new)
    as_seen = {os.path.abspath(p.file) for p in result.new.pieces if p.file} | {os.path.abspath(p.file) for p in result.old.pieces if p.file}
    assert as_seen == before | after
    assert (result.added.files, result.removed.files, result.shared.files) == (
        len(after - before), len(before - after), len(after & before))
    for state in result.states:
        assert 0 <= state.added_bytes <= state.new_bytes and 0 <= state.removed_bytes <= state.old_bytes


def test_a_checkpoint_against_itself_grew_by_nothing():
    newest = damage.checkpoint_root(FIXTURES / "flink-1.20-file-merging")
    chk = newest / f"chk-{damage.checkpoint_ids(newest)[-1]}"
    result = diff(str(chk), str(chk))
    assert result.growth_bytes == 0 and result.added.files == result.removed.files == 0
    assert result.shared.files == len(referenced_files(chk))
    assert all(s.growth_bytes == 0 and s.growth_entries == 0 for s in result.states)
    table = result.to_arrow()
    assert table.num_rows == len(result.states) and sum(table.column("new_bytes").to_pylist()) == result.new.bytes


def test_the_command(capsys, tmp_path):
    root = damage.checkpoint_root(FIXTURES / "flink-2.1-p3-external-xxh3-zstd")
    ids = damage.checkpoint_ids(root)
    assert main(["diff", str(root / f"chk-{ids[-2]}"), str(root / f"chk-{ids[-1]}"), "--json", "--top", "3"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert len(document["states"]) == 3 and document["states_left_off"] > 0
    assert main(["diff", str(root / f"chk-{ids[-2]}"), str(root / f"chk-{ids[-1]}")]) == 0
    assert "files: added" in capsys.readouterr().out
    assert main(["diff", str(root), str(root / f"chk-{ids[-1]}")]) == 2  # a job root holds several checkpoints
    assert "give one checkpoint" in capsys.readouterr().err
    missing = damage.damaged_copy("flink-2.1-p3-external-xxh3-zstd", tmp_path, "missing_sst")
    assert main(["diff", str(missing.root / f"chk-{ids[-2]}"), str(missing.root / f"chk-{ids[-1]}")]) == 1
    out, err = capsys.readouterr()
    assert "missing_file" in out and "Traceback" not in out + err
