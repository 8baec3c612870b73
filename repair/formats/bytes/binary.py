"""A bounded reader over bytes, used by every decoder.

Java's ``DataOutputStream`` writes big-endian integers and "modified UTF-8" strings; Flink's
``_metadata`` and serializer snapshots are made of them. Each read names the field it reads so that a
failure says which field, at which offset, expected what and found what. Lengths read from the data
are checked against what is left before anything is allocated.
"""

from __future__ import annotations

import struct

from repair.errors import FormatError, TruncatedError

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ByteReader:
    """Reads big-endian values from ``data`` starting at ``offset``; never reads past ``end``."""

    __slots__ = ("data", "pos", "end", "base")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None, base: int = 0):
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = offset
        # An end past the data (a corrupt length or offset computed by the caller) is the data's end:
        # reads stop with a TruncatedError there, never with struct's or IndexError.
        self.end = len(self.data) if end is None else min(end, len(self.data))
        #: Added to positions in error messages, for readers over a slice of a larger file.
        self.base = base

    # -- positions -------------------------------------------------------------------------------
    @property
    def offset(self) -> int:
        """Position in the file (``base`` + position in ``data``)."""
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def _need(self, n: int, field: str) -> int:
        start = self.pos
        if n > self.end - start:
            raise TruncatedError(field, self.base + start, n, self.end - start)
        self.pos = start + n
        return start

    # -- primitives ------------------------------------------------------------------------------
    def u8(self, field: str) -> int:
        start = self._need(1, field)
        return self.data[start]

    def i8(self, field: str) -> int:
        value = self.u8(field)
        return value - 256 if value > 127 else value

    def bool(self, field: str) -> bool:
        start = self.pos
        value = self.u8(field)
        if value > 1:
            raise FormatError(field, self.base + start, "a boolean (0 or 1)", value)
        return value == 1

    def i16(self, field: str) -> int:
        start = self._need(2, field)
        return _I16.unpack_from(self.data, start)[0]

    def u16(self, field: str) -> int:
        start = self._need(2, field)
        return _U16.unpack_from(self.data, start)[0]

    def i32(self, field: str) -> int:
        start = self._need(4, field)
        return _I32.unpack_from(self.data, start)[0]

    def i64(self, field: str) -> int:
        start = self._need(8, field)
        return _I64.unpack_from(self.data, start)[0]

    def raw(self, n: int, field: str) -> bytes:
        """``n`` bytes; ``n`` is checked against what is left before anything is copied."""
        if n < 0:
            raise FormatError(field, self.offset, "a length >= 0", n)
        start = self._need(n, field)
        return bytes(self.data[start : start + n])

    def skip(self, n: int, field: str) -> None:
        if n < 0:
            raise FormatError(field, self.offset, "a length >= 0", n)
        self._need(n, field)

    # -- checked values --------------------------------------------------------------------------
    def count(self, field: str, *, item_size: int = 1, maximum: int | None = None) -> int:
        """An ``int`` count of items that each take at least ``item_size`` bytes.

        A negative count, or one that cannot fit in the remaining bytes, is a :class:`FormatError`:
        this is what keeps a corrupt length from allocating gigabytes or looping for hours.
        """
        start = self.offset
        value = self.i32(field)
        if value < 0:
            raise FormatError(field, start, "a count >= 0", value)
        limit = self.remaining // max(item_size, 1)
        if maximum is not None:
            limit = min(limit, maximum)
        if value > limit:
            raise FormatError(field, start, f"a count <= {limit} (bytes left: {self.remaining})", value)
        return value

    def expect_i32(self, expected: int, field: str) -> int:
        start = self.offset
        value = self.i32(field)
        if value != expected:
            raise FormatError(field, start, f"0x{expected & 0xFFFFFFFF:08X}", f"0x{value & 0xFFFFFFFF:08X}")
        return value

    def utf(self, field: str) -> str:
        """A Java ``writeUTF`` string: unsigned 16-bit length, then modified UTF-8."""
        length = self.u16(field + " length")
        start = self.offset
        raw = self.raw(length, field)
        try:
            return decode_modified_utf8(raw)
        except ValueError as exc:
            raise FormatError(field, start, "modified UTF-8 text", raw[:32].hex(), detail=str(exc)) from None


def decode_modified_utf8(raw: bytes) -> str:
    """Decode Java's modified UTF-8 (``C0 80`` for U+0000, surrogate pairs as two 3-byte sequences)."""
    try:
        text = raw.decode("utf-8")
        if "\x00" not in text:
            return text
    except UnicodeDecodeError:
        pass
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b < 0x80:
            units.append(b)
            i += 1
        elif b & 0xE0 == 0xC0 and i + 1 < n and raw[i + 1] & 0xC0 == 0x80:
            units.append(((b & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif b & 0xF0 == 0xE0 and i + 2 < n and raw[i + 1] & 0xC0 == 0x80 and raw[i + 2] & 0xC0 == 0x80:
            units.append(((b & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError(f"invalid byte 0x{b:02x} at index {i}")
    # UTF-16 code units to text, pairing surrogates.
    return b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be", errors="surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    """Inverse of :func:`decode_modified_utf8` (used by encoders and tests)."""
    out = bytearray()
    data = text.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(data), 2):
        u = (data[i] << 8) | data[i + 1]
        if 0 < u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
        else:
            out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)
