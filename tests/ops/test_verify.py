"""``repair verify`` on healthy fixtures, damaged copies, RocksDB directories and single files.

Which checkpoints a damage breaks is predicted independently by tests/damage.py (by scanning raw
bytes for file names), and sst_dump / ldb give a second opinion on the fixture files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.manifest import read_manifest, replay
from repair.formats.rocksdb.table.sst import open_table
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, fixture_info, logs_state_changes
from tests.rocksdb_testlib import (
    ldb_live_files,
    make_rocksdict_db,
    needs_ldb,
    needs_sst_dump,
    sst_dump,
    sst_dump_properties,
)

EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"


def _snapshots(fixture: Path) -> list[Path]:
    info = fixture_info(fixture)
    return [damage.checkpoint_root(fixture)] + [fixture / rel for rel in info["savepoints"].values()]


def test_healthy_fixtures_verify_clean(fixture_dir, read_only_guard):
    read_only_guard(fixture_dir)
    results = {}
    for path in _snapshots(fixture_dir):
        result = results[path] = verify(str(path))
        findings = result.findings
        if logs_state_changes(fixture_dir):
            # before the first materialization a changelog may record no key serializer (test_changelog.py)
            findings = [f for f in findings if not (f.kind == "not_fully_checked" and "no key serializer recorded" in f.message)]
        assert findings == [], [f.describe() for f in findings]
        assert result.ok and all(s.ok for s in result.snapshots)
    root = results[damage.checkpoint_root(fixture_dir)]  # the job root, verified above
    assert [s.checkpoint_id for s in root.snapshots] == fixture_info(fixture_dir)["retained_checkpoints"]
    assert root.blocks > 0 and root.bytes > 0


DAMAGE_CASES = [
    ("missing_sst", EXTERNAL, "missing_file"),
    ("sst_flipped_byte", EXTERNAL, "block_checksum_mismatch"),
    ("sst_bad_magic", EXTERNAL, "bad_magic"),
    ("sst_truncated", EXTERNAL, "truncated_file"),
    ("missing_manifest", EXTERNAL, "missing_file"),
    ("metadata_truncated", EXTERNAL, "metadata_undecodable"),
    ("inline_sst_flipped_byte", "flink-1.20-default", "block_checksum_mismatch"),
    ("sst_flipped_byte", "flink-2.1-p3-external-xxh3-zstd", "block_checksum_mismatch"),
]


@pytest.mark.parametrize("kind, fixture, finding_kind", DAMAGE_CASES)
def test_damaged_copies_are_reported_exactly(tmp_path, capsys, kind, fixture, finding_kind):
    dmg = damage.damaged_copy(fixture, tmp_path, kind)
    result = verify(str(dmg.root))
    assert not result.ok
    broken = {s.name for s in result.snapshots if not s.ok}
    assert broken == {f"chk-{c}" for c in dmg.checkpoints}, "exactly the checkpoints that reference the file"
    errors = [f for f in result.findings if f.severity == "error"]
    assert {f.kind for f in errors} == {finding_kind}
    assert {f.reference.snapshot for f in errors} == broken
    for finding in errors:
        if kind == "inline_sst_flipped_byte":
            assert finding.path is None and finding.reference.local_name.endswith(".sst")
        else:
            assert finding.path.endswith(dmg.file.name)
    if kind == "sst_flipped_byte":
        # Data blocks start at offset 0; the damage flips a byte inside the first one.
        assert {f.offset for f in errors} == {0}
        assert all("block checksum mismatch at offset 0" in f.message for f in errors)
    if kind == "missing_manifest":
        assert all(f.reference.local_name.startswith("MANIFEST-") for f in errors)
        assert all("No such file or directory" in f.message for f in errors)
    code = main(["verify", str(dmg.root)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"in {', '.join(sorted(broken, key=lambda n: int(n[4:])))}" in out


def test_json_report_contract(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    code = main(["verify", str(dmg.root), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False
    # the document's fields: tests/cli/test_json_contracts.py; here, its values
    assert doc["checked"]["checkpoints"] == len(fixture_info(FIXTURES / EXTERNAL)["retained_checkpoints"])
    assert doc["findings"]
    finding = doc["findings"][0]
    assert finding["checkpoint"] in dmg.checkpoints and finding["local_name"].endswith(".sst")
    assert finding["offset"] == 0 and finding["expected"] != finding["found"]


def test_healthy_json_and_exit_code(capsys):
    code = main(["verify", str(damage.checkpoint_root(FIXTURES / "flink-2.1-default")), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True and doc["findings"] == []


def test_process_pool_gives_the_same_report(tmp_path):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    single = verify(str(dmg.root), workers=1).to_json()
    pooled = verify(str(dmg.root), workers=2).to_json()
    assert pooled == single


def test_each_physical_file_is_read_once(monkeypatch):
    from repair.ops.verify import file_checks

    seen = []
    original = file_checks.check_file

    def counting(task, storage=None):
        seen.append(task.key)
        return original(task, storage)

    monkeypatch.setattr("repair.ops.verify.engine.check_file", counting)
    result = verify(str(damage.checkpoint_root(FIXTURES / EXTERNAL)), workers=1)
    assert len(seen) == len(set(seen))
    # Five checkpoints share most SSTs: far fewer reads than references.
    assert result.files < sum(1 for _ in seen) * 5


# -- RocksDB directories and single files --------------------------------------------------------


@pytest.fixture
def rocksdict_db(tmp_path) -> Path:
    path = tmp_path / "db"
    make_rocksdict_db(path, checksum="xxh3", compression="zstd", block_size=512, column_families=("tags",))
    return path


def test_rocksdb_directory_written_by_rocksdict_verifies(rocksdict_db, read_only_guard):
    read_only_guard(rocksdict_db)
    result = verify(str(rocksdict_db))
    assert result.layout == "rocksdb-dir"
    assert result.ok and result.blocks > 0, [f.describe() for f in result.findings]


def test_rocksdb_directory_without_its_manifest(rocksdict_db):
    manifest = (rocksdict_db / "CURRENT").read_text().strip()
    (rocksdict_db / manifest).unlink()
    result = verify(str(rocksdict_db))
    assert [f.kind for f in result.findings] == ["manifest_missing"]
    assert f"CURRENT names {manifest}" in result.findings[0].message


def test_rocksdb_directory_missing_an_sst(rocksdict_db):
    victim = sorted(rocksdict_db.glob("*.sst"))[0]
    victim.unlink()
    result = verify(str(rocksdict_db))
    assert [(f.kind, f.reference.local_name) for f in result.findings] == [("manifest_references_missing_sst", victim.name)]


def test_single_sst_and_manifest_files(rocksdict_db):
    sst = sorted(rocksdict_db.glob("*.sst"))[0]
    manifest = rocksdict_db / (rocksdict_db / "CURRENT").read_text().strip()
    assert verify(str(sst)).ok and verify(str(sst)).blocks > 0
    assert verify(str(manifest)).ok
    broken = rocksdict_db.parent / "broken.sst"
    data = bytearray(sst.read_bytes())
    data[3] ^= 0x10
    broken.write_bytes(bytes(data))
    assert [f.kind for f in verify(str(broken)).findings] == ["block_checksum_mismatch"]


# -- second opinions on the real Flink files -----------------------------------------------------


def _fixture_files(predicate) -> list[Path]:
    files = []
    for name in (EXTERNAL, "flink-2.1-p3-external-xxh3-zstd"):
        root = damage.checkpoint_root(FIXTURES / name)
        files += [p for p in sorted((root / "shared").iterdir()) if predicate(p)]
    return files


@needs_sst_dump
def test_fixture_ssts_same_verdict_and_properties_as_sst_dump(tmp_path):
    ssts = _fixture_files(damage.is_sst)
    assert len(ssts) > 100
    for i, path in enumerate(ssts[:: max(1, len(ssts) // 40)]):
        copy = tmp_path / f"{i:06d}.sst"  # sst_dump wants the .sst suffix
        shutil.copy(path, copy)
        out = sst_dump(f"--file={copy}", "--command=verify", "--verify_checksum")
        assert "The file is ok" in out.stdout, path
        assert verify(str(copy)).ok
        theirs = sst_dump_properties(copy)
        ours = open_table(BytesSource(path.read_bytes())).properties
        assert theirs["column family name"] == ours.column_family_name
        assert int(theirs["# entries"]) == ours.num_entries
        assert int(theirs["# merge operands"]) == ours.num_merge_operands
        assert theirs["merge operator name"] == ours.merge_operator == "StringAppendTESTOperator"
        assert theirs["SST file compression algo"] == ours.compression
        # The same flipped byte is a corruption for both.
        data = bytearray(copy.read_bytes())
        data[7] ^= 0xFF
        copy.write_bytes(bytes(data))
        out = sst_dump(f"--file={copy}", "--command=verify", "--verify_checksum")
        assert "The file is ok" not in out.stdout
        assert not verify(str(copy)).ok


@needs_ldb
def test_fixture_manifests_same_live_files_as_ldb(tmp_path):
    manifests = _fixture_files(damage.is_manifest)
    assert len(manifests) > 10
    for path in manifests[:: max(1, len(manifests) // 15)]:
        copy = tmp_path / "MANIFEST-000001"
        shutil.copy(path, copy)
        version = replay(read_manifest(BytesSource(path.read_bytes())))
        ours = {(cf.name, m.level, m.number, m.file_size, m.smallest_seqno, m.largest_seqno) for cf, m in version.live_files()}
        assert ours == ldb_live_files(copy), path


# -- Spark -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_spark_local_mode_gives_the_same_report(tmp_path):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    in_process = verify(str(dmg.root)).to_json()
    on_spark = verify(str(dmg.root), master="local[2]").to_json()
    assert on_spark == in_process


def test_checkpoint_on_s3_verifies_like_on_disk(s3, s3_storage, tmp_path):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    root = dmg.root
    files = {f"ckpt/{root.name}/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    bucket = s3.new_bucket(files)
    remote = verify(f"s3://{bucket}/ckpt/{root.name}", storage=s3_storage)
    local = verify(str(root))
    strip = lambda doc: [{k: v for k, v in f.items() if k not in ("path", "message")} for f in doc["findings"]]  # noqa: E731
    assert strip(remote.to_json()) == strip(local.to_json()) and not remote.ok
    assert all(f.path.startswith(f"s3://{bucket}/") for f in remote.findings)
    assert remote.to_json()["checked"] == local.to_json()["checked"]


def test_checksums_only_still_finds_checksum_damage(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    full = verify(str(dmg.root)).to_json()
    quick = verify(str(dmg.root), decompress=False).to_json()
    assert quick["findings"] == full["findings"] and quick["checked"]["blocks"] == full["checked"]["blocks"]
    assert main(["verify", str(dmg.root), "--checksums-only"]) == 1


# -- full snapshots of the heap backend: key-group streams are decoded, not only sized ------------------------------


def _heap_root(tmp_path: Path, name: str) -> Path:
    return damage.checkpoint_root(damage.copy_fixture(name, tmp_path))


def _newest_keyed_delegate(root: Path):
    """(snapshot, first keyed subtask's KeyGroupsHandle) of the newest checkpoint under ``root``."""
    from repair.formats.flink.handles import KeyGroupsHandle
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot

    storage = st.default_storage()
    layout = discover(str(root), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    handle = next(s.managed_keyed_state for op in snapshot.metadata.operators for s in op.subtasks
                  if isinstance(s.managed_keyed_state, KeyGroupsHandle))
    return snapshot, handle


def test_a_flipped_byte_in_an_external_heap_snapshot_is_found(tmp_path, capsys):
    """Snappy-framed key groups (Flink 2.1, heap backend): a flipped byte fails its chunk's CRC."""
    root = _heap_root(tmp_path, "flink-2.1-heap-p3-snappy")
    snapshot, handle = _newest_keyed_delegate(root)
    path = Path(snapshot.resolver.resolve(handle.delegate).uri)
    data = bytearray(path.read_bytes())
    at = (handle.offsets[1] + handle.offsets[2]) // 2  # inside key group 1's streams
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    result = verify(str(root))
    (finding,) = result.findings
    assert finding.kind == "bad_key_groups" and finding.severity == "error"
    assert finding.reference.role == "key-groups" and finding.reference.checkpoint == snapshot.ref.number
    assert "key group 1" in finding.message and finding.offset is not None and abs(finding.offset - at) < 65536 + 8
    assert main(["verify", str(root)]) == 1
    assert "snappy chunk checksum" in capsys.readouterr().out


def test_a_bad_record_count_in_an_inline_heap_snapshot_is_found(tmp_path):
    """Key groups inline in ``_metadata`` (Flink 1.20, heap backend): a record count the bytes cannot hold."""
    from repair.formats.flink.metadata import decode_metadata, encode_metadata

    root = _heap_root(tmp_path, "flink-1.20-heap")
    snapshot, handle = _newest_keyed_delegate(root)
    metadata_path = Path(snapshot.ref.metadata_uri)
    metadata = decode_metadata(metadata_path.read_bytes())
    target = next(s.managed_keyed_state for op in metadata.operators for s in op.subtasks
                  if s.managed_keyed_state is not None and s.managed_keyed_state.offsets == handle.offsets)
    data = bytearray(target.delegate.data)
    count_at = handle.offsets[3] + 4 + 2  # key group 3: int keyGroup, short kvStateId, int count
    data[count_at : count_at + 4] = (0x7FFFFFFF).to_bytes(4, "big")
    target.delegate.data = bytes(data)
    metadata_path.write_bytes(encode_metadata(metadata))
    result = verify(str(root))
    (finding,) = result.findings
    assert finding.kind == "bad_key_groups" and finding.offset == count_at and "record count" in finding.message
    assert [s.ok for s in result.snapshots] == [True] * (len(result.snapshots) - 1) + [False]


def test_a_heap_state_without_a_known_serializer_is_a_warning_not_an_error(monkeypatch):
    """Records are not framed: an unknown serializer hides the rest of its key group (its state and those
    written after it), the bytes may be fine; the warning names the states not checked."""
    import dataclasses

    from repair.formats.flink.serializers import SerializerSnapshot
    from repair.readers import full_snapshot as savepoint_reader

    real = savepoint_reader.decode_keyed_backend_meta
    hidden = set()

    def with_an_unknown_value_serializer(data, **options):
        meta = real(data, **options)
        state = next(s for s in meta.states if s.kind != "priority-queue")  # window operators have no value state
        hidden.add(state.name)
        unknown = dataclasses.replace(state, serializers=[(k, SerializerSnapshot("com.example.KryoLike", 1) if k == "VALUE_SERIALIZER" else v)
                                                          for k, v in state.serializers])
        return dataclasses.replace(meta, states=[unknown if s is state else s for s in meta.states])

    monkeypatch.setattr(savepoint_reader, "decode_keyed_backend_meta", with_an_unknown_value_serializer)
    result = verify(str(damage.checkpoint_root(FIXTURES / "flink-1.20-heap")))
    assert result.findings and {(f.kind, f.severity) for f in result.findings} == {("not_fully_checked", "warning")}
    assert all("com.example.KryoLike" in f.message for f in result.findings)
    assert all(f.message.startswith("states not checked: ") for f in result.findings)
    assert all(any(repr(name) in f.message.split(";")[0] for name in hidden) for f in result.findings)
    assert result.ok


@pytest.mark.parametrize(("fixture", "share"), [
    ("flink-1.20-heap", "all"),  # heap key groups and operator state, no snapshot compression
    ("flink-2.1-heap-p3-snappy", "none"),  # the same with snapshot compression: Snappy's CRC-32C per chunk
    ("flink-1.20-default", "some"),  # SSTs and MANIFESTs checksummed; operator state is not
])
def test_bytes_no_checksum_covers_are_counted_and_said(fixture, share, capsys):
    """What verify cannot see (a byte changed inside a value no checksum covers: damage matrix, heap
    key-groups/flipped) it says, in bytes, beside what it checked."""
    root = str(damage.checkpoint_root(FIXTURES / fixture))
    checked = verify(root).to_json()["checked"]
    without = checked["bytes_without_checksum"]
    assert {"all": without == checked["bytes"], "none": without == 0, "some": 0 < without < checked["bytes"] / 100}[share]
    assert main(["verify", root]) == 0
    assert ("carry no checksum" in capsys.readouterr().out) == (share != "none")


def test_verifying_one_file_reports_the_bytes_it_read(tmp_path):
    """A single SST: every byte of it (blocks and footer); a file that is no SST: its footer, read and refused."""
    root = FIXTURES / "flink-1.20-bloom-filter" / "checkpoints" / fixture_info(FIXTURES / "flink-1.20-bloom-filter")["job_id"]
    magic = (0x88E241B785F4CFF7).to_bytes(8, "little")  # RocksDB's block-based table magic number, the file's last 8 bytes
    sst = next(p for p in sorted((root / "shared").iterdir()) if p.read_bytes()[-8:] == magic)
    report = verify(str(sst))
    assert report.ok and report.bytes == sst.stat().st_size
    not_sst = tmp_path / "operator-state"
    not_sst.write_bytes(b"\0\0\0\x06" + b"org.apache.flink.api.common.typeutils" * 20)
    report = verify(str(not_sst))
    assert not report.ok and report.bytes == 53  # the footer RocksDB reads first, whose magic number is wrong
