"""``StringValue.writeString``'s format, read: how Flink's ``StringSerializer`` (and ``StringUtils.writeString``,
e.g. in ``AvroSerializerSnapshot``) writes a String. A module of its own so that the serializer
snapshot reader and the value decoders share it."""

from __future__ import annotations

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader


def _varint7(r: ByteReader, field: str) -> int:
    """``StringValue``'s varint: 7 bits per byte, least significant first, high bit = more."""
    value = r.u8(field)
    if value < 0x80:
        return value
    value &= 0x7F
    shift = 7
    while True:
        at = r.offset
        byte = r.u8(field)
        if shift > 28:
            raise FormatError(field, at, "a varint of at most 5 bytes", "a longer varint")
        if byte < 0x80:
            return value | (byte << shift)
        value |= (byte & 0x7F) << shift
        shift += 7


def read_string_value(r: ByteReader) -> str | None:
    """``StringValue.readString``: length+1 (0 = null), then UTF-16 code units as varints."""
    at = r.offset
    length = _varint7(r, "string length")
    if length == 0:
        return None
    length -= 1
    if length > r.remaining:  # every char takes at least one byte
        raise FormatError("string length", at, f"at most {r.remaining} chars", length)
    data, pos = r.data, r.pos
    end = pos + length
    if end <= r.end:
        chunk = bytes(data[pos:end])
        if chunk.isascii():  # every char one byte: the common case, checked in C
            r.pos = end
            return chunk.decode("ascii")
    units = bytearray()
    for _ in range(length):
        unit = _varint7(r, "string char")
        if unit > 0xFFFF:
            raise FormatError("string char", r.offset, "a UTF-16 code unit", unit)
        units += unit.to_bytes(2, "big")
    return units.decode("utf-16-be", errors="surrogatepass")
