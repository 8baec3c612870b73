"""Salvage of damaged SSTs block by block (repair.formats.rocksdb.table.salvage, issue #35).

The expected entries are taken from the intact table, block by block, before the damage; the salvaged
table must hold exactly the entries of the sound blocks, say how many were lost and between which keys,
and be a table our verify and sst_dump accept.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.checksum import ChecksumType, block_checksum, context_modifier
from repair.formats.rocksdb.table.compression import CompressionType
from repair.formats.rocksdb.table.salvage import SalvageError, salvage_table
from repair.formats.rocksdb.table.sst import BlockKind, open_table, verify_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table
from tests.conftest import FIXTURES
from tests.rocksdb_testlib import needs_sst_dump, sst_dump

SST_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")
CF = (3, "per-user")
ENTRIES = [(InternalKey(b"\x00\x07key%05d" % i, 100 + i, ValueType.MERGE if i % 11 == 0 else ValueType.VALUE), b"v" * (i % 13))
           for i in range(300)]
TOMBSTONE = (InternalKey(b"\x00\x07key00010", 5, ValueType.RANGE_DELETION), b"\x00\x07key00020")


def _table(format_version=5, checksum=ChecksumType.CRC32C, compression=CompressionType.NONE, entries=ENTRIES, **kwargs) -> bytes:
    options = TableOptions(format_version=format_version, checksum_type=checksum, compression=compression, block_size=256,
                           column_family_id=CF[0], column_family_name=CF[1])
    return build_table(entries, options, range_tombstones=[TOMBSTONE], **kwargs)


def _blocks(data: bytes, kind: BlockKind):
    return [b.handle for b in open_table(BytesSource(data)).iter_block_handles() if b.kind == kind]


def _block_entries(data: bytes, handle) -> list[tuple[InternalKey, bytes]]:
    reader = open_table(BytesSource(data)).block_reader(handle, BlockKind.DATA)
    return [(InternalKey(bytes(k[:-8]), int.from_bytes(k[-8:], "little") >> 8, k[-8]), bytes(v)) for _, k, v in reader.entries()]


def _flip(data: bytes, offset: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 0x40
    return bytes(damaged)


def _written(salvage, column_family=CF) -> list[tuple[InternalKey, bytes]]:
    out = salvage.write(column_family)
    assert verify_table(BytesSource(out)).ok
    table = open_table(BytesSource(out))
    return [(InternalKey(e.user_key, e.seqno, e.value_type), bytes(e.value)) for e in table.entries()]


@pytest.mark.parametrize(("format_version", "checksum", "compression"), [
    (4, ChecksumType.CRC32C, CompressionType.NONE), (5, ChecksumType.XXHASH64, CompressionType.LZ4),
    (5, ChecksumType.XXH3, CompressionType.ZSTD), (6, ChecksumType.XXH3, CompressionType.SNAPPY),
])
def test_a_damaged_data_block_loses_exactly_its_entries(format_version, checksum, compression):
    data = _table(format_version, checksum, compression)
    blocks = _blocks(data, BlockKind.DATA)
    victim = blocks[5]
    lost = _block_entries(data, victim)
    salvage = salvage_table(BytesSource(_flip(data, victim.offset + 3)))
    assert salvage.method == "index"
    assert salvage.entries == [e for e in ENTRIES if e not in lost]
    assert salvage.entries_lost == len(lost) > 0
    (block,) = salvage.lost_blocks
    assert (block.offset, block.entries) == (victim.offset, len(lost))
    assert all(block.after_key < key.user_key <= block.up_to_key for key, _ in lost)
    assert block.after_key == _block_entries(data, blocks[4])[-1][0].user_key  # the last key before it
    assert _written(salvage) == salvage.entries
    assert salvage.range_tombstones == [TOMBSTONE] and salvage.range_deletions_lost == 0
    written = open_table(BytesSource(salvage.write(CF)))
    assert (written.format_version, written.checksum_type, written.properties.compression) == (
        format_version, checksum, open_table(BytesSource(data)).properties.compression)


def _value_byte(data: bytes, handle) -> int:
    """The offset of a byte inside a value of an uncompressed data block (flipped, the block still decodes)."""
    return data.index(b"vvv", handle.offset, handle.offset + handle.size) + 1


def test_two_damaged_data_blocks_lose_their_entries_in_all():
    data = _table()
    first, second = _blocks(data, BlockKind.DATA)[2], _blocks(data, BlockKind.DATA)[9]
    lost = _block_entries(data, first) + _block_entries(data, second)
    salvage = salvage_table(BytesSource(_flip(_flip(data, first.offset + 1), second.offset + 1)))
    assert salvage.entries_lost == len(lost) and len(salvage.entries) == len(ENTRIES) - len(lost)
    assert [b.entries for b in salvage.lost_blocks] == [None, None]  # their bytes do not read: the total is exact, not the split


def test_two_damaged_blocks_whose_bytes_still_read_are_counted_each_and_their_keys_listed():
    data = _table()
    first, second = _blocks(data, BlockKind.DATA)[2], _blocks(data, BlockKind.DATA)[9]
    salvage = salvage_table(BytesSource(_flip(_flip(data, _value_byte(data, first)), _value_byte(data, second))))
    assert [b.entries for b in salvage.lost_blocks] == [len(_block_entries(data, first)), len(_block_entries(data, second))]
    assert [list(b.read_keys) for b in salvage.lost_blocks] == [[k for k, _ in _block_entries(data, h)] for h in (first, second)]
    assert salvage.entries_lost == sum(b.entries for b in salvage.lost_blocks)


def test_a_block_that_verifies_but_does_not_decode_is_dropped_not_written():
    """Its checksum is right for its bytes, but they are no data block (a restart count beyond the block)."""
    data = bytearray(_table())
    victim = _blocks(bytes(data), BlockKind.DATA)[3]
    lost = _block_entries(bytes(data), victim)
    data[victim.offset:victim.offset + victim.size] = b"\xff" * (victim.size - 4) + (1 << 20).to_bytes(4, "little")
    trailer = victim.offset + victim.size
    checksum = block_checksum(ChecksumType.CRC32C, bytes(data[victim.offset:trailer]), data[trailer]) + context_modifier(0, victim.offset)
    data[trailer + 1:trailer + 5] = (checksum & 0xFFFFFFFF).to_bytes(4, "little")
    assert not [f for f in verify_table(BytesSource(bytes(data))).findings if "checksum" in f.kind]  # its checksum holds
    salvage = salvage_table(BytesSource(bytes(data)))
    (block,) = salvage.lost_blocks
    assert (block.offset, block.entries, block.read_keys) == (victim.offset, len(lost), None)
    assert "checksum" not in block.reason  # dropped for what it decodes to
    assert salvage.entries == [e for e in ENTRIES if e not in lost]
    assert _written(salvage) == salvage.entries


@pytest.mark.parametrize("kind", [BlockKind.PROPERTIES, BlockKind.INDEX, BlockKind.METAINDEX, "footer"])
def test_only_a_metadata_block_damaged_loses_nothing(kind):
    data = _table()
    offset = len(data) - 12 if kind == "footer" else _blocks(data, kind)[0].offset + 2
    salvage = salvage_table(BytesSource(_flip(data, offset)))
    assert salvage.method == ("index" if kind == BlockKind.PROPERTIES else "scan")
    assert salvage.entries == ENTRIES and salvage.entries_lost == 0 and salvage.lost_blocks == []
    assert salvage.lossless and salvage.damaged_metadata
    assert _written(salvage) == ENTRIES
    if kind != BlockKind.PROPERTIES:  # found again through the metaindex
        assert salvage.range_tombstones == [TOMBSTONE] and salvage.range_deletions_lost == 0


def test_a_damaged_range_deletion_block_is_counted():
    data = _table()
    salvage = salvage_table(BytesSource(_flip(data, _blocks(data, BlockKind.RANGE_DEL)[0].offset + 1)))
    assert salvage.entries == ENTRIES and salvage.entries_lost == 0
    assert salvage.range_tombstones == [] and salvage.range_deletions_lost == 1 and not salvage.lossless


def test_a_block_that_verifies_but_is_out_of_order_is_dropped_not_written():
    swapped = list(ENTRIES)
    swapped[40], swapped[41] = swapped[41], swapped[40]
    data = _table(entries=swapped, allow_unsorted=True)
    bad = next(h for h in _blocks(data, BlockKind.DATA) if swapped[40] in _block_entries(data, h))
    assert verify_table(BytesSource(data)).ok  # every checksum holds
    salvage = salvage_table(BytesSource(data))
    lost = _block_entries(data, bad)
    assert salvage.entries == [e for e in swapped if e not in lost] and salvage.entries_lost == len(lost)
    assert "order" in salvage.lost_blocks[0].reason


def test_damaged_index_and_data_block_keep_the_blocks_before_and_count_the_rest():
    data = _table()
    victim = _blocks(data, BlockKind.DATA)[7]
    damaged = _flip(_flip(data, victim.offset + 2), _blocks(data, BlockKind.INDEX)[0].offset + 2)
    salvage = salvage_table(BytesSource(damaged))
    kept = [e for h in _blocks(data, BlockKind.DATA)[:7] for e in _block_entries(data, h)]
    assert salvage.method == "scan" and salvage.scan_stopped_at == victim.offset
    assert salvage.entries == kept and salvage.entries_lost == len(ENTRIES) - len(kept)  # from the properties
    assert salvage.lost_blocks[0].after_key == kept[-1][0].user_key


def test_format_version_6_with_a_damaged_footer_cannot_be_scanned():
    data = _table(format_version=6, checksum=ChecksumType.XXH3)
    with pytest.raises(SalvageError, match="first block"):
        salvage_table(BytesSource(_flip(data, len(data) - 10)))


def test_unreadable_properties_need_the_column_family_from_the_caller():
    data = _table()
    salvage = salvage_table(BytesSource(_flip(data, _blocks(data, BlockKind.PROPERTIES)[0].offset + 2)))
    with pytest.raises(ValueError, match="column family"):
        salvage.write()
    assert open_table(BytesSource(salvage.write(CF))).properties.column_family_name == CF[1]


def _fixture_sst(name: str) -> bytes:
    found = sorted((p.stat().st_size, p) for p in (FIXTURES / name / "checkpoints").glob("*/shared/*") if p.read_bytes()[-8:] == SST_MAGIC)
    return found[-1][1].read_bytes()


def _scan(tmp_path: Path, data: bytes) -> list[tuple[str, ...]]:
    path = tmp_path / "t.sst"
    path.write_bytes(data)
    out = sst_dump(f"--file={path}", "--command=scan", "--output_hex", "--verify_checksum")
    assert out.returncode == 0 and "corrupt" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr
    return re.findall(r"'([0-9A-F]*)' seq:(\d+), type:(\d+) => ([0-9A-F]*)", out.stdout)


@needs_sst_dump
@pytest.mark.parametrize("fixture", ["flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"])
def test_flink_sst_with_damaged_properties_is_salvaged_whole_and_one_with_a_damaged_data_block_is_counted(fixture, tmp_path):
    data = _fixture_sst(fixture)
    table = open_table(BytesSource(data))
    count, column_family = table.properties.num_entries, (table.properties.column_family_id, table.properties.column_family_name)
    salvage = salvage_table(BytesSource(_flip(data, table.metaindex["rocksdb.properties"].offset + 2)))
    assert salvage.entries_lost == 0 and len(salvage.entries) == count
    assert _scan(tmp_path, salvage.write(column_family)) == _scan(tmp_path, data)

    (block,) = _blocks(data, BlockKind.DATA)  # a small Flink SST: one data block
    salvage = salvage_table(BytesSource(_flip(data, block.offset + 1)))
    assert salvage.entries == [] and salvage.entries_lost == count
