"""MANIFEST decoding and replay against MANIFESTs written by RocksDB, plus log framing corner cases."""

from __future__ import annotations

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.log_format import BLOCK_SIZE, LogFormatError, LogReader, RecordType, encode_log
from repair.formats.rocksdb.manifest import (
    CustomTag,
    FileMetaData,
    ManifestFormatError,
    Tag,
    VersionEdit,
    decode_version_edit,
    encode_manifest,
    encode_version_edit,
    iter_version_edits,
    read_manifest,
    replay,
)
from repair.formats.rocksdb.table.block import InternalKey
from repair.formats.rocksdb.table.sst import open_table
from tests.rocksdb_testlib import FileSource, manifest_of


@pytest.fixture(scope="module")
def busy_db(tmp_path_factory):
    """A DB with three column families, several flushes, a compaction and a dropped column family."""
    from rocksdict import Options, Rdict

    path = tmp_path_factory.mktemp("manifest") / "db"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_disable_auto_compactions(True)
    db = Rdict(str(path), options, column_families={"window-contents": options, "value-state": options, "doomed": options})
    for round_ in range(3):
        for name in ("window-contents", "value-state", "doomed"):
            cf = db.get_column_family(name)
            for i in range(50):
                cf[b"%s-%d-%03d" % (name.encode(), round_, i)] = b"x" * 20
            cf.flush()
        db[b"default-%d" % round_] = b"d"
        db.flush()
    db.get_column_family("value-state").compact_range(None, None)
    db.drop_column_family("doomed")
    live = db.live_files()
    db.close()
    return path, live


def test_replay_gives_the_live_files_rocksdb_reports(busy_db):
    path, live = busy_db
    version = replay(read_manifest(FileSource(manifest_of(path))))

    names = {cf.name: cf_id for cf_id, cf in version.column_families.items()}
    assert names.keys() == {"default", "window-contents", "value-state"} and names["default"] == 0
    assert list(version.dropped_column_families.values()) == ["doomed"]
    assert version.max_column_family == 3
    assert all(cf.comparator == "leveldb.BytewiseComparator" for cf in version.column_families.values())
    ours = {(meta.file_name, meta.file_size, meta.level) for _, meta in version.live_files()}
    theirs = {(f["name"].lstrip("/"), f["size"], f["level"]) for f in live}
    assert ours == theirs
    # value-state was compacted (its files moved below L0: deletes + adds); the others stay in L0.
    levels = {cf.name: sorted(m.level for m in cf.files.values()) for cf in version.column_families.values()}
    assert levels["window-contents"] == [0, 0, 0] and levels["value-state"] and min(levels["value-state"]) > 0
    assert version.next_file_number > max(meta.number for _, meta in version.live_files())
    assert version.findings == []
    for cf, meta in version.live_files():
        table = open_table(FileSource(path / meta.file_name))
        entries = list(table.entries())
        # The MANIFEST's key range and seqnos are those of the file, and its CF matches the properties.
        assert meta.smallest_key() == InternalKey(entries[0].user_key, entries[0].seqno, entries[0].value_type)
        assert meta.largest_key() == InternalKey(entries[-1].user_key, entries[-1].seqno, entries[-1].value_type)
        assert meta.smallest_seqno == min(e.seqno for e in entries) and meta.largest_seqno == max(e.seqno for e in entries)
        assert table.properties.column_family_id == cf.id
        assert version.last_sequence >= meta.largest_seqno
        assert meta.epoch_number is not None and meta.file_creation_time and meta.unique_id


def test_every_record_re_encodes_to_the_same_edit(busy_db):
    path, _ = busy_db
    for edit in read_manifest(FileSource(manifest_of(path))):
        again = decode_version_edit(encode_version_edit(edit), edit.offset)
        assert again == edit


def test_whole_manifest_round_trip(busy_db):
    path, _ = busy_db
    edits = read_manifest(FileSource(manifest_of(path)))
    rewritten = read_manifest(BytesSource(encode_manifest(edits)))
    assert [e.to_json() | {"offset": 0} for e in rewritten] == [e.to_json() | {"offset": 0} for e in edits]
    assert replay(rewritten).to_json()["column_families"] == replay(edits).to_json()["column_families"]


def test_corrupt_record_names_its_offset(busy_db):
    path, _ = busy_db
    data = bytearray(manifest_of(path).read_bytes())
    edits = read_manifest(BytesSource(bytes(data)))
    victim = edits[len(edits) // 2]
    data[victim.offset + 9] ^= 0x20  # inside the payload (after the 7-byte header)
    with pytest.raises(LogFormatError) as info:
        read_manifest(BytesSource(bytes(data)))
    assert info.value.kind == "bad_record_checksum" and info.value.offset == victim.offset
    findings: list = []
    lenient = list(iter_version_edits(BytesSource(bytes(data)), strict=False, findings=findings))
    assert findings[0].kind == "bad_record_checksum" and findings[0].offset == victim.offset
    assert len(lenient) < len(edits)


def test_truncated_manifest(busy_db):
    path, _ = busy_db
    data = manifest_of(path).read_bytes()
    with pytest.raises(LogFormatError) as info:
        read_manifest(BytesSource(data[:-3]))
    assert info.value.kind == "truncated_record"


def test_records_spanning_blocks_and_block_trailers():
    records = [b"a" * 10, b"b" * (BLOCK_SIZE * 2 + 100), b"", b"c" * (BLOCK_SIZE - 7 - 7 - 10 - 3), b"d" * 50]
    data = encode_log(records)
    got = list(LogReader(BytesSource(data)).records())
    assert [r.payload for r in got] == records
    assert got[1].offset == 17 and got[2].offset > BLOCK_SIZE * 2
    types = [t for _, t, _ in LogReader(BytesSource(data)).physical_records()]
    assert types[:4] == [RecordType.FULL, RecordType.FIRST, RecordType.MIDDLE, RecordType.LAST]
    # Recyclable records carry the log number; records of an older life of the file end the log.
    recycled = encode_log(records, log_number=42)
    assert [r.payload for r in LogReader(BytesSource(recycled), log_number=42).records()] == records
    assert list(LogReader(BytesSource(recycled), log_number=41).records()) == []


def test_fragment_order_problems_are_reported():
    data = bytearray(encode_log([b"x" * (BLOCK_SIZE + 10)]))
    # Drop the FIRST fragment's block: the LAST fragment then has no start.
    reader = LogReader(BytesSource(bytes(data[BLOCK_SIZE:])), strict=False)
    assert list(reader.records()) == []
    assert [f.kind for f in reader.findings] == ["missing_record_start"]


def _file(number: int, **extra) -> FileMetaData:
    return FileMetaData(1, number, 1000 + number, InternalKey(b"a", 5, 1).encode(), InternalKey(b"z", 9, 1).encode(), 5, 9, **extra)


def test_every_field_round_trips():
    meta = _file(7, path_id=1, need_compaction=True, min_log_number_to_keep=3, oldest_blob_file_number=4,
                 oldest_ancester_time=5, file_creation_time=6, file_checksum=b"\x01\x02", file_checksum_func_name="crc32c",
                 temperature=2, min_timestamp=b"t0", max_timestamp=b"t9", unique_id=(1, 2), epoch_number=8,
                 compensated_range_deletion_size=9, tail_size=10, user_defined_timestamps_persisted=False,
                 unknown_custom_fields=[(33, b"future")])
    edit = VersionEdit(comparator="leveldb.BytewiseComparator", log_number=1, prev_log_number=0, next_file_number=20,
                       last_sequence=99, max_column_family=2, min_log_number_to_keep=1, column_family=2, has_column_family=True,
                       column_family_add="window-contents", deleted_files=[(0, 3)], new_files=[meta, _file(8, tag=Tag.NEW_FILE2)],
                       compact_cursors=[(1, InternalKey(b"m", 1, 1).encode())], db_id="abc", remaining_in_atomic_group=0,
                       unknown_tags=[(8192 + 99, b"ignored")])
    assert decode_version_edit(encode_version_edit(edit)) == edit


def test_unknown_tags():
    base = encode_version_edit(VersionEdit(log_number=5))
    # A safe-to-ignore tag is kept, not an error.
    ignorable = base + bytes([0xE3, 0x40]) + b"\x03abc"  # varint32 8291
    assert decode_version_edit(ignorable).unknown_tags == [(8291, b"abc")]
    with pytest.raises(ManifestFormatError) as info:
        decode_version_edit(base + b"\x63\x00", 4096)  # tag 99 without the safe-ignore bit
    assert info.value.offset == 4096 and info.value.found == 99
    # kNewFile4 custom fields: unknown without bit 64 -> kept; with bit 64 -> must fail.
    meta = _file(7)
    encoded = encode_version_edit(VersionEdit(new_files=[meta]))
    assert encoded.endswith(b"\x01")
    kept = decode_version_edit(encoded[:-1] + b"\x1e\x02hi\x01")
    assert kept.new_files[0].unknown_custom_fields == [(30, b"hi")]
    with pytest.raises(ManifestFormatError, match="custom tag"):
        decode_version_edit(encoded[:-1] + bytes([64 + 30]) + b"\x02hi\x01")
    assert CustomTag.PATH_ID == 65


def test_replay_problems_name_the_record():
    edits = [
        VersionEdit(offset=0, comparator="leveldb.BytewiseComparator"),
        VersionEdit(offset=10, column_family=5, has_column_family=True, new_files=[_file(3)]),
        VersionEdit(offset=20, deleted_files=[(1, 77)]),
        VersionEdit(offset=30, column_family=1, has_column_family=True, column_family_add="a"),
        VersionEdit(offset=40, column_family=1, has_column_family=True, column_family_add="a"),
        VersionEdit(offset=50, new_files=[_file(4)], remaining_in_atomic_group=1),
    ]
    version = replay(edits)
    assert [(f.kind, f.offset) for f in version.findings] == [
        ("unknown_column_family", 10), ("delete_of_missing_file", 20), ("duplicate_column_family", 40), ("incomplete_atomic_group", 50),
    ]
    assert version.live_files() == []
