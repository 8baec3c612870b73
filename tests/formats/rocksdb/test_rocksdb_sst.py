"""The SST reader against tables written by real RocksDB (rocksdict, and Debian's librocksdb)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.block import ValueType
from repair.formats.rocksdb.table.checksum import ChecksumType
from repair.formats.rocksdb.table.sst import (
    BLOCK_BASED_MAGIC,
    BlockKind,
    open_table,
    verify_table,
)
from tests.rocksdb_testlib import CApiDB, FileSource, make_rocksdict_db, needs_librocksdb, sst_files

CHECKSUMS = {"no_checksum": 0, "crc32c": 1, "xxhash": 2, "xxhash64": 3, "xxh3": 4}

# (format_version, checksum, compression, partitioned index + filters, index restart interval)
CONFIGS = [
    (None, None, None, False, None),  # rocksdict defaults: format_version 6, XXH3, snappy
    (5, "crc32c", "zlib", False, None),
    (4, "xxhash", "lz4", False, 4),
    (3, "xxhash64", "bz2", False, None),
    (2, "no_checksum", "zstd", False, None),
    (5, "crc32c", "lz4hc", True, None),
    (6, "xxh3", "zstd", True, 4),
    (6, "crc32c", "none", False, 8),
]


def _config_id(config) -> str:
    fv, checksum, compression, partitioned, interval = config
    return f"fv{fv or 'default'}-{checksum or 'default'}-{compression or 'default'}{'-partitioned' if partitioned else ''}{f'-iri{interval}' if interval else ''}"


@pytest.fixture(scope="module", params=CONFIGS, ids=_config_id)
def written(request, tmp_path_factory):
    fv, checksum, compression, partitioned, interval = request.param
    db = tmp_path_factory.mktemp("db") / "db"
    expected = make_rocksdict_db(
        db, format_version=fv, checksum=checksum, compression=compression, block_size=256,
        partitioned=partitioned, index_restart_interval=interval, column_families=("window-contents",),
    )
    return request.param, db, expected


def _table_for_cf(db: Path, name: str):
    for path in sst_files(db):
        table = open_table(FileSource(path))
        if table.properties.column_family_name == name:
            return path, table
    raise AssertionError(f"no SST of column family {name}")


@pytest.mark.parametrize("cf_name", ["default", "window-contents"])
def test_reads_every_entry_and_property(written, cf_name):
    (fv, checksum, compression, partitioned, _), db, expected = written
    path, table = _table_for_cf(db, cf_name)
    props = table.properties

    assert table.footer.magic == BLOCK_BASED_MAGIC
    assert table.format_version == (fv if fv is not None else 6)
    assert table.checksum_type == (CHECKSUMS[checksum] if checksum else ChecksumType.XXH3)

    entries = list(table.entries())
    # Every key written is there exactly once: the newest version survives the flush.
    assert [e.user_key for e in entries] == sorted(expected[cf_name])
    for entry in entries:
        value = expected[cf_name][entry.user_key]
        if value is None:
            assert (entry.value_type, entry.value) == (ValueType.DELETION, b"")
        else:
            assert (entry.value_type, entry.value) == (ValueType.VALUE, value)
    assert all(0 < e.seqno < 1 << 56 for e in entries)
    tombstones = list(table.range_tombstones())
    if cf_name == "default":
        assert [(t.start, t.end) for t in tombstones] == [(b"default-key000100", b"default-key000120")]
        assert tombstones[0].seqno > max(e.seqno for e in entries)
    else:
        assert tombstones == []

    assert props.column_family_name == cf_name
    assert props.column_family_id == (0 if cf_name == "default" else 1)
    assert props.comparator == "leveldb.BytewiseComparator"
    assert props.num_entries == len(entries) + len(tombstones)
    assert props.num_deletions == sum(e.value_type == ValueType.DELETION for e in entries) + len(tombstones)
    assert props.num_range_deletions == len(tombstones)
    assert props.num_merge_operands == 0
    # Raw sizes count range tombstones too (start key + 8, end key as value).
    assert props.raw_key_size == sum(len(e.user_key) + 8 for e in entries) + sum(len(t.start) + 8 for t in tombstones)
    assert props.raw_value_size == sum(len(e.value) for e in entries) + sum(len(t.end) for t in tombstones)
    assert props.db_id and len(props.db_session_id) == 20
    assert props.creation_time > 0 and props.file_creation_time > 0
    if compression:
        assert props.compression.lower().replace("compression", "") in {
            "zlib": ("zlib",), "lz4": ("lz4",), "bz2": ("bzip2",), "zstd": ("zstd",), "lz4hc": ("lz4hc",), "none": ("no",),
        }[compression]

    blocks = list(table.iter_block_handles())
    data_blocks = [b.handle for b in blocks if b.kind == BlockKind.DATA]
    assert len(data_blocks) == props.num_data_blocks > 10
    assert sum(h.size + 5 for h in data_blocks) == props.data_size
    # Blocks tile the file: each starts where the previous one's trailer ends, the footer follows.
    assert blocks[0].handle.offset == 0
    for before, after in zip(blocks, blocks[1:]):
        assert after.handle.offset == before.handle.end
    assert blocks[-1].kind == BlockKind.METAINDEX and blocks[-1].handle.end == table.footer.footer_offset
    if partitioned:
        assert table.is_partitioned_index
        assert len(table.index_partitions()) == props.index_partitions > 1
        assert any(b.kind == BlockKind.FILTER_PARTITION for b in blocks)

    report = table.verify()
    assert report.ok, report.findings
    assert report.blocks_checked == len(blocks)
    assert report.bytes_checked == table.footer.footer_offset
    assert report.blocks_by_kind["data"] == props.num_data_blocks


def _data_block(path: Path, index: int):
    table = open_table(FileSource(path))
    return [b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA][index]


@pytest.fixture(scope="module")
def fv5_and_fv6(tmp_path_factory):
    result = {}
    for fv, checksum in ((5, "crc32c"), (6, "xxh3")):
        db = tmp_path_factory.mktemp(f"fv{fv}") / "db"
        make_rocksdict_db(db, format_version=fv, checksum=checksum, compression="snappy", block_size=256)
        result[fv] = sst_files(db)[0]
    return result


@pytest.mark.parametrize("fv", [5, 6])
def test_flipped_byte_in_a_data_block_is_reported_at_its_offset(fv5_and_fv6, tmp_path, fv):
    original = fv5_and_fv6[fv]
    victim = _data_block(original, 3)
    data = bytearray(original.read_bytes())
    data[victim.offset + victim.size // 2] ^= 0x40

    report = verify_table(BytesSource(bytes(data)))

    assert [(f.kind, f.block_kind, f.offset, f.size) for f in report.findings] == [
        ("block_checksum_mismatch", "data", victim.offset, victim.size)
    ]
    message = report.findings[0].message
    assert message.startswith(f"data block checksum mismatch at offset {victim.offset} (size {victim.size}): stored 0x")
    assert ("(context removed)" in message) == (fv == 6)
    # Every other block was still checked.
    assert report.blocks_checked == len(list(open_table(FileSource(original)).iter_block_handles()))


def test_checksum_of_the_trailer_itself_is_checked(fv5_and_fv6):
    original = fv5_and_fv6[5]
    victim = _data_block(original, 0)
    data = bytearray(original.read_bytes())
    data[victim.offset + victim.size + 2] ^= 0x01  # a byte of the stored checksum
    report = verify_table(BytesSource(bytes(data)))
    assert [(f.kind, f.offset) for f in report.findings] == [("block_checksum_mismatch", victim.offset)]


def test_overwritten_magic_is_bad_magic(fv5_and_fv6):
    data = bytearray(fv5_and_fv6[6].read_bytes())
    data[-8:] = b"NOTMAGIC"
    report = verify_table(BytesSource(bytes(data)))
    assert [(f.kind, f.offset) for f in report.findings] == [("bad_magic", len(data) - 8)]
    assert report.findings[0].expected == f"0x{BLOCK_BASED_MAGIC:016x}"


@pytest.mark.parametrize("keep", [30, 1000])
def test_truncated_file(fv5_and_fv6, keep):
    data = fv5_and_fv6[5].read_bytes()[:keep]
    report = verify_table(BytesSource(data))
    kinds = [f.kind for f in report.findings]
    # Cut inside the data, the magic at the end is gone; shorter than a footer, the file is truncated.
    assert kinds == (["truncated"] if keep < 48 else ["bad_magic"])


def test_corrupt_index_block_prevents_opening(fv5_and_fv6):
    original = fv5_and_fv6[5]
    table = open_table(FileSource(original))
    index = table.index_handle
    data = bytearray(original.read_bytes())
    data[index.offset + 1] ^= 0xFF
    report = verify_table(BytesSource(bytes(data)))
    assert [(f.kind, f.block_kind, f.offset) for f in report.findings] == [("block_checksum_mismatch", "index", index.offset)]
    assert "cannot be opened" in report.findings[0].message


def test_corrupt_properties_block_still_verifies_the_data(fv5_and_fv6):
    original = fv5_and_fv6[6]
    table = open_table(FileSource(original))
    props = table.metaindex["rocksdb.properties"]
    data = bytearray(original.read_bytes())
    data[props.offset + 3] ^= 0x10
    broken = open_table(BytesSource(bytes(data)))
    assert broken.properties is None
    report = broken.verify()
    assert [(f.kind, f.block_kind, f.offset) for f in report.findings] == [("block_checksum_mismatch", "properties", props.offset)]
    assert report.blocks_by_kind["data"] == table.properties.num_data_blocks


def test_moved_block_fails_only_with_context_checksums(tmp_path):
    """format_version 6 binds a block's checksum to its offset: a block copied elsewhere fails."""
    from repair.formats.rocksdb.table.block import InternalKey
    from repair.formats.rocksdb.table.writer import TableOptions, build_table

    entries = [(InternalKey(b"k%05d" % i, i + 1, 1), b"x" * 40) for i in range(400)]
    for fv, expect_failure in ((5, False), (6, True)):
        data = bytearray(build_table(entries, TableOptions(format_version=fv, checksum_type=ChecksumType.XXH3, block_size=512)))
        table = open_table(BytesSource(bytes(data)))
        blocks = [b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA]
        a, b = next((x, y) for x, y in zip(blocks, blocks[1:]) if x.size == y.size and bytes(data[x.offset:x.end]) != bytes(data[y.offset:y.end]))
        data[b.offset : b.end] = data[a.offset : a.end]  # whole block with its trailer
        report = verify_table(BytesSource(bytes(data)))
        assert [(f.kind, f.offset) for f in report.findings] == ([("block_checksum_mismatch", b.offset)] if expect_failure else [])


def test_corrupt_compressed_block_with_valid_checksum_is_decompression_failure(fv5_and_fv6):
    from repair.formats.rocksdb.table.checksum import stored_block_checksum

    original = fv5_and_fv6[5]
    victim = _data_block(original, 2)
    data = bytearray(original.read_bytes())
    assert data[victim.offset + victim.size] == 1  # snappy
    data[victim.offset] = 0xFF  # snappy's length header now claims far more than the block holds
    data[victim.offset + 1] = 0xFF
    payload = bytes(data[victim.offset : victim.offset + victim.size])
    data[victim.end - 4 : victim.end] = stored_block_checksum(ChecksumType.CRC32C, payload, 1).to_bytes(4, "little")
    report = verify_table(BytesSource(bytes(data)))
    assert [(f.kind, f.block_kind, f.offset) for f in report.findings] == [("decompression_failed", "data", victim.offset)]
    assert "snappy" in report.findings[0].message


def test_verify_reads_in_large_sequential_chunks(fv5_and_fv6):
    source = FileSource(fv5_and_fv6[6])
    table = open_table(source)
    source.reads.clear()
    progress = []
    report = table.verify(lambda done, total: progress.append((done, total)), chunk_size=16384)
    assert report.ok
    data_reads = [r for r in source.reads if r[1] > 1000]
    assert len(source.reads) <= source.size // 16384 + 4
    assert all(length <= 16384 for _, length in data_reads)
    assert progress[-1][0] == progress[-1][1] and len(progress) == len(data_reads)


def test_plain_and_cuckoo_tables_are_recognised(tmp_path):
    from rocksdict import CuckooTableOptions, Options, PlainTableFactoryOptions, Rdict, SliceTransform

    for kind in ("plain", "cuckoo"):
        path = tmp_path / kind
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_allow_mmap_reads(True)  # plain tables need mmap
        if kind == "plain":
            options.set_prefix_extractor(SliceTransform.create_fixed_prefix(3))
            options.set_plain_table_factory(PlainTableFactoryOptions())
        else:
            options.set_cuckoo_table_factory(CuckooTableOptions())
        db = Rdict(str(path), options)
        for i in range(50):
            db[b"key%03d" % i] = b"value"
        db.flush()
        db.close()
        report = verify_table(FileSource(sst_files(path)[0]))
        assert [f.kind for f in report.findings] == ["not_block_based_table"]
        assert f"{kind} table (magic 0x" in report.findings[0].message


def test_sst_file_writer_output(tmp_path):
    from rocksdict import Options, SstFileWriter

    path = tmp_path / "ingest.sst"
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(path))
    for i in range(100):
        writer[b"k%03d" % i] = b"v%d" % i
    writer.finish()
    table = open_table(FileSource(path))
    assert table.properties.column_family_is_unknown
    assert table.properties.column_family_name is None
    assert table.properties.external_sst_file_version == 2
    assert table.properties.external_sst_file_global_seqno == 0
    assert [(e.user_key, e.seqno, e.value) for e in table.entries()][:2] == [(b"k000", 0, b"v0"), (b"k001", 0, b"v1")]


@needs_librocksdb
@pytest.mark.parametrize(
    "format_version,checksum,compression",
    [(0, 1, "snappy"), (1, 2, "zlib"), (1, 3, "lz4"), (1, 1, "bz2"), (2, 4, "lz4hc"), (5, 1, "zstd"), (5, 4, "none")],
)
def test_merge_operands_and_legacy_formats_written_by_debian_rocksdb(tmp_path, format_version, checksum, compression):
    """Debian's RocksDB 7.8 writes format_version 0 and 1 footers and Flink-like merge operands."""
    db = CApiDB(tmp_path / "db", format_version=format_version, checksum=checksum, compression=compression, block_size=512)
    for i in range(200):
        db.put(b"value-state-%04d" % i, b"v" * (i % 30))
        for j in range(3):
            db.merge(b"list-state-%04d" % i, b"element-%d-%d" % (i, j))
    db.single_delete(b"value-state-0003")  # cancels out with the put below it during the flush
    db.single_delete(b"value-state-9999")
    db.delete(b"value-state-0005")
    db.flush()
    db.close()
    table = open_table(FileSource(sst_files(tmp_path / "db")[0]))
    assert table.format_version == format_version
    assert table.footer.is_legacy == (format_version == 0)
    assert table.checksum_type == (1 if format_version == 0 else checksum)
    entries = list(table.entries())
    merges = [e for e in entries if e.value_type == ValueType.MERGE]
    # Operands of one key come newest first (descending seqno).
    assert [e.value for e in merges[:3]] == [b"element-0-2", b"element-0-1", b"element-0-0"]
    assert len(merges) == 600 == table.properties.num_merge_operands
    assert table.properties.merge_operator == "StringAppendTESTOperator"
    types = {e.user_key: e.value_type for e in entries if e.user_key.startswith(b"value-state-")}
    assert b"value-state-0003" not in types
    assert types[b"value-state-9999"] == ValueType.SINGLE_DELETION
    assert types[b"value-state-0005"] == ValueType.DELETION
    assert table.properties.num_deletions == 2
    assert table.verify().ok
