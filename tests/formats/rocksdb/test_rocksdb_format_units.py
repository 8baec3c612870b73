"""Corner cases of the RocksDB decoders on hand-built bytes: checksums, compression framing, footers."""

from __future__ import annotations

import bz2
import zlib

import pytest
import xxhash

from repair.errors import FormatError, TruncatedError
from repair.formats.bytes.coding import decode_varint32, decode_varint64, encode_varint, zigzag_decode, zigzag_encode
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.block import BlockReader, InternalKey, TableFormatError
from repair.formats.rocksdb.table.checksum import (
    ChecksumType,
    block_checksum,
    buffer_checksum,
    checksum_function,
    context_modifier,
    crc32c,
    mask_crc,
    unmask_crc,
)
from repair.formats.rocksdb.table.compression import (
    CompressionType,
    DecompressionError,
    UnsupportedCompressionError,
    compress_block,
    decompress_block,
)
from repair.formats.rocksdb.table.sst import decode_footer, open_table, verify_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table


def test_crc32c_and_masking():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for value in (0, 1, 0xE3069283, 0xFFFFFFFF):
        assert unmask_crc(mask_crc(value)) == value
    assert mask_crc(0) == 0xA282EAD8


def test_block_checksums_cover_payload_and_type_byte():
    payload = b"some block contents" * 10
    assert block_checksum(ChecksumType.CRC32C, payload, 1) == mask_crc(crc32c(payload + b"\x01"))
    assert block_checksum(ChecksumType.XXHASH32, payload, 1) == xxhash.xxh32_intdigest(payload + b"\x01")
    assert block_checksum(ChecksumType.XXHASH64, payload, 1) == xxhash.xxh64_intdigest(payload + b"\x01") & 0xFFFFFFFF
    # XXH3: hash of the payload only, then the type byte mixed in by multiplication (format.cc).
    assert block_checksum(ChecksumType.XXH3, payload, 7) == (xxhash.xxh3_64_intdigest(payload) & 0xFFFFFFFF) ^ ((7 * 0x6B9083D9) & 0xFFFFFFFF)
    assert block_checksum(ChecksumType.NONE, payload, 1) == 0
    for kind in (1, 2, 3, 4):
        assert checksum_function(kind)(memoryview(payload), 5) == block_checksum(kind, payload, 5)
        # A whole buffer's checksum treats its last byte as the type byte.
        assert buffer_checksum(kind, payload + b"\x05") == block_checksum(kind, payload, 5)
    assert buffer_checksum(ChecksumType.XXH3, b"") == 0


def test_context_modifier():
    assert context_modifier(0, 12345) == 0
    assert context_modifier(0x12345678, 100) == 0x12345678 ^ 100
    # Offsets above 4 GiB mix in the high half.
    assert context_modifier(0x12345678, (3 << 32) + 5) == 0x12345678 ^ 8


def test_varints():
    for value in (0, 1, 127, 128, 300, 2**32 - 1, 2**63 + 5):
        encoded = encode_varint(value)
        assert decode_varint64(encoded, 0, len(encoded), "v") == (value, len(encoded))
    assert decode_varint32(b"\xff\xff\xff\xff\x0f", 0, 5, "v") == (2**32 - 1, 5)
    with pytest.raises(FormatError):
        decode_varint32(b"\xff\xff\xff\xff\x1f", 0, 5, "v")  # above 2^32
    with pytest.raises(TruncatedError):
        decode_varint64(b"\x80\x80", 0, 2, "v")
    with pytest.raises(FormatError):
        decode_varint64(b"\x80" * 11, 0, 11, "v")
    for value in (0, -1, 1, -(2**40), 2**40):
        assert zigzag_decode(zigzag_encode(value)) == value


@pytest.mark.parametrize("codec", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("format_version", [1, 2])
def test_compression_framing_round_trips(codec, format_version):
    data = b"".join(b"entry %d, " % i for i in range(2000))
    framed = compress_block(codec, data, format_version)
    assert bytes(decompress_block(codec, framed, format_version)) == data
    if codec in (2, 3, 4, 5) and format_version >= 2:
        # compress_format_version 2: varint32 decompressed size first.
        assert framed.startswith(encode_varint(len(data)))


def test_framing_details_match_rocksdb():
    data = b"abc" * 1000
    # fv1 LZ4: 8-byte little-endian size field, then the raw block.
    framed = compress_block(CompressionType.LZ4, data, 1)
    assert int.from_bytes(framed[:4], "little") == len(data) and framed[4:8] == b"\0\0\0\0"
    # Zlib: raw deflate (window_bits -14), and also a zlib-wrapped stream if a user chose positive bits.
    wrapped = encode_varint(len(data)) + zlib.compress(data)
    assert bytes(decompress_block(CompressionType.ZLIB, wrapped, 2)) == data
    assert bytes(decompress_block(CompressionType.BZIP2, bz2.compress(data), 1)) == data


def test_decompression_is_bounded():
    data = b"\0" * 100_000
    framed = compress_block(CompressionType.ZSTD, data, 5)
    with pytest.raises(DecompressionError):
        decompress_block(CompressionType.ZSTD, framed, 5, max_size=50_000)
    # A snappy header claiming 4 GiB for a 10-byte block is refused before allocating anything.
    with pytest.raises(DecompressionError, match="at most"):
        decompress_block(CompressionType.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\0" * 5, 5)
    # A declared size that disagrees with the stream.
    lying = encode_varint(len(data) + 1) + framed[len(encode_varint(len(data))) :]
    with pytest.raises(DecompressionError):
        decompress_block(CompressionType.ZSTD, lying, 5)
    with pytest.raises(DecompressionError):
        decompress_block(CompressionType.ZLIB, compress_block(CompressionType.ZLIB, data, 2)[:-20], 2)
    with pytest.raises(UnsupportedCompressionError):
        decompress_block(CompressionType.XPRESS, b"abc", 5)


ENTRIES = [(InternalKey(b"key%04d" % i, 100 + i, 1), b"value%d" % i) for i in range(300)]


@pytest.mark.parametrize("format_version", [0, 1, 2, 3, 4, 5, 6])
def test_every_footer_version_reads_back(format_version):
    data = build_table(ENTRIES, TableOptions(format_version=format_version, block_size=256, index_block_restart_interval=3))
    table = open_table(BytesSource(data))
    assert table.format_version == format_version
    assert table.footer.is_legacy == (format_version == 0)
    assert table.footer.size == (48 if format_version == 0 else 53)
    assert (table.footer.index_handle is None) == (format_version >= 6)
    assert [(e.user_key, e.seqno, e.value) for e in table.entries()] == [(k.user_key, k.seqno, v) for k, v in ENTRIES]
    assert verify_table(BytesSource(data)).ok


def _footer_error(data: bytes) -> TableFormatError:
    with pytest.raises(TableFormatError) as info:
        decode_footer(data[-53:], len(data))
    return info.value


def test_footer_problems():
    data = bytearray(build_table(ENTRIES, TableOptions(format_version=6)))
    assert _footer_error(bytes(data[:-12]) + (8).to_bytes(4, "little") + bytes(data[-8:])).kind == "unsupported_format_version"
    bad_type = bytearray(data)
    bad_type[-53] = 9
    assert _footer_error(bytes(bad_type)).kind == "unsupported_checksum_type"
    bad_sum = bytearray(data)
    bad_sum[-53 + 20] ^= 1  # an ignored padding byte, but covered by the footer checksum
    assert _footer_error(bytes(bad_sum)).kind == "footer_checksum_mismatch"
    bad_ext = bytearray(data)
    bad_ext[-52] = 0
    assert _footer_error(bytes(bad_ext)).kind == "bad_footer"
    # Reserved bytes must be zero; they are covered by the footer checksum, so fix it up to get there.
    reserved = bytearray(data)
    reserved[-20] = 1
    assert _footer_error(bytes(reserved)).kind == "footer_checksum_mismatch"
    footer = bytearray(reserved[-53:])
    footer[5:9] = bytes(4)
    base = int.from_bytes(footer[9:13], "little")
    fixed = (buffer_checksum(footer[0], bytes(footer)) + context_modifier(base, len(data) - 53)) & 0xFFFFFFFF
    reserved[-48:-44] = fixed.to_bytes(4, "little")
    assert _footer_error(bytes(reserved)).kind == "unsupported_feature"


def test_block_layout_problems():
    block = BlockReader(b"\x00\x01\x01k" + b"v" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), 1000)
    assert list(block.entries()) == [(0, b"k", b"v")]
    with pytest.raises(TableFormatError) as info:
        BlockReader(b"\x00\x01\x01kv" + (0).to_bytes(4, "little") + (50).to_bytes(4, "little"), 1000)
    assert info.value.field == "restart count" and info.value.offset == 1000 + 9
    with pytest.raises(TableFormatError):
        BlockReader(b"ab", 0)
    shared_too_long = BlockReader(b"\x05\x01\x01kv" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), 0)
    with pytest.raises(TableFormatError, match="shared key length"):
        list(shared_too_long.entries())
    value_past_end = BlockReader(b"\x00\x01\x09kv" + (0).to_bytes(4, "little") + (1).to_bytes(4, "little"), 0)
    with pytest.raises(TableFormatError):
        list(value_past_end.entries())


def test_block_handle_past_the_footer_is_reported():
    data = bytearray(build_table(ENTRIES, TableOptions(format_version=5, block_size=256)))
    table = open_table(BytesSource(bytes(data)))
    # Rewrite the index so that one handle points past the end: build a table whose index we patch.
    first = table.top_level_index[0]
    from repair.formats.rocksdb.table.block import BlockHandle

    table.top_level_index[0] = BlockHandle(first.offset, len(data) * 2)
    report = table.verify()
    assert [(f.kind, f.block_kind, f.offset) for f in report.findings] == [("bad_block_handle", "data", first.offset)]
