"""Values Flink's ``KryoSerializer`` wrote (generic types: a ``keyBy`` returning ``Object``, a
``ValueState<Object>``), for the classes Kryo registers itself, the same in Kryo 2.24 (Flink 1.x) and
Kryo 5 (Flink 2.x), checked against real Flink 1.20 and 2.1 state (fixtures ``flink-*-kryo``).

``Kryo.writeClassAndObject``: the class as a varint (7 bits a byte, least significant first; ``0``
null, ``1`` a class written by name, else the registration id + 2), then, for classes whose objects
Kryo tracks by reference (all but the primitive wrappers), a reference marker varint (``1`` a new
object; ``0`` null; others back-references), then the object. Kryo's own registrations come first in
every ``Kryo`` instance, so their ids do not depend on the user's: 0 ``int``/``Integer`` (zig-zag
varint), 1 ``String``, 3 ``boolean`` (one byte), 4 ``byte``, 7 ``long``/``Long`` (zig-zag varlong of up
to 9 bytes, the ninth holding 8 bits).

A ``String`` is either ASCII (no high bit but on its last byte, which carries 0x80) or a length + 1
(0: null) in a varint whose first byte has 0x80 as its flag and 6 bits (0x40: more bytes), followed by
UTF-16 code units each in 1 (<= 0x7F), 2 (<= 0x7FF) or 3 bytes.

Anything else (floats, chars, shorts and doubles, whose fixed-width byte order differs between the
Kryo generations; classes written by name; user registrations; back-references) raises
:class:`~repair.formats.flink.values.UnsupportedSerializerError` with the reason, so the raw bytes
are kept.
"""

from __future__ import annotations

from typing import Any, Callable

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader

#: Kryo's own registration ids (``Kryo`` constructor, 2.24 and 5).
INT, STRING, FLOAT, BOOLEAN, BYTE, CHAR, SHORT, LONG, DOUBLE = range(9)
_NAMES = {FLOAT: "float", CHAR: "char", SHORT: "short", DOUBLE: "double"}


def read_varint(r: ByteReader, field: str) -> int:
    """``Input.readVarInt(true)``: up to 5 bytes, 7 bits each, least significant first."""
    value = 0
    for shift in range(0, 35, 7):
        byte = r.u8(field)
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFF
    raise FormatError(field, r.offset - 1, "a varint of at most 5 bytes", "a longer one")


def _unzigzag(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return (value >> 1) ^ -(value & 1)


def read_varlong(r: ByteReader, field: str) -> int:
    """``Input.readLong(false)`` / ``readVarLong(false)``: 8 bytes of 7 bits, a ninth of 8, zig-zag."""
    value = 0
    for shift in range(0, 56, 7):
        byte = r.u8(field)
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return _unzigzag(value, 64)
    return _unzigzag(value | r.u8(field) << 56, 64)


def read_string(r: ByteReader) -> str | None:
    """``Input.readString``."""
    first = r.u8("kryo string")
    if not first & 0x80:  # ASCII: the last char has its high bit set
        chars = bytearray([first])
        while not chars[-1] & 0x80:
            chars.append(r.u8("kryo ascii string"))
        chars[-1] &= 0x7F
        return chars.decode("ascii")
    length = first & 0x3F
    if first & 0x40:
        for shift in range(6, 34, 7):
            byte = r.u8("kryo string length")
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
    if length == 0:
        return None
    count = length - 1
    if count > r.remaining:
        raise FormatError("kryo string length", r.offset, f"at most {r.remaining} chars", count)
    units = bytearray()
    for _ in range(count):
        at = r.offset
        b = r.u8("kryo string char")
        kind = b >> 4
        if kind < 8:
            unit = b
        elif kind in (12, 13):
            unit = (b & 0x1F) << 6 | r.u8("kryo string char") & 0x3F
        elif kind == 14:
            unit = (b & 0x0F) << 12 | (r.u8("kryo string char") & 0x3F) << 6 | r.u8("kryo string char") & 0x3F
        else:
            raise FormatError("kryo string char", at, "a 1-, 2- or 3-byte char", f"0x{b:02x}")
        units += unit.to_bytes(2, "big")
    return units.decode("utf-16-be", errors="surrogatepass")


def _reference(r: ByteReader) -> bool:
    """The reference marker of a tracked object: True for a new object, False for null."""
    at = r.offset
    marker = read_varint(r, "kryo reference marker")
    if marker in (0, 1):
        return marker == 1
    from repair.formats.flink.values import UnsupportedSerializerError

    raise UnsupportedSerializerError("Kryo", at, detail=f"cannot decode a Kryo back-reference (id {marker - 2})")


_READERS: dict[int, Callable[[ByteReader], Any]] = {
    INT: lambda r: _unzigzag(read_varint(r, "kryo int"), 32),
    LONG: lambda r: read_varlong(r, "kryo long"),
    BOOLEAN: lambda r: r.bool("kryo boolean"),
    BYTE: lambda r: r.i8("kryo byte"),
}


def read_class_and_object(r: ByteReader, type_class: str | None = None) -> Any:
    """``Kryo.readClassAndObject`` for Kryo's own registrations (see the module docstring)."""
    from repair.formats.flink.values import UnsupportedSerializerError

    at = r.offset
    tag = read_varint(r, "kryo class")
    if tag == 0:
        return None
    if tag == 1:
        raise UnsupportedSerializerError("Kryo", at, detail=f"cannot decode Kryo {type_class}: a class written by name (not registered)")
    registration = tag - 2
    if registration == STRING:
        return read_string(r) if _reference(r) else None
    read = _READERS.get(registration)
    if read is None:
        what = _NAMES.get(registration, f"registration id {registration}")
        raise UnsupportedSerializerError("Kryo", at, detail=f"cannot decode Kryo {type_class}: a {what} (not decoded yet)")
    return read(r)
