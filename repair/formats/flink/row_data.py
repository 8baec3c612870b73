"""Values of Flink SQL's internal data structures (flink-table-runtime serializers), as state holds them.

* ``RowDataSerializer`` / ``BinaryRowDataSerializer``: ``int size`` + a ``BinaryRowData`` of that size.
  A ``BinaryRowData`` is little-endian (Flink writes it through ``MemorySegment`` in native order):

  - a null-bit set of ``((arity + 63 + 8) // 64) * 8`` bytes; its first byte is the ``RowKind`` (0 ``+I``,
    1 ``-U``, 2 ``+U``, 3 ``-D``), field ``i``'s null bit is bit ``(i + 8) % 8`` of byte ``(i + 8) // 8``;
  - one 8-byte slot per field: BOOLEAN/TINYINT one byte, SMALLINT two, INT/DATE/TIME/INTERVAL YEAR TO
    MONTH four, BIGINT/INTERVAL DAY TO SECOND eight, FLOAT/DOUBLE IEEE; a compact DECIMAL (precision <=
    18) its unscaled long; a compact TIMESTAMP/TIMESTAMP_LTZ (precision <= 3) its epoch milliseconds;
  - variable-length data after the slots, the slot holding ``offset << 32 | size``: CHAR/VARCHAR (UTF-8)
    and BINARY/VARBINARY (up to 7 bytes inline instead: the slot's top byte is ``0x80 | size`` and the
    bytes fill the slot from its first byte), a non-compact DECIMAL (unscaled two's complement,
    big-endian), a non-compact TIMESTAMP (the slot holds ``offset << 32 | nanoOfMillisecond``, the
    offset a long of epoch milliseconds), a nested ROW (a ``BinaryRowData``), ARRAY (a ``BinaryArrayData``),
    MAP and MULTISET (a ``BinaryMapData``) and RAW (kept as its bytes).
* ``StringDataSerializer``: ``int size`` + UTF-8. ``TimestampDataSerializer``: ``long millis`` and, when
  its precision is above 3, ``int nanoOfMillisecond``. ``DecimalDataSerializer``: compact precision:
  ``long unscaled``, else ``int n`` + n bytes. ``RawValueDataSerializer``: ``int size`` + bytes.
  ``ExternalSerializer``: the value of its nested (internal) serializer. ``NullSerializer``: nothing.

Decoded rows are ``{"kind": "+I", "f0": ..., ...}`` (the serializer snapshot has types, not names);
timestamps are epoch milliseconds (precision <= 3) or epoch nanoseconds (above), decimals their
``str``, ARRAY fields lists, MAP fields ``[(key, value), ...]``, MULTISET fields ``[(element, count), ...]``,
RAW fields their bytes.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any, Callable

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.table_types import SqlType

ROW_KINDS = ("+I", "-U", "+U", "-D")
_HIGHEST_BIT = 0x80 << 56


def null_bits_size(arity: int) -> int:
    """``BinaryRowData.calculateBitSetWidthInBytes``."""
    return ((arity + 63 + 8) // 64) * 8


def _var_part(row: bytes, slot: int, field: str) -> bytes:
    offset, size = slot >> 32, slot & 0xFFFFFFFF
    if offset + size > len(row) or offset < 0:
        raise FormatError(field, offset, f"variable-length data within the row's {len(row)} bytes", f"{size} bytes at {offset}")
    return row[offset : offset + size]


def _string_or_bytes(row: bytes, slot_at: int, field: str) -> bytes:
    slot = int.from_bytes(row[slot_at : slot_at + 8], "little")
    if slot & _HIGHEST_BIT:  # at most 7 bytes, inline in the slot
        size = (slot >> 56) & 0x7F
        if size > 7:
            raise FormatError(field, slot_at, "at most 7 inline bytes", size)
        return row[slot_at : slot_at + size]
    return _var_part(row, slot, field)


def _utf8(data: bytes, field: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FormatError(field, error.start, "UTF-8 text", data[error.start : error.start + 4].hex()) from None


_FIXED: dict[str, struct.Struct] = {
    "BOOLEAN": struct.Struct("<?"), "TINYINT": struct.Struct("<b"), "SMALLINT": struct.Struct("<h"),
    "INTEGER": struct.Struct("<i"), "DATE": struct.Struct("<i"), "TIME_WITHOUT_TIME_ZONE": struct.Struct("<i"),
    "INTERVAL_YEAR_MONTH": struct.Struct("<i"), "BIGINT": struct.Struct("<q"), "INTERVAL_DAY_TIME": struct.Struct("<q"),
    "FLOAT": struct.Struct("<f"), "DOUBLE": struct.Struct("<d"),
}
_TIMESTAMPS = ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE")


def _field_reader(t: SqlType) -> Callable[[bytes, int, str], Any] | None:
    """``read(row bytes, slot offset, field name)`` of one field of a ``BinaryRowData``, or None."""
    root = t.root
    if root in _FIXED:
        unpack = _FIXED[root].unpack_from
        return lambda row, at, field: unpack(row, at)[0]
    if root in ("CHAR", "VARCHAR"):
        return lambda row, at, field: _utf8(_string_or_bytes(row, at, field), field)
    if root in ("BINARY", "VARBINARY"):
        return lambda row, at, field: bytes(_string_or_bytes(row, at, field))
    if root == "DECIMAL":
        precision, scale = t.params.get("precision", 0), t.params.get("scale", 0)
        if precision <= 18:
            return lambda row, at, field: decimal_text(int.from_bytes(row[at : at + 8], "little", signed=True), scale)
        return lambda row, at, field: decimal_text(int.from_bytes(
            _var_part(row, int.from_bytes(row[at : at + 8], "little"), field), "big", signed=True), scale)
    if root in _TIMESTAMPS:
        if t.params.get("precision", 6) <= 3:
            return lambda row, at, field: int.from_bytes(row[at : at + 8], "little", signed=True)

        def wide(row: bytes, at: int, field: str) -> int:
            slot = int.from_bytes(row[at : at + 8], "little")
            millis = int.from_bytes(_var_part(row, (slot >> 32) << 32 | 8, field), "little", signed=True)
            return millis * 1_000_000 + (slot & 0xFFFFFFFF)

        return wide
    if root in ("ROW", "STRUCTURED_TYPE") and t.names is not None:  # a structured type (e.g. an accumulator) is a nested row too
        nested = binary_row_reader(t.children)
        return lambda row, at, field: nested(_var_part(row, int.from_bytes(row[at : at + 8], "little"), field))
    if root == "ARRAY" and len(t.children) == 1:
        array = binary_array_reader(t.children[0])
        if array is None:
            return None
        return lambda row, at, field: array(_var_part(row, int.from_bytes(row[at : at + 8], "little"), field), field)
    if root in ("MAP", "MULTISET"):
        entries = binary_map_reader(t)
        if entries is None:
            return None
        return lambda row, at, field: entries(_var_part(row, int.from_bytes(row[at : at + 8], "little"), field), field)
    if root == "RAW":
        return lambda row, at, field: bytes(_var_part(row, int.from_bytes(row[at : at + 8], "little"), field))
    return None


def element_size(t: SqlType) -> int:
    """``BinaryArrayData.calculateFixLengthPartSize``: the bytes of one element's slot."""
    if t.root in ("BOOLEAN", "TINYINT"):
        return 1
    if t.root == "SMALLINT":
        return 2
    if t.root in ("INTEGER", "FLOAT", "DATE", "TIME_WITHOUT_TIME_ZONE", "INTERVAL_YEAR_MONTH"):
        return 4
    return 8


def binary_array_reader(element: SqlType) -> Callable[[bytes, str], list] | None:
    """A ``BinaryArrayData`` of ``element``s (little-endian, as ``BinaryRowData``): ``int n``, a null bit
    per element (bit ``i % 8`` of byte ``4 + i // 8``) in ``(n + 31) // 32`` ints, then one slot of
    :func:`element_size` bytes per element; variable-length elements as in a row, their offsets from
    the array's start. None when the element type is unknown."""
    read = _field_reader(element)
    if read is None:
        return None
    size = element_size(element)

    def array(data: bytes, field: str) -> list:
        count = int.from_bytes(data[:4], "little", signed=True) if len(data) >= 4 else -1
        header = 4 + (count + 31) // 32 * 4
        if count < 0 or header + count * size > len(data):
            raise FormatError(field, 0, f"an array whose {max(count, 0)} elements fit in {len(data)} bytes", count)
        return [None if data[4 + (i >> 3)] >> (i & 7) & 1 else read(data, header + i * size, f"{field}[{i}]")  # type: ignore[misc]
                for i in range(count)]

    return array


def map_entry_types(t: SqlType) -> tuple[SqlType, SqlType] | None:
    """The key and value types of a MAP's ``BinaryMapData``; a MULTISET's are its element and INT (its count)."""
    if t.root == "MULTISET" and len(t.children) == 1:
        return t.children[0], SqlType("INTEGER", False)
    if t.root == "MAP" and len(t.children) == 2:
        return t.children[0], t.children[1]
    return None


def binary_map_reader(t: SqlType) -> Callable[[bytes, str], list[tuple[Any, Any]]] | None:
    """A ``BinaryMapData`` (MAP, or MULTISET: its elements to INT counts): ``int`` size of the key array,
    the keys' ``BinaryArrayData``, then the values'; entries as ``[(key, value), ...]``."""
    types = map_entry_types(t)
    if types is None:
        return None
    keys, values = binary_array_reader(types[0]), binary_array_reader(types[1])
    if keys is None or values is None:
        return None

    def entries(data: bytes, field: str) -> list[tuple[Any, Any]]:
        size = int.from_bytes(data[:4], "little", signed=True) if len(data) >= 4 else -1
        if not 0 <= size <= len(data) - 4:
            raise FormatError(field, 0, f"a key array within the map's {len(data)} bytes", size)
        found_keys, found_values = keys(data[4 : 4 + size], field + " keys"), values(data[4 + size :], field + " values")
        if len(found_keys) != len(found_values):
            raise FormatError(field, 0, f"{len(found_keys)} values, one per key", len(found_values))
        return list(zip(found_keys, found_values))

    return entries


def binary_row_reader(types: list[SqlType]) -> Callable[[bytes], dict[str, Any]] | None:
    """A function decoding a whole ``BinaryRowData`` of fields ``types``; None if a type is unknown."""
    readers = [_field_reader(t) for t in types]
    if any(r is None for r in readers):
        return None
    arity = len(types)
    bits = null_bits_size(arity)
    fixed_end = bits + 8 * arity

    def read(row: bytes) -> dict[str, Any]:
        if len(row) < fixed_end:
            raise FormatError("binary row", 0, f"at least {fixed_end} bytes for {arity} fields", f"{len(row)} bytes")
        kind = row[0]
        if kind > 3:
            raise FormatError("row kind", 0, "0..3", kind)
        out: dict[str, Any] = {"kind": ROW_KINDS[kind]}
        for i, reader in enumerate(readers):
            bit = i + 8
            name = f"f{i}"
            out[name] = None if row[bit >> 3] >> (bit & 7) & 1 else reader(row, bits + 8 * i, name)  # type: ignore[misc]
        return out

    return read


def sized(r: ByteReader, what: str) -> bytes:
    """``int size`` + that many bytes (bounded by the bytes left)."""
    return r.raw(r.count(what + " size"), what)


def row_data_read(types: list[SqlType]) -> Callable[[ByteReader], dict[str, Any]] | None:
    """``RowDataSerializer``'s ``read(reader)``; None when a field type is unknown."""
    row = binary_row_reader(types)
    if row is None:
        return None
    return lambda r: row(sized(r, "binary row"))


def string_data_read(r: ByteReader) -> str:
    return _utf8(sized(r, "string data"), "string data")


def timestamp_data_read(precision: int) -> Callable[[ByteReader], int]:
    if precision <= 3:
        return lambda r: r.i64("timestamp millis")
    return lambda r: r.i64("timestamp millis") * 1_000_000 + r.i32("timestamp nanos of millisecond")


def decimal_text(unscaled: int, scale: int) -> str:
    """The exact decimal ``unscaled * 10**-scale`` as plain text (no rounding to a context precision)."""
    return format(Decimal(f"{unscaled}E{-scale}"), "f")


def decimal_data_read(precision: int, scale: int) -> Callable[[ByteReader], str]:
    if precision <= 18:
        return lambda r: decimal_text(r.i64("decimal unscaled"), scale)
    return lambda r: decimal_text(int.from_bytes(sized(r, "decimal"), "big", signed=True), scale)
