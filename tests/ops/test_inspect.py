"""``repair inspect`` on every committed fixture, compared with what the generator knows.

The expectations come from fixture.json (written by the generator from the job it ran) and from the
bytes on disk, not from the code under test; key-group ranges come from repair.formats.flink.keygroups, which
tests/formats/flink/test_keygroups.py checks against Flink's own jars.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from repair.formats.flink.keygroups import key_group_range_for_operator, operator_id_for_uid
from repair.ops.inspect import inspect
from tests.conftest import FIXTURES, checkpoint_parallelism, fixture_info, logs_state_changes, writes_rocksdb_instances


def _root(fixture: Path) -> Path:
    return fixture / "checkpoints" / fixture_info(fixture)["job_id"]


def _snapshot_paths(fixture: Path) -> list[tuple[str, Path]]:
    info = fixture_info(fixture)
    root = _root(fixture)
    paths = [(f"chk-{c}", root / f"chk-{c}") for c in info["retained_checkpoints"]]
    paths += [(fmt, fixture / rel) for fmt, rel in info["savepoints"].items()]
    return paths


def _operators_by_uid(result, uids):
    by_id = {op.id: op for op in result.operators}
    return {uid: by_id.get(operator_id_for_uid(uid)) for uid in uids}


def test_every_snapshot_of_every_fixture_matches_the_generator(fixture_dir, read_only_guard):
    read_only_guard(fixture_dir)
    info = fixture_info(fixture_dir)
    version = tuple(int(x) for x in info["flink_version"].split(".")[:2])
    for label, path in _snapshot_paths(fixture_dir):
        result = inspect(str(path))
        assert result.checkpoint_id >= 1
        expected_version = 3 if version < (1, 16) else 4 if version < (2, 0) else 5 if version < (2, 1) else 6
        assert result.metadata_version == expected_version
        if label in ("CANONICAL", "NATIVE"):
            assert (result.kind, result.savepoint_format) == ("savepoint", label.lower())
        else:
            assert result.kind == "checkpoint" and result.checkpoint_id == int(label[4:])

        operators = _operators_by_uid(result, info["uids"])
        assert all(operators.values()), f"{label}: missing operators {[u for u, o in operators.items() if o is None]}"
        if result.metadata_version >= 5:
            assert {op.uid for op in operators.values()} == set(info["uids"])

        parallelism = checkpoint_parallelism(info, result.checkpoint_id if result.kind == "checkpoint" else None)
        for uid, spec in info["keyed_operators"].items():
            op = operators[uid]
            assert (op.parallelism, op.max_parallelism) == (parallelism, info["max_parallelism"])
            assert [s.index for s in op.subtasks] == list(range(parallelism))
            for sub in op.subtasks:
                assert sub.problems == []
                assert sub.key_group_range == key_group_range_for_operator(op.max_parallelism, op.parallelism, sub.index)
                kinds = {s.name: s.kind for s in sub.states}
                for name, kind in spec["states"].items():
                    assert kinds.get(name) == kind, f"{label} {uid}[{sub.index}] {name}"
                # a changelog names a timer state once a timer changed or it was materialized
                for service in spec["timer_services"] if not logs_state_changes(fixture_dir) else ():
                    assert kinds.get(f"_timer_state/event_{service}") == "priority-queue"
                expected_handle = ("savepoint-key-groups" if label == "CANONICAL"
                                   else "changelog" if logs_state_changes(fixture_dir)
                                   else "incremental-rocksdb" if writes_rocksdb_instances(fixture_dir) else "key-groups")
                assert sub.handle == expected_handle

        for uid, states in info["operator_states"].items():
            sub_states = {s.name: s.kind for sub in operators[uid].subtasks for s in sub.states}
            assert sub_states == {name: f"operator-{kind}" for name, kind in states.items()}


def test_external_file_sizes_equal_the_bytes_on_disk(fixture_dir):
    for _, path in _snapshot_paths(fixture_dir):
        result = inspect(str(path))
        external = [f for op in result.operators for s in op.subtasks for f in s.files if not f.inline]
        inline = [f for op in result.operators for s in op.subtasks for f in s.files if f.inline]
        for f in external:
            assert Path(f.path).is_file(), f.path
            if f.role == "changelog":  # the size counts the change stream, after a flag byte (0: not compressed)
                assert os.path.getsize(f.path) == f.size + 1, f.path
            elif f.segment_start is None:
                assert os.path.getsize(f.path) == f.size, f.path
            else:  # a segment of a merged file (file merging, 1.20+)
                assert f.segment_start + f.size <= os.path.getsize(f.path), f.path
            assert Path(f.path).resolve().is_relative_to(fixture_dir.resolve())
        assert result.inline_bytes == sum(f.size for f in inline)
        assert result.external_bytes == sum(f.size for f in external)


def test_inline_threshold_decides_what_is_inline():
    external = inspect(str(_root(FIXTURES / "flink-1.20-p3-external-xxhash-lz4")))
    default = inspect(str(_root(FIXTURES / "flink-1.20-default")))
    keyed = lambda r: [f for op in r.operators for s in op.subtasks for f in s.files if s.handle]  # noqa: E731
    # Threshold 0: every RocksDB file and meta data stream is a file.
    assert all(not f.inline for f in keyed(external))
    # Default threshold (20 kb): CURRENT and small SSTs are inline; OPTIONS files (17 to 65 kB, more
    # column families, more bytes) are inline only below it.
    assert all(f.inline for f in keyed(default) if f.local_name == "CURRENT")
    options = [f for f in keyed(default) if (f.local_name or "").startswith("OPTIONS")]
    assert {f.inline for f in options} == {True, False}
    assert all(f.inline == (f.size < 20 * 1024) for f in options)


def test_committed_fixtures_are_read_as_relocated():
    fixture = FIXTURES / "flink-1.20-default"
    info = fixture_info(fixture)
    result = inspect(str(_root(fixture)))
    recorded = info["original_locations"]["checkpoints"].removeprefix("file://") + "/" + info["job_id"]
    assert result.relocated_from == {recorded: str(_root(fixture))}
    shared = [f for op in result.operators for s in op.subtasks for f in s.files if f.role in ("shared", "private") and not f.inline]
    assert shared and all(f.relocated and f.recorded.startswith("file:/var/lib/flink/") for f in shared)


def test_native_savepoint_files_are_relative_to_the_savepoint():
    fixture = FIXTURES / "flink-2.1-default"
    path = fixture / fixture_info(fixture)["savepoints"]["NATIVE"]
    result = inspect(str(path))
    external = [f for op in result.operators for s in op.subtasks for f in s.files if not f.inline]
    assert external and all(Path(f.path).parent == path and not f.relocated for f in external)
    assert result.relocated_from == {}


def test_a_copied_checkpoint_inspects_the_same(tmp_path):
    fixture = FIXTURES / "flink-2.1-p3-external-xxh3-zstd"
    original = inspect(str(_root(fixture))).to_json()
    copy_root = tmp_path / "elsewhere" / fixture_info(fixture)["job_id"]
    shutil.copytree(_root(fixture), copy_root)
    copied = inspect(str(copy_root)).to_json()
    assert _without_locations(copied) == _without_locations(original)
    paths = [f["path"] for op in copied["operators"] for s in op["subtasks"] for f in s["files"] if f["path"]]
    assert paths and all(p.startswith(str(copy_root)) for p in paths)


def test_a_checkpoint_on_s3_inspects_the_same(s3, s3_storage):
    fixture = FIXTURES / "flink-1.20-p3-external-xxhash-lz4"
    root = _root(fixture)
    files = {f"ckpt/{root.name}/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    bucket = s3.new_bucket(files)
    remote = inspect(f"s3://{bucket}/ckpt/{root.name}", storage=s3_storage).to_json()
    local = inspect(str(root)).to_json()
    assert _without_locations(remote) == _without_locations(local)
    paths = [f["path"] for op in remote["operators"] for s in op["subtasks"] for f in s["files"] if f["path"]]
    assert paths and all(p.startswith(f"s3://{bucket}/ckpt/{root.name}/") for p in paths)


def test_uid_argument_labels_operators_of_checkpoints_without_uids():
    fixture = FIXTURES / "flink-1.15-default"
    result = inspect(str(_root(fixture)), operators=["per-user", "no-such-uid"])
    assert [op.uid for op in result.operators] == ["per-user"]
    assert result.operators[0].uid_from_argument and result.operators[0].name is None
    assert result.unmatched_uids == ["no-such-uid"]


def test_older_checkpoint_of_a_root_can_be_chosen():
    root = _root(FIXTURES / "flink-1.20-default")
    assert inspect(str(root), checkpoint=2).checkpoint_id == 2
    with pytest.raises(Exception, match="no chk-99 here"):
        inspect(str(root), checkpoint=99)


def _without_locations(document: dict) -> dict:
    """The inspect document without anything that names where it was read (or when that copy was written)."""
    doc = json.loads(json.dumps(document))
    for key in ("source", "path", "metadata_path", "relocated", "written_at"):
        doc.pop(key)
    for op in doc["operators"]:
        for sub in op["subtasks"]:
            for f in sub["files"]:
                f.pop("path")
                f.pop("relocated")
    return doc
