"""``repair relocate``: a moved checkpoint gets a new _metadata that points where its files are now.

Real Flink is the judge: the slow test restores a relocated copy of a committed fixture (written by
Flink under /var/lib/flink, a path that does not exist on a fresh machine) and compares the state
with expected.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.restore import restore_state
from repair.cli.app import main
from repair.errors import UsageError
from repair.formats.flink.handles import FileHandle, SegmentFileHandle
from repair.formats.flink.metadata import decode_metadata
from repair.ops.relocate import relocate
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, fixture_info

EXTERNAL = "flink-2.1-p3-external-xxh3-zstd"


def _file_paths(metadata_path: Path) -> list[str]:
    metadata = decode_metadata(metadata_path.read_bytes())
    paths = []
    for _, handle in metadata.iter_stream_handles():
        if isinstance(handle, FileHandle):
            paths.append(handle.path)
        elif isinstance(handle, SegmentFileHandle):
            paths.append(handle.physical_path)
    return paths


@pytest.mark.parametrize("copy", [False, True])
def test_relocated_checkpoint_names_only_existing_files(tmp_path, read_only_guard, copy):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    read_only_guard(root)
    new_root = tmp_path / "new"
    newest = f"chk-{damage.checkpoint_ids(root)[-1]}"
    result = relocate(str(root / newest), str(new_root), copy=copy)
    assert result.ok and Path(result.new_metadata) == new_root / newest / "_metadata"
    paths = _file_paths(new_root / newest / "_metadata")
    assert paths and all(p.startswith("file:/") and Path(p[5:]).is_file() for p in paths)
    expected_base = new_root if copy else root
    assert all(Path(p[5:]).is_relative_to(expected_base.resolve()) for p in paths)
    assert not any("/var/lib/flink" in p for p in paths)
    # Everything else is unchanged: same operators, handles, sizes; and it verifies clean.
    original = decode_metadata((root / newest / "_metadata").read_bytes())
    rewritten = decode_metadata((new_root / newest / "_metadata").read_bytes())
    assert [op.operator_id for op in rewritten.operators] == [op.operator_id for op in original.operators]
    assert [h.size for _, h in rewritten.iter_stream_handles()] == [h.size for _, h in original.iter_stream_handles()]
    report = verify(str(new_root / newest))
    assert report.ok and report.files == len(result.files)
    # Files relative to _metadata (the meta data streams in chk-N/) are always copied next to it.
    relative = sum(1 for f in result.files if not f.recorded.startswith("file:"))
    assert relative and result.to_json()["copied"]["files"] == (len(result.files) if copy else relative)


def test_missing_files_write_nothing(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "missing_sst")
    newest = max(dmg.checkpoints)
    new_root = tmp_path / "new"
    assert main(["relocate", str(dmg.root / f"chk-{newest}"), "--to", str(new_root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["new_metadata"] is None
    assert [m["source"].endswith(dmg.file.name) for m in doc["missing"]] == [True]
    assert not new_root.exists()


def test_refuses_job_roots_and_existing_targets(tmp_path):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    with pytest.raises(UsageError, match="not a job root"):
        relocate(str(root), str(tmp_path / "x"))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        relocate(str(root / f"chk-{damage.checkpoint_ids(root)[-1]}"), str(tmp_path / "taken"))


@pytest.mark.slow
@pytest.mark.parametrize("name, copy", [("flink-1.20-default", True), ("flink-2.1-p3-external-xxh3-zstd", False)])
def test_real_flink_restores_a_relocated_checkpoint(tmp_path, name, copy):
    fixture = FIXTURES / name
    info = fixture_info(fixture)
    moved = tmp_path / "moved" / info["job_id"]
    shutil.copytree(damage.checkpoint_root(fixture), moved)  # a copy "from another host"
    newest = info["retained_checkpoints"][-1]
    result = relocate(str(moved / f"chk-{newest}"), str(tmp_path / "relocated"), copy=copy)
    assert result.ok
    records = state_model.read_records(fixture / "records.tsv")
    restored = restore_state(info["flink_version"], tmp_path / "relocated" / f"chk-{newest}", records,
                             parallelism=info["parallelism"], max_parallelism=info["spec"]["max_parallelism"])
    expected = json.loads((fixture / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]
