"""Differential tests: our decoders against Debian's ``sst_dump`` and ``ldb`` (RocksDB 7.8.3).

RocksDB 7.8.3 reads format_version <= 5 only, so the tables here are written with format_version 5
(rocksdict), 0-5 (Debian's librocksdb via its C API) or built by our own writer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repair.formats.rocksdb.manifest import read_manifest, replay
from repair.formats.rocksdb.table.block import InternalKey
from repair.formats.rocksdb.table.checksum import ChecksumType, unmask_crc
from repair.formats.rocksdb.table.sst import BlockKind, open_table, verify_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table
from tests.rocksdb_testlib import (
    LIBROCKSDB,
    CApiDB,
    FileSource,
    ldb,
    ldb_live_files,
    make_rocksdict_db,
    manifest_of,
    needs_ldb,
    needs_sst_dump,
    sst_dump,
    sst_dump_properties,
    sst_files,
)

pytestmark = needs_sst_dump


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> list[Path]:
    """SSTs of several writers and options, all readable by RocksDB 7.8.3."""
    paths: list[Path] = []
    for fv, checksum, compression, partitioned in ((5, "crc32c", "snappy", False), (4, "xxh3", "zstd", True), (3, "xxhash64", "lz4", False)):
        db = tmp_path_factory.mktemp("rocksdict") / "db"
        make_rocksdict_db(db, format_version=fv, checksum=checksum, compression=compression, block_size=256,
                          partitioned=partitioned, column_families=("window-contents",))
        paths += sst_files(db)
    if LIBROCKSDB is not None:
        for fv, checksum, compression in ((0, 1, "zlib"), (1, 3, "bz2"), (5, 1, "snappy")):
            path = tmp_path_factory.mktemp("capi") / "db"
            db = CApiDB(path, format_version=fv, checksum=checksum, compression=compression, block_size=512)
            for i in range(300):
                db.merge(b"list-%04d" % i, b"element-%d" % i)
                db.put(b"value-%04d" % i, b"v" * (i % 40))
            db.flush()
            db.close()
            paths += sst_files(path)
    built = tmp_path_factory.mktemp("built")
    entries = [(InternalKey(b"key%05d" % i, 10_000 - i, (1, 0, 2, 7)[i % 4]), b"x" * (i % 60)) for i in range(2000)]
    for fv, checksum, compression in ((1, 2, 4), (2, 4, 5), (5, 0, 3)):
        path = built / f"built-fv{fv}.sst"
        path.write_bytes(build_table(entries, TableOptions(format_version=fv, checksum_type=checksum, compression=compression, block_size=400),
                                     range_tombstones=[(InternalKey(b"key00010", 20_000, 0xF), b"key00020")]))
        paths.append(path)
    return paths


def test_properties_agree_with_sst_dump(tables):
    for path in tables:
        theirs = sst_dump_properties(path)
        ours = open_table(FileSource(path)).properties
        user_key = ours.index_key_is_user_key or 0
        delta = ours.index_value_is_delta_encoded or 0
        expected = {
            "# data blocks": ours.num_data_blocks,
            "# entries": ours.num_entries,
            "# deletions": ours.num_deletions,
            "# merge operands": ours.num_merge_operands,
            "# range deletions": ours.num_range_deletions,
            "raw key size": ours.raw_key_size,
            "raw value size": ours.raw_value_size,
            "data block size": ours.data_size,
            f"index block size (user-key? {user_key}, delta-value? {delta})": ours.index_size,
            "filter block size": ours.filter_size,
            "column family ID": ours.column_family_id,
            "column family name": ours.column_family_name or "N/A",
            "comparator name": ours.comparator,
            "merge operator name": ours.merge_operator,
            "SST file compression algo": ours.compression,
            "creation time": ours.creation_time,
            "time stamp of earliest key": ours.oldest_key_time,
            "file creation time": ours.file_creation_time or 0,
            "DB identity": ours.db_id or "",
            "DB session identity": ours.db_session_id or "",
        }
        for label, value in expected.items():
            assert theirs.get(label, "").strip() == str(value).strip(), (path, label, theirs.get(label), value)


def test_entries_agree_with_sst_dump_scan(tables):
    for path in tables:
        out = sst_dump(f"--file={path}", "--command=scan", "--output_hex")
        theirs = re.findall(r"'([0-9A-F]*)' seq:(\d+), type:(\d+) => ([0-9A-F]*)", out.stdout)
        ours = [(e.user_key.hex().upper(), str(e.seqno), str(e.value_type), e.value.hex().upper()) for e in open_table(FileSource(path)).entries()]
        assert ours == theirs, path


def test_clean_tables_verify_clean_in_both(tables):
    for path in tables:
        out = sst_dump(f"--file={path}", "--command=verify", "--verify_checksum")
        assert "The file is ok" in out.stdout and "corrupt" not in out.stderr.lower(), path
        assert verify_table(FileSource(path)).ok


def test_corrupted_data_blocks_same_verdict_offset_and_values(tables, tmp_path):
    for path in tables:
        table = open_table(FileSource(path))
        if table.checksum_type == ChecksumType.NONE:
            continue
        victim = [b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA][2]
        data = bytearray(path.read_bytes())
        data[victim.offset + 1] ^= 0x04
        broken = tmp_path / path.name
        broken.write_bytes(bytes(data))

        out = sst_dump(f"--file={broken}", "--command=verify", "--verify_checksum")
        match = re.search(r"block checksum mismatch: stored = (\d+), computed = (\d+), type = (\d+)\s+in \S+ offset (\d+) size (\d+)", out.stderr)
        assert match, (path, out.stdout, out.stderr)
        stored, computed, kind, offset, size = map(int, match.groups())

        (finding,) = verify_table(FileSource(broken)).findings
        assert (finding.kind, finding.offset, finding.size) == ("block_checksum_mismatch", offset, size)
        ours_stored, ours_computed = int(finding.expected, 16), int(finding.found, 16)
        if kind == ChecksumType.CRC32C:  # RocksDB prints CRC32C values unmasked
            ours_stored, ours_computed = unmask_crc(ours_stored), unmask_crc(ours_computed)
        assert (ours_stored, ours_computed) == (stored, computed)


def test_bad_magic_same_verdict(tables, tmp_path):
    broken = tmp_path / "bad.sst"
    broken.write_bytes(tables[0].read_bytes()[:-8] + b"\0" * 8)
    out = sst_dump(f"--file={broken}", "--command=verify", "--verify_checksum")
    assert "not a valid SST file" in out.stdout + out.stderr or "Bad table magic number" in out.stdout + out.stderr
    assert [f.kind for f in verify_table(FileSource(broken)).findings] == ["bad_magic"]


@needs_ldb
def test_live_files_agree_with_ldb_manifest_dump(tmp_path):
    from rocksdict import Options, Rdict

    path = tmp_path / "db"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_disable_auto_compactions(True)
    db = Rdict(str(path), options, column_families={"window-contents": options, "value-state": options})
    for round_ in range(3):
        for name in ("window-contents", "value-state"):
            cf = db.get_column_family(name)
            for i in range(40):
                cf[b"k-%d-%03d" % (round_, i)] = b"v"
            cf.flush()
    db.get_column_family("window-contents").compact_range(None, None)
    db.close()
    manifest = manifest_of(path)
    version = replay(read_manifest(FileSource(manifest)))
    ours = {(cf.name, m.level, m.number, m.file_size, m.smallest_seqno, m.largest_seqno) for cf, m in version.live_files()}
    assert ours == ldb_live_files(manifest)
    summary = ldb("manifest_dump", f"--path={manifest}").stdout
    # VersionSet::Recover reserves one more number (next_file_number_ = recorded + 1) before printing.
    assert (
        f"next_file_number {version.next_file_number + 1} last_sequence {version.last_sequence}  prev_log_number "
        f"{version.prev_log_number} max_column_family {version.max_column_family} "
        f"min_log_number_to_keep {version.min_log_number_to_keep}"
    ) in summary
