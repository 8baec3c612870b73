"""The production SST writer (repair.formats.rocksdb.table.writer) against RocksDB's own readers.

Real SSTs (Flink fixtures, RocksDB databases written by rocksdict) are rewritten from their entries with
the writer, in their own format (format_version, checksum type, compression): the rewritten files must
pass our verify and ``sst_dump --verify_checksum --command=scan`` with the same entries, and a database
whose SSTs are all rewritten (MANIFEST rebuilt for the new sizes) must read the same in ``ldb`` and in
rocksdict (RocksDB itself).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.files import decode_current, file_number
from repair.formats.rocksdb.manifest import read_manifest, replay
from repair.formats.rocksdb.manifest_builder import build_manifest, describe_sst
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.sst import open_table, verify_table
from repair.formats.rocksdb.table.writer import build_table, check_sorted, rewrite_options
from tests.conftest import FIXTURES
from tests.rocksdb_testlib import ldb, make_rocksdict_db, needs_ldb, needs_sst_dump, sst_dump, sst_dump_properties

SST_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")


def rewrite(data: bytes) -> bytes:
    """``data`` (a table) written again by our writer from its entries, in its own format."""
    table = open_table(BytesSource(data))
    entries = [(InternalKey(e.user_key, e.seqno, e.value_type), bytes(e.value)) for e in table.entries()]
    tombstones = [(InternalKey(t.start, t.seqno, ValueType.RANGE_DELETION), bytes(t.end)) for t in table.range_tombstones()]
    return build_table(entries, rewrite_options(table), range_tombstones=tombstones)


def scan(path: Path) -> list[tuple[str, ...]]:
    out = sst_dump(f"--file={path}", "--command=scan", "--output_hex", "--verify_checksum")
    assert out.returncode == 0 and "corrupt" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr
    return re.findall(r"'([0-9A-F]*)' seq:(\d+), type:(\d+) => ([0-9A-F]*)", out.stdout)


def fixture_ssts(name: str, count: int) -> list[Path]:
    found = sorted((p.stat().st_size, p) for p in (FIXTURES / name / "checkpoints").glob("*/shared/*") if p.read_bytes()[-8:] == SST_MAGIC)
    return [p for _, p in found[-count:]]


@needs_sst_dump
@pytest.mark.parametrize("fixture", ["flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"])
def test_flink_ssts_rewritten_read_the_same_in_sst_dump(fixture, tmp_path):
    for path in fixture_ssts(fixture, 2):
        original = path.read_bytes()
        rewritten = rewrite(original)
        assert rewritten != original
        assert verify_table(BytesSource(rewritten)).ok
        copy, mine = tmp_path / "original.sst", tmp_path / "rewritten.sst"
        copy.write_bytes(original)
        mine.write_bytes(rewritten)
        assert scan(mine) == scan(copy) != []
        theirs, ours = sst_dump_properties(copy), sst_dump_properties(mine)
        for label in ("column family ID", "column family name", "comparator name", "merge operator name", "# entries",
                      "# deletions", "raw key size", "raw value size", "SST file compression algo", "DB identity"):
            assert ours.get(label) == theirs.get(label), (label, ours.get(label), theirs.get(label))
        before, after = open_table(BytesSource(original)), open_table(BytesSource(rewritten))
        assert (after.footer.format_version, after.footer.checksum_type) == (before.footer.format_version, before.footer.checksum_type)


@needs_ldb
@pytest.mark.parametrize(("checksum", "compression"), [("crc32c", "lz4"), ("xxh3", "zstd")])
def test_a_database_of_rewritten_ssts_reads_the_same_in_ldb_and_rocksdb(tmp_path, checksum, compression):
    db = tmp_path / "db"
    make_rocksdict_db(db, format_version=5, checksum=checksum, compression=compression, block_size=256,
                      column_families=("cf",), keys=400)
    before = {cf: _ldb_scan(db, cf) for cf in ("default", "cf")}
    rewritten = tmp_path / "rewritten"
    shutil.copytree(db, rewritten)
    summaries = []
    for sst in sorted(rewritten.glob("*.sst")):
        data = rewrite(sst.read_bytes())
        table = open_table(BytesSource(data))
        assert len(list(table.iter_data_block_handles())) > 1  # several blocks, restarts and a real index
        sst.write_bytes(data)
        summaries.append(describe_sst(BytesSource(data), sst.name))
    assert any(s.num_range_deletions for s in summaries)  # the range deletion is kept
    original = replay(read_manifest(BytesSource((db / decode_current((db / "CURRENT").read_bytes())).read_bytes())))
    empty = [(c.id, c.name) for c in original.column_families.values() if not c.files]
    rebuilt = build_manifest(summaries, empty, format="frocksdb8",
                             existing_numbers={n for p in rewritten.iterdir() if (n := file_number(p.name)) is not None})
    for p in list(rewritten.glob("MANIFEST-*")) + [rewritten / "CURRENT"]:
        p.unlink()
    (rewritten / rebuilt.manifest_name).write_bytes(rebuilt.manifest)
    (rewritten / "CURRENT").write_bytes(rebuilt.current)
    assert {cf: _ldb_scan(rewritten, cf) for cf in ("default", "cf")} == before
    assert _rocksdb_contents(rewritten) == _rocksdb_contents(db)


def _ldb_scan(db: Path, cf: str) -> str:
    work = db.parent / (db.name + "-ldb")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(db, work)
    out = ldb(f"--db={work}", f"--column_family={cf}", "--ignore_unknown_options", "scan", "--hex")
    shutil.rmtree(work, ignore_errors=True)
    assert out.returncode == 0 and out.stdout.strip(), out.stderr + out.stdout
    return out.stdout


def _rocksdb_contents(db: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    from rocksdict import AccessType, Options, Rdict

    work = db.parent / (db.name + "-rd")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(db, work)
    opened = Rdict(str(work), Options(raw_mode=True), column_families={"cf": Options(raw_mode=True)},
                   access_type=AccessType.read_only(False))
    try:
        return {name: list((opened if name == "default" else opened.get_column_family(name)).items()) for name in ("default", "cf")}
    finally:
        opened.close()
        shutil.rmtree(work, ignore_errors=True)


def test_entries_out_of_internal_key_order_are_refused():
    keys = [InternalKey(b"a", 5, ValueType.VALUE), InternalKey(b"a", 7, ValueType.VALUE)]  # same key: newest first
    with pytest.raises(ValueError, match="entry 1"):
        check_sorted(keys)
    with pytest.raises(ValueError, match="sorted"):
        build_table([(k, b"") for k in keys])
    check_sorted(list(reversed(keys)))
