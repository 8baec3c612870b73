"""Decoders of Flink-serialized values, chosen by serializer snapshot.

``decoder_for(snapshot)`` returns a :class:`Decoder` whose ``decode(data, offset)`` gives ``(value,
offset after it)``. Errors are :class:`~repair.errors.FormatError` naming the field and its byte offset.
A snapshot class without a known wire format gives a decoder that raises
:class:`UnsupportedSerializerError` ("cannot decode <class>") on use, so callers can keep raw bytes.

Wire formats (flink-core / flink-runtime, ``serialize`` methods):

* ``StringSerializer``: ``StringValue.writeString``, length+1 then UTF-16 chars, each a little-endian
  base-128 varint (high bit = continuation); length 0 is null. Not Java ``writeUTF``.
* ``Long``/``Int``/``Short``/``Byte``/``Double``/``Float``/``Char``: big-endian; ``Boolean``: one byte.
* ``byte[]``: ``int length`` + bytes. The other primitive arrays (``boolean[]``, ``char[]``, ``short[]``,
  ``int[]``, ``long[]``, ``float[]``, ``double[]``): ``int length`` + the elements as the boxed serializer
  writes each (a ``char[]`` decoded as one string of its UTF-16 units). ``VoidNamespace``, ``GlobalWindow`` and ``Void``: one byte 0 (any
  other byte is an error here; Flink's readers skip the byte unread). ``TimeWindow``: start, end.
* ``Tuple``: the fields in order, no null flags. ``Enum``: ``int ordinal``.
* ``POJO``: ``byte flags`` (1 null, 2 no subclass); then per field ``bool isNull`` + field bytes.
* ``List``: ``int size`` + elements. ``Map``: ``int size`` + (key, ``bool isNull``, value if not null).
* ``Set`` (2.x ``SetSerializer``): ``int size`` + (``bool isNull``, element if not null), a list here.
* ``Row`` (``RowSerializer``): a bit mask of ``ceil((2 + n) / 8)`` bytes, most significant bit first
  (``MaskUtils.writeMask``): two ``RowKind`` bits (kind byte = first + 2 * second: 0 ``+I``, 1 ``-U``,
  2 ``+U``, 3 ``-D``), then one bit per field, set when the field is null; unused bits are 0. Then the
  non-null fields in order. In legacy mode (``supports_row_kind`` false) the mask has no kind bits and
  the kind is None. Decoded as ``{"kind": ..., "f0": ..., ...}`` (the snapshot has no field names).
* ``Nullable`` (``NullableSerializer``): ``bool isNull``; if null, ``null_padding_length`` padding
  bytes (0), else the wrapped value.
* ``TTL`` (``TtlSerializer``, a ``CompositeSerializer``): ``long lastAccess`` + user value.
* ``Timer`` (``TimerSerializer``): ``long timestamp`` with its sign bit flipped, key, namespace.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, NamedTuple

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import avro, kryo, registry, row_data, scala_types
from repair.formats.flink.serializers import (
    DECIMAL_DATA_SNAPSHOT,
    KRYO_GENERATION,
    KRYO_SNAPSHOT,
    POJO_SNAPSHOT,
    ROW_DATA_SNAPSHOT,
    SIMPLE_SNAPSHOTS,
    TIMESTAMP_DATA_SNAPSHOT,
    SerializerSnapshot,
    describe,
)
from repair.formats.flink.string_value import read_string_value

_F64 = struct.Struct(">d")
_F32 = struct.Struct(">f")
_SIGN_BIT = 1 << 63


class TtlValue(NamedTuple):
    """``TtlValue``: the last-access timestamp (ms) and the user value."""

    timestamp: int
    value: Any


class Timer(NamedTuple):
    """``TimerHeapInternalTimer``: timestamp (ms), key and namespace."""

    timestamp: int
    key: Any
    namespace: Any


#: The namespace of non-windowed state (VoidNamespace.INSTANCE).
VOID_NAMESPACE = None


#: ``fast(data, offset) -> (value, offset after it)`` over ``bytes``: a decoder's fast path. It gives
#: the same value as the exact reader for well-formed bytes and raises one of :data:`FAST_MISSES` for
#: anything else (corrupt or unusual bytes, non-ASCII strings): the caller then runs the exact reader,
#: which decodes or raises the :class:`FormatError` naming the field.
FastDecode = Callable[[bytes, int], "tuple[Any, int]"]


class FastMiss(Exception):
    """Raised by a fast path for bytes it leaves to the exact reader."""


#: What a fast path raises for bytes it does not decode (never escapes to users).
FAST_MISSES = (FastMiss, IndexError, struct.error)


class Decoder:
    """Decodes one serialized value. ``length`` is Flink's ``getLength()`` (-1: variable length);
    ``fast`` the optional :data:`FastDecode` of the same format (see :data:`FAST_MISSES`)."""

    def __init__(self, name: str, read: Callable[[ByteReader], Any], length: int = -1, fast: FastDecode | None = None,
                 *, supported: bool = True):
        self.name = name
        self._read = read
        self.length = length
        self.fast = fast
        #: False for a serializer without a known wire format (every read raises
        #: :class:`UnsupportedSerializerError`); callers may still delimit its bytes by their neighbours.
        self.supported = supported

    @property
    def is_variable_length(self) -> bool:
        return self.length < 0

    def read(self, reader: ByteReader) -> Any:
        return self._read(reader)

    def decode(self, data: bytes, offset: int = 0, end: int | None = None) -> tuple[Any, int]:
        """The value at ``offset`` of ``data`` (not reading at or past ``end``) and the offset after it."""
        reader = ByteReader(data, offset, end)
        value = self._read(reader)
        return value, reader.pos

    def decode_all(self, data: bytes, offset: int = 0, field: str = "value") -> Any:
        """The value filling ``data[offset:]`` exactly; trailing bytes are a :class:`FormatError`."""
        value, end = self.decode(data, offset)
        if end != len(data):
            raise FormatError(field, end, f"the end of the {self.name} bytes", f"{len(data) - end} more bytes")
        return value

    def __repr__(self) -> str:
        return f"Decoder({self.name})"


# -- primitives --------------------------------------------------------------------------------------


def _char(r: ByteReader) -> str:
    return chr(r.u16("char"))


def _double(r: ByteReader) -> float:
    return _F64.unpack(r.raw(8, "double"))[0]


def _float(r: ByteReader) -> float:
    return _F32.unpack(r.raw(4, "float"))[0]


def _byte_array(r: ByteReader) -> bytes:
    return r.raw(r.count("byte[] length"), "byte[]")


class PrimitiveArray(NamedTuple):
    """A primitive array serializer's elements: their :mod:`struct` code (big-endian) and byte width."""

    code: str
    width: int

    def unpack(self, data: bytes, what: str, at: int) -> Any:
        """The elements of ``data`` (exactly ``len(data) // width`` of them): a list, a ``char[]`` a string."""
        if self.code == "H":  # char[]: UTF-16 code units; a lone surrogate stays in the string, as Character's does
            return data.decode("utf-16-be", "surrogatepass")
        values = list(struct.unpack(f">{len(data) // self.width}{self.code}", data))
        if self.code == "?" and any(byte > 1 for byte in data):
            raise FormatError(what, at, "booleans (0 or 1)", data.hex())
        return values


#: ``<Kind>PrimitiveArraySerializer`` (all but byte[]): ``int length`` then the elements.
PRIMITIVE_ARRAYS: dict[registry.Serializer, PrimitiveArray] = {
    registry.BOOLEAN_ARRAY: PrimitiveArray("?", 1), registry.CHAR_ARRAY: PrimitiveArray("H", 2),
    registry.SHORT_ARRAY: PrimitiveArray("h", 2), registry.INT_ARRAY: PrimitiveArray("i", 4),
    registry.LONG_ARRAY: PrimitiveArray("q", 8), registry.FLOAT_ARRAY: PrimitiveArray("f", 4),
    registry.DOUBLE_ARRAY: PrimitiveArray("d", 8),
}


def _primitive_array(serializer: registry.Serializer) -> Callable[[ByteReader], Any]:
    layout, what = PRIMITIVE_ARRAYS[serializer], serializer.type_name

    def read(r: ByteReader) -> Any:
        size = r.count(f"{what} length", item_size=layout.width)
        at = r.offset
        return layout.unpack(r.raw(size * layout.width, what), what, at)

    return read


def _fast_primitive_array(serializer: registry.Serializer) -> FastDecode:
    layout, what = PRIMITIVE_ARRAYS[serializer], serializer.type_name

    def fast(data: bytes, pos: int) -> tuple[Any, int]:
        size = _I32.unpack_from(data, pos)[0]
        start = pos + 4
        end = start + size * layout.width
        if size < 0 or end > len(data):
            raise FastMiss
        try:
            return layout.unpack(data[start:end], what, start), end
        except FormatError:
            raise FastMiss from None

    return fast


def _one_zero_byte(what: str) -> Callable[[ByteReader], None]:
    def read(r: ByteReader) -> None:
        at = r.offset
        value = r.u8(what)
        if value != 0:
            raise FormatError(what, at, "0x00", f"0x{value:02x}")
        return None

    return read


def _time_window(r: ByteReader) -> dict[str, int]:
    return {"start": r.i64("window start"), "end": r.i64("window end")}


#: Leaf serializer snapshot class -> (reader, Flink getLength()).
_SIMPLE: dict[str, tuple[Callable[[ByteReader], Any], int]] = registry.register(registry.DECODE, {
    registry.STRING: (read_string_value, -1),
    registry.LONG: (lambda r: r.i64("long"), 8),
    registry.INT: (lambda r: r.i32("int"), 4),
    registry.SHORT: (lambda r: r.i16("short"), 2),
    registry.BYTE: (lambda r: r.i8("byte"), 1),
    registry.BOOLEAN: (lambda r: r.bool("boolean"), 1),
    registry.DOUBLE: (_double, 8),
    registry.FLOAT: (_float, 4),
    registry.CHAR: (_char, 2),
    registry.VOID: (_one_zero_byte("void"), 1),
    registry.BYTE_ARRAY: (_byte_array, -1),
    # VoidNamespaceSerializer.getLength() is 0, yet it writes one byte
    registry.VOID_NAMESPACE: (_one_zero_byte("void namespace"), 0),
    registry.QUERYABLE_VOID_NAMESPACE: (_one_zero_byte("void namespace"), 0),
    registry.TIME_WINDOW: (_time_window, 16),
    # countWindow / GlobalWindows: the one GlobalWindow, decoded as None like VoidNamespace
    # (GlobalWindow.Serializer.getLength() is 0, yet it writes one byte)
    registry.GLOBAL_WINDOW: (_one_zero_byte("global window"), 0),
    registry.STRING_DATA: (row_data.string_data_read, -1),
    registry.NULL: (_one_zero_byte("null"), 1),  # NullSerializer writes one byte 0
    **{serializer: (_primitive_array(serializer), -1) for serializer in PRIMITIVE_ARRAYS},
})


# -- fast paths over bytes (see FastDecode) ----------------------------------------------------------


def _fast_struct(fmt: str) -> FastDecode:
    unpack, size = struct.Struct(fmt).unpack_from, struct.calcsize(fmt)

    def fast(data: bytes, pos: int) -> tuple[Any, int]:
        return unpack(data, pos)[0], pos + size  # struct.error when fewer bytes are left

    return fast


def _fast_bool(data: bytes, pos: int) -> tuple[bool, int]:
    value = data[pos]
    if value > 1:
        raise FastMiss
    return value == 1, pos + 1


def _fast_zero_byte(data: bytes, pos: int) -> tuple[None, int]:
    if data[pos] != 0:
        raise FastMiss
    return None, pos + 1


def _fast_char(data: bytes, pos: int) -> tuple[str, int]:
    return chr(_U16.unpack_from(data, pos)[0]), pos + 2


def _fast_string(data: bytes, pos: int) -> tuple[str | None, int]:
    """``StringValue`` of ASCII text (every char one byte); anything else is left to the exact reader."""
    length = data[pos]
    pos += 1
    if length >= 0x80:  # a longer length: at most 5 varint bytes, as the exact reader allows
        length &= 0x7F
        shift = 7
        while True:
            byte = data[pos]
            pos += 1
            if byte < 0x80:
                length |= byte << shift
                break
            if shift >= 28:
                raise FastMiss
            length |= (byte & 0x7F) << shift
            shift += 7
    if length == 0:
        return None, pos
    end = pos + length - 1
    chunk = data[pos:end]
    if len(chunk) != length - 1 or not chunk.isascii():
        raise FastMiss
    return chunk.decode("ascii"), end


def _fast_byte_array(data: bytes, pos: int) -> tuple[bytes, int]:
    size = _I32.unpack_from(data, pos)[0]
    pos += 4
    end = pos + size
    if size < 0 or end > len(data):
        raise FastMiss
    return data[pos:end], end


def _fast_time_window(data: bytes, pos: int) -> tuple[dict[str, int], int]:
    start, end = _I64_PAIR.unpack_from(data, pos)
    return {"start": start, "end": end}, pos + 16


_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_PAIR = struct.Struct(">qq")
_FAST_SIMPLE: dict[str, FastDecode] = registry.register(registry.FAST_DECODE, {
    registry.STRING: _fast_string,
    registry.LONG: _fast_struct(">q"),
    registry.INT: _fast_struct(">i"),
    registry.SHORT: _fast_struct(">h"),
    registry.BYTE: _fast_struct(">b"),
    registry.BOOLEAN: _fast_bool,
    registry.DOUBLE: _fast_struct(">d"),
    registry.FLOAT: _fast_struct(">f"),
    registry.CHAR: _fast_char,
    registry.VOID: _fast_zero_byte,
    registry.BYTE_ARRAY: _fast_byte_array,
    registry.VOID_NAMESPACE: _fast_zero_byte,
    registry.QUERYABLE_VOID_NAMESPACE: _fast_zero_byte,
    registry.TIME_WINDOW: _fast_time_window,
    registry.GLOBAL_WINDOW: _fast_zero_byte,
    **{serializer: _fast_primitive_array(serializer) for serializer in PRIMITIVE_ARRAYS},
})


# -- composites --------------------------------------------------------------------------------------


def _unsupported(snapshot: SerializerSnapshot | None, detail: str | None = None) -> Decoder:
    class_name = snapshot.class_name if snapshot is not None else "<no serializer snapshot>"
    if detail is None and snapshot is not None and "undecoded" in snapshot.attributes:
        detail = f"cannot decode {class_name}: its serializer snapshot is unreadable ({snapshot.attributes['undecoded']})"

    def read(r: ByteReader) -> Any:
        raise UnsupportedSerializerError(class_name, r.offset, detail=detail)

    return Decoder(describe(snapshot) if snapshot is not None else "?", read, supported=False)


def _nested(snapshot: SerializerSnapshot, count: int) -> list[Decoder] | None:
    if len(snapshot.nested) != count:
        return None
    return [decoder_for(n) for n in snapshot.nested]


def _fixed_sum(decoders: list[Decoder]) -> int:
    return -1 if any(d.length < 0 for d in decoders) else sum(d.length for d in decoders)


def _all_fast(decoders: list[Decoder]) -> list[FastDecode] | None:
    fast = [d.fast for d in decoders]
    return None if None in fast else fast  # type: ignore[return-value]


def _tuple(snapshot: SerializerSnapshot) -> Decoder:
    fields = [decoder_for(n) for n in snapshot.nested]

    def read(r: ByteReader) -> list:
        return [f.read(r) for f in fields]

    fast_fields = _all_fast(fields)

    def fast(data: bytes, pos: int) -> tuple[list, int]:
        out = []
        for f in fast_fields:
            value, pos = f(data, pos)
            out.append(value)
        return out, pos

    return Decoder(describe(snapshot), read, _fixed_sum(fields), fast if fast_fields is not None else None)


def _list(snapshot: SerializerSnapshot) -> Decoder | None:
    nested = _nested(snapshot, 1)
    return _sequence(describe(snapshot), nested[0], "list size") if nested is not None else None


def _set(snapshot: SerializerSnapshot) -> Decoder | None:
    """A Set: a list whose elements each have a null flag (a Nullable without padding)."""
    nested = _nested(snapshot, 1)
    if nested is None:
        return None
    return _sequence(describe(snapshot), _null_flagged(nested[0], 0, "set element is null"), "set size")


def _sequence(name: str, element: Decoder, size_field: str) -> Decoder:
    """``int size`` + that many elements (each at least one byte), as a list."""

    def read(r: ByteReader) -> list:
        size = r.count(size_field)
        return [element.read(r) for _ in range(size)]

    fast_element = element.fast

    def fast(data: bytes, pos: int) -> tuple[list, int]:
        size = _I32.unpack_from(data, pos)[0]
        pos += 4
        if not 0 <= size <= len(data) - pos:
            raise FastMiss
        out = []
        for _ in range(size):
            value, pos = fast_element(data, pos)
            out.append(value)
        return out, pos

    return Decoder(name, read, fast=fast if fast_element is not None else None)


def _map(snapshot: SerializerSnapshot) -> Decoder | None:
    nested = _nested(snapshot, 2)
    if nested is None:
        return None
    key, value = nested

    def read(r: ByteReader) -> list[tuple[Any, Any]]:
        size = r.count("map size", item_size=2)
        out = []
        for _ in range(size):
            k = key.read(r)
            out.append((k, None if r.bool("map value is null") else value.read(r)))
        return out

    fast_key, fast_value = key.fast, value.fast

    def fast(data: bytes, pos: int) -> tuple[list[tuple[Any, Any]], int]:
        size = _I32.unpack_from(data, pos)[0]
        pos += 4
        if not 0 <= size <= (len(data) - pos) // 2:
            raise FastMiss
        out = []
        for _ in range(size):
            k, pos = fast_key(data, pos)
            is_null, pos = _fast_bool(data, pos)
            if is_null:
                out.append((k, None))
            else:
                v, pos = fast_value(data, pos)
                out.append((k, v))
        return out, pos

    return Decoder(describe(snapshot), read, fast=fast if fast_key is not None and fast_value is not None else None)


def _ttl(snapshot: SerializerSnapshot) -> Decoder | None:
    # TtlSerializer(LongSerializer, user serializer); older snapshots may nest only the user one.
    if not snapshot.nested or len(snapshot.nested) > 2:
        return None
    value = decoder_for(snapshot.nested[-1])

    def read(r: ByteReader) -> TtlValue:
        return TtlValue(r.i64("ttl timestamp"), value.read(r))

    fast_value = value.fast

    def fast(data: bytes, pos: int) -> tuple[TtlValue, int]:
        timestamp = _I64.unpack_from(data, pos)[0]
        user, pos = fast_value(data, pos + 8)
        return TtlValue(timestamp, user), pos

    return Decoder(describe(snapshot), read, -1 if value.length < 0 else 8 + value.length,
                   fast if fast_value is not None else None)


def _timer(snapshot: SerializerSnapshot) -> Decoder | None:
    nested = _nested(snapshot, 2)
    if nested is None:
        return None
    key, namespace = nested

    def read(r: ByteReader) -> Timer:
        flipped = r.i64("timer timestamp") & 0xFFFFFFFFFFFFFFFF
        timestamp = flipped ^ _SIGN_BIT
        if timestamp >= _SIGN_BIT:
            timestamp -= 1 << 64
        return Timer(timestamp, key.read(r), namespace.read(r))

    fast_key, fast_namespace = key.fast, namespace.fast

    def fast(data: bytes, pos: int) -> tuple[Timer, int]:
        timestamp = _I64.unpack_from(data, pos)[0] ^ -_SIGN_BIT  # the sign bit flipped back
        k, pos = fast_key(data, pos + 8)
        n, pos = fast_namespace(data, pos)
        return Timer(timestamp, k, n), pos

    return Decoder(describe(snapshot), read, fast=fast if fast_key is not None and fast_namespace is not None else None)


def _pojo(snapshot: SerializerSnapshot) -> Decoder | None:
    fields = snapshot.pojo_fields or []
    if any(f.snapshot is None for f in fields):
        return None
    decoders = [(f.name, decoder_for(f.snapshot)) for f in fields]
    pojo_class = snapshot.attributes.get("pojo_class")

    def read(r: ByteReader) -> dict[str, Any] | None:
        at = r.offset
        flags = r.u8("pojo flags")
        if flags & 1:
            return None
        if flags != 2:
            raise UnsupportedSerializerError(
                POJO_SNAPSHOT, at, detail=f"cannot decode {pojo_class} subclasses (pojo flags 0x{flags:02x})"
            )
        out = {}
        for name, decoder in decoders:
            out[name] = None if r.bool(f"pojo field {name} is null") else decoder.read(r)
        return out

    fast_fields = _all_fast([d for _, d in decoders])
    named = list(zip([name for name, _ in decoders], fast_fields or []))

    def fast(data: bytes, pos: int) -> tuple[dict[str, Any] | None, int]:
        flags = data[pos]
        pos += 1
        if flags & 1:
            return None, pos
        if flags != 2:
            raise FastMiss
        out = {}
        for name, f in named:
            is_null = data[pos]
            if is_null:
                if is_null != 1:
                    raise FastMiss
                out[name] = None
                pos += 1
            else:
                out[name], pos = f(data, pos + 1)
        return out, pos

    return Decoder(describe(snapshot), read, fast=fast if fast_fields is not None else None)


def _enum(snapshot: SerializerSnapshot) -> Decoder:
    constants = snapshot.attributes.get("enum_constants") or []

    def read(r: ByteReader) -> str:
        at = r.offset
        ordinal = r.i32("enum ordinal")
        if not 0 <= ordinal < len(constants):
            raise FormatError("enum ordinal", at, f"0..{len(constants) - 1}", ordinal)
        return constants[ordinal]

    def fast(data: bytes, pos: int) -> tuple[str, int]:
        ordinal = _I32.unpack_from(data, pos)[0]
        if not 0 <= ordinal < len(constants):
            raise FastMiss
        return constants[ordinal], pos + 4

    return Decoder(describe(snapshot), read, 4, fast)


class _KryoDecoder(Decoder):
    """Kryo is decoded for some classes only (:mod:`repair.formats.flink.kryo`): a whole value whose
    reading does not end at its end was not understood (not corrupt), so it stays raw."""

    def decode_all(self, data: bytes, offset: int = 0, field: str = "value") -> Any:
        value, end = self.decode(data, offset)
        if end != len(data):
            raise UnsupportedSerializerError(
                KRYO_SNAPSHOT, end, detail=f"cannot decode {self.name}: {len(data) - end} bytes left after the value read"
            )
        return value


#: ``RowKind.shortString()`` by ``RowKind.toByteValue()``.
ROW_KINDS = ("+I", "-U", "+U", "-D")


class RowMask(NamedTuple):
    """Where ``RowSerializer``'s bit mask keeps what: ``size`` bytes read as one big-endian integer,
    the kind bits at ``kind_shifts`` (None in legacy mode), field ``i``'s null bit at ``null_shifts[i]``;
    the bits of ``unused`` must be 0."""

    size: int
    kind_shifts: tuple[int, int] | None
    null_shifts: tuple[int, ...]
    unused: int

    @classmethod
    def of(cls, fields: int, supports_row_kind: bool) -> "RowMask":
        used = fields + (2 if supports_row_kind else 0)
        size = (used + 7) // 8
        top = 8 * size - 1  # the shift of the first (most significant) bit
        kind = (top, top - 1) if supports_row_kind else None
        first = 2 if supports_row_kind else 0
        return cls(size, kind, tuple(top - first - i for i in range(fields)), (1 << (8 * size - used)) - 1)

    def kind(self, mask: int) -> str | None:
        if self.kind_shifts is None:
            return None
        low, high = self.kind_shifts
        return ROW_KINDS[(mask >> low & 1) | (mask >> high & 1) << 1]


def _row(snapshot: SerializerSnapshot) -> Decoder | None:
    supports_row_kind = snapshot.attributes.get("supports_row_kind")
    if type(supports_row_kind) is not bool:
        return None
    fields = [decoder_for(n) for n in snapshot.nested]
    layout = RowMask.of(len(fields), supports_row_kind)
    plan = [(f"f{i}", shift, f) for i, (shift, f) in enumerate(zip(layout.null_shifts, fields))]

    def read(r: ByteReader) -> dict[str, Any]:
        at = r.offset
        mask = int.from_bytes(r.raw(layout.size, "row null mask"), "big")
        if mask & layout.unused:
            raise FormatError("row null mask", at, "unused mask bits 0", f"0x{mask:0{2 * layout.size}x}")
        out: dict[str, Any] = {"kind": layout.kind(mask)}
        for name, shift, decoder in plan:
            out[name] = None if mask >> shift & 1 else decoder.read(r)
        return out

    fast_fields = _all_fast(fields)
    fast_plan = [(name, shift, f) for (name, shift, _), f in zip(plan, fast_fields or [])]

    def fast(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        end = pos + layout.size
        chunk = data[pos:end]
        if len(chunk) != layout.size:
            raise FastMiss
        mask = int.from_bytes(chunk, "big")
        if mask & layout.unused:
            raise FastMiss
        out: dict[str, Any] = {"kind": layout.kind(mask)}
        pos = end
        for name, shift, f in fast_plan:
            if mask >> shift & 1:
                out[name] = None
            else:
                out[name], pos = f(data, pos)
        return out, pos

    return Decoder(describe(snapshot), read, fast=fast if fast_fields is not None else None)


def _nullable(snapshot: SerializerSnapshot) -> Decoder | None:
    padding = snapshot.attributes.get("null_padding_length")
    nested = _nested(snapshot, 1)
    if nested is None or type(padding) is not int or padding < 0:
        return None
    return _null_flagged(nested[0], padding, "nullable is null", describe(snapshot))


def _null_flagged(inner: Decoder, padding: int, flag_field: str, name: str | None = None) -> Decoder:
    """``bool isNull``, then ``padding`` zero bytes if null, else the ``inner`` value."""

    def read(r: ByteReader) -> Any:
        if not r.bool(flag_field):
            return inner.read(r)
        at = r.offset
        found = r.raw(padding, "null padding")  # bounded by the bytes left
        if found.count(0) != padding:
            raise FormatError("null padding", at, f"{padding} zero bytes", found[:16].hex())
        return None

    fast_inner = inner.fast

    def fast(data: bytes, pos: int) -> tuple[Any, int]:
        is_null, pos = _fast_bool(data, pos)
        if not is_null:
            return fast_inner(data, pos)
        end = pos + padding
        if data.count(0, pos, end) != padding:  # also when fewer bytes are left
            raise FastMiss
        return None, end

    # NullableSerializer.getLength(): 1 + padding when it pads, else variable length
    return Decoder(name or f"Nullable<{inner.name}>", read, 1 + padding if padding > 0 else -1,
                   fast if fast_inner is not None else None)


def _table(snapshot: SerializerSnapshot) -> Decoder | None:
    """flink-table-runtime serializers (see :mod:`repair.formats.flink.row_data`)."""
    name, attributes = snapshot.class_name, snapshot.attributes
    read: Callable[[ByteReader], Any] | None = None
    if name == ROW_DATA_SNAPSHOT:
        read = row_data.row_data_read(attributes.get("logical_types") or [])
    elif name == TIMESTAMP_DATA_SNAPSHOT and type(attributes.get("precision")) is int:
        read = row_data.timestamp_data_read(attributes["precision"])
    elif name == DECIMAL_DATA_SNAPSHOT and type(attributes.get("precision")) is int:
        read = row_data.decimal_data_read(attributes["precision"], attributes.get("scale") or 0)
    return Decoder(describe(snapshot), read) if read is not None else None


def _external(snapshot: SerializerSnapshot) -> Decoder | None:
    """``ExternalSerializer``: the bytes are the nested internal serializer's."""
    nested = _nested(snapshot, 1)
    return nested[0] if nested is not None and nested[0].supported else None


def _raw_value(snapshot: SerializerSnapshot) -> Decoder:
    """``RawValueDataSerializer``: ``int size`` + the bytes of the nested serializer, kept as bytes."""
    return Decoder(describe(snapshot), lambda r: row_data.sized(r, "raw value"))


def _case_class(snapshot: SerializerSnapshot) -> Decoder:
    return Decoder(describe(snapshot), scala_types.case_class_read([decoder_for(n).read for n in snapshot.nested]))


def _scala_wrapping(snapshot: SerializerSnapshot, count: int, wrap: Callable[..., Callable[[ByteReader], Any]]) -> Decoder | None:
    """A Scala Option, collection or Either (:mod:`repair.formats.flink.scala_types`) of nested values
    this module decodes; unsupported (raw bytes kept, the reason naming the element) otherwise."""
    nested = _nested(snapshot, count)
    if nested is None:
        return None
    unsupported = [n.name for n in nested if not n.supported]
    if unsupported:  # an element has no length of its own: the whole value stays raw
        return _unsupported(snapshot, f"cannot decode {describe(snapshot)}: no decoder for {', '.join(unsupported)}")
    return Decoder(describe(snapshot), wrap(*(n.read for n in nested)))


def _ttl_aware(snapshot: SerializerSnapshot) -> Decoder | None:
    """``TtlAwareSerializer`` (Flink 2.x): the wrapped serializer's bytes."""
    return decoder_for(snapshot.nested[0]) if len(snapshot.nested) == 1 else None


def _kryo(snapshot: SerializerSnapshot) -> Decoder:
    type_class = snapshot.attributes.get("type_class")
    registrations = kryo.Registrations(snapshot.attributes.get("kryo_registrations"), snapshot.attributes.get("kryo_registration_serializers"))
    generation = snapshot.attributes.get(KRYO_GENERATION)  # None: both generations are tried
    return _KryoDecoder(describe(snapshot), lambda r: kryo.read_class_and_object(r, type_class, generation, registrations))


def _scala_enum(snapshot: SerializerSnapshot) -> Decoder | None:
    names = snapshot.attributes.get("enum_names")
    return Decoder(describe(snapshot), scala_types.enum_read(names), 4) if isinstance(names, dict) else None


def _avro(snapshot: SerializerSnapshot) -> Decoder:
    read, problem = avro.reader_for(snapshot)
    return Decoder(describe(snapshot), read) if read is not None else _unsupported(snapshot, problem)


_R = registry
#: Each composite's decoder, built from its nested serializers' (None: not decodable, raw bytes kept).
_COMPOSITES: dict[str, Callable[[SerializerSnapshot], Decoder | None]] = registry.register(registry.DECODE, {
    _R.SCALA_CASE_CLASS: _case_class, _R.SCALA_TUPLE2_CASE_CLASS: _case_class,
    _R.SCALA_OPTION: lambda s: _scala_wrapping(s, 1, scala_types.option_read),
    _R.SCALA_TRAVERSABLE: lambda s: _scala_wrapping(s, 1, scala_types.traversable_read),
    _R.SCALA_EITHER: lambda s: _scala_wrapping(s, 2, scala_types.either_read),
    _R.EXTERNAL: _external, _R.RAW_VALUE: _raw_value, _R.TUPLE: _tuple, _R.LIST: _list, _R.ARRAY_LIST: _list,
    _R.MAP: _map, _R.SET: _set, _R.TTL: _ttl, _R.TTL_V2: _ttl, _R.TIMER: _timer, _R.ROW: _row, _R.NULLABLE: _nullable,
    _R.POJO: _pojo, _R.ENUM: _enum, _R.TTL_AWARE: _ttl_aware, _R.ROW_DATA: _table, _R.TIMESTAMP_DATA: _table,
    _R.DECIMAL_DATA: _table, _R.KRYO: _kryo, _R.SCALA_ENUM: _scala_enum, _R.AVRO: _avro,
})
#: The composites whose decoder has a fast path (``Decoder.fast``) when their nested serializers have one.
registry.register(registry.FAST_DECODE, {serializer: _COMPOSITES[serializer.class_name] for serializer in (
    _R.LIST, _R.ARRAY_LIST, _R.MAP, _R.SET, _R.TTL, _R.TTL_V2, _R.TIMER, _R.TUPLE, _R.ROW, _R.NULLABLE, _R.EXTERNAL, _R.POJO,
    _R.ENUM, _R.TTL_AWARE,
)})


def decoder_for(snapshot: SerializerSnapshot | None) -> Decoder:
    """The decoder of values written by the serializer ``snapshot`` describes.

    Never raises: a class without a known wire format gives a decoder raising
    :class:`UnsupportedSerializerError` when used.
    """
    if snapshot is None:
        return _unsupported(None)
    name = snapshot.class_name
    if name in _SIMPLE:
        read, length = _SIMPLE[name]
        return Decoder(SIMPLE_SNAPSHOTS[name], read, length, _FAST_SIMPLE.get(name))
    build = _COMPOSITES.get(name)
    decoder = build(snapshot) if build is not None else None
    return decoder if decoder is not None else _unsupported(snapshot)
