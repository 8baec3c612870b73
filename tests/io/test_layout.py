"""Layout discovery and path resolution (relocation) on real fixtures and crafted trees."""

from __future__ import annotations

import shutil

import pytest

from repair.errors import StorageError
from repair.formats.flink.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from repair.io.layout import (
    CHECKPOINT,
    DIRECTORY,
    FILE,
    JOB_ROOT,
    METADATA_FILE,
    ROCKSDB_DIR,
    SAVEPOINT,
    SAVEPOINTS_DIR,
    PathResolver,
    SnapshotRef,
    classify,
    discover,
)
from repair.io.storage import default_storage
from repair.ops.verify.engine import verify
from tests.conftest import FIXTURES, fixture_info

FIXTURE = FIXTURES / "flink-1.20-default"
JOB = fixture_info(FIXTURE)["job_id"]
ROOT = FIXTURE / "checkpoints" / JOB


def test_discover_job_root_lists_retained_checkpoints_oldest_first():
    layout = discover(str(ROOT))
    assert layout.kind == "job-root" and layout.root == str(ROOT)
    assert [s.number for s in layout.snapshots] == fixture_info(FIXTURE)["retained_checkpoints"]


@pytest.mark.parametrize(
    "path, kind, number",
    [
        (ROOT / "chk-3", "checkpoint", 3),
        (ROOT / "chk-3" / "_metadata", "metadata-file", 3),
        (FIXTURE / fixture_info(FIXTURE)["savepoints"]["NATIVE"], "savepoint", None),
    ],
)
def test_discover_single_snapshots(path, kind, number):
    layout = discover(str(path))
    assert layout.kind == kind
    assert [s.number for s in layout.snapshots] == [number]
    assert layout.root == (str(ROOT) if number else None)


def test_discover_reports_incomplete_checkpoints(tmp_path):
    root = tmp_path / JOB
    shutil.copytree(ROOT, root)
    (root / "chk-6").mkdir()
    layout = discover(str(root))
    assert layout.incomplete == [str(root / "chk-6")]
    assert layout.snapshots[-1].number == 5


def test_discover_a_base_dir_names_the_job_dirs(tmp_path):
    shutil.copytree(ROOT, tmp_path / JOB)
    with pytest.raises(StorageError, match=f"pass one of them: {JOB}"):
        discover(str(tmp_path))


def test_discover_rejects_other_files_and_missing_paths(tmp_path):
    with pytest.raises(StorageError, match="no such file"):
        discover(str(tmp_path / "missing"))
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(StorageError, match="not a _metadata file"):
        discover(str(tmp_path / "x.txt"))
    with pytest.raises(StorageError, match="no _metadata"):
        discover(str(tmp_path))


def _resolver(root: str, number: int = 5) -> PathResolver:
    ref = SnapshotRef(f"{root}/chk-{number}", f"{root}/chk-{number}/_metadata", number)
    return PathResolver(ref, root)


def test_files_recorded_elsewhere_are_relocated_under_the_root_being_read():
    resolver = _resolver("/mnt/copy/" + JOB)
    resolved = resolver.resolve(FileHandle(f"s3a://bucket/ckpts/{JOB}/shared/abc", 10))
    assert (resolved.uri, resolved.relocated) == (f"/mnt/copy/{JOB}/shared/abc", True)
    assert resolver.moves == {f"s3a://bucket/ckpts/{JOB}": f"/mnt/copy/{JOB}"}
    # File-merging segments keep their byte range.
    seg = resolver.resolve(SegmentFileHandle(100, 20, 1, f"hdfs://nn/c/{JOB}/taskowned/tm1/seg", "id"))
    assert (seg.uri, seg.start, seg.size) == (f"/mnt/copy/{JOB}/taskowned/tm1/seg", 100, 20)


def test_another_jobs_files_are_read_next_to_the_root_only_when_copied_along(tmp_path):
    from repair.io.storage import Storage

    other = "f" * 32
    (tmp_path / JOB).mkdir()
    ref = SnapshotRef(str(tmp_path / JOB / "chk-5"), str(tmp_path / JOB / "chk-5" / "_metadata"), 5)
    resolver = PathResolver(ref, str(tmp_path / JOB), Storage())
    handle = FileHandle(f"file:/old/place/{other}/shared/x", 1)
    # Not copied along (a job restored from another job's checkpoint): read where it was recorded.
    assert resolver.resolve(handle).uri == f"/old/place/{other}/shared/x"
    (tmp_path / other / "shared").mkdir(parents=True)
    (tmp_path / other / "shared" / "x").write_bytes(b"x")
    # Each recorded root is placed once per resolver (per loaded snapshot): a fresh one sees the copy.
    resolved = PathResolver(ref, str(tmp_path / JOB), Storage()).resolve(handle)
    assert (resolved.uri, resolved.relocated) == (str(tmp_path / other / "shared" / "x"), True)


def _renamed_copy(tmp_path, files: list[str], name: str = "p3") -> PathResolver:
    """A resolver for ``<tmp>/<name>/chk-5`` whose _metadata recorded ``files`` under ``/var/lib/flink/<JOB>``."""
    from repair.io.storage import Storage

    root = tmp_path / name
    for tail in files:
        (root / tail).parent.mkdir(parents=True, exist_ok=True)
        (root / tail).write_bytes(b"x")
    recorded = [f"file:/var/lib/flink/{JOB}/{tail}" for tail in ["shared/a", "shared/b", "chk-5/c"]]
    ref = SnapshotRef(str(root / "chk-5"), str(root / "chk-5" / "_metadata"), 5)
    return PathResolver(ref, str(root), Storage(), recorded)


def test_a_job_directory_copied_under_any_name_is_read_where_it_is(tmp_path):
    resolver = _renamed_copy(tmp_path, ["shared/a", "shared/b", "chk-5/c"])
    for tail in ["shared/a", "chk-5/c"]:
        resolved = resolver.resolve(FileHandle(f"file:/var/lib/flink/{JOB}/{tail}", 1))
        assert (resolved.uri, resolved.relocated) == (str(tmp_path / "p3" / tail), True)
    assert resolver.moves == {f"/var/lib/flink/{JOB}": str(tmp_path / "p3")}
    assert resolver.recorded_job_ids == {JOB}


def test_a_file_missing_from_a_renamed_copy_is_missing_where_the_copy_is(tmp_path):
    # One file gone: the root is placed by the others, so the missing one is reported in the copy.
    resolver = _renamed_copy(tmp_path, ["shared/b"])
    assert resolver.resolve(FileHandle(f"file:/var/lib/flink/{JOB}/shared/a", 1)).uri == str(tmp_path / "p3" / "shared" / "a")
    # Every file gone, none where recorded: still this checkpoint's own root (it holds chk-5's files).
    resolver = _renamed_copy(tmp_path, [], name="empty")
    assert resolver.resolve(FileHandle(f"file:/var/lib/flink/{JOB}/shared/a", 1)).uri == str(tmp_path / "empty" / "shared" / "a")


def test_files_of_another_root_that_exist_where_recorded_are_read_there(tmp_path):
    # `repair relocate` without --copy: a new root whose _metadata points to files in the old one.
    from repair.io.storage import Storage

    old = tmp_path / "old"
    (old / "shared").mkdir(parents=True)
    (old / "shared" / "a").write_bytes(b"x")
    ref = SnapshotRef(str(tmp_path / "new" / "chk-5"), str(tmp_path / "new" / "chk-5" / "_metadata"), 5)
    resolver = PathResolver(ref, str(tmp_path / "new"), Storage(), [f"file:{old}/shared/a"])
    resolved = resolver.resolve(FileHandle(f"file:{old}/shared/a", 1))
    assert (resolved.uri, resolved.relocated) == (str(old / "shared" / "a"), False)


def test_files_read_where_they_were_written_are_not_relocated():
    resolver = _resolver(f"/data/ckpts/{JOB}")
    resolved = resolver.resolve(FileHandle(f"file:/data/ckpts/{JOB}/shared/abc", 10))
    assert (resolved.uri, resolved.relocated) == (f"/data/ckpts/{JOB}/shared/abc", False)
    assert resolver.moves == {}
    # Paths without a <job-id>/shared|taskowned|chk-N anchor are read as recorded.
    assert resolver.resolve(FileHandle("s3://b/some/file", 1)).uri == "s3://b/some/file"


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../b", "c:\\x", ""])
def test_relative_handles_cannot_escape_the_snapshot_directory(name):
    with pytest.raises(StorageError, match="refusing name"):
        _resolver(f"/data/{JOB}").resolve(RelativeFileHandle(name, 1))


def test_classify_tells_every_kind_of_path_apart(tmp_path):
    """The one answer every command asks for: each kind a user may pass, and a directory that is none."""
    savepoints = tmp_path / "savepoints"
    for name in ("savepoint-b", "savepoint-a"):
        shutil.copytree(FIXTURE / fixture_info(FIXTURE)["savepoints"]["NATIVE"], savepoints / name)
    (savepoints / "notes").mkdir()
    db = tmp_path / "db"
    db.mkdir()
    (db / "000012.sst").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    sst = next((ROOT / "shared").iterdir())
    expected = {
        str(ROOT): JOB_ROOT, str(ROOT / "chk-3"): CHECKPOINT, str(ROOT / "chk-3" / "_metadata"): METADATA_FILE,
        str(FIXTURE / fixture_info(FIXTURE)["savepoints"]["NATIVE"]): SAVEPOINT, str(savepoints): SAVEPOINTS_DIR,
        str(db): ROCKSDB_DIR, str(sst): FILE, str(tmp_path / "empty"): DIRECTORY,
    }
    assert {path: classify(path).kind for path in expected} == expected
    assert [ref.name for ref in classify(str(savepoints)).snapshots] == ["savepoint-a", "savepoint-b"]
    assert classify(str(sst)).size == sst.stat().st_size


@pytest.mark.parametrize("kind, message", [
    ("db", "a RocksDB directory, not a checkpoint or savepoint"),
    ("savepoints", "a directory of savepoints, not one snapshot; pass one of them: sp"),
    ("empty", r"no _metadata, chk-\* checkpoint or savepoint found"),
])
def test_discover_refuses_what_is_not_a_snapshot_saying_what_it_is(tmp_path, kind, message):
    path = tmp_path / kind
    path.mkdir()
    if kind == "db":
        (path / "CURRENT").write_text("MANIFEST-000001\n")
    if kind == "savepoints":
        shutil.copytree(FIXTURE / fixture_info(FIXTURE)["savepoints"]["NATIVE"], path / "sp")
    with pytest.raises(StorageError, match=message):
        discover(str(path))


def test_classify_reads_a_job_root_once(monkeypatch):
    """One status of the path, one of its _metadata, one listing, one status per chk-N's _metadata:
    verify's path is no longer walked again by each check that wanted to know what it is."""
    storage = default_storage()
    calls = []
    for name in ("stat", "list_dir"):
        original = getattr(storage, name)
        monkeypatch.setattr(storage, name, lambda uri, *a, _o=original, _n=name, **k: calls.append((_n, uri)) or _o(uri, *a, **k))
    verify(str(ROOT), storage=storage)
    on_root = [call for call in calls if call[1].rstrip("/") in (str(ROOT), str(ROOT / "_metadata"))]
    assert on_root == [("stat", str(ROOT)), ("stat", str(ROOT / "_metadata")), ("list_dir", str(ROOT))]
