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
from repair.formats.flink.handles import RelativeFileHandle
from repair.formats.flink.metadata import decode_metadata
from repair.io.snapshot import recorded_paths
from repair.ops.relocate import relocate
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, fixture_info, fixture_spec

EXTERNAL = "flink-2.1-p3-external-xxh3-zstd"


def _file_paths(metadata_path: Path) -> list[str]:
    return recorded_paths(decode_metadata(metadata_path.read_bytes()))


@pytest.mark.parametrize("copy", [False, True])
def test_relocated_checkpoint_names_only_existing_files(tmp_path, read_only_guard, copy):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    read_only_guard(root)
    new_root = tmp_path / "new"
    newest = f"chk-{damage.checkpoint_ids(root)[-1]}"
    result = relocate(str(root / newest), str(new_root), copy=copy)
    assert result.ok and Path(result.new_metadata) == new_root / newest / "_metadata"
    paths = _file_paths(new_root / newest / "_metadata")
    original = decode_metadata((root / newest / "_metadata").read_bytes())
    rewritten = decode_metadata((new_root / newest / "_metadata").read_bytes())
    if copy:  # every copy is recorded relative to the new _metadata, as Flink records a savepoint's files
        assert paths == []
        relative = [h for _, h in rewritten.iter_stream_handles() if isinstance(h, RelativeFileHandle)]
        assert len(relative) == len(result.files) and all((new_root / newest / h.relative_path).is_file() for h in relative)
    else:
        assert paths and all(p.startswith("file:/") and Path(p[5:]).is_file() for p in paths)
        assert all(Path(p[5:]).is_relative_to(root.resolve()) for p in paths)
        assert not any("/var/lib/flink" in p for p in paths)
    # Everything else is unchanged: same operators, handles, sizes; and it verifies clean.
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
@pytest.mark.parametrize("name, copy", [("flink-1.20-default", True), ("flink-2.1-p3-external-xxh3-zstd", False),
                                        ("flink-2.1-p3-external-xxh3-zstd", True), ("flink-1.15-default", True),
                                        ("flink-1.20-changelog", True)])  # DSTL files copied and recorded relative too
def test_real_flink_restores_a_relocated_checkpoint(tmp_path, name, copy):
    fixture = FIXTURES / name
    info = fixture_info(fixture)
    moved = tmp_path / "moved" / "backup-of-the-job"  # a copy "from another host", under another name
    shutil.copytree(damage.checkpoint_root(fixture), moved)
    newest = info["retained_checkpoints"][-1]
    result = relocate(str(moved / f"chk-{newest}"), str(tmp_path / "relocated"), copy=copy)
    assert result.ok
    restore_root = tmp_path / "relocated"
    if copy:  # self-contained: moved once more (and the input gone), it still verifies and restores as it is
        shutil.rmtree(moved)
        restore_root = restore_root.rename(tmp_path / "moved-again")
    assert verify(str(restore_root / f"chk-{newest}")).ok
    records = state_model.read_records(fixture / "records.tsv")
    restored = restore_state(info["flink_version"], restore_root / f"chk-{newest}", records,
                             parallelism=info["parallelism"], max_parallelism=info["spec"]["max_parallelism"],
                             state_backend=fixture_spec(fixture)["state_backend"], extra_conf=info["spec"].get("extra"))
    expected = json.loads((fixture / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


def _renamed_copy(tmp_path: Path, name: str = "p3") -> Path:
    """The external fixture's job directory copied under another name (`cp -r <job-id> /backup/p3`)."""
    copy = tmp_path / "backup" / name
    shutil.copytree(damage.checkpoint_root(FIXTURES / EXTERNAL), copy)
    return copy


def test_a_job_directory_copied_under_any_name_verifies_relocated_and_clean(tmp_path):
    from repair.ops.fallback import fallback

    copy = _renamed_copy(tmp_path)
    report = verify(str(copy))
    assert report.ok and report.files > 0
    assert all(list(s.relocated_from.values()) == [str(copy)] for s in report.snapshots)
    newest = max(damage.checkpoint_ids(copy))
    chosen = fallback(str(copy)).chosen
    assert chosen is not None and chosen.checkpoint_id == newest
    result = relocate(str(copy / f"chk-{newest}"), str(tmp_path / "new"))
    assert result.ok and all(Path(p[5:]).is_relative_to(copy) for p in _file_paths(Path(result.new_metadata)))
    assert verify(str(tmp_path / "new")).ok


def test_a_copied_output_is_self_contained_and_movable(tmp_path):
    copy = _renamed_copy(tmp_path)
    newest = f"chk-{max(damage.checkpoint_ids(copy))}"
    assert relocate(str(copy / newest), str(tmp_path / "out"), copy=True).ok
    shutil.rmtree(copy)  # the original is gone: nothing may be read from it
    (tmp_path / "out").rename(tmp_path / "moved")
    report = verify(str(tmp_path / "moved" / newest))
    assert report.ok and report.files > 0
    # Nothing names a place: every file is recorded relative to the _metadata (Flink reads it so too).
    assert _file_paths(tmp_path / "moved" / newest / "_metadata") == [] and report.snapshots[0].relocated_from == {}


def test_a_job_directory_copied_under_another_s3_prefix_verifies_clean(s3_storage, s3):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    files = {f"backup/p3/{p.relative_to(root)}": p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    bucket = s3.new_bucket(files)
    report = verify(f"s3://{bucket}/backup/p3", storage=s3_storage)
    assert report.ok and report.files > 0
    assert all(list(s.relocated_from.values()) == [f"s3://{bucket}/backup/p3"] for s in report.snapshots)
