"""``repair rebuild-manifest``: a checkpoint whose MANIFEST is gone becomes one that real Flink restores.

Real Flink is the judge: the slow tests restore the rebuilt checkpoint in Flink 1.20 (FRocksDB 6.20),
Flink 2.1 and 2.3 (FRocksDB 8.10), also one of the changelog state backend, and compare the restored state
with expected.json.
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.flink_harness import FlinkRunError
from fixtures.generate import SPECS, generate
from fixtures.restore import restore_state
from fixtures.salvage_matrix import differing_states
from repair.cli.app import main
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    FileHandle,
    IncrementalKeyedHandle,
    iter_stream_handles,
)
from repair.formats.flink.in_rocksdb.key_range import describe_boundary, key_group_span
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import decode_metadata
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.rocksdb.manifest import read_manifest, replay
from repair.formats.rocksdb.table.block import MAX_SEQUENCE_NUMBER, InternalKey, ValueType
from repair.ops.rebuild import rebuild_manifest
from repair.ops.verify.engine import verify
from tests import damage
from tests._flink_state_files import local_file
from tests.conftest import FIXTURES, fixture_info
from tests.rebuild_testlib import (
    FIXTURES_WITH_FILES,
    SstFacts,
    _newest,
    instances,
    pick_count_sst,
    restore_fixture_checkpoint,
    rocksdb_key_prefix,
    sst_dump_facts,
)
from tests.rocksdb_testlib import ldb_live_files, needs_ldb, needs_sst_dump, sst_dump_properties
from tests.state_testlib import LONG, STRING, VOID_NS, _string_value, state_meta_info

#: A MANIFEST deleted where it is a file, flipped where it is inline in ``_metadata`` (a full RocksDB
#: checkpoint: every SST private to its chk-N/; an incremental one: SSTs shared).
BROKEN_MANIFESTS = [*((name, "missing_manifest") for name in FIXTURES_WITH_FILES),
                    ("flink-1.20-rocksdb-full-snappy", "inline_manifest_flipped_byte"),
                    ("flink-1.20-default", "inline_manifest_flipped_byte"),
                    # timers on the heap: the rebuilt _metadata must keep the raw keyed state holding them
                    ("flink-1.20-rocksdb-heap-timers", "inline_manifest_flipped_byte"),
                    ("flink-2.3-default", "inline_manifest_flipped_byte")]  # the newest release


def _manifest_bytes(handle: IncrementalKeyedHandle, root) -> bytes:
    """The MANIFEST of a committed fixture's instance: inline, or its file under ``shared/`` or ``chk-N/``."""
    entry = next(e for e in handle.private if e.local_path.startswith("MANIFEST-"))
    if isinstance(entry.handle, ByteStreamHandle):
        return entry.handle.data
    name = entry.handle.path.rsplit("/", 1)[1]
    return next(root.glob(f"*/{name}")).read_bytes()


@pytest.mark.parametrize("name, kind", BROKEN_MANIFESTS)
def test_a_missing_or_broken_manifest_is_rebuilt_with_the_same_live_files(tmp_path, read_only_guard, name, kind):
    dmg = damage.damaged_copy(name, tmp_path, kind)
    newest = max(dmg.checkpoints)
    read_only_guard(dmg.root)
    result = rebuild_manifest(str(dmg.root / f"chk-{newest}"), str(tmp_path / "out"))
    assert result.ok and result.output_verified and len(result.rebuilt) == 1
    assert verify(str(tmp_path / "out" / f"chk-{newest}")).ok

    # The rebuilt instance lists exactly the SSTs (numbers and sizes) of the original MANIFEST.
    original = {(op, i): h for op, i, h in instances(FIXTURES / name / "checkpoints" / dmg.root.name / f"chk-{newest}" / "_metadata")}
    rebuilt_instance = result.rebuilt[0]
    compared = 0
    for op, index, handle in instances(tmp_path / "out" / f"chk-{newest}" / "_metadata"):
        manifests = [e for e in handle.private if e.local_path.startswith("MANIFEST-")]
        assert len(manifests) == 1
        if not isinstance(manifests[0].handle, ByteStreamHandle) or not manifests[0].handle.name.startswith("repair-rebuild-manifest/"):
            continue
        assert manifests[0].local_path == rebuilt_instance.manifest_name
        ours = replay(read_manifest(BytesSource(manifests[0].handle.data)))
        source = original[(op, index)]
        theirs = replay(read_manifest(BytesSource(_manifest_bytes(source, FIXTURES / name / "checkpoints" / dmg.root.name))))
        live = lambda v: {(cf.name, m.number, m.file_size) for cf, m in v.live_files()}  # noqa: E731
        assert live(ours) == live(theirs)
        assert {cf.name for cf in ours.column_families.values()} >= {cf.name for cf in theirs.column_families.values()}
        compared += 1
    assert compared == 1


def test_broken_ssts_are_not_papered_over(tmp_path, capsys):
    dmg = damage.damaged_copy(FIXTURES_WITH_FILES[0], tmp_path, "sst_flipped_byte")
    newest = max(dmg.checkpoints)
    code = main(["rebuild-manifest", str(dmg.root / f"chk-{newest}"), "--out", str(tmp_path / "out"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False and doc["new_metadata"] is None
    assert any("block checksum mismatch" in line for line in doc["unrepairable"])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name, kind", [m for m in BROKEN_MANIFESTS if m[0] != "flink-1.20-default"])
def test_real_flink_restores_the_rebuilt_checkpoint(tmp_path, name, kind):
    dmg = damage.damaged_copy(name, tmp_path, kind)
    newest = max(dmg.checkpoints)
    result = rebuild_manifest(str(dmg.root / f"chk-{newest}"), str(tmp_path / "out"))
    assert result.ok
    info = fixture_info(FIXTURES / name)
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    restored = restore_state(info["flink_version"], tmp_path / "out" / f"chk-{newest}", records,
                             parallelism=info["parallelism"], max_parallelism=info["spec"]["max_parallelism"],
                             extra_conf=info["spec"].get("extra"))
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


@pytest.mark.slow
def test_real_flink_restores_a_rebuilt_changelog_checkpoint(tmp_path):
    """The changelog state backend over RocksDB: the MANIFEST of a materialized instance is broken; the
    rebuilt checkpoint keeps the logged changes (DSTL files) as they were, and Flink restores it with
    the changes applied. Freshly generated: a changelog checkpoint names the DSTL files where Flink
    wrote them. The source pauses before the third wave for more than two materialization intervals
    (4 s here): the first waves are materialized by then, and the last ones are logged after it."""
    committed = SPECS["flink-1.20-changelog"]
    spec = replace(committed, extra={**committed.extra, "state.changelog.periodic-materialize.interval": "4s",
                                     "fixture.late-wave-pause-ms": "9000"})
    for attempt in range(3):  # the newest checkpoint must hold changes logged since its materialization (timing)
        fresh = generate(spec, tmp_path / f"fresh-{attempt}", staging=tmp_path / f"staging-{attempt}")
        root = tmp_path / f"staging-{attempt}" / "checkpoints" / spec.name / fixture_info(fresh)["job_id"]
        newest = damage.checkpoint_ids(root)[-1]
        if any(_dstl_files(h) for h in _changelog_handles(decode_metadata((root / f"chk-{newest}" / "_metadata").read_bytes())).values()):
            break
    else:
        pytest.fail("three runs of the changelog job checkpointed nothing logged since a materialization")
    records = state_model.read_records(fresh / "records.tsv")
    restore = dict(parallelism=spec.parallelism, max_parallelism=spec.max_parallelism, state_backend=spec.state_backend,
                   extra_conf=spec.extra)
    damage.flip_inline_manifest_byte_in(root, newest)
    with pytest.raises(FlinkRunError):  # the damage matters: Flink cannot open the instance
        restore_state(spec.flink_version, root / f"chk-{newest}", records, **restore)

    result = rebuild_manifest(str(root / f"chk-{newest}"), str(tmp_path / "out"))
    assert result.ok and result.output_verified and len(result.rebuilt) == 1

    source = decode_metadata((root / f"chk-{newest}" / "_metadata").read_bytes())
    rebuilt = decode_metadata((tmp_path / "out" / f"chk-{newest}" / "_metadata").read_bytes())
    before, after = _changelog_handles(source), _changelog_handles(rebuilt)
    assert before.keys() == after.keys()
    target = (result.rebuilt[0].operator, result.rebuilt[0].subtask)
    for key, handle in after.items():
        assert _dstl_files(handle) == _dstl_files(before[key])
        manifests = [e.handle.name for m in handle.materialized if isinstance(m, IncrementalKeyedHandle)
                     for e in m.private if e.local_path.startswith("MANIFEST-") and isinstance(e.handle, ByteStreamHandle)]
        assert any(name.startswith("repair-rebuild-manifest/") for name in manifests) == (key == target)
    assert any(_dstl_files(handle) for handle in after.values())  # changes logged since the materialization

    restored = restore_state(spec.flink_version, tmp_path / "out" / f"chk-{newest}", records, **restore)
    expected = json.loads((fresh / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


def _changelog_handles(metadata) -> dict:
    """``(operator id, subtask) -> ChangelogBackendHandle`` of a checkpoint's metadata."""
    return {(op.operator_id, sub.index): sub.managed_keyed_state for op in metadata.operators for sub in op.subtasks
            if isinstance(sub.managed_keyed_state, ChangelogBackendHandle)}


def _dstl_files(handle: ChangelogBackendHandle) -> list:
    """The stream handles (DSTL files) of a changelog handle's logged changes."""
    return [stream for i, part in enumerate(handle.non_materialized) for _, stream in iter_stream_handles(part, str(i))]


# -- --drop-missing ----------------------------------------------------------------------------------
#
# Ground truth for what a dropped SST held is the SST's own bytes, read with sst_dump (not our reader)
# from the committed fixture before the copy is damaged; for what Flink restores, real Flink.










def _expected_overlaps(facts: list[SstFacts], dropped: SstFacts) -> tuple[set[str], set[str]]:
    """(older, newer) remaining files of the same instance and column family whose key ranges overlap."""
    older, newer = set(), set()
    for f in facts:
        same = (f.operator_id, f.subtask, f.column_family) == (dropped.operator_id, dropped.subtask, dropped.column_family)
        if not same or f.local_name == dropped.local_name or f.first > dropped.last or dropped.first > f.last:
            continue
        if f.seqnos[0] <= dropped.seqnos[1]:
            older.add(f.local_name)
        if f.seqnos[1] > dropped.seqnos[0]:
            newer.add(f.local_name)
    return older, newer


def _drop(name: str, tmp_path: Path, target: SstFacts, *, manifest_too: bool = False) -> Path:
    """A copy of the fixture without ``target`` (and without its instance's MANIFEST); returns chk-N of the copy."""
    copy = damage.copy_fixture(name, tmp_path / "damaged")
    root, metadata_path = _newest(name)
    copy_root = damage.checkpoint_root(copy)
    (copy_root / target.file.relative_to(root)).unlink()
    if manifest_too:
        handle = next(h for op, i, h in instances(metadata_path) if (op, i) == (target.operator_id, target.subtask))
        manifest = next(e for e in handle.private if e.local_path.startswith("MANIFEST-"))
        (copy_root / local_file(FIXTURES / name, metadata_path, manifest.handle).relative_to(root)).unlink()
    return copy_root / metadata_path.parent.name


def _rebuilt_manifest(new_metadata: Path, operator_id: str, subtask: int, tmp_path: Path) -> tuple[IncrementalKeyedHandle, Path]:
    handle = next(h for op, i, h in instances(new_metadata) if (op, i) == (operator_id, subtask))
    entry = next(e for e in handle.private if e.local_path.startswith("MANIFEST-"))
    assert isinstance(entry.handle, ByteStreamHandle) and entry.handle.name.startswith("repair-rebuild-manifest/")
    path = tmp_path / "rebuilt" / entry.local_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(entry.handle.data)
    return handle, path


def test_boundary_keys_give_key_group_and_flink_key():
    """Key-group prefixes of 1 byte (max parallelism <= 128) and 2 bytes, timers, range-tombstone ends."""
    value_state = state_meta_info("count", "VALUE", LONG, VOID_NS)
    one = describe_boundary(InternalKey(b"\x05" + _string_value("jürgen") + b"\x00", 7, ValueType.VALUE).encode(), value_state, STRING, 128)
    assert (one.key_group, one.key, one.seqno, one.exclusive, one.error) == (5, "jürgen", 7, False, None)
    two = describe_boundary(InternalKey(b"\x01\x2c" + _string_value("a") + b"\x00", 9, ValueType.DELETION).encode(), value_state, STRING, 1000)
    assert (two.key_group, two.key, two.value_type_name) == (300, "a", "deletion")

    timer_serializer = SerializerSnapshot("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", 3, nested=[LONG, VOID_NS])
    timers = StateMetaInfo("_timer_state/event_user-timers", 3, serializers=[("VALUE_SERIALIZER", timer_serializer)])
    timer_key = b"\x07" + struct.pack(">Q", 1234 ^ (1 << 63)) + struct.pack(">q", -7) + b"\x00"
    timer = describe_boundary(InternalKey(timer_key, 3, ValueType.VALUE).encode(), timers, LONG, 128)
    assert (timer.key_group, timer.key, timer.timer_timestamp) == (7, -7, 1234)

    # deleteRange(start, prefix of key group 9): the end is exclusive, so the range ends in key group 8.
    end = describe_boundary(InternalKey(b"\x09", MAX_SEQUENCE_NUMBER, ValueType.RANGE_DELETION).encode(), value_state, STRING, 128)
    assert end.exclusive and end.key is None and end.key_group == 9
    assert key_group_span(one, end, 128) == (5, 8)
    # Unknown state or undecodable bytes keep the key group and raw bytes, and say why.
    unknown = describe_boundary(InternalKey(b"\x04\xff", 1, ValueType.VALUE).encode(), None, STRING, 128)
    assert unknown.key_group == 4 and unknown.key is None and "no registered state" in unknown.error
    bad = describe_boundary(InternalKey(b"\x04\x85", 1, ValueType.VALUE).encode(), value_state, STRING, 128)
    assert bad.key_group == 4 and bad.key is None and "key not decoded" in bad.error
    assert bad.to_json()["user_key"] == "0485"


@needs_sst_dump
@needs_ldb
@pytest.mark.parametrize("name", FIXTURES_WITH_FILES)
def test_drop_missing_leaves_out_exactly_the_lost_sst_and_reports_its_range(tmp_path, read_only_guard, name):
    facts = sst_dump_facts(name, tmp_path)
    target = pick_count_sst(facts)
    checkpoint = _drop(name, tmp_path, target)
    read_only_guard(checkpoint.parent)
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), drop_missing=True)

    assert result.status == "rebuilt_with_losses" and not result.ok and result.output_verified
    new_metadata = tmp_path / "out" / checkpoint.name / "_metadata"
    assert verify(str(new_metadata.parent)).ok

    # The rebuilt MANIFEST lists every original live file but the dropped one (our decoder and ldb agree).
    root, metadata_path = _newest(name)
    original = next(h for op, i, h in instances(metadata_path) if (op, i) == (target.operator_id, target.subtask))
    original_manifest = next(e for e in original.private if e.local_path.startswith("MANIFEST-"))
    theirs = {n for _cf, _level, n, *_ in ldb_live_files(local_file(FIXTURES / name, metadata_path, original_manifest.handle))}
    handle, manifest = _rebuilt_manifest(new_metadata, target.operator_id, target.subtask, tmp_path)
    dropped_number = int(target.local_name.split(".")[0])
    assert dropped_number in theirs
    assert {n for _cf, _level, n, *_ in ldb_live_files(manifest)} == theirs - {dropped_number}
    assert {m.number for _cf, m in replay(read_manifest(BytesSource(manifest.read_bytes()))).live_files()} == theirs - {dropped_number}
    assert target.local_name not in {e.local_path for e in handle.shared}

    # The loss report says what sst_dump read from the file before it was deleted.
    (lost,) = result.lost
    prefix = 2 if fixture_info(FIXTURES / name)["max_parallelism"] > 128 else 1
    assert (lost.operator_id, lost.subtask, lost.local_name, lost.reason) == (target.operator_id, target.subtask, target.local_name, "missing")
    assert lost.column_family == target.column_family == "count"
    assert (lost.smallest.user_key, lost.largest.user_key) == (target.first, target.last)
    assert (lost.smallest_seqno, lost.largest_seqno) == target.seqnos
    assert lost.key_groups == (int.from_bytes(target.first[:prefix], "big"), int.from_bytes(target.last[:prefix], "big"))
    for boundary, raw in ((lost.smallest, target.first), (lost.largest, target.last)):
        assert boundary.key in state_model.USERS
        assert raw == raw[:prefix] + _string_value(boundary.key) + b"\x00"  # key group, key, VoidNamespace
    older, newer = _expected_overlaps(facts, target)
    assert {o.local_name for o in lost.older_overlaps} == older
    assert {o.local_name for o in lost.newer_overlaps} == newer
    if name == "flink-1.20-p3-external-xxhash-lz4":
        assert older and any("OLDER values" in w for w in lost.warnings())  # the resurrection case is exercised


@needs_sst_dump
def test_drop_missing_with_the_manifest_gone_too_says_the_range_is_unknown(tmp_path, read_only_guard):
    name = FIXTURES_WITH_FILES[0]
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint = _drop(name, tmp_path, target, manifest_too=True)
    read_only_guard(checkpoint.parent)
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), drop_missing=True)

    assert result.status == "rebuilt_with_losses" and result.output_verified
    (lost,) = result.lost
    assert lost.local_name == target.local_name and lost.reason == "missing"
    assert lost.column_family is None and lost.key_groups is None and lost.smallest is None and lost.smallest_seqno is None
    assert "MANIFEST" in lost.range_unknown and "unknown" in lost.range_unknown
    assert lost.overlaps == [] and "unknown" in lost.overlaps_unknown
    doc = lost.to_json()
    assert doc["key_groups"] is None and doc["smallest"] is None and doc["subtask_key_groups"] is not None


@needs_sst_dump
def test_drop_missing_drops_a_corrupt_sst_and_names_it_corrupt(tmp_path):
    dmg = damage.damaged_copy(FIXTURES_WITH_FILES[0], tmp_path, "sst_flipped_byte")
    newest = max(dmg.checkpoints)
    original = FIXTURES / FIXTURES_WITH_FILES[0] / dmg.file.relative_to(tmp_path / FIXTURES_WITH_FILES[0])
    named = tmp_path / "original.sst"
    shutil.copyfile(original, named)
    props = sst_dump_properties(named)
    result = rebuild_manifest(str(dmg.root / f"chk-{newest}"), str(tmp_path / "out"), drop_missing=True)

    assert result.status == "rebuilt_with_losses" and result.output_verified
    (lost,) = result.lost
    assert lost.reason == "corrupt" and any("checksum mismatch" in p for p in lost.problems)
    assert lost.offset is not None and lost.offset <= dmg.offset
    # Its column family from the MANIFEST, its entry count from its own (intact) properties block.
    assert lost.column_family == props["column family name"] and lost.entries == int(props["# entries"])
    assert lost.sources[-1] == "SST properties" and lost.key_groups is not None


def test_cli_drop_missing_exit_code_json_and_table(tmp_path, capsys):
    dmg = damage.damaged_copy(FIXTURES_WITH_FILES[1], tmp_path, "missing_sst")
    checkpoint = str(dmg.root / f"chk-{max(dmg.checkpoints)}")

    # Without --drop-missing: refused, and the message says what --drop-missing would do and cost.
    code = main(["rebuild-manifest", checkpoint, "--out", str(tmp_path / "refused"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["status"] == "not_rebuilt" and doc["new_metadata"] is None and doc["lost"] == []
    assert any(dmg.file.name in line and "--drop-missing" in line for line in doc["unrepairable"])
    assert "--drop-missing" in doc["hint"] and "lost" in doc["hint"] and "older values" in doc["hint"]
    assert not (tmp_path / "refused").exists()

    # With it: written and verified, but exit 1 because data was lost; the JSON lists what.
    code = main(["rebuild-manifest", checkpoint, "--out", str(tmp_path / "out"), "--drop-missing", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False and doc["status"] == "rebuilt_with_losses" and doc["output_verified"] is True
    assert doc["new_metadata"] and verify(doc["new_metadata"]).ok
    (lost,) = doc["lost"]
    assert lost["path"].endswith(dmg.file.name) and lost["reason"] == "missing"
    assert lost["local_name"] in doc["rebuilt"][0]["dropped"]
    assert lost["column_family"] and lost["key_groups"] and lost["smallest"]["user_key"] and lost["seqnos"] is not None

    code = main(["rebuild-manifest", checkpoint, "--out", str(tmp_path / "out-text"), "--drop-missing"])
    text = capsys.readouterr().out
    assert code == 1 and "DATA LOST" in text and lost["local_name"] in text and lost["column_family"] in text
    rebuilt = doc["rebuilt"][0]
    levels = ", ".join(map(str, sorted(set(rebuilt["levels"].values()))))
    said = f"{rebuilt['sst_files']} SSTs (1 dropped) in {len(rebuilt['column_families'])} column families, placed on level"
    assert said in " ".join(text.split()) and levels in text  # a count of SSTs, of column families, then the levels






def _in_lost_range(lost: list, operator: str, key: str, state: str, max_parallelism: int) -> bool:
    prefix = rocksdb_key_prefix(operator, key, max_parallelism)
    for item in lost:
        if item.operator_id != operator_id_for_uid(operator) or item.smallest is None:
            continue
        if state == "timers":
            key_group = int.from_bytes(prefix[: 2 if max_parallelism > 128 else 1], "big")
            if item.column_family.startswith("_timer_state/") and item.key_groups[0] <= key_group <= item.key_groups[1]:
                return True
        elif item.column_family == state:
            n = len(prefix)
            if item.smallest.user_key[:n] <= prefix <= item.largest.user_key[:n]:
                return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES_WITH_FILES)
def test_real_flink_restores_all_but_the_reported_lost_range(tmp_path, name):
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint = _drop(name, tmp_path, target)
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), drop_missing=True)
    assert result.status == "rebuilt_with_losses"
    max_parallelism = fixture_info(FIXTURES / name)["spec"]["max_parallelism"]
    restored, expected = restore_fixture_checkpoint(name, tmp_path / "out" / checkpoint.name)
    assert restored["operator"] == expected["operator"]
    differing = differing_states(restored, expected)
    # Every key outside the reported lost ranges has exactly its expected state; some key really was lost.
    assert differing, "dropping the file changed nothing: the test would prove nothing"
    outside = [d for d in differing if not _in_lost_range(result.lost, *d, max_parallelism)]
    assert outside == []


def test_a_copied_rebuild_is_self_contained_and_movable(tmp_path):
    dmg = damage.damaged_copy(FIXTURES_WITH_FILES[1], tmp_path, "missing_manifest")
    newest = f"chk-{max(dmg.checkpoints)}"
    result = rebuild_manifest(str(dmg.root / newest), str(tmp_path / "out"), copy=True)
    assert result.ok
    shutil.rmtree(dmg.root)  # the input is gone
    (tmp_path / "out").rename(tmp_path / "moved")
    moved = tmp_path / "moved" / newest
    assert verify(str(moved)).ok
    metadata = decode_metadata((moved / "_metadata").read_bytes())
    assert not [h for _, h in metadata.iter_stream_handles() if isinstance(h, FileHandle)]
