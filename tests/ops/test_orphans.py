"""``repair orphans``: files in shared/ and taskowned/ that no retained checkpoint references.

The expected orphans are computed here without the ``repair`` package, as tests/damage.py does: a file
is referenced when its name (a UUID Flink chose) occurs in the raw bytes of a retained ``_metadata``.
Every scenario runs on a copy of a committed real-Flink fixture; the copy is never modified by the
command (``read_only_guard``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from repair.cli.render import render_orphans
from repair.errors import UsageError
from repair.ops.orphans import IN_PROGRESS, orphans
from tests import damage
from tests.conftest import DATA, FIXTURES

SMALL = "flink-1.20-default"  # 20 shared files, everything else inline
EXTERNAL = ("flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd")  # inline threshold 0
STATE_DIRS = ("shared", "taskowned")
#: Written by Flink 2.1.1's MetadataV6Serializer: a file-merging SegmentFileHandle into shared/job_x_op_y_0_2/seg-1.
V6_SAMPLE = DATA / "flink_metadata" / "v6_unclaimed.bin"
V6_JOB = "0123456789abcdef0123456789abcdef"

DAY = 86400
T0 = int(time.time()) - 30 * DAY  # every file of a prepared copy is this old, before the _metadata times below


# -- independent expectations (raw bytes, no repair code) ----------------------------------------
def retained_metadata(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(root.glob("chk-*/_metadata"))]


def state_files(root: Path) -> list[Path]:
    return sorted(p for d in STATE_DIRS for p in (root / d).rglob("*") if p.is_file())


def expected_orphans(root: Path) -> set[str]:
    """Files of shared/ and taskowned/ whose name no retained ``_metadata`` contains."""
    metadata = retained_metadata(root)
    return {
        str(p.relative_to(root)) for p in state_files(root) if not any(p.name.encode() in m for m in metadata)
    }


def referenced_files(root: Path) -> list[Path]:
    """Files anywhere below ``root`` (but ``_metadata``) whose name a retained ``_metadata`` contains."""
    metadata = retained_metadata(root)
    return [
        p for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "_metadata" and any(p.name.encode() in m for m in metadata)
    ]


def copied_root(tmp_path: Path, name: str) -> Path:
    return damage.checkpoint_root(damage.copy_fixture(name, tmp_path))


def date_checkpoints(root: Path) -> dict[int, int]:
    """Every file of ``root`` gets mtime T0; ``chk-N/_metadata`` gets T0 + N days. Returns N -> its mtime."""
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (T0, T0))
    times = {}
    for metadata in root.glob("chk-*/_metadata"):
        number = int(metadata.parent.name[4:])
        times[number] = T0 + number * DAY
        os.utime(metadata, (times[number], times[number]))
    return times


def add_file(root: Path, relative: str, mtime: int, size: int = 100) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x01" * size)
    os.utime(path, (mtime, mtime))
    return path


# -- tests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json")))
def test_healthy_fixtures_have_no_orphans_and_count_every_referenced_file(name, read_only_guard):
    root = damage.checkpoint_root(FIXTURES / name)
    read_only_guard(root)
    result = orphans(str(root))

    assert expected_orphans(root) == set() and result.orphans == []
    referenced = referenced_files(root)
    totals = result.to_json()["totals"]
    assert totals["referenced"] == {"files": len(referenced), "bytes": sum(p.stat().st_size for p in referenced), "missing": 0}
    listed = state_files(root)
    assert totals["shared_and_taskowned"] == {"files": len(listed), "bytes": sum(p.stat().st_size for p in listed)}
    metadata_bytes = sum(len(m) for m in retained_metadata(root))
    retained = json.loads((FIXTURES / name / "fixture.json").read_text())["retained_checkpoints"]
    assert totals["retained_checkpoints"] == {
        "checkpoints": len(retained),
        "files": len(referenced) + len(retained),
        "bytes": totals["referenced"]["bytes"] + metadata_bytes,
    }
    assert result.retained_checkpoints == retained


@pytest.mark.parametrize("name", [SMALL, *EXTERNAL])
def test_files_only_deleted_checkpoints_referenced_become_orphans_exactly(tmp_path, name, read_only_guard, monkeypatch):
    root = copied_root(tmp_path, name)
    ids = damage.checkpoint_ids(root)
    for gone in ids[:2]:
        shutil.rmtree(root / f"chk-{gone}")
    expected = expected_orphans(root)
    assert expected, "deleting the two oldest checkpoints should leave files nobody references"
    read_only_guard(root)

    monkeypatch.chdir(tmp_path)  # a relative root: listed and resolved paths must still match
    result = orphans(str(root.relative_to(tmp_path)))

    assert {o.relative_path for o in result.orphans} == expected
    for orphan in result.orphans:
        assert orphan.path == str(root / orphan.relative_path)
        assert orphan.size == (root / orphan.relative_path).stat().st_size
    totals = result.to_json()["totals"]
    assert totals["orphans"] == {"files": len(expected), "bytes": sum((root / r).stat().st_size for r in expected)}
    assert totals["referenced"]["files"] == len(referenced_files(root)) and totals["referenced"]["missing"] == 0
    assert result.retained_checkpoints == ids[2:]


def test_orphans_are_classified_by_age_against_the_retained_metadata(tmp_path, read_only_guard, capsys):
    root = copied_root(tmp_path, SMALL)
    times = date_checkpoints(root)
    ids = damage.checkpoint_ids(root)
    shutil.rmtree(root / f"chk-{ids[0]}")
    (root / f"chk-{ids[0]}").mkdir()  # a half-deleted checkpoint: older than the retained ones, not in progress
    (root / "chk-99").mkdir()  # the checkpoint in progress: files uploaded, no _metadata yet
    oldest, newest = times[ids[1]], times[ids[-1]]
    old = add_file(root, "shared/leftover-old", oldest - DAY)
    between = add_file(root, "shared/leftover-between", oldest + DAY)
    new_shared = add_file(root, "shared/upload-new", newest + 60)
    new_merged = add_file(root, "taskowned/tm-1/segment-new", newest + 60)
    read_only_guard(root)

    result = orphans(str(root))

    by_name = {o.relative_path: o for o in result.orphans}
    assert set(by_name) == expected_orphans(root)
    assert {"shared/leftover-old", "shared/leftover-between", "shared/upload-new", "taskowned/tm-1/segment-new"} <= set(by_name)
    assert result.incomplete_checkpoints == [f"chk-{ids[0]}", "chk-99"]
    assert (result.oldest_metadata_mtime, result.newest_metadata_mtime) == (oldest, newest)
    for new in (new_shared, new_merged):
        orphan = by_name[str(new.relative_to(root))]
        assert (orphan.could_be_needed_by, orphan.older_than_retained) == ("chk-99", False)
        assert orphan.mtime == newest + 60
    assert (by_name[str(between.relative_to(root))].could_be_needed_by, by_name[str(between.relative_to(root))].older_than_retained) == (None, False)
    assert (by_name[str(old.relative_to(root))].could_be_needed_by, by_name[str(old.relative_to(root))].older_than_retained) == (None, True)

    document = json.loads(json.dumps(result.to_json()))  # its fields: tests/cli/test_json_contracts.py
    assert document["retained_checkpoints"] == ids[1:]
    entry = next(o for o in document["orphans"] if o["relative_path"] == "shared/upload-new")
    assert entry == {
        "path": str(new_shared), "relative_path": "shared/upload-new", "size": 100, "mtime": newest + 60,
        "could_be_needed_by": "chk-99", "older_than_retained": False,
    }

    render_orphans(result)
    out = capsys.readouterr().out
    assert "shared/upload-new" in out and "may belong to chk-99" in out and "taskowned/tm-1/segment-new" in out
    assert f"{len(by_name)} orphan file(s)" in out
    assert "rm " not in out and "delete_" not in out  # says how to delete safely, prints nothing that deletes


def test_a_new_orphan_without_a_chk_directory_may_belong_to_a_checkpoint_in_progress(tmp_path):
    root = copied_root(tmp_path, SMALL)
    times = date_checkpoints(root)
    add_file(root, "shared/upload-new", max(times.values()) + 1)
    add_file(root, "shared/upload-same-second", max(times.values()))

    result = orphans(str(root))

    assert {o.relative_path: o.could_be_needed_by for o in result.orphans} == {
        "shared/upload-new": IN_PROGRESS,
        "shared/upload-same-second": IN_PROGRESS,
    }
    assert IN_PROGRESS == "a checkpoint in progress"


def test_a_missing_referenced_file_is_counted_not_orphaned(tmp_path, read_only_guard):
    fixture = damage.copy_fixture(EXTERNAL[0], tmp_path)
    gone = damage.delete_sst(fixture)
    read_only_guard(gone.root)

    result = orphans(str(gone.root))

    assert result.orphans == [] and expected_orphans(gone.root) == set()
    assert result.to_json()["totals"]["referenced"]["missing"] == 1
    assert result.to_json()["totals"]["referenced"]["files"] == len(referenced_files(gone.root))


def test_a_file_merging_segment_references_its_physical_file(tmp_path, read_only_guard):
    root = tmp_path / V6_JOB
    (root / "chk-42").mkdir(parents=True)
    shutil.copy(V6_SAMPLE, root / "chk-42" / "_metadata")
    for referenced in ("shared/job_x_op_y_0_2/seg-1", "shared/6f1c0a4e-sst", "shared/manifest"):
        add_file(root, referenced, T0)
    for orphan in ("shared/job_x_op_y_0_2/seg-2", "taskowned/tm-1/seg-3"):
        add_file(root, orphan, T0)
    assert b"shared/job_x_op_y_0_2/seg-1" in (root / "chk-42" / "_metadata").read_bytes()
    read_only_guard(root)

    result = orphans(str(root))

    assert [o.relative_path for o in result.orphans] == ["shared/job_x_op_y_0_2/seg-2", "taskowned/tm-1/seg-3"]
    assert result.to_json()["totals"]["shared_and_taskowned"]["files"] == 5


@pytest.mark.parametrize("below", ["chk-N", "chk-N/_metadata"])
def test_anything_but_a_job_root_is_a_usage_error(below, read_only_guard):
    root = damage.checkpoint_root(FIXTURES / SMALL)
    read_only_guard(root)
    with pytest.raises(UsageError) as error:
        orphans(str(root / below.replace("chk-N", f"chk-{damage.checkpoint_ids(root)[-1]}")))
    assert "not a job checkpoint root" in str(error.value)
    assert str(root) in str(error.value)  # names the job root to pass instead
