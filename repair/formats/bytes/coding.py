"""RocksDB's primitive encodings: little-endian fixed-width integers and LevelDB varints.

Source: RocksDB ``util/coding.h``. Varints carry 7 bits per byte, least significant group first,
the high bit meaning "more bytes follow"; a varint32 takes at most 5 bytes, a varint64 at most 10.
"Signed" varint64 values are zigzag encoded (``PutVarsignedint64``).

:class:`LittleEndianReader` extends the project's bounded :class:`~repair.formats.bytes.binary.ByteReader`
with these encodings, so every read names its field and never runs past its end. The free functions
are the allocation-free fast paths used in hot loops (block entries, block handles).
"""

from __future__ import annotations

import struct

from repair.errors import FormatError, TruncatedError
from repair.formats.bytes.binary import ByteReader

U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")


def decode_varint(data, pos: int, end: int, max_bytes: int, field: str, base: int = 0) -> tuple[int, int]:
    """Decode one varint of at most ``max_bytes`` bytes from ``data[pos:end]``.

    Returns ``(value, next_pos)``. ``base`` is added to positions in errors (file offset of ``data``).
    """
    result = 0
    shift = 0
    start = pos
    limit = end if end - pos < max_bytes else pos + max_bytes
    while pos < limit:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if max_bytes == 5 and result > 0xFFFFFFFF:
                raise FormatError(field, base + start, "a varint32 below 2^32", result)
            return result, pos
        shift += 7
    if pos >= end and pos - start < max_bytes:
        raise TruncatedError(field, base + start, 1, 0)
    raise FormatError(field, base + start, f"a varint of at most {max_bytes} bytes", "a longer varint")


def decode_varint32(data, pos: int, end: int, field: str, base: int = 0) -> tuple[int, int]:
    """A varint32 (at most 5 bytes); fast path for the common one-byte case."""
    if pos < end:
        byte = data[pos]
        if byte < 0x80:
            return byte, pos + 1
    return decode_varint(data, pos, end, 5, field, base)


def decode_varint64(data, pos: int, end: int, field: str, base: int = 0) -> tuple[int, int]:
    """A varint64 (at most 10 bytes); fast paths for one to three bytes (sizes, offsets < 2 MiB)."""
    if pos + 2 < end:
        b0 = data[pos]
        if b0 < 0x80:
            return b0, pos + 1
        b1 = data[pos + 1]
        if b1 < 0x80:
            return (b0 & 0x7F) | (b1 << 7), pos + 2
        b2 = data[pos + 2]
        if b2 < 0x80:
            return (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14), pos + 3
    return decode_varint(data, pos, end, 10, field, base)


def zigzag_decode(value: int) -> int:
    """Inverse of RocksDB's ``i64ToZigzag``: 0, -1, 1, -2 ... are stored as 0, 1, 2, 3 ..."""
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    """Encode a non-negative integer as a LevelDB varint."""
    if value < 0:
        raise ValueError(f"varint of a negative value {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63) if value < 0 else value << 1


def length_prefixed(data: bytes) -> bytes:
    """``varint32 length`` followed by ``data`` (RocksDB ``PutLengthPrefixedSlice``)."""
    return encode_varint(len(data)) + bytes(data)


class LittleEndianReader(ByteReader):
    """A :class:`ByteReader` for RocksDB's little-endian and varint encodings."""

    __slots__ = ()

    def fixed32(self, field: str) -> int:
        start = self._need(4, field)
        return U32.unpack_from(self.data, start)[0]

    def fixed64(self, field: str) -> int:
        start = self._need(8, field)
        return U64.unpack_from(self.data, start)[0]

    def varint32(self, field: str) -> int:
        value, self.pos = decode_varint32(self.data, self.pos, self.end, field, self.base)
        return value

    def varint64(self, field: str) -> int:
        value, self.pos = decode_varint64(self.data, self.pos, self.end, field, self.base)
        return value

    def signed_varint64(self, field: str) -> int:
        return zigzag_decode(self.varint64(field))

    def length_prefixed(self, field: str) -> bytes:
        """``varint32`` length then that many bytes; the length is checked against what is left."""
        length = self.varint32(field + " length")
        return self.raw(length, field)
