"""Java ``DataOutputStream`` writing, and the strict string read the Flink decoders share.

:class:`ByteWriter` is the inverse of :class:`repair.formats.bytes.binary.ByteReader`: big-endian integers and
Java ``writeUTF`` strings. The encoders (``encode_metadata`` and friends) use it to re-create files byte
for byte.

:func:`read_utf` reads a ``writeUTF`` string and also insists that it is in the *canonical* form
``writeUTF`` produces (no overlong sequences, no raw NUL byte, no 4-byte UTF-8). Java's ``readUTF`` is
more lenient, but Java never writes anything else, so a non-canonical string is corruption; rejecting
it is what guarantees that decoding and re-encoding give back the same bytes.
"""

from __future__ import annotations

import struct

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader, encode_modified_utf8

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: Java ``writeUTF`` refuses strings whose modified UTF-8 form is longer than this.
MAX_UTF_BYTES = 0xFFFF


def read_utf(reader: ByteReader, field: str) -> str:
    """A Java ``writeUTF`` string (u16 length, modified UTF-8) in the canonical form Java writes."""
    start = reader.offset
    begin = reader.pos + 2
    text = reader.utf(field)
    raw = bytes(reader.data[begin : reader.pos])
    if not (raw.isascii() and b"\x00" not in raw) and encode_modified_utf8(text) != raw:
        raise FormatError(
            field,
            start + 2,
            "modified UTF-8 as Java writeUTF writes it",
            raw[:32].hex(),
            detail="non-canonical encoding (overlong, raw NUL or 4-byte sequence)",
        )
    return text


class ByteWriter:
    """Collects big-endian values like ``java.io.DataOutputStream``."""

    __slots__ = ("_out",)

    def __init__(self) -> None:
        self._out = bytearray()

    def __len__(self) -> int:
        return len(self._out)

    def getvalue(self) -> bytes:
        return bytes(self._out)

    def u8(self, value: int) -> None:
        self._out.append(value & 0xFF)

    def bool(self, value: bool) -> None:
        self._out.append(1 if value else 0)

    def i16(self, value: int) -> None:
        self._out += _I16.pack(value)

    def u16(self, value: int) -> None:
        self._out += struct.pack(">H", value)

    def i32(self, value: int) -> None:
        self._out += _I32.pack(value)

    def i64(self, value: int) -> None:
        self._out += _I64.pack(value)

    def raw(self, data: bytes) -> None:
        self._out += data

    def utf(self, text: str) -> None:
        """Java ``writeUTF``: u16 byte length, then modified UTF-8."""
        data = encode_modified_utf8(text)
        if len(data) > MAX_UTF_BYTES:
            raise ValueError(f"string of {len(data)} bytes is too long for writeUTF")
        self.u16(len(data))
        self._out += data
