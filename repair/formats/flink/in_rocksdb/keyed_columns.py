"""Columnar decoding of Flink keyed state: a batch of resolved RocksDB entries of one state -> Arrow columns.

:func:`decode_entry_batch` gives, for well-formed entries of Flink's common serializers, exactly the
rows :class:`~repair.formats.flink.in_rocksdb.keyed_rows.KeyedStateDecoder` gives (same columns, same values,
same order), but computed with pyarrow compute kernels over whole columns instead of one Python call
per field and row: the key-group prefix, keys and namespaces, map user keys, values, TTL timestamps,
timers and list elements. Whatever it cannot decode that way raises :class:`ColumnarMiss` and the
caller decodes the batch row by row (the exact path, which also names bad bytes and keeps undecodable
values as raw bytes with ``error`` set). A miss is never an error: it only costs speed.

Vectorized serializers (:data:`_VECTOR`): String (ASCII text column-wise, other text by the exact reader
row by row), Long, Int, Short, Byte, Boolean, Double, Float, Char (a lone surrogate misses), byte[] and the
other primitive arrays (a char[] decoded row by row), Void,
VoidNamespace, GlobalWindow, TimeWindow, enums; Tuples, POJOs, Rows (bit mask: kind and null bits) and Nullables of
them; Lists, Sets and Maps of them (``int size``, then the elements: all at once when they have a fixed
width, else in rounds, round ``j`` reading the ``j``-th element of every row that has one; rows with more
than :data:`MAX_LIST_STEPS` elements are read by the serializer's fast path, row by row); and TTL wrappers
around them. Values of serializers with a fast path but no column-wise reader are decoded per row by that
fast path when they are the last field of their bytes (a value, a map value, a map user key); a key or
namespace of such a serializer misses.

Byte layout: see :mod:`repair.formats.flink.in_rocksdb.keyed_rows`. Positions below are absolute offsets into the
data buffer of the batch's keys or values (binary arrays), one int64 per row.
"""

from __future__ import annotations

import array
import functools
import sys
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from repair.errors import RepairError
from repair.formats.flink import registry
from repair.formats.flink.arrow import SIMPLE_TYPES, StateColumns, column_converter, to_arrow
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.keygroups import key_group_prefix_bytes
from repair.formats.flink.serializers import (
    COMPOSITE_SNAPSHOTS,
    ENUM_SNAPSHOT,
    POJO_SNAPSHOT,
    TTL_AWARE_SNAPSHOT,
    SerializerSnapshot,
)
from repair.formats.flink.values import FAST_MISSES, ROW_KINDS, Decoder, FastMiss, RowMask, TtlValue, decoder_for

#: The Arrow type of the output columns no serializer decides (the others: the state's ``StateColumns``).
FIXED_COLUMN_TYPES = {
    "key_group": pa.int32(), "list_index": pa.int32(), "ttl_timestamp": pa.int64(), "timestamp": pa.int64(),
    "key_raw": pa.binary(), "namespace_raw": pa.binary(), "user_key_raw": pa.binary(), "value_raw": pa.binary(),
    "error": pa.string(),
}
#: The most elements per row read in rounds (one kernel round per element), for elements without a
#: fixed width: a list *state* value with more sends its batch down the row path; a list, set or map
#: inside a value with more is read by its serializer's fast path (that row alone).
MAX_LIST_STEPS = 64
_LIST_DELIMITER = 0x2C
_STRING_SNAPSHOT = SerializerSnapshot(registry.STRING.class_name, 1)
_SIGN = pa.scalar(-(1 << 63), pa.int64())


class ColumnarMiss(Exception):
    """This batch cannot be decoded column-wise (decode it row by row)."""


# -- bytes of a batch ----------------------------------------------------------------------------


class _Bytes:
    """One binary column of the batch (keys or values): its data buffer as uint8 and each row's range."""

    def __init__(self, array: pa.BinaryArray):
        if array.null_count or array.offset:
            raise ColumnarMiss
        self.array = array
        n = len(array)
        offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, array.buffers()[1]]).cast(pa.int64())
        self.starts = offsets.slice(0, n)
        self.ends = offsets.slice(1, n)
        data = array.buffers()[2]
        self.data = pa.Array.from_buffers(pa.uint8(), data.size if data is not None else 0, [None, data])
        self.data_buffer = data if data is not None else pa.py_buffer(b"")
        self._items: list[bytes] | None = None

    @property
    def items(self) -> list[bytes]:
        """The rows as bytes (for the readers that go row by row: made on first use)."""
        if self._items is None:
            self._items = self.array.to_pylist()
        return self._items


def _binary(items: pa.BinaryArray | list[bytes]) -> pa.BinaryArray:
    return items if isinstance(items, pa.Array) else pa.array(items, pa.binary())


def _all(condition: pa.Array) -> bool:
    return len(condition) == 0 or (condition.null_count == 0 and pc.all(condition).as_py())


@functools.lru_cache(maxsize=16)
def _arange(n: int) -> pa.Array:
    """``0, 1, ..., n - 1`` as int64; cached (arrays are immutable, and batches are mostly of one size)."""
    if n == 0:
        return pa.array([], pa.int64())
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)


@functools.lru_cache(maxsize=16)
def _span_order(n: int) -> tuple[pa.Array, pa.Array]:
    """For :func:`_slices` of ``n`` ranges: the order ``0, n, 1, n + 1, ...`` that interleaves starts and
    ends, and the even indices ``0, 2, ..., 2n - 2`` (the ranges among the spans)."""
    k = _arange(2 * n)
    return pc.add(pc.shift_right(k, 1), pc.multiply(pc.bit_wise_and(k, 1), n)), pc.multiply(_arange(n), 2)


@dataclass
class _Cursor:
    """Rows of one binary column being read: absolute end of each row and the current position."""

    src: _Bytes
    rows: pa.Array  # row indices into the batch (int64)
    ends: pa.Array
    pos: pa.Array
    #: One position per row of ``src``, in row order (``rows`` is 0..n-1): ranges can be cut per row.
    whole: bool = False

    def need(self, width: int | pa.Array) -> pa.Array:
        """The positions after ``width`` more bytes (a miss if a row has fewer left)."""
        after = pc.add(self.pos, width)
        if not _all(pc.less_equal(after, self.ends)):
            raise ColumnarMiss
        return after

    def byte(self, at: int = 0) -> pa.Array:
        return pc.take(self.src.data, pc.add(self.pos, at) if at else self.pos)

    def big_endian(self, arrow: pa.DataType) -> pa.Array:
        """The next bytes of every row as a big-endian number of type ``arrow`` (Java's byte order):
        the bytes gathered into one buffer, byte-swapped by :mod:`array` in C."""
        code = _NATIVE_CODES[arrow]
        width = arrow.bit_width // 8
        end = self.need(width)
        n = len(self.pos)
        values = array.array(code)
        if n:
            values.frombytes(memoryview(self.slices(self.pos, end).buffers()[2])[: n * width])
            if width > 1 and sys.byteorder == "little":
                values.byteswap()
        return pa.Array.from_buffers(arrow, n, [None, pa.py_buffer(values)])

    def advance(self, width: int | pa.Array) -> None:
        self.pos = pc.add(self.pos, width)

    def at_end(self) -> bool:
        return _all(pc.equal(self.pos, self.ends))

    def subset(self, mask: pa.Array) -> "_Cursor":
        return _Cursor(self.src, pc.filter(self.rows, mask), pc.filter(self.ends, mask), pc.filter(self.pos, mask))

    def slices(self, starts: pa.Array, ends: pa.Array) -> pa.BinaryArray:
        """:func:`_slices` of ranges at this cursor's rows."""
        return _slices(self.src, starts, ends, per_row=self.whole)


def _slices(src: _Bytes, starts: pa.Array, ends: pa.Array, *, per_row: bool = False) -> pa.BinaryArray:
    """``data[starts[i]:ends[i]]`` per row, in order (ranges inside their rows, so ordered and disjoint):
    the ranges and the gaps between them are the elements of one binary array over the same data
    buffer; taking every other element copies just the ranges.

    ``per_row``: range ``i`` lies in row ``i`` of ``src``. Ranges at the same place in every row (the
    same start in the row, and the same width or the same distance to the row's end: a fixed-width
    field, a key-group prefix, a suffix) are then cut by ``binary_slice``, or are ``src`` itself."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    if per_row:
        same = _same_place(src, starts, ends)
        if same is not None:
            begin, stop = same
            return src.array if begin == 0 and stop == _ROW_END else pc.binary_slice(src.array, begin, stop)
    interleave, evens = _span_order(n)
    offsets = pc.take(pa.concat_arrays([starts, ends]).cast(pa.int32()), interleave)
    spans = pa.BinaryArray.from_buffers(pa.binary(), 2 * n - 1, [None, offsets.buffers()[1], src.data_buffer])
    return pc.take(spans, evens)


#: ``binary_slice``'s stop for "to the end of each row" (pyarrow 26 fails on ``stop=None``: "Negative
#: buffer resize"); binary offsets are int32, so no row is longer.
_ROW_END = (1 << 31) - 1


def _same_place(src: _Bytes, starts: pa.Array, ends: pa.Array) -> tuple[int, int] | None:
    """``(start, stop)`` within each row (stop: from its start, or negative from its end, or
    :data:`_ROW_END`) when the ranges, one per row, are at the same place in every row; else None.

    Ranges of one width get a stop from their start even when they also end at the same distance from
    their rows' ends: ``binary_slice`` then allocates exactly its output (its width times the rows).
    With a negative stop it allocates as many bytes as the rows hold and shrinks the buffer after, which
    pyarrow's system allocator (the command's) does by copying it whole: a 1 KB key's text and raw bytes
    cost twice a copy each (docs/benchmarks/export.md)."""
    begin = _constant(pc.subtract(starts, src.starts))
    if begin is None:
        return None
    tail = _constant(pc.subtract(src.ends, ends))
    if begin == 0 and tail == 0:
        return begin, _ROW_END
    width = _constant(pc.subtract(ends, starts))
    if width is not None:
        return begin, begin + width
    if tail is not None:
        return begin, -tail if tail else _ROW_END
    return None


def _constant(values: pa.Array) -> int | None:
    """The value of an array whose elements are all equal (None if they differ)."""
    low, high = pc.min_max(values).values()
    return low.as_py() if low == high else None


# -- vectorized serializers ------------------------------------------------------------------------

Vector = Callable[[_Cursor], pa.Array]


#: :mod:`array` type codes of Java's fixed-width numbers (checked at import: C's sizes can differ).
_NATIVE_CODES = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q", pa.float32(): "f", pa.float64(): "d"}
assert all(array.array(code).itemsize == arrow.bit_width // 8 for arrow, code in _NATIVE_CODES.items())


def _number(arrow: pa.DataType) -> Vector:
    """Long, Int, Short, Byte, Double, Float: big-endian, fixed width."""

    def read(c: _Cursor) -> pa.Array:
        value = c.big_endian(arrow)
        c.advance(arrow.bit_width // 8)
        return value

    return read


def _boolean(c: _Cursor) -> pa.Array:
    c.need(1)
    byte = c.byte()
    if not _all(pc.less_equal(byte, 1)):
        raise ColumnarMiss
    c.advance(1)
    return pc.equal(byte, 1)


def _zero_byte(c: _Cursor) -> pa.Array:
    c.need(1)
    if not _all(pc.equal(c.byte(), 0)):
        raise ColumnarMiss
    c.advance(1)
    return pa.nulls(len(c.pos))


def _time_window(c: _Cursor) -> pa.Array:
    start = _number(pa.int64())(c)
    end = _number(pa.int64())(c)
    return pa.StructArray.from_arrays([start, end], names=["start", "end"])


#: UTF-16 code units by the length of their UTF-8 encoding: ``(first, end, bytes)``; the surrogates
#: 0xD800-0xDFFF have none (0 bytes: null in :func:`_char_table`).
_UTF8_WIDTHS = ((0, 0x80, 1), (0x80, 0x800, 2), (0x800, 0xD800, 3), (0xD800, 0xE000, 0), (0xE000, 1 << 16, 3))


@functools.cache
def _char_table() -> pa.Array:
    """``chr(unit)`` of every UTF-16 code unit (one char of 1, 2 or 3 UTF-8 bytes), indexed by unit; null
    for the surrogates 0xD800-0xDFFF, which no UTF-8 string holds alone. Built once, on first use, from
    the UTF-8 of all the chars in a row and the offsets their widths give (a string per unit from Python
    took about 20-25 ms of CPU, paid by every process that reads a ``Character``)."""
    units = array.array("H", range(0xD800))
    units.extend(range(0xE000, 1 << 16))
    text = units.tobytes().decode("utf-16-le" if sys.byteorder == "little" else "utf-16-be")
    widths = pa.concat_arrays([pa.repeat(pa.scalar(width, pa.int32()), end - first) for first, end, width in _UTF8_WIDTHS])
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(widths)])
    valid = pc.not_equal(widths, 0).buffers()[1]
    return pa.Array.from_buffers(pa.string(), 1 << 16, [valid, offsets.buffers()[1], pa.py_buffer(text.encode("utf-8"))], null_count=0x800)


def _char(c: _Cursor) -> pa.Array:
    """``Character``: a big-endian UTF-16 code unit, a one-char string (looked up in :func:`_char_table`).
    A lone surrogate misses: Arrow strings are UTF-8, so the row path keeps its bytes and says why."""
    units = c.big_endian(pa.int16()).view(pa.uint16())
    c.advance(2)
    chars = pc.take(_char_table(), units)
    if chars.null_count:
        raise ColumnarMiss
    return chars


def _varint7(c: _Cursor) -> tuple[pa.Array, pa.Array]:
    """``StringValue``'s length varint (at most 3 bytes here, 2 million chars): ``(value, size)`` per row."""
    c.need(1)
    byte = c.byte().cast(pa.int64())
    more = pc.greater_equal(byte, 0x80)
    value, size = byte, pa.repeat(pa.scalar(1, pa.int64()), len(byte))
    for shift in (7, 14, 21):
        if _all(pc.invert(more)):
            return value, size
        if shift == 21:
            raise ColumnarMiss  # a longer length: the row path reads it
        size = pc.add(size, more.cast(pa.int64()))
        c.need(size)
        # rows that stop here read their own last byte again (in bounds), masked out below
        byte = pc.take(c.src.data, pc.min_element_wise(pc.add(c.pos, shift // 7), pc.subtract(c.ends, 1))).cast(pa.int64())
        value = pc.if_else(more, pc.bit_wise_or(pc.bit_wise_and(value, (1 << shift) - 1), pc.shift_left(byte, shift)), value)
        more = pc.and_(more, pc.greater_equal(byte, 0x80))
    raise AssertionError("unreachable")


def _string(c: _Cursor) -> pa.Array:
    """``StringValue``: ASCII rows column-wise (each char one byte); rows holding other chars (varints
    of two or three bytes, not UTF-8) by the exact reader, row by row."""
    head = c.pos
    length, size = _varint7(c)
    c.advance(size)
    chars = pc.max_element_wise(pc.subtract(length, 1), 0)
    end = c.need(chars)  # every char takes at least one byte
    text = c.slices(c.pos, end)
    if _all_ascii(text):
        text = text.view(pa.string())
    else:
        other = pc.invert(pc.string_is_ascii(text.view(pa.string())))
        decoded, ends = _exact_strings(c, pc.filter(head, other), pc.filter(c.rows, other))
        text = pc.replace_with_mask(text, other, decoded).cast(pa.string())
        end = pc.replace_with_mask(end, other, ends)
    c.pos = end
    if _all(pc.not_equal(length, 0)):
        return text
    return pc.if_else(pc.equal(length, 0), pa.scalar(None, pa.string()), text)


def _all_ascii(values: pa.BinaryArray) -> bool:
    """Whether every byte of every value is below 0x80: the largest of the values' bytes, all in one
    range of the data buffer, in one pass (a check per value costs about six times as much)."""
    if len(values) == 0:
        return True
    _, offsets, data = values.buffers()
    bounds = pa.Array.from_buffers(pa.int32(), len(values) + 1, [None, offsets], offset=values.offset)
    first, last = bounds[0].as_py(), bounds[-1].as_py()
    if first == last:
        return True
    return pc.max(pa.Array.from_buffers(pa.uint8(), last - first, [None, data], offset=first)).as_py() < 0x80


def _exact_strings(c: _Cursor, heads: pa.Array, rows: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The strings starting at ``heads`` of ``rows`` read by the exact reader: ``(UTF-8 bytes, ends)``."""
    read = decoder_for(_STRING_SNAPSHOT).decode
    encoded, ends = [], []
    bases = pc.take(c.src.starts, rows).to_pylist()
    for row, base, head in zip(rows.to_pylist(), bases, heads.to_pylist()):
        try:
            value, stop = read(c.src.items[row], head - base)
            encoded.append(value.encode("utf-8"))
        except (RepairError, UnicodeError):  # corrupt, or a lone surrogate: the row path says what
            raise ColumnarMiss from None
        ends.append(base + stop)
    return pa.array(encoded, pa.binary()), pa.array(ends, pa.int64())


def _byte_array(c: _Cursor) -> pa.Array:
    length = c.big_endian(pa.int32()).cast(pa.int64())
    if not _all(pc.greater_equal(length, 0)):
        raise ColumnarMiss
    c.advance(4)
    end = c.need(length)
    data = c.slices(c.pos, end)
    c.pos = end
    return data


def _primitive_array(element: pa.DataType) -> Vector:
    """``boolean[]``, ``short[]``, ``int[]``, ``long[]``, ``float[]``, ``double[]``: ``int length`` then the
    elements, each of a fixed width, all read at once."""
    width = 1 if element == pa.bool_() else element.bit_width // 8
    read_element = _boolean if element == pa.bool_() else _number(element)
    arrow = pa.list_(element)

    def build(offsets: pa.Array, arrays: list[pa.Array]) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, arrays[0], type=arrow)

    def read(c: _Cursor) -> pa.Array:  # (_sequence_vector is defined below)
        return _sequence_vector(lambda items: [read_element(items)], build, _never, item_size=width, width=width)(c)

    return read


def _never(c: _Cursor) -> pa.Array:
    raise AssertionError("fixed-width elements are never read one by one")


def _char_array(c: _Cursor) -> pa.Array:
    """``char[]``: ``int length`` then UTF-16 code units, one string per row (decoded row by row); a lone
    surrogate misses, as a ``Character``'s does."""
    length = c.big_endian(pa.int32()).cast(pa.int64())
    if not _all(pc.greater_equal(length, 0)):
        raise ColumnarMiss
    c.advance(4)
    end = c.need(pc.multiply(length, 2))
    try:
        text = pa.array([units.decode("utf-16-be") for units in c.slices(c.pos, end).to_pylist()], pa.string())
    except UnicodeDecodeError:
        raise ColumnarMiss from None
    c.pos = end
    return text


#: Leaf serializer snapshot class -> its column-wise reader (of values of its ``SIMPLE_TYPES`` Arrow type).
_VECTOR: dict[str, Vector] = registry.register(registry.COLUMN_READER, {
    registry.STRING: _string,
    registry.LONG: _number(pa.int64()),
    registry.INT: _number(pa.int32()),
    registry.SHORT: _number(pa.int16()),
    registry.BYTE: _number(pa.int8()),
    registry.BOOLEAN: _boolean,
    registry.DOUBLE: _number(pa.float64()),
    registry.FLOAT: _number(pa.float32()),
    registry.CHAR: _char,
    registry.VOID: _zero_byte,
    registry.BYTE_ARRAY: _byte_array,
    # namespaces of one instance, written as one byte 0 and decoded as null
    registry.VOID_NAMESPACE: _zero_byte,
    registry.QUERYABLE_VOID_NAMESPACE: _zero_byte,
    registry.GLOBAL_WINDOW: _zero_byte,
    registry.TIME_WINDOW: _time_window,
    registry.BOOLEAN_ARRAY: _primitive_array(pa.bool_()),
    registry.SHORT_ARRAY: _primitive_array(pa.int16()),
    registry.INT_ARRAY: _primitive_array(pa.int32()),
    registry.LONG_ARRAY: _primitive_array(pa.int64()),
    registry.FLOAT_ARRAY: _primitive_array(pa.float32()),
    registry.DOUBLE_ARRAY: _primitive_array(pa.float64()),
    registry.CHAR_ARRAY: _char_array,
})


def _enum_vector(constants: list[str]) -> Vector:
    """An enum: ``int ordinal``, a constant's name; an ordinal outside the constants misses."""
    names = pa.array(constants, pa.string())

    def read(c: _Cursor) -> pa.Array:
        ordinals = c.big_endian(pa.int32())
        if len(ordinals) and not _all(pc.and_(pc.greater_equal(ordinals, 0), pc.less(ordinals, len(constants)))):
            raise ColumnarMiss
        c.advance(4)
        return pc.take(names, ordinals)

    return read


def _struct_vector(names: list[str], children: list[Vector]) -> Vector:
    """A Tuple: its fields in order, no null flags."""

    def read(c: _Cursor) -> pa.Array:
        return pa.StructArray.from_arrays([child(c) for child in children], names=names)

    return read


def _pojo_vector(names: list[str], children: list[Vector]) -> Vector:
    """A POJO: ``byte flags`` (bit 1: null; 2: no subclass), then per field ``bool isNull`` + its bytes.
    Subclass flags miss (the row path names them)."""

    def read(c: _Cursor) -> pa.Array:
        c.need(1)
        flags = c.byte()
        null = pc.equal(pc.bit_wise_and(flags, 1), 1)
        if not _all(pc.or_(null, pc.equal(flags, 2))):
            raise ColumnarMiss
        c.advance(1)
        present = pc.invert(null)
        every = _all(present)
        rows = c if every else c.subset(present)
        arrays = [_null_flagged(child)(rows) for child in children]
        if not every:
            c.pos = pc.replace_with_mask(c.pos, present, rows.pos)
            arrays = [_scatter(array, present) for array in arrays]
        return pa.StructArray.from_arrays(arrays, names=names, mask=null)

    return read


def _null_flagged(child: Vector, padding: int = 0) -> Vector:
    """``bool isNull``, then the value if not null, else ``padding`` zero bytes (a POJO field: no
    padding; a ``NullableSerializer``: its ``null_padding_length``). Padding that is not 0 misses."""

    def read(c: _Cursor) -> pa.Array:
        null = _boolean(c)  # a flag that is not 0 or 1 misses
        has = pc.invert(null)
        if padding and not _all(has):
            nulls = c.subset(null)
            end = nulls.need(padding)  # bounds the zeros below by the bytes there are
            if not _all(pc.equal(_slices(c.src, nulls.pos, end), pa.scalar(bytes(padding), pa.binary()))):
                raise ColumnarMiss
            c.pos = pc.replace_with_mask(c.pos, null, end)
        return _read_where(c, has, child)

    return read


def _read_where(c: _Cursor, has: pa.Array, child: Vector) -> pa.Array:
    """``child`` read from the rows where ``has`` is true (their positions advance), null elsewhere."""
    if _all(has):
        return child(c)
    rows = c.subset(has)
    values = child(rows)
    c.pos = pc.replace_with_mask(c.pos, has, rows.pos)
    return _scatter(values, has)


def _read_split(c: _Cursor, other: pa.Array, read: Vector, read_other: Vector) -> pa.Array:
    """``read`` from the rows where ``other`` is false and ``read_other`` from the rest (arrays of the
    same type; positions advance), in row order."""
    mine = pc.invert(other)
    first, second = c.subset(mine), c.subset(other)
    values = pa.concat_arrays([read(first), read_other(second)])
    c.pos = pc.replace_with_mask(pc.replace_with_mask(c.pos, mine, first.pos), other, second.pos)
    rank = pc.subtract(pc.cumulative_sum(mine.cast(pa.int64())), 1)
    rank_other = pc.add(pc.subtract(pc.cumulative_sum(other.cast(pa.int64())), 1), len(first.pos))
    return pc.take(values, pc.if_else(mine, rank, rank_other))


def _spread(c: _Cursor, counts: pa.Array, stride: int) -> tuple[_Cursor, pa.Array, pa.Array]:
    """``(cursor, row, index)``: a cursor over the ``counts[i]`` items of every row ``i``, the first at the
    row's position and each ``stride`` bytes after the one before, in row order; each item's row (among
    ``c``'s) and index in its row."""
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(counts)])
    total = offsets[-1].as_py()
    row = pc.list_parent_indices(pa.ListArray.from_arrays(offsets.cast(pa.int32()), pa.nulls(total)))
    index = pc.subtract(_arange(total), pc.take(offsets, row))
    at = pc.add(pc.take(c.pos, row), pc.multiply(index, stride))
    return _Cursor(c.src, pc.take(c.rows, row), pc.take(c.ends, row), at), row, index


#: ``elements(cursor)``: one element of every row of the cursor (positions advance), as its arrays.
Elements = Callable[[_Cursor], list[pa.Array]]


def _sequence_vector(elements: Elements, build: Callable[[pa.Array, list[pa.Array]], pa.Array], one_by_one: Vector,
                     *, item_size: int, width: int | None) -> Vector:
    """A List, Set or Map: ``int size``, then that many elements, as ``build(offsets, element arrays)``.

    A size below 0 or above the bytes left (``item_size`` bytes per element at least, the row path's
    bound) misses. Elements of a fixed ``width`` are read all at once; others in rounds, round ``j``
    reading the ``j``-th element of every row that has one, then put in row order; rows with more than
    :data:`MAX_LIST_STEPS` elements are read by ``one_by_one`` instead."""

    def read(c: _Cursor) -> pa.Array:
        head = c.pos
        size = c.big_endian(pa.int32()).cast(pa.int64())
        c.advance(4)
        if not _all(pc.and_(pc.greater_equal(size, 0), pc.less_equal(pc.multiply(size, item_size), pc.subtract(c.ends, c.pos)))):
            raise ColumnarMiss
        offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(size)]).cast(pa.int32())
        if width is not None:
            items, _, _ = _spread(c, size, width)
            start = items.pos
            arrays = elements(items)
            if not _all(pc.equal(items.pos, pc.add(start, width))):
                raise ColumnarMiss  # an element of another width: the row path says what it is
            c.pos = pc.add(c.pos, pc.multiply(size, width))
            return build(offsets, arrays)
        long = pc.greater(size, MAX_LIST_STEPS)
        if not _all(pc.invert(long)):
            c.pos = head
            return _read_split(c, long, read, one_by_one)
        return build(offsets, _in_rounds(c, size, elements))

    return read


def _in_rounds(c: _Cursor, size: pa.Array, elements: Elements) -> list[pa.Array]:
    """The ``size[i]`` elements of every row ``i`` (``c`` at the first), read in rounds, in row order;
    ``c`` ends after each row's last element."""
    rounds = pc.max(size).as_py() or 0
    if rounds == 0:
        return elements(c.subset(pc.greater(size, 0)))  # typed, empty
    active, local, left = c, _arange(len(size)), size
    done_local: list[pa.Array] = []  # rows whose elements are all read, and where they end
    done_pos: list[pa.Array] = []
    element_local: list[pa.Array] = []
    parts: list[list[pa.Array]] = []
    for j in range(rounds):
        has = pc.greater(left, j)
        if not _all(has):
            gone = pc.invert(has)
            done_local.append(pc.filter(local, gone))
            done_pos.append(pc.filter(active.pos, gone))
            active, local, left = active.subset(has), pc.filter(local, has), pc.filter(left, has)
        parts.append(elements(active))
        element_local.append(local)
    if done_local:  # (else every row had every round: ``active`` is ``c``)
        done_local.append(local)
        done_pos.append(active.pos)
        c.pos = pc.take(pa.concat_arrays(done_pos), pc.sort_indices(pa.concat_arrays(done_local)))
    if rounds == 1:
        return parts[0]
    order = pc.sort_indices(pa.concat_arrays(element_local))  # stable: a row's elements stay in round order
    return [pc.take(pa.concat_arrays([p[i] for p in parts]), order) for i in range(len(parts[0]))]


def _list_vector(snapshot: SerializerSnapshot, arrow: pa.ListType, element: Vector, width: int | None) -> Vector:
    """A List (or a Set: ``element`` reads its null flag too) as ``list<T>``."""
    return _sequence_vector(lambda c: [element(c)], lambda offsets, arrays: pa.ListArray.from_arrays(offsets, arrays[0], type=arrow),
                            _one_by_one(snapshot, arrow), item_size=1, width=width)


def _map_vector(snapshot: SerializerSnapshot, arrow: pa.MapType, key: Vector, value: Vector) -> Vector:
    """A Map: entries of key, ``bool isNull``, value if not null; as ``map<K, V>``. A null key misses
    (an Arrow map key is never null: the row path says so)."""
    flagged = _null_flagged(value)

    def build(offsets: pa.Array, arrays: list[pa.Array]) -> pa.Array:
        keys, items = arrays
        if keys.null_count:
            raise ColumnarMiss
        return pa.MapArray.from_arrays(offsets, keys, items, type=arrow)

    return _sequence_vector(lambda c: [key(c), flagged(c)], build, _one_by_one(snapshot, arrow), item_size=2, width=None)


def _fixed_width(snapshot: SerializerSnapshot | None) -> int | None:
    """The byte width of every value of ``snapshot`` when it is fixed (Flink's ``getLength()``; 0, e.g.
    VoidNamespace's, which writes a byte all the same, counts as not fixed). Readers check it."""
    length = decoder_for(snapshot).length
    return length if length > 0 else None


_ROW_KINDS = pa.array(ROW_KINDS, pa.string())


def _row_vector(names: list[str], children: list[Vector], layout: RowMask) -> Vector:
    """A Row: its bit mask (kind bits unless legacy, one null bit per field; unused bits that are not
    0 miss), then the fields that are not null. ``names``: ``kind``, then ``f0``..."""

    def bit(mask: list[pa.Array], shift: int) -> pa.Array:
        return pc.bit_wise_and(pc.shift_right(mask[layout.size - 1 - shift // 8], shift % 8), 1)

    def read(c: _Cursor) -> pa.Array:
        c.need(layout.size)
        mask = [c.byte(j) for j in range(layout.size)]
        if layout.unused and not _all(pc.equal(pc.bit_wise_and(mask[-1], layout.unused), 0)):
            raise ColumnarMiss  # (unused bits all lie in the last byte)
        if layout.kind_shifts is None:
            kind = pa.nulls(len(c.pos), pa.string())
        else:
            low, high = layout.kind_shifts
            kind = pc.take(_ROW_KINDS, pc.add(bit(mask, low), pc.shift_left(bit(mask, high), 1)))
        c.advance(layout.size)
        fields = [_read_where(c, pc.equal(bit(mask, shift), 0), child)
                  for shift, child in zip(layout.null_shifts, children)]
        return pa.StructArray.from_arrays([kind, *fields], names=names)

    return read


def _vector(snapshot: SerializerSnapshot, arrow: pa.DataType) -> Vector | None:
    """The column-wise reader of ``snapshot``'s values as ``arrow`` (the type the column decision
    gave them), or None."""
    simple = _VECTOR.get(snapshot.class_name)
    if simple is not None:
        return simple if SIMPLE_TYPES[snapshot.class_name] == arrow else None
    if snapshot.class_name == ENUM_SNAPSHOT:
        return _enum_vector(snapshot.attributes.get("enum_constants") or []) if arrow == pa.string() else None
    label = COMPOSITE_SNAPSHOTS.get(snapshot.class_name, ("",))[0]
    if label == "Nullable":  # the column has the wrapped serializer's type
        padding = snapshot.attributes.get("null_padding_length")
        if len(snapshot.nested) != 1 or type(padding) is not int or padding < 0:
            return None
        inner = _vector(snapshot.nested[0], arrow)
        return _null_flagged(inner, padding) if inner is not None else None
    if label in ("List", "ArrayList", "Set") and len(snapshot.nested) == 1 and pa.types.is_list(arrow):
        element = _vector(snapshot.nested[0], arrow.value_type)
        if element is None:
            return None
        if label == "Set":  # each element has a null flag
            return _list_vector(snapshot, arrow, _null_flagged(element), None)
        return _list_vector(snapshot, arrow, element, _fixed_width(snapshot.nested[0]))
    if label == "Map" and len(snapshot.nested) == 2 and pa.types.is_map(arrow):
        key, value = _vector(snapshot.nested[0], arrow.key_type), _vector(snapshot.nested[1], arrow.item_type)
        return _map_vector(snapshot, arrow, key, value) if key is not None and value is not None else None
    if not pa.types.is_struct(arrow):
        return None
    names = [arrow.field(i).name for i in range(arrow.num_fields)]
    first = 0  # the first struct field that is a serialized field
    if snapshot.class_name == POJO_SNAPSHOT:
        fields = snapshot.pojo_fields or []
        if [f.name for f in fields] != names or any(f.snapshot is None for f in fields):
            return None
        nested = [f.snapshot for f in fields]
        build = _pojo_vector
    elif label == "Tuple" and len(snapshot.nested) == len(names):
        nested = snapshot.nested
        build = _struct_vector
    elif label == "Row" and names == ["kind", *(f"f{i}" for i in range(len(snapshot.nested)))] \
            and arrow.field(0).type == pa.string() and type(snapshot.attributes.get("supports_row_kind")) is bool:
        nested, first = snapshot.nested, 1
        layout = RowMask.of(len(nested), snapshot.attributes["supports_row_kind"])

        def build(names: list[str], children: list[Vector]) -> Vector:
            return _row_vector(names, children, layout)
    else:
        return None
    children = [_vector(n, arrow.field(first + i).type) for i, n in enumerate(nested)]
    if any(child is None for child in children):
        return None
    return build(names, children)


@dataclass(frozen=True)
class _Field:
    """How to read one serialized field column-wise: ``read(cursor) -> (values, ttl timestamps or None)``."""

    read: Callable[[_Cursor], tuple[pa.Array, pa.Array | None]]
    #: Only valid as the last field of its bytes (a per-row decoder that must end at the row's end).
    last_only: bool = False
    #: The byte width of every value (TTL timestamp included) when it is fixed, else None.
    width: int | None = None


def _unwrap(snapshot: SerializerSnapshot | None) -> tuple[SerializerSnapshot | None, bool]:
    """``(user serializer, TTL?)`` as :func:`repair.formats.flink.values.decoder_for` reads them."""
    ttl = False
    while snapshot is not None:
        if snapshot.class_name == TTL_AWARE_SNAPSHOT and len(snapshot.nested) == 1:
            snapshot = snapshot.nested[0]
        elif COMPOSITE_SNAPSHOTS.get(snapshot.class_name, ("",))[0] == "TTL" and 1 <= len(snapshot.nested) <= 2:
            if ttl:
                return None, ttl  # TTL inside TTL: leave it to the row path
            snapshot, ttl = snapshot.nested[-1], True
        else:
            break
    return snapshot, ttl


#: The composites read column-wise: by :func:`_vector`'s branch for each (from their nested serializers'
#: readers), or, for the TTL wrappers, their user value's reader after :func:`_unwrap` (the timestamp a
#: column of its own).
registry.register(registry.COLUMN_READER, {
    **dict.fromkeys((registry.ENUM, registry.NULLABLE, registry.LIST, registry.ARRAY_LIST, registry.SET, registry.MAP,
                     registry.POJO, registry.TUPLE, registry.ROW), _vector),
    **dict.fromkeys((registry.TTL, registry.TTL_V2, registry.TTL_AWARE), _unwrap),
})


def field_reader(snapshot: SerializerSnapshot | None, arrow: pa.DataType | None) -> _Field:
    """The column-wise reader of values of ``snapshot`` for a column of Arrow type ``arrow`` (None: JSON
    text); raises :class:`ColumnarMiss` when there is none."""
    if arrow is None:
        raise ColumnarMiss  # JSON text columns come from the row path
    inner, ttl = _unwrap(snapshot)
    if inner is None:
        raise ColumnarMiss
    read = _vector(inner, arrow)
    if read is not None:

        def vector_read(c: _Cursor) -> tuple[pa.Array, pa.Array | None]:
            timestamps = _number(pa.int64())(c) if ttl else None
            return read(c), timestamps

        return _Field(vector_read, width=_fixed_width(snapshot))
    decoder = decoder_for(snapshot)  # TTL included: the fast path returns TtlValue
    if decoder.fast is None:
        raise ColumnarMiss
    convert = column_converter(arrow)

    def row_read(c: _Cursor) -> tuple[pa.Array, pa.Array | None]:
        values, stops = _decode_rows(decoder, c)
        if not _all(pc.equal(stops, c.ends)):
            raise ColumnarMiss
        timestamps = []
        for i, value in enumerate(values):
            if type(value) is TtlValue:
                timestamps.append(value.timestamp)
                values[i] = value.value
            else:
                timestamps.append(None)
        array, bad = to_arrow(values, arrow, convert)
        if bad:
            raise ColumnarMiss  # the row path writes null with the reason in `error`
        c.pos = stops
        return array, pa.array(timestamps, pa.int64()) if ttl else None

    return _Field(row_read, last_only=True)


def _decode_rows(decoder: Decoder, c: _Cursor) -> tuple[list, pa.Array]:
    """``(values, positions after them)``: the value at every row's position, decoded by ``decoder``'s fast
    path (or its exact reader where the fast path declines, e.g. non-ASCII text), one row at a time.
    Bytes neither decodes miss: the row path names them."""
    fast = decoder.fast
    items = c.src.items
    values, stops = [], []
    bases = pc.take(c.src.starts, c.rows).to_pylist()
    for row, base, pos, end in zip(c.rows.to_pylist(), bases, c.pos.to_pylist(), c.ends.to_pylist()):
        data = items[row]
        try:
            if fast is None:
                raise FastMiss
            value, stop = fast(data, pos - base)
        except FAST_MISSES:
            try:
                value, stop = decoder.decode(data, pos - base, end - base)
            except (RepairError, UnicodeError):
                raise ColumnarMiss from None
        values.append(value)
        stops.append(base + stop)
    return values, pa.array(stops, pa.int64())


def _one_by_one(snapshot: SerializerSnapshot, arrow: pa.DataType) -> Vector:
    """``snapshot``'s values read row by row by its decoder, as ``arrow`` (a value Arrow cannot hold
    exactly misses)."""
    decoder, convert = decoder_for(snapshot), column_converter(arrow)

    def read(c: _Cursor) -> pa.Array:
        values, stops = _decode_rows(decoder, c)
        array, bad = to_arrow(values, arrow, convert)
        if bad:
            raise ColumnarMiss
        c.pos = stops
        return array

    return read


# -- one batch -----------------------------------------------------------------------------------


def _check_suffix(c: _Cursor, length: pa.Array) -> None:
    """The key/namespace length suffix (``writeVariableIntBytes``: lowest byte first, at least one byte)."""
    if not _all(pc.less(length, 1 << 16)):
        raise ColumnarMiss
    size = pc.if_else(pc.less(length, 256), 1, 2).cast(pa.int64())
    c.need(size)
    low = c.byte()
    high = pc.if_else(pc.equal(size, 2), pc.take(c.src.data, pc.min_element_wise(pc.add(c.pos, 1), pc.subtract(c.ends, 1))), 0)
    if not _all(pc.equal(pc.add(low.cast(pa.int64()), pc.shift_left(high.cast(pa.int64()), 8)), length)):
        raise ColumnarMiss
    c.advance(size)


class ColumnarStateDecoder:
    """Decodes batches of one keyed state's live entries column-wise (see the module docstring).

    Built once per state and subtask; :meth:`decode` raises :class:`ColumnarMiss` for a batch it cannot
    do (and the constructor for a state it can never do)."""

    def __init__(self, state: StateMetaInfo, key_serializer: SerializerSnapshot | None, max_parallelism: int,
                 columns: StateColumns):
        self.kind = state.kind
        self.prefix = key_group_prefix_bytes(max_parallelism)
        self.types = {name: columns.columns[name].storage_type for name in ("key", "namespace", "user_key", "value")}
        arrow = {name: columns.columns[name].arrow for name in self.types}
        value = state.serializer("VALUE_SERIALIZER")
        if self.kind == "priority-queue":
            if value is None or len(value.nested) != 2:
                raise ColumnarMiss
            key_snapshot, namespace_snapshot = value.nested
        else:
            key_snapshot, namespace_snapshot = key_serializer, state.serializer("NAMESPACE_SERIALIZER")
        self.key = field_reader(key_snapshot, arrow["key"])
        self.namespace = field_reader(namespace_snapshot, arrow["namespace"])
        if self.key.last_only or self.namespace.last_only:
            raise ColumnarMiss
        key_decoder, namespace_decoder = decoder_for(key_snapshot), decoder_for(namespace_snapshot)
        self.suffixes = self.kind != "priority-queue" and key_decoder.is_variable_length and namespace_decoder.is_variable_length
        nested = value.nested if value is not None else []
        if self.kind == "list":
            self.value = field_reader(nested[0] if len(nested) == 1 else None, arrow["value"])
            if self.value.last_only:
                raise ColumnarMiss  # elements are followed by a delimiter
        elif self.kind == "map":
            self.user_key = field_reader(nested[0] if len(nested) == 2 else None, arrow["user_key"])
            self.value = field_reader(nested[1] if len(nested) == 2 else None, arrow["value"])
        elif self.kind != "priority-queue":
            self.value = field_reader(value, arrow["value"])

    def decode(self, keys: pa.BinaryArray | list[bytes], values: pa.BinaryArray | list[bytes], first_group: int,
               last_group: int) -> tuple[dict[str, pa.Array], int]:
        """``(columns, outside)``: the output columns of the entries (their keys and values, binary
        arrays or lists of bytes) whose key group is in ``[first_group, last_group]``, and how many
        entries were outside that range (dropped)."""
        key_array = _binary(keys)
        value_array = _binary(values)
        if len(key_array) != len(value_array):
            raise ValueError(f"{len(key_array)} keys and {len(value_array)} values")
        K = _Bytes(key_array)
        n = len(key_array)
        lengths = pc.subtract(K.ends, K.starts)
        if not _all(pc.greater_equal(lengths, self.prefix)):
            raise ColumnarMiss
        group = pc.take(K.data, K.starts).cast(pa.int32())
        if self.prefix == 2:
            group = pc.add(pc.shift_left(group, 8), pc.take(K.data, pc.add(K.starts, 1)).cast(pa.int32()))
        inside = pc.and_(pc.greater_equal(group, first_group), pc.less_equal(group, last_group))
        outside = n - pc.sum(inside.cast(pa.int64())).as_py() if n else 0
        if outside:
            key_array = pc.filter(key_array, inside)
            value_array = pc.filter(value_array, inside)
            K = _Bytes(key_array)
            group = pc.filter(group, inside)
            n = len(key_array)
        V = _Bytes(value_array)
        rows = _arange(n)
        kc = _Cursor(K, rows, K.ends, pc.add(K.starts, self.prefix), whole=True)
        columns: dict[str, pa.Array] = {"key_group": group}
        if self.kind == "priority-queue":
            if not _all(pc.equal(pc.subtract(V.ends, V.starts), 0)):
                raise ColumnarMiss
            raw_start = kc.pos
            flipped = kc.big_endian(pa.int64())
            kc.advance(8)
            columns["timestamp"] = pc.bit_wise_xor(flipped, _SIGN)
            columns["key"], _ = self.key.read(kc)
            columns["namespace"], _ = self.namespace.read(kc)
            if not kc.at_end():
                raise ColumnarMiss
            columns["key_raw"] = kc.slices(raw_start, K.ends)
            columns["value_raw"] = value_array
            return self._complete(columns, n), outside
        key_start = kc.pos
        columns["key"], _ = self.key.read(kc)
        key_end = kc.pos
        if self.suffixes:
            _check_suffix(kc, pc.subtract(key_end, key_start))
        namespace_start = kc.pos
        columns["namespace"], _ = self.namespace.read(kc)
        namespace_end = kc.pos
        if self.suffixes:
            _check_suffix(kc, pc.subtract(namespace_end, namespace_start))
        columns["key_raw"] = kc.slices(key_start, key_end)
        columns["namespace_raw"] = kc.slices(namespace_start, namespace_end)
        if self.kind == "map":
            columns["user_key_raw"] = kc.slices(kc.pos, K.ends)
            columns["user_key"], _ = self.user_key.read(kc)
            if not kc.at_end():
                raise ColumnarMiss
            columns["value"], columns["ttl_timestamp"] = self._map_values(V, n)
            columns["value_raw"] = value_array
            return self._complete(columns, n), outside
        if not kc.at_end():
            raise ColumnarMiss
        vc = _Cursor(V, rows, V.ends, V.starts, whole=True)
        if self.kind == "list":
            return self._list_rows(columns, vc, n), outside
        columns["value"], columns["ttl_timestamp"] = self.value.read(vc)
        if not vc.at_end():
            raise ColumnarMiss
        columns["value_raw"] = value_array
        return self._complete(columns, n), outside

    def _map_values(self, V: _Bytes, n: int) -> tuple[pa.Array, pa.Array | None]:
        vc = _Cursor(V, _arange(n), V.ends, V.starts, whole=True)
        vc.need(1)
        flag = vc.byte()
        is_null = pc.equal(flag, 1)
        if not _all(pc.less_equal(flag, 1)) or not _all(pc.or_(pc.invert(is_null), pc.equal(pc.subtract(V.ends, V.starts), 1))):
            raise ColumnarMiss
        vc.advance(1)
        if not _all(pc.invert(is_null)):
            present = vc.subset(pc.invert(is_null))
            values, timestamps = self.value.read(present)
            if not present.at_end():
                raise ColumnarMiss
            mask = pc.invert(is_null)
            return _scatter(values, mask), _scatter(timestamps, mask) if timestamps is not None else None
        values, timestamps = self.value.read(vc)
        if not vc.at_end():
            raise ColumnarMiss
        return values, timestamps

    def _list_rows(self, columns: dict[str, pa.Array], vc: _Cursor, n: int) -> dict[str, pa.Array]:
        """One row per element: elements read in rounds, round ``j`` reading the ``j``-th element of
        every list that has one (elements of a fixed width: all at once)."""
        if self.value.width is not None:
            return self._fixed_width_list_rows(columns, vc)
        parts: list[tuple[pa.Array, pa.Array, pa.Array, pa.Array | None, pa.Array]] = []  # rows, index, values, ttl, raw
        active = vc
        for step in range(MAX_LIST_STEPS + 1):
            if len(active.rows) == 0:
                break
            if step == MAX_LIST_STEPS:
                raise ColumnarMiss
            start = active.pos
            values, timestamps = self.value.read(active)
            raw = active.slices(start, active.pos)
            parts.append((active.rows, pa.repeat(pa.scalar(step, pa.int32()), len(active.rows)), values, timestamps, raw))
            going_on = pc.less(active.pos, active.ends)
            if _all(pc.invert(going_on)):
                break
            active = active.subset(going_on)
            active.need(1)
            if not _all(pc.equal(active.byte(), _LIST_DELIMITER)):
                raise ColumnarMiss
            active.advance(1)
            if not _all(pc.less(active.pos, active.ends)):
                raise ColumnarMiss  # a trailing delimiter
        if not parts:
            return self._complete({name: array.slice(0, 0) for name, array in columns.items()}, 0)
        if len(parts) == 1:  # one element per list (round 0 read every row): the rows are in order already
            _, index, values, timestamps, raw = parts[0]
            out = {**columns, "list_index": index, "value": values, "value_raw": raw}
            if timestamps is not None:
                out["ttl_timestamp"] = timestamps
            return self._complete(out, len(index))
        rows = pa.concat_arrays([p[0] for p in parts])
        # the rows in key order, elements in list order: sort by (row, index)
        order = pc.sort_indices(pa.table({"row": rows, "index": pa.concat_arrays([p[1] for p in parts])}),
                                sort_keys=[("row", "ascending"), ("index", "ascending")])
        parent = pc.take(rows, order)
        out = {name: pc.take(array, parent) for name, array in columns.items()}
        out["list_index"] = pc.take(pa.concat_arrays([p[1] for p in parts]), order)
        out["value"] = pc.take(pa.concat_arrays([p[2] for p in parts]), order)
        if parts[0][3] is not None:
            out["ttl_timestamp"] = pc.take(pa.concat_arrays([p[3] for p in parts]), order)
        out["value_raw"] = pc.take(pa.concat_arrays([p[4] for p in parts]), order)
        return self._complete(out, len(parent))

    def _fixed_width_list_rows(self, columns: dict[str, pa.Array], vc: _Cursor) -> dict[str, pa.Array]:
        """List rows of elements ``w`` bytes wide: ``(length + 1) / (w + 1)`` of them per value (a
        length that does not divide misses), a delimiter after every one but the last."""
        stride = self.value.width + 1
        room = pc.add(pc.subtract(vc.ends, vc.pos), 1)
        count = pc.divide(room, stride)  # (integer division)
        if not _all(pc.equal(pc.multiply(count, stride), room)):
            raise ColumnarMiss
        items, parent, index = _spread(vc, count, stride)
        start = items.pos
        values, timestamps = self.value.read(items)
        if not _all(pc.equal(items.pos, pc.add(start, stride - 1))):
            raise ColumnarMiss
        delimiters = pc.filter(items.pos, pc.less(pc.add(index, 1), pc.take(count, parent)))
        if not _all(pc.equal(pc.take(vc.src.data, delimiters), _LIST_DELIMITER)):
            raise ColumnarMiss
        one_each = len(parent) == len(vc.pos)  # (a row has at least one element): the rows as they are
        out = dict(columns) if one_each else {name: pc.take(array, parent) for name, array in columns.items()}
        out["list_index"] = index.cast(pa.int32())
        out["value"] = values
        if timestamps is not None:
            out["ttl_timestamp"] = timestamps
        out["value_raw"] = _slices(vc.src, start, items.pos)
        return self._complete(out, len(parent))

    def _complete(self, columns: dict[str, pa.Array], n: int) -> dict[str, pa.Array]:
        """Every output column, typed; null where this kind of state has nothing."""
        out = {}
        for name, arrow in (*self.types.items(), *FIXED_COLUMN_TYPES.items()):
            array = columns.get(name)
            out[name] = pa.nulls(n, arrow) if array is None else array
        return out


def _scatter(values: pa.Array, mask: pa.Array) -> pa.Array:
    """An array as long as ``mask`` with the ``values`` in order where it is true, null elsewhere."""
    position = pc.replace_with_mask(pa.nulls(len(mask), pa.int64()), mask, _arange(len(values)))
    return pc.take(values, position)
