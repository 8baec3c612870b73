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
