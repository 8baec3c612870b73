"""Flink's wire formats written independently of the decoders under test (for hand-built entries)."""

from __future__ import annotations


def string_value(text: str | None) -> bytes:
    """``StringValue.writeString``: length+1 (0 for null), then each UTF-16 code unit as a varint
    (7 bits per byte, least significant first, high bit = more)."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(0x80 | (n & 0x7F))
            n >>= 7
        out.append(n)
        return bytes(out)

    if text is None:
        return b"\x00"
    units = text.encode("utf-16-be", errors="surrogatepass")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    return varint(len(codes) + 1) + b"".join(varint(c) for c in codes)


#: ``RowKind.toByteValue()`` by ``RowKind.shortString()``.
ROW_KIND_BYTES = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


def row(kind: str | None, fields: list[bytes | None]) -> bytes:
    """``RowSerializer.serialize``: ``fillMask`` (``mask[0] = kind & 1``, ``mask[1] = kind & 2``, then
    one flag per field, true when null; no kind flags when ``kind`` is None, the legacy mode) written by
    ``MaskUtils.writeMask`` (8 flags a byte, first flag in the highest bit, the last byte's free bits
    0), then the bytes of the fields that are not null."""
    flags = [] if kind is None else [bool(ROW_KIND_BYTES[kind] & 1), bool(ROW_KIND_BYTES[kind] & 2)]
    flags += [f is None for f in fields]
    mask = bytearray()
    for i in range(0, len(flags), 8):
        byte = 0
        chunk = flags[i : i + 8]
        for flag in chunk:
            byte = (byte << 1) | flag
        mask.append(byte << (8 - len(chunk)))
    return bytes(mask) + b"".join(f for f in fields if f is not None)


def nullable(value: bytes | None, padding: int = 0) -> bytes:
    """``NullableSerializer.serialize``: ``bool isNull``, then ``padding`` zero bytes or the value."""
    return b"\x01" + bytes(padding) if value is None else b"\x00" + value
