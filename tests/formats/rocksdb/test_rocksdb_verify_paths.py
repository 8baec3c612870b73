"""SST verification: the ``decompress`` switch, and the fast paths against the general ones.

``Table.verify`` has fast paths (index decoding into lists, a block loop without per-block objects,
Snappy into a reused buffer) and falls back to the general code for anything unusual. These tests
damage real RocksDB tables in many ways and require the same report, finding for finding, with the
fast paths on and off (``sst._FAST_PATHS``).
"""

from __future__ import annotations

import json
import random

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table import sst
from repair.formats.rocksdb.table.block import BlockReader
from repair.formats.rocksdb.table.checksum import ChecksumType, stored_block_checksum
from repair.formats.rocksdb.table.sst import BlockKind, open_table, verify_table
from tests.rocksdb_testlib import make_rocksdict_db, random_damage, sst_files

# (format_version, checksum, compression, partitioned, index restart interval)
CONFIGS = [
    (5, "crc32c", "snappy", False, None),  # what Flink writes by default: the main fast path
    (4, "crc32c", "snappy", False, 4),  # size deltas in the index
    (5, "crc32c", "snappy", True, None),  # partitioned index and filters
    (6, "crc32c", "snappy", False, None),  # context checksums: the general loop
    (5, "xxhash64", "lz4", False, None),
    (5, "xxh3", "zstd", False, None),
    (5, "crc32c", "none", False, None),
    (2, "crc32c", "snappy", False, None),  # index values not delta encoded
]


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> list[bytes]:
    result = []
    for n, (fv, checksum, compression, partitioned, interval) in enumerate(CONFIGS):
        db = tmp_path_factory.mktemp(f"db{n}") / "db"
        make_rocksdict_db(
            db, format_version=fv, checksum=checksum, compression=compression, block_size=256,
            partitioned=partitioned, index_restart_interval=interval, keys=300,
        )
        result += [path.read_bytes() for path in sst_files(db)]
    return result


def _report(data: bytes, *, fast: bool, chunk_size: int, decompress: bool = True, monkeypatch=None) -> tuple[str, list]:
    monkeypatch.setattr(sst, "_FAST_PATHS", fast)
    progress: list = []
    try:
        report = verify_table(BytesSource(data), lambda done, total: progress.append((done, total)), chunk_size=chunk_size, decompress=decompress)
    except Exception as exc:  # noqa: BLE001 - compared between the paths, like any result
        return f"{type(exc).__name__}: {exc}", progress
    return json.dumps(report.to_json()), progress




def test_fast_and_general_paths_agree_on_healthy_tables(tables, monkeypatch):
    for data in tables:
        for chunk_size in (100, 1 << 20):
            for decompress in (True, False):
                fast = _report(data, fast=True, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
                general = _report(data, fast=False, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
                assert fast == general
                assert json.loads(fast[0])["ok"]


@pytest.mark.parametrize("seed", range(4))
def test_fast_and_general_paths_agree_on_damaged_tables(tables, monkeypatch, seed):
    rng = random.Random(seed)
    with_findings = 0
    for _ in range(250):
        data = random_damage(rng, rng.choice(tables))
        chunk_size = rng.choice([300, 4096, 1 << 20])
        decompress = rng.random() < 0.8
        fast = _report(data, fast=True, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
        general = _report(data, fast=False, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
        assert fast == general
        with_findings += '"ok": false' in fast[0]
    assert with_findings > 150  # the damage is real


def test_snappy_blocks_larger_than_the_buffer(tables, monkeypatch):
    monkeypatch.setattr(sst, "_SNAPPY_SCRATCH_SIZE", 16)
    for data in tables[:2]:
        small = _report(data, fast=True, chunk_size=1 << 20, monkeypatch=monkeypatch)
        general = _report(data, fast=False, chunk_size=1 << 20, monkeypatch=monkeypatch)
        assert small == general
        assert json.loads(small[0])["blocks_decompressed"] > 0


def test_index_fast_decoder_matches_the_block_reader(tables):
    rng = random.Random(7)
    indexes = []
    for data in tables:
        table = open_table(BytesSource(data))
        if table.index_value_is_delta_encoded:
            indexes.append(bytes(table.block_reader(table.index_handle, BlockKind.INDEX).data))
    assert indexes
    compared = 0
    for _ in range(3000):
        index = bytearray(rng.choice(indexes))
        for _ in range(rng.choice([0, 1, 1, 2])):
            index[rng.randrange(len(index))] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        try:
            reader = BlockReader(bytes(index), 0, block_kind="index")
        except sst.TableFormatError:
            continue
        try:
            expected = reader.index_handles(value_delta_encoded=True)
        except sst.FormatError:
            expected = None
        fast = sst._delta_index_arrays(reader.data, reader.layout.entries_end)
        if fast is not None:
            # The fast decoder may decline (None); when it answers, it is the general answer.
            assert expected is not None and fast == ([h.offset for h in expected], [h.size for h in expected])
            compared += 1
    assert compared > 500


@pytest.mark.parametrize("where", ["past the end of the file", "into the footer", "too large"])
def test_an_index_handle_out_of_bounds_is_the_same_finding_on_both_paths(tables, monkeypatch, where):
    """An index entry pointing past the blocks (a wrong length or offset in the index): the fast loop
    checks the bounds before reading, as the general loop does, and both name that one entry."""
    data = tables[0]
    reports = []
    for fast in (True, False):
        monkeypatch.setattr(sst, "_FAST_PATHS", fast)
        table = open_table(BytesSource(data))
        handles = list(table.top_level_index)
        last = handles[-1]
        handles[-1] = {
            "past the end of the file": sst.BlockHandle(len(data) + 10, last.size),
            "into the footer": sst.BlockHandle(last.offset, table.footer.footer_offset - last.offset),
            "too large": sst.BlockHandle(last.offset, table.max_block_size + 100),
        }[where]
        table.top_level_index = handles
        for chunk_size in (300, 1 << 20):
            reports.append(json.dumps(table.verify(chunk_size=chunk_size, decompress=False).to_json()))
    assert len(set(reports)) == 1
    findings = json.loads(reports[0])["findings"]
    assert [f["kind"] for f in findings] == ["bad_block_handle"]
    assert findings[0]["offset"] == handles[-1].offset


# -- decompress=False ----------------------------------------------------------------------------


def test_decompress_false_checks_every_block_without_decompressing(tables):
    for data in tables:
        full = verify_table(BytesSource(data))
        quick = verify_table(BytesSource(data), decompress=False)
        assert full.ok and quick.ok
        assert (quick.blocks_checked, quick.bytes_checked, quick.blocks_by_kind) == (full.blocks_checked, full.bytes_checked, full.blocks_by_kind)
        assert quick.blocks_decompressed == 0
    snappy_fv5 = tables[0]
    assert verify_table(BytesSource(snappy_fv5)).blocks_decompressed > 0
    assert open_table(BytesSource(snappy_fv5)).verify(decompress=False).blocks_decompressed == 0


def test_decompress_false_misses_a_block_that_only_fails_to_decompress(tables):
    data = bytearray(tables[0])
    table = open_table(BytesSource(bytes(data)))
    assert table.checksum_type == ChecksumType.CRC32C
    offset, size = [b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA][2]
    assert data[offset + size] == 1  # snappy
    data[offset : offset + 2] = b"\xff\xff"  # the length header claims far more than the block holds
    stored = stored_block_checksum(ChecksumType.CRC32C, bytes(data[offset : offset + size]), 1)
    data[offset + size + 1 : offset + size + 5] = stored.to_bytes(4, "little")

    full = verify_table(BytesSource(bytes(data)))
    assert [(f.kind, f.offset) for f in full.findings] == [("decompression_failed", offset)]
    assert verify_table(BytesSource(bytes(data)), decompress=False).ok
    assert open_table(BytesSource(bytes(data))).verify(decompress=False).ok
    # A checksum mismatch is found either way.
    data[offset + 5] ^= 0x01
    assert [f.kind for f in verify_table(BytesSource(bytes(data)), decompress=False).findings] == ["block_checksum_mismatch"]


# -- read size -----------------------------------------------------------------------------------


class _RecordingSource:
    """A RandomAccess over bytes that records its reads and prefers ``preferred_read_size``."""

    def __init__(self, data: bytes, preferred_read_size: int | None):
        self._inner = BytesSource(data)
        self.size = self._inner.size
        self.preferred_read_size = preferred_read_size
        self.reads: list[int] = []

    def read(self, offset: int, length: int):
        self.reads.append(length)
        return self._inner.read(offset, length)


def test_verify_reads_in_the_size_the_source_prefers(tables, tmp_path):
    data = max(tables, key=len)
    default = _RecordingSource(data, None)
    assert verify_table(default).ok
    preferring = _RecordingSource(data, 2048)
    assert verify_table(preferring).ok
    assert max(preferring.reads) <= 2048 < max(default.reads)
    chosen = _RecordingSource(data, 2048)
    assert verify_table(chosen, chunk_size=1 << 20).ok  # the caller's choice wins
    assert max(chosen.reads) > 2048

    from repair.io.storage import LOCAL_READ_SIZE, default_storage

    path = tmp_path / "table.sst"
    path.write_bytes(data)
    with default_storage().open_input(str(path)) as local:
        assert local.preferred_read_size == LOCAL_READ_SIZE
