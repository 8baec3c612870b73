"""Values encoded as Flink's built-in serializers write them: the inverse of :mod:`repair.formats.flink.values`.

:func:`encoder_for` gives the encoder of the serializer a snapshot describes, for the serializers whose
bytes follow from the value alone: ``String`` (``StringValue.writeString``), ``Long``, ``Integer``,
``Short``, ``Byte``, ``Boolean``, ``Double``, ``Float``, ``Character``, ``byte[]`` and the other primitive
arrays (a ``char[]`` from its string), ``VoidNamespace``,
``GlobalWindow``, ``TimeWindow``, the TTL wrapper (``TtlSerializer``: last access, then the value) and
timers (``TimerSerializer``: the timestamp with its sign bit flipped, key, namespace), and of Flink SQL
``RowDataSerializer`` (:mod:`repair.formats.flink.row_data_encoder`), ``StringDataSerializer`` and
``ExternalSerializer`` (its internal serializer's bytes). Values are the
Python values the decoders give (a TTL value a :class:`~repair.formats.flink.values.TtlValue`, a timer a
:class:`~repair.formats.flink.values.Timer`, a TimeWindow ``{"start", "end"}``). For any other
serializer it returns None: such values can only be written from their raw bytes.

For every value ``v`` an encoder accepts, ``decoder.decode_all(encode(v)) == v``, and for bytes ``b``
Flink wrote, ``encode(decode(b)) == b`` (``tests/formats/flink/test_value_encoders.py`` holds both on every fixture).
"""

from __future__ import annotations

import math
import struct
from typing import Any, Callable

from repair.formats.flink import avro, registry, scala_types
from repair.formats.flink.row_data_encoder import RowEncodeError, row_data_encoder
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.values import Timer, TtlValue

_SIGN_BIT = 1 << 63
#: ``StringValue``'s high bit: more bytes of a varint follow.
_HIGH_BIT = 0x80


class EncodeError(ValueError):
    """A value the serializer cannot write (wrong type, out of range, a null where none is allowed)."""


Encode = Callable[[Any], bytes]


def _checked(kinds: type | tuple[type, ...], what: str, pack: Encode) -> Encode:
    """``pack`` for values of ``kinds`` only (a bool is no number here)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)

    def encode(value: Any) -> bytes:
        if not isinstance(value, kinds) or (type(value) is bool and bool not in kinds):
            raise EncodeError(f"a {what} is needed, not {type(value).__name__} {value!r}")
        try:
            return pack(value)
        except (struct.error, OverflowError) as error:
            raise EncodeError(f"{value!r} is not a {what}: {error}") from None

    return encode


def _varint7(value: int) -> bytes:
    out = bytearray()
    while value >= _HIGH_BIT:
        out.append((value | _HIGH_BIT) & 0xFF)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_string_value(value: str | None) -> bytes:
    """``StringValue.writeString``: length+1 as a varint (0 = null), then each UTF-16 unit as a varint."""
    if value is None:
        return b"\x00"
    if not isinstance(value, str):
        raise EncodeError(f"a string is needed, not {type(value).__name__} {value!r}")
    units = value.encode("utf-16-be", "surrogatepass")
    if value.isascii():
        return _varint7(len(value) + 1) + value.encode("ascii")
    codes = struct.unpack(f">{len(units) // 2}H", units)
    return _varint7(len(codes) + 1) + b"".join(_varint7(unit) for unit in codes)


def _char(value: str) -> bytes:
    units = value.encode("utf-16-be", "surrogatepass") if isinstance(value, str) else b""
    if len(units) != 2:
        raise EncodeError(f"a Character is one UTF-16 unit, not {value!r}")
    return units


def _double(value: float) -> bytes:
    return struct.pack(">d", value)


def _float(value: float) -> bytes:
    if math.isfinite(value) and abs(value) > 3.4028234663852886e38:
        raise EncodeError(f"{value!r} is out of a Float's range")
    packed = struct.pack(">f", value)
    if math.isfinite(value) and struct.unpack(">f", packed)[0] != value:
        raise EncodeError(f"{value!r} is not exactly a Float")
    return packed


def _byte_array(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + bytes(value)


def _zero_byte(value: Any) -> bytes:
    if value is not None:
        raise EncodeError(f"this namespace has one value, written as null, not {value!r}")
    return b"\x00"


def _time_window(value: Any) -> bytes:
    if not isinstance(value, dict) or set(value) != {"start", "end"}:
        raise EncodeError(f"a TimeWindow is {{'start': ..., 'end': ...}}, not {value!r}")
    return struct.pack(">qq", value["start"], value["end"])


_LONG = _checked(int, "Long", lambda v: struct.pack(">q", v))
_INT = _checked(int, "Integer", lambda v: struct.pack(">i", v))
_SHORT = _checked(int, "Short", lambda v: struct.pack(">h", v))
_BOOLEAN = _checked(bool, "Boolean", lambda v: b"\x01" if v else b"\x00")
_DOUBLE = _checked((float, int), "Double", _double)
_FLOAT = _checked((float, int), "Float", _float)


def _primitive_array(element: Encode, what: str) -> Encode:
    """``<Kind>PrimitiveArraySerializer``: ``int length`` then each element (never null)."""

    def encode(value: Any) -> bytes:
        if type(value) is not list:
            raise EncodeError(f"a {what} is a list, not {type(value).__name__} {value!r}")
        return struct.pack(">i", len(value)) + b"".join(map(element, value))

    return encode


def _char_array(value: Any) -> bytes:
    """``CharPrimitiveArraySerializer``: ``int length`` then the UTF-16 units of the string."""
    if not isinstance(value, str):
        raise EncodeError(f"a char[] is a string, not {type(value).__name__} {value!r}")
    units = value.encode("utf-16-be", "surrogatepass")
    return struct.pack(">i", len(units) // 2) + units


#: Leaf serializer snapshot class -> its encoder (a null refused unless in :data:`_NULLABLE`).
_SIMPLE: dict[str, Encode] = registry.register(registry.ENCODE, {
    registry.STRING: encode_string_value,
    registry.LONG: _LONG,
    registry.INT: _INT,
    registry.SHORT: _SHORT,
    registry.BYTE: _checked(int, "Byte", lambda v: struct.pack(">b", v)),
    registry.BOOLEAN: _BOOLEAN,
    registry.DOUBLE: _DOUBLE,
    registry.FLOAT: _FLOAT,
    registry.CHAR: _char,
    registry.BOOLEAN_ARRAY: _primitive_array(_BOOLEAN, "boolean[]"),
    registry.CHAR_ARRAY: _char_array,
    registry.SHORT_ARRAY: _primitive_array(_SHORT, "short[]"),
    registry.INT_ARRAY: _primitive_array(_INT, "int[]"),
    registry.LONG_ARRAY: _primitive_array(_LONG, "long[]"),
    registry.FLOAT_ARRAY: _primitive_array(_FLOAT, "float[]"),
    registry.DOUBLE_ARRAY: _primitive_array(_DOUBLE, "double[]"),
    registry.BYTE_ARRAY: _checked((bytes, bytearray), "byte[]", _byte_array),
    registry.VOID_NAMESPACE: _zero_byte,
    registry.QUERYABLE_VOID_NAMESPACE: _zero_byte,
    registry.GLOBAL_WINDOW: _zero_byte,
    registry.TIME_WINDOW: _time_window,
})
#: Serializers that write null (the others refuse it: Flink's would throw).
_NULLABLE = {registry.STRING.class_name, *(k for k, v in _SIMPLE.items() if v is _zero_byte)}


def _not_null(name: str, encode: Encode) -> Encode:
    if name in _NULLABLE:
        return encode

    def checked(value: Any) -> bytes:
        if value is None:
            raise EncodeError("null cannot be written by this serializer")
        return encode(value)

    return checked


def _ttl(snapshot: SerializerSnapshot) -> Encode | None:
    if not snapshot.nested or len(snapshot.nested) > 2:
        return None
    inner = encoder_for(snapshot.nested[-1])
    if inner is None:
        return None

    def encode(value: Any) -> bytes:
        if not isinstance(value, TtlValue):
            raise EncodeError(f"a TTL value (last access timestamp and value) is needed, not {value!r}")
        return struct.pack(">q", value.timestamp) + inner(value.value)

    return encode


def _timer(snapshot: SerializerSnapshot) -> Encode | None:
    if len(snapshot.nested) != 2:
        return None
    key, namespace = (encoder_for(nested) for nested in snapshot.nested)
    if key is None or namespace is None:
        return None

    def encode(value: Any) -> bytes:
        if not isinstance(value, Timer):
            raise EncodeError(f"a timer (timestamp, key, namespace) is needed, not {value!r}")
        flipped = (value.timestamp & 0xFFFFFFFFFFFFFFFF) ^ _SIGN_BIT
        return flipped.to_bytes(8, "big") + key(value.key) + namespace(value.namespace)

    return encode


_SCALA_ENCODERS: dict[str, tuple[int, Callable[..., Encode]]] = {
    scala_types.OPTION: (1, scala_types.option_encode),
    scala_types.TRAVERSABLE: (1, scala_types.traversable_encode),
    scala_types.EITHER: (2, scala_types.either_encode),
}


def _scala(snapshot: SerializerSnapshot, label: str) -> Encode | None:
    """Scala case classes, Options, collections and Eithers (:mod:`repair.formats.flink.scala_types`)."""
    nested = [encoder_for(n) for n in snapshot.nested]
    if None in nested:
        return None
    if label == scala_types.CASE_CLASS:
        inner = scala_types.case_class_encode(nested)
    else:
        count, make = _SCALA_ENCODERS[label]
        if len(nested) != count:
            return None
        inner = make(*nested)

    return _raising_encode_error(inner, scala_types.ScalaEncodeError)


def _raising_encode_error(inner: Encode | None, errors: type[Exception]) -> Encode | None:
    """``inner`` raising :class:`EncodeError` for its own ``errors``."""
    if inner is None:
        return None

    def encode(value: Any) -> bytes:
        try:
            return inner(value)
        except errors as error:
            raise EncodeError(str(error)) from None

    return encode


def writes_serializer(class_name: str | None) -> bool:
    """Whether :func:`encoder_for` writes the values of the serializer snapshot class named, whatever
    wraps it (TTL, a list's or map's element): the leaf serializers it knows."""
    return class_name in _SIMPLE


def encoder_for(snapshot: SerializerSnapshot | None) -> Encode | None:
    """The encoder of values written by the serializer ``snapshot`` describes; None when this module
    cannot write them (their raw bytes must be kept)."""
    if snapshot is None:
        return None
    name = snapshot.class_name
    if name in _SIMPLE:
        return _not_null(name, _SIMPLE[name])
    build = _COMPOSITES.get(name)
    if build is not None:
        return build(snapshot)
    if name == registry.STRING_DATA.class_name:
        return _checked(str, "string", lambda v: struct.pack(">i", len(v.encode("utf-8"))) + v.encode("utf-8"))
    return None


def _wrapped(snapshot: SerializerSnapshot) -> Encode | None:
    """A TtlAwareSerializer or an ExternalSerializer: the bytes are its one nested serializer's."""
    return encoder_for(snapshot.nested[0]) if len(snapshot.nested) == 1 else None


def _scala_enum(snapshot: SerializerSnapshot) -> Encode | None:
    names = snapshot.attributes.get("enum_names")
    return _raising_encode_error(scala_types.enum_encode(names), scala_types.ScalaEncodeError) if isinstance(names, dict) else None


def _list(snapshot: SerializerSnapshot) -> Encode | None:
    """``ListSerializer`` / ``ArrayListSerializer``: ``int size``, then the elements (never null)."""
    if len(snapshot.nested) != 1:
        return None
    element = encoder_for(snapshot.nested[0])
    if element is None:
        return None
    element = _not_null("", element)

    def encode(value: Any) -> bytes:
        if not isinstance(value, list):
            raise EncodeError(f"a list is needed, not {value!r}")
        return struct.pack(">i", len(value)) + b"".join(element(v) for v in value)

    return encode


def _tuple(snapshot: SerializerSnapshot) -> Encode | None:
    """``TupleSerializer``: the fields one after the other (never null); a tuple as a list (decoded) or
    ``{"f0": ..., ...}`` (its Parquet struct)."""
    fields = [encoder_for(n) for n in snapshot.nested]
    if not fields or any(f is None for f in fields):
        return None
    names = [f"f{i}" for i in range(len(fields))]

    def encode(value: Any) -> bytes:
        if isinstance(value, dict) and list(value) == names:
            value = [value[n] for n in names]
        if not isinstance(value, (list, tuple)) or len(value) != len(fields):
            raise EncodeError(f"a Tuple{len(fields)} is needed, not {value!r}")
        return b"".join(_not_null("", f)(v) for f, v in zip(fields, value))  # type: ignore[arg-type]

    return encode


def _row_data(snapshot: SerializerSnapshot) -> Encode | None:
    return _raising_encode_error(row_data_encoder(snapshot.attributes.get("logical_types") or []), RowEncodeError)


_R = registry
#: Each composite's encoder, built from its nested serializers' (None: its raw bytes must be kept).
_COMPOSITES: dict[str, Callable[[SerializerSnapshot], Encode | None]] = registry.register(registry.ENCODE, {
    _R.TTL_AWARE: _wrapped, _R.EXTERNAL: _wrapped, _R.TTL: _ttl, _R.TTL_V2: _ttl, _R.TIMER: _timer,
    **{serializer: lambda s, label=serializer.type_name: _scala(s, label) for serializer in (
        _R.SCALA_CASE_CLASS, _R.SCALA_TUPLE2_CASE_CLASS, _R.SCALA_OPTION, _R.SCALA_TRAVERSABLE, _R.SCALA_EITHER)},
    _R.AVRO: lambda s: _raising_encode_error(avro.encoder_for(s), avro.AvroEncodeError), _R.SCALA_ENUM: _scala_enum,
    _R.LIST: _list, _R.ARRAY_LIST: _list, _R.TUPLE: _tuple, _R.ROW_DATA: _row_data,
})
