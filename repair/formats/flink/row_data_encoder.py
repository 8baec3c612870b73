"""RowData values written as Flink's table runtime writes them: the inverse of :mod:`repair.formats.flink.row_data`.

``BinaryRowWriter`` (and ``BinaryArrayWriter``) lay out what ``row_data`` reads: the null bits (the first
byte the ``RowKind``), one 8-byte slot per field (a value narrower than 8 bytes in its first bytes, the
rest zero; a null field's slot zero), then the variable-length parts, each padded with zeros to a multiple
of 8 bytes, its slot holding ``offset << 32 | size``; CHAR/VARCHAR and BINARY/VARBINARY of at most 7 bytes
inline in the slot instead; a wide DECIMAL always reserves 16 bytes (its unscaled value as Java's
``BigInteger.toByteArray``); a wide TIMESTAMP 8 (its milliseconds, the nanoseconds of the millisecond in the
slot). A ``BinaryMapData`` is ``int`` size of its key array, the keys' array, the values' array.

Values are what ``row_data`` decodes: rows ``{"kind": "+I", "f0": ...}``, arrays lists, maps and multisets
``[(key, value), ...]`` (pairs as lists too), decimals their text, timestamps epoch milliseconds
(precision <= 3) or nanoseconds. :func:`row_data_encoder` returns None for a type it cannot write (a
structured type without field names, an unknown root), so such values keep their raw bytes.
"""

from __future__ import annotations

import struct
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Callable

from repair.formats.flink.row_data import ROW_KINDS, element_size, map_entry_types, null_bits_size
from repair.formats.flink.table_types import SqlType

#: ``put(buffer, slot offset, value)`` writes one non-null field into its slot, appending what goes
#: into the variable-length part to ``buffer`` (whose length is the next offset).
Put = Callable[[bytearray, int, Any], None]

_FIXED: dict[str, tuple[struct.Struct, tuple[type, ...]]] = {
    "BOOLEAN": (struct.Struct("<?"), (bool,)), "TINYINT": (struct.Struct("<b"), (int,)),
    "SMALLINT": (struct.Struct("<h"), (int,)), "INTEGER": (struct.Struct("<i"), (int,)), "DATE": (struct.Struct("<i"), (int,)),
    "TIME_WITHOUT_TIME_ZONE": (struct.Struct("<i"), (int,)), "INTERVAL_YEAR_MONTH": (struct.Struct("<i"), (int,)),
    "BIGINT": (struct.Struct("<q"), (int,)), "INTERVAL_DAY_TIME": (struct.Struct("<q"), (int,)),
    "FLOAT": (struct.Struct("<f"), (float, int)), "DOUBLE": (struct.Struct("<d"), (float, int)),
}
_TIMESTAMPS = ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE")


class RowEncodeError(ValueError):
    """A value the RowData type cannot hold."""


def _check(value: Any, kinds: tuple[type, ...], what: str) -> None:
    if not isinstance(value, kinds) or (type(value) is bool and bool not in kinds):
        raise RowEncodeError(f"a {what} is needed, not {type(value).__name__} {value!r}")


def _word(size: int) -> int:
    return (size + 7) & ~7


def _append_var(buffer: bytearray, slot: int, data: bytes, size_field: int | None = None) -> None:
    """``writeSegmentsToVarLenPart``: ``data`` at the end, zero-padded to a word; the slot points to it."""
    offset = len(buffer)
    buffer += data + bytes(_word(len(data)) - len(data))
    buffer[slot : slot + 8] = (offset << 32 | (len(data) if size_field is None else size_field)).to_bytes(8, "little")


def _bytes_put(buffer: bytearray, slot: int, data: bytes) -> None:
    """``writeString`` / ``writeBinary``: at most 7 bytes inline (the slot's top byte ``0x80 | size``)."""
    if len(data) <= 7:
        buffer[slot : slot + 8] = data + bytes(7 - len(data)) + bytes([0x80 | len(data)])
    else:
        _append_var(buffer, slot, data)


def java_unscaled_bytes(unscaled: int) -> bytes:
    """``BigInteger.toByteArray``: minimal two's complement, big-endian, at least one byte."""
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _unscaled(value: Any, precision: int, scale: int) -> int:
    _check(value, (str,), "DECIMAL as text")
    try:
        exact = Decimal(value)
        if not exact.is_finite():
            raise InvalidOperation
        unscaled = exact.scaleb(scale, Context(prec=max(precision, len(exact.as_tuple().digits)) + 2))  # exact, not rounded to 28 digits
    except InvalidOperation:
        raise RowEncodeError(f"{value!r} is not a decimal") from None
    if unscaled != unscaled.to_integral_value() or len(str(abs(int(unscaled)))) > precision:
        raise RowEncodeError(f"{value!r} does not fit DECIMAL({precision}, {scale})")
    return int(unscaled)


def _put_for(t: SqlType) -> Put | None:
    root = t.root
    if root in _FIXED:
        packer, kinds = _FIXED[root]

        def fixed(buffer: bytearray, slot: int, value: Any) -> None:
            _check(value, kinds, root)
            try:
                packer.pack_into(buffer, slot, value)
            except (struct.error, OverflowError) as error:
                raise RowEncodeError(f"{value!r} is not a {root}: {error}") from None

        return fixed
    if root in ("CHAR", "VARCHAR"):
        def text(buffer: bytearray, slot: int, value: Any) -> None:
            _check(value, (str,), "string")
            _bytes_put(buffer, slot, value.encode("utf-8"))

        return text
    if root in ("BINARY", "VARBINARY", "RAW"):
        def binary(buffer: bytearray, slot: int, value: Any) -> None:
            _check(value, (bytes, bytearray), "bytes")
            if root == "RAW":
                _append_var(buffer, slot, bytes(value))
            else:
                _bytes_put(buffer, slot, bytes(value))

        return binary
    if root == "DECIMAL":
        precision, scale = t.params.get("precision", 0), t.params.get("scale", 0)

        def decimal(buffer: bytearray, slot: int, value: Any) -> None:
            unscaled = _unscaled(value, precision, scale)
            if precision <= 18:
                buffer[slot : slot + 8] = unscaled.to_bytes(8, "little", signed=True)
                return
            data = java_unscaled_bytes(unscaled)
            offset = len(buffer)
            buffer += data + bytes(16 - len(data))
            buffer[slot : slot + 8] = (offset << 32 | len(data)).to_bytes(8, "little")

        return decimal
    if root in _TIMESTAMPS:
        compact = t.params.get("precision", 6) <= 3

        def timestamp(buffer: bytearray, slot: int, value: Any) -> None:
            _check(value, (int,), "timestamp (epoch ms or ns)")
            if compact:
                buffer[slot : slot + 8] = value.to_bytes(8, "little", signed=True)
                return
            millis, nanos = divmod(value, 1_000_000)
            _append_var(buffer, slot, millis.to_bytes(8, "little", signed=True), size_field=nanos)

        return timestamp
    if root in ("ROW", "STRUCTURED_TYPE") and t.names is not None:  # a structured type (e.g. an accumulator) is a nested row too
        nested = binary_row_encoder(t.children)
        if nested is None:
            return None
        return lambda buffer, slot, value: _append_var(buffer, slot, nested(value))
    if root == "ARRAY" and len(t.children) == 1:
        array = binary_array_encoder(t.children[0])
        if array is None:
            return None
        return lambda buffer, slot, value: _append_var(buffer, slot, array(value))
    if root in ("MAP", "MULTISET"):
        entries = binary_map_encoder(t)
        if entries is None:
            return None
        return lambda buffer, slot, value: _append_var(buffer, slot, entries(value))
    return None


def binary_row_encoder(types: list[SqlType]) -> Callable[[dict], bytes] | None:
    """A ``BinaryRowData`` of fields ``types`` from ``{"kind": ..., "f0": ...}``; None if a type is unknown."""
    puts = [_put_for(t) for t in types]
    if any(p is None for p in puts):
        return None
    arity = len(types)
    bits = null_bits_size(arity)
    names = ["kind", *(f"f{i}" for i in range(arity))]

    def encode(row: dict) -> bytes:
        if not isinstance(row, dict) or set(row) != set(names):
            raise RowEncodeError(f"a row {{kind, f0..f{arity - 1}}} is needed, not {row!r}")
        if row["kind"] not in ROW_KINDS:
            raise RowEncodeError(f"a row kind is one of {ROW_KINDS}, not {row['kind']!r}")
        buffer = bytearray(bits + 8 * arity)
        buffer[0] = ROW_KINDS.index(row["kind"])
        for i, put in enumerate(puts):
            value = row[f"f{i}"]
            if value is None:
                bit = i + 8
                buffer[bit >> 3] |= 1 << (bit & 7)
            else:
                put(buffer, bits + 8 * i, value)  # type: ignore[misc]
        return bytes(buffer)

    return encode


def binary_array_encoder(element: SqlType) -> Callable[[list], bytes] | None:
    """A ``BinaryArrayData`` of ``element``s from a list (None elements null)."""
    put = _put_for(element)
    if put is None:
        return None
    size = element_size(element)

    def encode(values: list) -> bytes:
        if not isinstance(values, (list, tuple)):
            raise RowEncodeError(f"an array is a list, not {values!r}")
        count = len(values)
        header = 4 + (count + 31) // 32 * 4
        buffer = bytearray(_word(header + size * count))
        buffer[0:4] = count.to_bytes(4, "little")
        for i, value in enumerate(values):
            if value is None:
                buffer[4 + (i >> 3)] |= 1 << (i & 7)
            elif size == 8:
                put(buffer, header + 8 * i, value)
            else:  # a narrow element: written into an 8-byte scratch slot, its first bytes kept
                scratch = bytearray(8)
                put(scratch, 0, value)
                buffer[header + size * i : header + size * (i + 1)] = scratch[:size]
        return bytes(buffer)

    return encode


def binary_map_encoder(t: SqlType) -> Callable[[list], bytes] | None:
    """A ``BinaryMapData`` (MAP, or MULTISET of its elements to INT counts) from ``[(key, value), ...]``."""
    types = map_entry_types(t)
    if types is None:
        return None
    keys, values = binary_array_encoder(types[0]), binary_array_encoder(types[1])
    if keys is None or values is None:
        return None

    def encode(entries: list) -> bytes:
        if not isinstance(entries, (list, tuple)) or any(not isinstance(e, (list, tuple)) or len(e) != 2 for e in entries):
            raise RowEncodeError(f"map entries are [(key, value), ...], not {entries!r}")
        key_bytes = keys([k for k, _ in entries])
        return len(key_bytes).to_bytes(4, "little") + key_bytes + values([v for _, v in entries])

    return encode


def row_data_encoder(types: list[SqlType]) -> Callable[[dict], bytes] | None:
    """``RowDataSerializer.serialize``: ``int size`` (big-endian) + the ``BinaryRowData``."""
    row = binary_row_encoder(types)
    if row is None:
        return None

    def encode(value: dict) -> bytes:
        data = row(value)
        return len(data).to_bytes(4, "big") + data

    return encode
