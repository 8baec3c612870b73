"""Decompression of RocksDB blocks, with RocksDB's framing of each codec.

The compression type byte follows every block (``include/rocksdb/compression_type.h``). Framing of
the stored payload (RocksDB ``util/compression.h``; ``compress_format_version`` is 2 for table
format_version >= 2 and 1 below, see ``GetCompressFormatForVersion`` in ``table/format.h``):

* Snappy: a raw snappy block, which carries its own varint length header; same for every version.
* Zlib: raw deflate (``window_bits`` -14 by default, a zlib header if a user chose positive bits);
  compress_format_version 2 prefixes a varint32 uncompressed size.
* BZip2: a bzip2 stream; version 2 prefixes a varint32 size.
* LZ4 / LZ4HC: a raw LZ4 *block*; version 2 prefixes a varint32 size, version 1 an 8-byte field of
  which the first 4 bytes are the little-endian size.
* ZSTD (and the old ``ZSTDNotFinal`` 0x40): always a varint32 size followed by a zstd frame.

Every decompression is bounded: the declared size is checked against ``max_size`` (and, for
snappy and LZ4, against the codec's largest possible expansion) before a buffer of that size is
allocated, and the output must have exactly the declared size.
"""

from __future__ import annotations

import bz2
import enum
import zlib

import cramjam

from repair.errors import FormatError
from repair.formats.bytes.coding import decode_varint32

#: Largest decompressed block accepted by default. RocksDB blocks are normally a few KiB to a few
#: MiB; a single huge value can make one block larger, hence the generous bound.
DEFAULT_MAX_BLOCK_SIZE = 256 << 20

# Largest expansion ratios of the codecs, used to reject absurd declared sizes before allocating.
_SNAPPY_MAX_RATIO = 32  # a 2-byte copy op yields at most 11 bytes, a 3-byte one 64
_LZ4_MAX_RATIO = 256  # each extra length byte adds at most 255


class CompressionType(enum.IntEnum):
    """Codes of the per-block compression type byte."""

    NONE = 0x00
    SNAPPY = 0x01
    ZLIB = 0x02
    BZIP2 = 0x03
    LZ4 = 0x04
    LZ4HC = 0x05
    XPRESS = 0x06
    ZSTD = 0x07
    ZSTD_NOT_FINAL = 0x40


def compression_name(code: int) -> str:
    """A display name for a compression type byte (``0x..`` for codes RocksDB does not define)."""
    try:
        return CompressionType(code).name.lower()
    except ValueError:
        return f"0x{code:02x}"


class DecompressionError(FormatError):
    """A block that does not decompress (corrupt payload, bad size prefix, unknown codec)."""


class UnsupportedCompressionError(DecompressionError):
    """A codec this toolkit cannot decompress (Xpress, custom codecs of format_version 7)."""


def decompress_block(
    compression_type: int,
    payload,
    format_version: int,
    *,
    offset: int = 0,
    max_size: int = DEFAULT_MAX_BLOCK_SIZE,
) -> bytes | bytearray | memoryview:
    """Decompress one stored block ``payload`` (trailer excluded) of the given compression type.

    ``offset`` is the block's file offset, used in errors. Returns the payload itself for type 0.
    """
    if compression_type == CompressionType.NONE:
        return payload
    view = memoryview(payload)
    framed_v2 = format_version >= 2
    try:
        if compression_type == CompressionType.SNAPPY:
            declared = _snappy_length(view, offset)
            _check_size(declared, len(view) * _SNAPPY_MAX_RATIO + 64, max_size, offset, compression_type)
            out = bytearray(declared)
            written = cramjam.snappy.decompress_raw_into(view, out)
            return _exact(out, written, declared, offset, compression_type)
        if compression_type in (CompressionType.ZSTD, CompressionType.ZSTD_NOT_FINAL):
            declared, start = _size_prefix(view, offset, compression_type)
            _check_size(declared, None, max_size, offset, compression_type)
            out = bytearray(declared)
            written = cramjam.zstd.decompress_into(view[start:], out) if declared else _zstd_empty(view[start:])
            return _exact(out, written, declared, offset, compression_type)
        if compression_type in (CompressionType.LZ4, CompressionType.LZ4HC):
            if framed_v2:
                declared, start = _size_prefix(view, offset, compression_type)
            else:
                if len(view) < 8:
                    raise DecompressionError("lz4 size field", offset, "8 bytes", len(view))
                declared, start = int.from_bytes(view[:4], "little"), 8
            _check_size(declared, (len(view) - start) * _LZ4_MAX_RATIO + 64, max_size, offset, compression_type)
            out = bytearray(declared)
            written = cramjam.lz4.decompress_block_into(view[start:], out) if declared else 0
            return _exact(out, written, declared, offset, compression_type)
        if compression_type == CompressionType.ZLIB:
            declared, start = _size_prefix(view, offset, compression_type) if framed_v2 else (None, 0)
            return _stream_decompress(_zlib_decompressor(view[start:]), view[start:], declared, max_size, offset, compression_type)
        if compression_type == CompressionType.BZIP2:
            declared, start = _size_prefix(view, offset, compression_type) if framed_v2 else (None, 0)
            return _stream_decompress(bz2.BZ2Decompressor(), view[start:], declared, max_size, offset, compression_type)
    except DecompressionError:
        raise
    except (cramjam.DecompressionError, zlib.error, OSError, ValueError, EOFError) as exc:
        raise DecompressionError(
            "compressed block", offset, f"a valid {compression_name(compression_type)} payload", "undecodable bytes", detail=str(exc)
        ) from None
    raise UnsupportedCompressionError(
        "compression type", offset, "none, snappy, zlib, bzip2, lz4, lz4hc or zstd", compression_name(compression_type)
    )


def _snappy_length(view: memoryview, offset: int) -> int:
    # Snappy's own header is the uncompressed length as a varint32.
    return decode_varint32(view, 0, len(view), "snappy uncompressed length", offset)[0]


def _size_prefix(view: memoryview, offset: int, compression_type: int) -> tuple[int, int]:
    """RocksDB's varint32 decompressed-size prefix (``compress_format_version`` 2, and ZSTD)."""
    return decode_varint32(view, 0, len(view), f"{compression_name(compression_type)} decompressed size", offset)


def _check_size(declared: int, codec_bound: int | None, max_size: int, offset: int, compression_type: int) -> None:
    limit = max_size if codec_bound is None else min(max_size, codec_bound)
    if declared > limit:
        raise DecompressionError(
            f"{compression_name(compression_type)} decompressed size",
            offset,
            f"at most {limit} bytes",
            declared,
            detail="larger than the block can expand to" if codec_bound is not None and declared <= max_size else None,
        )


def _exact(out: bytearray, written: int, declared: int, offset: int, compression_type: int) -> bytearray:
    if written != declared:
        raise DecompressionError(
            f"{compression_name(compression_type)} decompressed size", offset, f"{declared} bytes (declared)", f"{written} bytes"
        )
    return out


def _zstd_empty(frame: memoryview) -> int:
    """Decompress a frame declared empty; returns its real length (0 if it is indeed empty)."""
    return len(cramjam.zstd.decompress(frame))


def _zlib_decompressor(data: memoryview):
    # RocksDB writes raw deflate unless the user configured positive window bits (zlib header).
    # A zlib header is 0x78 followed by a byte making the pair a multiple of 31.
    if len(data) >= 2 and data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0:
        return zlib.decompressobj(zlib.MAX_WBITS)
    return zlib.decompressobj(-zlib.MAX_WBITS)


def _stream_decompress(decompressor, data: memoryview, declared: int | None, max_size: int, offset: int, compression_type: int) -> bytes:
    """Run a streaming decompressor with bounded output; checks the declared size when known."""
    if declared is not None:
        _check_size(declared, None, max_size, offset, compression_type)
    limit = (declared if declared is not None else max_size) + 1
    out = decompressor.decompress(data, limit)
    if len(out) >= limit:
        raise DecompressionError(
            f"{compression_name(compression_type)} decompressed size",
            offset,
            f"{declared} bytes (declared)" if declared is not None else f"at most {max_size} bytes",
            "more",
        )
    if not decompressor.eof:
        raise DecompressionError(
            "compressed block", offset, f"a complete {compression_name(compression_type)} stream", "a stream that ends early"
        )
    if declared is not None and len(out) != declared:
        raise DecompressionError(
            f"{compression_name(compression_type)} decompressed size", offset, f"{declared} bytes (declared)", f"{len(out)} bytes"
        )
    return out


def compress_block(compression_type: int, data: bytes, format_version: int) -> bytes:
    """Compress ``data`` with RocksDB's framing (the inverse of :func:`decompress_block`).

    Used by the table writer (:mod:`repair.formats.rocksdb.table.writer`); the codecs' own output may differ from RocksDB's bytes, but the
    framing is the same, so RocksDB can read it.
    """
    from repair.formats.bytes.coding import encode_varint

    data = bytes(data)
    prefix = encode_varint(len(data))
    if compression_type == CompressionType.NONE:
        return data
    if compression_type == CompressionType.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if compression_type in (CompressionType.ZSTD, CompressionType.ZSTD_NOT_FINAL):
        return prefix + bytes(cramjam.zstd.compress(data))
    if compression_type in (CompressionType.LZ4, CompressionType.LZ4HC):
        body = bytes(cramjam.lz4.compress_block(data, store_size=False))
        return (prefix if format_version >= 2 else len(data).to_bytes(8, "little")) + body
    if compression_type == CompressionType.ZLIB:
        compressor = zlib.compressobj(6, zlib.DEFLATED, -14)
        body = compressor.compress(data) + compressor.flush()
        return (prefix if format_version >= 2 else b"") + body
    if compression_type == CompressionType.BZIP2:
        return (prefix if format_version >= 2 else b"") + bz2.compress(data)
    raise ValueError(f"cannot compress with {compression_name(compression_type)}")
