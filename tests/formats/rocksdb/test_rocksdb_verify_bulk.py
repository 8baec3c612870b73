"""SST verification in bulk: the index decoder and the checksum comparison that work on many entries at once.

``sst_block.bulk_index_arrays`` decodes index blocks with a restart point at every entry column by
column (``pyarrow`` gathers), and ``checksum.mismatched_blocks`` compares the checksums of all blocks
of a chunk in one go. Both must answer exactly as the sequential decoders do, or decline (the bulk
index decoder returns ``None`` and the caller falls back). These tests check that on index blocks
encoded here (independently of the decoders), on real RocksDB tables and on damaged copies of them.
"""

from __future__ import annotations

import json
import random

import pytest

from repair.formats.bytes.coding import encode_varint
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table import block as sst_block
from repair.formats.rocksdb.table import sst
from repair.formats.rocksdb.table.block import BlockReader, bulk_index_arrays
from repair.formats.rocksdb.table.checksum import ChecksumType, mismatched_blocks, stored_block_checksum
from repair.formats.rocksdb.table.sst import BlockKind, open_table, verify_table
from tests.rocksdb_testlib import make_rocksdict_db, random_damage, sst_files

# -- the bulk index decoder --------------------------------------------------------------------


def _index_block(entries: list[tuple[bytes, int, int]], *, interval: int = 1) -> bytes:
    """An index block with delta-encoded values (format_version >= 4), as BlockBuilder writes one.

    Restart points every ``interval`` entries hold a full handle; the others share the first byte of
    the previous key (``shared`` 1: a size delta follows only when ``shared`` is not 0) and store the
    size delta, zigzag encoded.
    """
    out = bytearray()
    restarts = []
    previous_size = 0
    previous_key = b""
    for n, (key, offset, size) in enumerate(entries):
        if n % interval == 0:
            restarts.append(len(out))
            out += b"\x00" + encode_varint(len(key)) + key + encode_varint(offset) + encode_varint(size)
        else:
            assert key[:1] == previous_key[:1] != b""
            delta = size - previous_size
            out += b"\x01" + encode_varint(len(key) - 1) + key[1:]
            out += encode_varint(delta * 2 if delta >= 0 else -delta * 2 - 1)
        previous_size = size
        previous_key = key
    for point in restarts:
        out += point.to_bytes(4, "little")
    out += len(restarts).to_bytes(4, "little")
    return bytes(out)


def _sequential(data: bytes):
    """What the sequential decoder says: ``(offsets, sizes)``, or the error's type name."""
    try:
        handles = BlockReader(data, 0, block_kind="index").index_handles(value_delta_encoded=True)
    except sst.FormatError as exc:
        return type(exc).__name__
    return [h.offset for h in handles], [h.size for h in handles]


def _contiguous(rng: random.Random, *, n: int, first: int = 0, max_size: int = 5000, max_key: int = 40) -> list:
    entries = []
    offset = first
    for _ in range(n):
        size = rng.randrange(max_size)
        entries.append((rng.randbytes(rng.randrange(max_key)), offset, size))
        offset += size + 5
    return entries


@pytest.fixture
def bulk_always(monkeypatch):
    """The bulk decoder for every index block, however small."""
    monkeypatch.setattr(sst_block, "BULK_INDEX_MIN_ENTRIES", 1)


def _bulk_decodes(entries) -> bool:
    """The bulk decoder's domain: key lengths below 2^14, each varint at most 5 bytes, a handle at most 8."""
    return all(
        len(key) < 1 << 14 and len(encode_varint(offset)) <= 5 and len(encode_varint(size)) <= 5
        and len(encode_varint(offset) + encode_varint(size)) <= 8
        for key, offset, size in entries
    )


@pytest.mark.parametrize("shape, bulk_answers", [
    (dict(n=2000, max_size=5000, max_key=40), True),  # short keys, 2-byte sizes, 1- to 4-byte offsets
    (dict(n=300, max_size=100, max_key=2), True),  # 1-byte sizes and keys (and empty keys)
    (dict(n=400, max_size=300_000, max_key=300), True),  # 2-byte key lengths, 3-byte sizes
    (dict(n=300, max_size=5000, max_key=20, first=1 << 33), True),  # 5-byte offsets
    (dict(n=50, max_size=1 << 30, max_key=20, first=(1 << 35) - (1 << 31)), False),  # then 6-byte offsets
    (dict(n=300, max_size=1 << 24, max_key=20, first=1 << 30), False),  # 5 + 4 bytes: longer than 8
])
def test_bulk_index_decoder_answers_like_the_sequential_decoder(bulk_always, shape, bulk_answers):
    entries = _contiguous(random.Random(11), **shape)
    assert _bulk_decodes(entries) == bulk_answers
    data = _index_block(entries)
    expected = ([o for _, o, _ in entries], [s for _, _, s in entries])
    assert _sequential(data) == expected
    bulk = bulk_index_arrays(data, BlockReader(data, 0, block_kind="index").layout)
    # Declined (None) outside its domain: the caller then runs the sequential decoder.
    assert bulk == (expected if bulk_answers else None)


def test_bulk_index_decoder_declines_what_it_does_not_decode(bulk_always):
    rng = random.Random(5)
    entries = [(b"k" + key, offset, size) for key, offset, size in _contiguous(rng, n=600)]
    # Size deltas between restart points (index_block_restart_interval > 1): declined.
    data = _index_block(entries, interval=4)
    assert bulk_index_arrays(data, BlockReader(data, 0, block_kind="index").layout) is None
    assert _sequential(data) == ([o for _, o, _ in entries], [s for _, _, s in entries])
    # A key length of 3 bytes (keys of 16 KiB and more): declined.
    data = _index_block([(b"k" * 20000, 0, 100)] + entries[1:])
    assert bulk_index_arrays(data, BlockReader(data, 0, block_kind="index").layout) is None
    assert _sequential(data)[1][0] == 100


def test_bulk_index_decoder_on_damaged_blocks(bulk_always):
    """Random bytes changed in valid index blocks: the bulk decoder declines or gives the sequential answer."""
    rng = random.Random(7)
    blocks = [_index_block(_contiguous(rng, n=n, max_key=k)) for n, k in ((40, 12), (300, 30), (120, 200))]
    answered = declined = 0
    for _ in range(4000):
        data = bytearray(rng.choice(blocks))
        for _ in range(rng.choice([1, 1, 2, 3])):
            where = rng.randrange(len(data)) if rng.random() < 0.7 else len(data) - 1 - rng.randrange(min(len(data), 64))
            data[where] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        data = bytes(data)
        try:
            layout = BlockReader(data, 0, block_kind="index").layout
        except sst.FormatError:
            continue
        bulk = bulk_index_arrays(data, layout)
        if bulk is None:
            declined += 1
        else:
            assert bulk == _sequential(data)
            answered += 1
    assert answered > 1000 and declined > 500  # both outcomes are exercised


# -- the bulk checksum comparison ----------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ChecksumType))
@pytest.mark.parametrize("base_context", [0, 0x9E3779B9])
def test_mismatched_blocks_finds_exactly_the_damaged_blocks(kind, base_context):
    rng = random.Random(int(kind) * 31 + (base_context & 7))
    data = bytearray(rng.randbytes(64))
    starts, ends, offsets = [], [], []
    file_base = (1 << 32) - 40_000  # offsets on both sides of 2^32: the context uses both halves
    for _ in range(300):
        payload = rng.randbytes(rng.randrange(0, 300))
        type_byte = rng.choice([0, 1, 4, 7])
        start = len(data)
        stored = stored_block_checksum(kind, payload, type_byte, base_context, file_base + start)
        data += payload + bytes([type_byte]) + stored.to_bytes(4, "little")
        starts.append(start)
        ends.append(start + len(payload))
        offsets.append(file_base + start)
    clean = bytes(data)
    stops = [end + 1 for end in ends]
    assert mismatched_blocks(kind, clean, starts, stops, base_context_checksum=base_context, offsets=offsets) == []
    damaged = bytearray(clean)
    hit = sorted(rng.sample(range(300), 25))
    for k in hit:
        # A changed payload byte, type byte or stored checksum byte.
        damaged[rng.randrange(starts[k], ends[k] + 5)] ^= 1 << rng.randrange(8)
    found = mismatched_blocks(kind, memoryview(bytes(damaged)), starts, stops, base_context_checksum=base_context, offsets=offsets)
    assert found == ([] if kind == ChecksumType.NONE else hit)


# -- whole tables --------------------------------------------------------------------------------

# (format_version, checksum, compression, partitioned): tables with more than 256 data blocks, so that
# the bulk index decoder runs at its default threshold.
CONFIGS = [
    (5, "crc32c", "snappy", False),
    (6, "crc32c", "snappy", False),  # context checksums
    (6, "xxh3", "lz4", False),
    (5, "xxhash", "zstd", False),
    (5, "xxhash64", "none", False),
    (4, "crc32c", "snappy", True),  # partitioned index: the partitions go through the same decoder
]


@pytest.fixture(scope="module")
def big_tables(tmp_path_factory) -> list[bytes]:
    result = []
    for n, (fv, checksum, compression, partitioned) in enumerate(CONFIGS):
        db = tmp_path_factory.mktemp(f"big{n}") / "db"
        make_rocksdict_db(db, format_version=fv, checksum=checksum, compression=compression, block_size=128,
                          partitioned=partitioned, keys=3000)
        result += [path.read_bytes() for path in sst_files(db)]
    return result


def _report(data: bytes, *, fast: bool, chunk_size: int, decompress: bool, monkeypatch) -> str:
    monkeypatch.setattr(sst, "_FAST_PATHS", fast)
    try:
        return json.dumps(verify_table(BytesSource(data), chunk_size=chunk_size, decompress=decompress).to_json())
    except Exception as exc:  # noqa: BLE001 - compared between the paths, like any result
        return f"{type(exc).__name__}: {exc}"


def test_big_tables_use_the_bulk_index_decoder(big_tables):
    used = 0
    for data in big_tables:
        table = open_table(BytesSource(data))
        handle = table.index_partitions()[0] if table.is_partitioned_index else table.index_handle
        kind = BlockKind.INDEX_PARTITION if table.is_partitioned_index else BlockKind.INDEX
        reader = table.block_reader(handle, kind)
        if reader.layout.num_restarts >= sst_block.BULK_INDEX_MIN_ENTRIES:
            bulk = bulk_index_arrays(reader.data, reader.layout)
            assert bulk is not None
            handles = reader.index_handles(value_delta_encoded=True)
            assert bulk == ([h.offset for h in handles], [h.size for h in handles])
            used += 1
    assert used >= 5


def test_fast_and_general_paths_agree_on_big_tables(big_tables, monkeypatch):
    rng = random.Random(3)
    with_findings = 0
    for data in big_tables:
        for chunk_size in (4096, 1 << 20):
            for decompress in (True, False):
                fast = _report(data, fast=True, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
                assert fast == _report(data, fast=False, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
                assert json.loads(fast)["ok"]
        for _ in range(25):
            damaged = random_damage(rng, data)
            chunk_size = rng.choice([4096, 1 << 20])
            decompress = rng.random() < 0.7
            fast = _report(damaged, fast=True, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
            assert fast == _report(damaged, fast=False, chunk_size=chunk_size, decompress=decompress, monkeypatch=monkeypatch)
            with_findings += '"ok": false' in fast
    assert with_findings > 60


def test_every_flipped_byte_of_a_data_block_is_named_with_its_offset(big_tables):
    """Through the bulk paths: each flipped byte of a block (payload or trailer) is found, at that block."""
    data = big_tables[0]
    table = open_table(BytesSource(data))
    blocks = [b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA]
    assert len(blocks) > sst_block.BULK_INDEX_MIN_ENTRIES
    for offset, size in [blocks[0], blocks[len(blocks) // 2], blocks[-1]]:
        for where in range(offset, offset + size + 5):
            damaged = bytearray(data)
            damaged[where] ^= 0x10
            report = verify_table(BytesSource(bytes(damaged)), decompress=False)
            assert [(f.kind, f.offset) for f in report.findings] == [("block_checksum_mismatch", offset)]
