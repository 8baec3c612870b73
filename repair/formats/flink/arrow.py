"""Arrow types of Flink state, decided from the serializer snapshots alone (never from the data).

:func:`arrow_type` maps one :class:`~repair.formats.flink.serializers.SerializerSnapshot` to the Arrow
type of the values :func:`repair.formats.flink.values.decoder_for` decodes from it:

=============================================  ==================================================
serializer                                     Arrow type (Python value the decoder produces)
=============================================  ==================================================
String, Character, Enum                        ``string`` (``str``; Enum: the constant's name)
Long, Integer, Short, Byte                     ``int64``, ``int32``, ``int16``, ``int8`` (``int``)
Boolean, Double, Float                         ``bool``, ``float64``, ``float32``
byte[]                                         ``binary``
Void, VoidNamespace, GlobalWindow              ``null`` (always None: one byte 0, one instance)
TimeWindow                                     ``struct<start: int64, end: int64>``
List / ArrayList of T                          ``list<T>``
Set of T (Flink 2.x)                           ``list<T>`` (the elements in the order written)
Map of K to V                                  ``map<K, V>`` (the decoder's ``[(k, v), ...]``)
Tuple of T0..Tn                                ``struct<f0: T0, ...>`` (Flink's field names)
Scala case class, Option of T, collection of T ``struct<f0: T0, ...>`` (by position: the snapshot has no
                                               field names), T (None is null), ``list<T>``
Avro (the writer schema)                       records ``struct`` of their fields, ``[null, T]`` T, enums
                                               and decimals ``string``, bytes and fixed ``binary``, maps
                                               ``map<string, V>`` (other unions, recursion: JSON text)
POJO                                           ``struct`` with the snapshot's field names, in its order
Row of T0..Tn                                  ``struct<kind: string, f0: T0, ...>`` (``dict``; ``kind``:
                                               RowKind ``+I``, ``-U``, ``+U`` or ``-D``, null in legacy
                                               mode; the snapshot has no field names)
RowData (Flink SQL)                            ``struct<kind: string, f0: T0, ...>`` from the logical types:
                                               BOOLEAN..DOUBLE as above, CHAR/VARCHAR ``string``,
                                               BINARY/VARBINARY/RAW ``binary``, ARRAY ``list``, MAP/MULTISET ``map``,
                                               DECIMAL ``string``, DATE/TIME ``int32``, TIMESTAMP(_LTZ)
                                               ``int64`` (epoch ms, or ns above precision 3), ROW a struct
StringData, TimestampData, DecimalData         ``string``, ``int64``, ``string``
External of T, RawValueData, NullSerializer    T, ``binary``, ``null``
Nullable of T                                  T (a null value is null)
TTL of T, TtlAware of T                        T (the TTL timestamp is a column of its own)
=============================================  ==================================================

Everything else (Kryo, custom serializers, a POJO field without a snapshot, a Tuple, POJO or
Row field of a type with no decoded type, structs without fields or with duplicate field names, maps
with a null-typed key) has **no decoded type**: :class:`ColumnType` then says why, and the column
holds JSON text of whatever the decoder produced (usually nothing: unsupported serializers raise and
the rows keep raw bytes).

:func:`column_converter` gives the per-value check that makes the conversion exact: integers of the
wrong Python type or outside the Arrow type's range, floats that a ``float32`` would change, structs
whose keys are not the fields, map entries with a null key, strings that are not valid Unicode (lone
surrogates) are :class:`NotRepresentable`; NaN stays NaN, a null POJO is a null struct and a null POJO
or Row field is a null field. :func:`to_arrow` converts one column of values and reports the values it
could not represent (those become null; the caller keeps their raw bytes and says why).

Pure: snapshots and Python values in, Arrow types and arrays out.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from repair.formats.flink import avro, registry
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.serializers import (
    COMPOSITE_SNAPSHOTS,
    TTL_AWARE_SNAPSHOT,
    SerializerSnapshot,
    describe,
)
from repair.formats.flink.table_types import SqlType

_NULL = pa.null()
#: Leaf serializer snapshot classes the decoders know -> Arrow type.
SIMPLE_TYPES: dict[str, pa.DataType] = registry.register(registry.ARROW_TYPE, {
    registry.STRING: pa.string(), registry.LONG: pa.int64(), registry.INT: pa.int32(), registry.SHORT: pa.int16(),
    registry.BYTE: pa.int8(), registry.BOOLEAN: pa.bool_(), registry.DOUBLE: pa.float64(),
    registry.FLOAT: pa.float32(), registry.CHAR: pa.string(), registry.VOID: _NULL,
    registry.STRING_DATA: pa.string(), registry.NULL: _NULL, registry.BYTE_ARRAY: pa.binary(),
    registry.VOID_NAMESPACE: _NULL, registry.QUERYABLE_VOID_NAMESPACE: _NULL,
    # the one window of countWindow / GlobalWindows: nothing to tell apart, so null like VoidNamespace
    registry.GLOBAL_WINDOW: _NULL,
    registry.TIME_WINDOW: pa.struct([("start", pa.int64()), ("end", pa.int64())]),
    # primitive arrays: lists of their elements (never null), a char[] one string
    registry.BOOLEAN_ARRAY: pa.list_(pa.bool_()), registry.CHAR_ARRAY: pa.string(),
    registry.SHORT_ARRAY: pa.list_(pa.int16()), registry.INT_ARRAY: pa.list_(pa.int32()),
    registry.LONG_ARRAY: pa.list_(pa.int64()), registry.FLOAT_ARRAY: pa.list_(pa.float32()),
    registry.DOUBLE_ARRAY: pa.list_(pa.float64()),
})

#: ``describe()`` of a column with no serializer at all (e.g. ``user_key`` of a value state).
NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class ColumnType:
    """The decision for one decoded column of one state.

    ``arrow`` is the Arrow type of the decoded values, or None when the serializer has no decoded type:
    the column is then JSON text (``storage_type`` string) and ``reason`` says why. ``serializer`` is
    the snapshot class the decision came from (after unwrapping TTL), ``describes`` its short type.
    """

    arrow: pa.DataType | None
    serializer: str | None
    describes: str
    reason: str | None = None

    @property
    def is_json(self) -> bool:
        return self.arrow is None

    @property
    def storage_type(self) -> pa.DataType:
        """The Parquet column's Arrow type (string for JSON text)."""
        return pa.string() if self.arrow is None else self.arrow

    @property
    def type_name(self) -> str:
        return "json" if self.arrow is None else str(self.arrow)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type_name, "serializer": self.serializer, "describes": self.describes}
        if self.reason:
            out["reason"] = self.reason
        return out


def absent(reason: str) -> ColumnType:
    """A column no serializer fills for this kind of state (always null)."""
    return ColumnType(pa.null(), None, NOT_APPLICABLE, reason)


def unwrap_ttl(snapshot: SerializerSnapshot | None) -> tuple[SerializerSnapshot | None, bool]:
    """The user serializer inside TTL wrappers (``TtlSerializer``, ``TtlAwareSerializer``); whether TTL was on."""
    ttl = False
    while snapshot is not None:
        label = COMPOSITE_SNAPSHOTS.get(snapshot.class_name, ("",))[0]
        if label == "TTL" and snapshot.nested and len(snapshot.nested) <= 2:
            snapshot, ttl = snapshot.nested[-1], True
        elif snapshot.class_name == TTL_AWARE_SNAPSHOT and len(snapshot.nested) == 1:
            snapshot = snapshot.nested[0]
        else:
            break
    return snapshot, ttl


def column_type(snapshot: SerializerSnapshot | None, *, missing: str = "no serializer snapshot") -> ColumnType:
    """The :class:`ColumnType` of values of ``snapshot`` (TTL wrappers unwrapped first)."""
    snapshot, _ttl = unwrap_ttl(snapshot)
    if snapshot is None:
        return ColumnType(None, None, "?", missing)
    arrow, reason = arrow_type(snapshot)
    return ColumnType(arrow, snapshot.class_name, describe(snapshot), reason)


def arrow_type(snapshot: SerializerSnapshot | None) -> tuple[pa.DataType | None, str | None]:
    """``(Arrow type, None)`` of the values the snapshot's decoder produces, or ``(None, why not)``."""
    if snapshot is None:
        return None, "no serializer snapshot"
    name = snapshot.class_name
    if name in SIMPLE_TYPES:
        return SIMPLE_TYPES[name], None
    build = _COMPOSITE_TYPES.get(name)
    found = build(snapshot) if build is not None else None
    return found if found is not None else (None, f"no decoded type for {describe(snapshot)} ({snapshot.simple_name})")


_Typed = tuple[pa.DataType | None, str | None]


def _wrapped_type(snapshot: SerializerSnapshot) -> _Typed | None:
    """A wrapper whose values are its one nested serializer's (an Option's None is null)."""
    return arrow_type(snapshot.nested[0]) if len(snapshot.nested) == 1 else None


def _list_type(snapshot: SerializerSnapshot) -> _Typed | None:
    """A List, ArrayList, Set or Scala collection: a list of its element's type."""
    if len(snapshot.nested) != 1:
        return None
    inner, reason = arrow_type(snapshot.nested[0])
    return (pa.list_(inner), None) if inner is not None else (None, reason)


def _map_type(snapshot: SerializerSnapshot) -> _Typed | None:
    if len(snapshot.nested) != 2:
        return None
    key, reason = arrow_type(snapshot.nested[0])
    if key is None:
        return None, reason
    if pa.types.is_null(key):
        return None, "a map whose keys are always null has no Arrow map type"
    value, reason = arrow_type(snapshot.nested[1])
    return (pa.map_(key, value), None) if value is not None else (None, reason)


def _tuple_type(snapshot: SerializerSnapshot) -> _Typed:
    """A Tuple or a Scala case class: its fields by position."""
    return _struct_type([(f"f{i}", n) for i, n in enumerate(snapshot.nested)], describe(snapshot))


def _row_type(snapshot: SerializerSnapshot) -> _Typed | None:
    if type(snapshot.attributes.get("supports_row_kind")) is not bool:
        return None
    return _struct_type([(f"f{i}", n) for i, n in enumerate(snapshot.nested)], describe(snapshot), leading=(pa.field("kind", pa.string()),))


def _nullable_type(snapshot: SerializerSnapshot) -> _Typed | None:
    padding = snapshot.attributes.get("null_padding_length")
    return _wrapped_type(snapshot) if type(padding) is int and padding >= 0 else None


def _ttl_type(snapshot: SerializerSnapshot) -> _Typed | None:
    """A TTL wrapper: its user value's type (the timestamp is a column of its own)."""
    return arrow_type(snapshot.nested[-1]) if snapshot.nested and len(snapshot.nested) <= 2 else None


#: Arrow types of the SQL logical types as :mod:`repair.formats.flink.row_data` decodes them.
SQL_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(), "DATE": pa.int32(),
    "TIME_WITHOUT_TIME_ZONE": pa.int32(), "INTERVAL_YEAR_MONTH": pa.int32(), "BIGINT": pa.int64(),
    "INTERVAL_DAY_TIME": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "CHAR": pa.string(),
    "VARCHAR": pa.string(), "BINARY": pa.binary(), "VARBINARY": pa.binary(), "DECIMAL": pa.string(),
    "TIMESTAMP_WITHOUT_TIME_ZONE": pa.int64(), "TIMESTAMP_WITH_LOCAL_TIME_ZONE": pa.int64(),
    "RAW": pa.binary(),
}


def _sql_arrow(t: SqlType) -> tuple[pa.DataType | None, str | None]:
    """The Arrow type of one SQL type: a nested ROW a struct, an ARRAY a list, a MAP a map, a MULTISET
    a map of its elements to their int32 counts."""
    if t.root in ("ROW", "STRUCTURED_TYPE") and t.names is not None:  # a structured type is a nested row too
        return _row_data_type(t.children, t.sql())
    if t.root in ("ARRAY", "MULTISET", "MAP") and len(t.children) == (2 if t.root == "MAP" else 1):
        parts = [_sql_arrow(c) for c in t.children]
        for child, reason in parts:
            if child is None:
                return None, f"{t.sql()}: {reason}"
        if t.root == "ARRAY":
            return pa.list_(parts[0][0]), None
        return pa.map_(parts[0][0], parts[1][0] if t.root == "MAP" else pa.int32()), None
    found = SQL_TYPES.get(t.root)
    return (found, None) if found is not None else (None, f"no decoded type for SQL type {t.sql()}")


def _row_data_type(types: list[SqlType], what: str) -> tuple[pa.DataType | None, str | None]:
    """``struct<kind: string, f0: T0, ...>`` of a ``RowDataSerializer`` (or a nested ROW)."""
    children = [pa.field("kind", pa.string())]
    for i, t in enumerate(types):
        child, reason = _sql_arrow(t)
        if child is None:
            return None, f"{what}: field f{i}: {reason}"
        children.append(pa.field(f"f{i}", child))
    return pa.struct(children), None


def _pojo_type(snapshot: SerializerSnapshot) -> tuple[pa.DataType | None, str | None]:
    fields = snapshot.pojo_fields or []
    missing = [f.name for f in fields if f.snapshot is None]
    if missing:
        return None, f"POJO fields without a readable serializer snapshot: {', '.join(missing)}"
    return _struct_type([(f.name, f.snapshot) for f in fields], describe(snapshot))


def _struct_type(fields: list[tuple[str, SerializerSnapshot]], what: str,
                 leading: tuple[pa.Field, ...] = ()) -> tuple[pa.DataType | None, str | None]:
    """A struct of ``leading`` (fields of known type, e.g. a Row's ``kind``) then ``fields``."""
    if not fields and not leading:
        return None, f"{what} has no fields (Parquet has no empty struct)"
    names = [f.name for f in leading] + [name for name, _ in fields]
    if len(set(names)) != len(names):
        return None, f"{what} has duplicate field names"
    children = list(leading)
    for name, snapshot in fields:
        child, reason = arrow_type(snapshot)
        if child is None:
            return None, f"field {name}: {reason}"
        children.append(pa.field(name, child))
    return pa.struct(children), None


# -- exact conversion of decoded values --------------------------------------------------------------


class NotRepresentable(ValueError):
    """A decoded value the column's Arrow type cannot hold exactly."""


_INT_RANGES = {
    pa.int8(): (-(1 << 7), (1 << 7) - 1),
    pa.int16(): (-(1 << 15), (1 << 15) - 1),
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
    pa.int64(): (-(1 << 63), (1 << 63) - 1),
}
_F32 = struct.Struct(">f")
Convert = Callable[[Any], Any]


def _fail(expected: str, value: Any) -> NotRepresentable:
    text = repr(value)
    return NotRepresentable(f"{expected} expected, found {text[:80]}{'...' if len(text) > 80 else ''}")


def _of_type(python_type: type, expected: str) -> Convert:
    def convert(value: Any) -> Any:
        if type(value) is not python_type:
            raise _fail(expected, value)
        return value

    convert.plain_type = python_type  # type: ignore[attr-defined]  # see to_arrow
    return convert


def _integer(low: int, high: int, expected: str) -> Convert:
    def convert(value: Any) -> Any:
        if type(value) is not int or not low <= value <= high:
            raise _fail(expected, value)
        return value

    convert.plain_type = int  # type: ignore[attr-defined]  # see to_arrow
    return convert


def _float32(value: Any) -> Any:
    if type(value) is not float:
        raise _fail("float32", value)
    if not math.isnan(value):
        try:
            exact = _F32.unpack(_F32.pack(value))[0] == value
        except OverflowError:
            exact = False
        if not exact:
            raise _fail("a value a float32 holds exactly", value)
    return value


def _null(value: Any) -> Any:
    raise _fail("null", value)


_null.plain_type = type(None)  # type: ignore[attr-defined]  # see to_arrow


def column_converter(arrow: pa.DataType | None) -> Convert:
    """A function turning one decoded non-null value into what ``pa.array(..., type=arrow)`` takes,
    raising :class:`NotRepresentable` when that would not be exact. ``None``: JSON text."""
    if arrow is None:
        return json_text
    if arrow in _INT_RANGES:
        low, high = _INT_RANGES[arrow]
        return _integer(low, high, str(arrow))
    if pa.types.is_string(arrow):
        return _of_type(str, "string")
    if pa.types.is_binary(arrow):
        return _of_type(bytes, "bytes")
    if pa.types.is_boolean(arrow):
        return _of_type(bool, "bool")
    if pa.types.is_float64(arrow):
        return _of_type(float, "float64")
    if pa.types.is_float32(arrow):
        return _float32
    if pa.types.is_null(arrow):
        return _null
    if pa.types.is_map(arrow):
        return _map_converter(arrow)
    if pa.types.is_list(arrow):
        return _list_converter(arrow)
    if pa.types.is_struct(arrow):
        return _struct_converter(arrow)
    raise ValueError(f"no converter for Arrow type {arrow}")  # not produced by arrow_type


def _nullable(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _list_converter(arrow: pa.ListType) -> Convert:
    element = _nullable(column_converter(arrow.value_type))

    def convert(value: Any) -> Any:
        if type(value) is not list:
            raise _fail("list", value)
        return [element(v) for v in value]

    return convert


def _map_converter(arrow: pa.MapType) -> Convert:
    key, item = column_converter(arrow.key_type), _nullable(column_converter(arrow.item_type))

    def convert(value: Any) -> Any:
        if type(value) is not list:
            raise _fail("map entries", value)
        out = []
        for entry in value:
            if type(entry) is not tuple or len(entry) != 2:
                raise _fail("a (key, value) map entry", entry)
            if entry[0] is None:
                raise NotRepresentable("a map entry with a null key (Arrow map keys are never null)")
            out.append((key(entry[0]), item(entry[1])))
        return out

    return convert


def _struct_converter(arrow: pa.StructType) -> Convert:
    names = [arrow.field(i).name for i in range(arrow.num_fields)]
    fields = [(name, _nullable(column_converter(arrow.field(i).type))) for i, name in enumerate(names)]
    name_set = set(names)

    def convert(value: Any) -> Any:
        if type(value) is dict:
            if value.keys() != name_set:
                raise _fail(f"fields {names}", sorted(value))
            return {name: f(value[name]) for name, f in fields}
        if type(value) is list and len(value) == len(fields):  # a Tuple: fields by position
            return {name: f(v) for (name, f), v in zip(fields, value)}
        raise _fail(f"a struct of {names}", value)

    return convert


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def json_text(value: Any) -> str:
    """A decoded value as JSON text: UTF-8, bytes as hex, NaN/Infinity as Python's ``json`` writes
    them; strings that are not valid Unicode (lone surrogates) are written with ``\\u`` escapes."""
    text = json.dumps(value, ensure_ascii=False, default=_json_default)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, ensure_ascii=True, default=_json_default)
    return text


_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeError)


def to_arrow(values: list, arrow: pa.DataType, convert: Convert) -> tuple[pa.Array, dict[int, str]]:
    """``values`` (decoded, None for null) as an array of ``arrow``; values that cannot be represented
    exactly become null and are returned as ``{index: reason}``.

    Fast path, for converters that return the value unchanged (``plain_type``: strings, bytes, bools,
    float64, integers, null): when every value is of exactly that Python type (or None), the values go
    to Arrow as they are, in one call; what Arrow refuses there (an integer out of range, a lone
    surrogate) sends the column down the exact per-value path, which gives the same result."""
    plain = getattr(convert, "plain_type", None)
    if plain is not None and set(map(type, values)) <= {plain, type(None)}:
        try:
            return pa.array(values, type=arrow, from_pandas=False), {}
        except _ARROW_ERRORS:
            pass
    bad: dict[int, str] = {}
    prepared = []
    append = prepared.append
    for i, value in enumerate(values):
        if value is None:
            append(None)
            continue
        try:
            append(convert(value))
        except NotRepresentable as error:
            append(None)
            bad[i] = str(error)
    try:
        return pa.array(prepared, type=arrow, from_pandas=False), bad
    except _ARROW_ERRORS:
        pass
    for i, value in enumerate(prepared):  # find the values Arrow refuses (e.g. lone surrogates)
        if value is None:
            continue
        try:
            pa.array([value], type=arrow, from_pandas=False)
        except _ARROW_ERRORS as error:
            prepared[i] = None
            bad[i] = f"not representable as {arrow}: {error}"
    return pa.array(prepared, type=arrow, from_pandas=False), bad


# -- the decoded columns of one state ----------------------------------------------------------------

#: The decoded columns of every exported row, each with a ``<name>_raw`` binary column beside it.
DECODED_COLUMNS = ("key", "namespace", "user_key", "value")


@dataclass(frozen=True)
class StateColumns:
    """The decisions for the decoded columns of one state, and whether its values carry TTL."""

    columns: dict[str, ColumnType]
    ttl: bool = False

    def to_json(self) -> dict[str, Any]:
        return {name: self.columns[name].to_json() for name in DECODED_COLUMNS}


def _nested(snapshot: SerializerSnapshot | None, index: int, count: int) -> SerializerSnapshot | None:
    if snapshot is None or len(snapshot.nested) != count:
        return None
    return snapshot.nested[index]


def keyed_state_columns(state: StateMetaInfo, key_serializer: SerializerSnapshot | None) -> StateColumns:
    """Decisions for a keyed state from its serializers (``NAMESPACE_SERIALIZER``, ``VALUE_SERIALIZER``)
    and the backend's key serializer.

    Timers (``priority-queue``): key and namespace from the ``TimerSerializer``'s nested serializers,
    no value. List state: ``value`` is one element; map state: ``user_key`` and ``value`` are the map's
    key and value. TTL wrappers around the value (or element, or map value) are unwrapped.
    """
    kind, value = state.kind, state.serializer("VALUE_SERIALIZER")
    no_user_key = absent("only map state has user keys")
    if kind == "priority-queue":
        return StateColumns({
            "key": column_type(_nested(value, 0, 2), missing="no timer key serializer"),
            "namespace": column_type(_nested(value, 1, 2), missing="no timer namespace serializer"),
            "user_key": no_user_key,
            "value": absent("timers have no value"),
        })
    columns = {
        "key": column_type(key_serializer, missing="no key serializer"),
        "namespace": column_type(state.serializer("NAMESPACE_SERIALIZER"), missing="no namespace serializer"),
        "user_key": no_user_key,
    }
    if kind == "list":
        element, ttl = unwrap_ttl(_nested(value, 0, 1))
        columns["value"] = column_type(element, missing="no list element serializer")
    elif kind == "map":
        columns["user_key"] = column_type(_nested(value, 0, 2), missing="no map key serializer")
        item, ttl = unwrap_ttl(_nested(value, 1, 2))
        columns["value"] = column_type(item, missing="no map value serializer")
    else:
        _inner, ttl = unwrap_ttl(value)
        columns["value"] = column_type(value, missing="no value serializer")
    return StateColumns(columns, ttl)


def operator_state_columns(state: StateMetaInfo) -> StateColumns:
    """Decisions for an operator state: list and union state have one ``value`` per element
    (``VALUE_SERIALIZER`` is the element's); broadcast state is a map (``KEY_SERIALIZER`` ->
    ``user_key``, ``VALUE_SERIALIZER`` -> ``value``). Operator state has no key and no namespace."""
    columns = {"key": absent("operator state has no key"), "namespace": absent("operator state has no namespace")}
    if state.kind == "broadcast":
        columns["user_key"] = column_type(state.serializer("KEY_SERIALIZER"), missing="no broadcast key serializer")
    else:
        columns["user_key"] = absent("only broadcast state has map keys")
    columns["value"] = column_type(state.serializer("VALUE_SERIALIZER"), missing="no value serializer")
    return StateColumns(columns)


def merge_state_columns(decisions: list[StateColumns]) -> StateColumns:
    """One decision per column for a state whose subtasks may disagree (a state not re-registered since
    a serializer changed keeps its old snapshot): where the Arrow types differ the column is JSON text."""
    first = decisions[0]
    merged = {}
    for name in DECODED_COLUMNS:
        seen = [d.columns[name] for d in decisions]
        if len({c.arrow for c in seen}) == 1 and None not in {c.arrow for c in seen}:
            merged[name] = first.columns[name]
            continue
        if all(c == seen[0] for c in seen):
            merged[name] = seen[0]
            continue
        described = sorted({c.describes for c in seen})
        merged[name] = ColumnType(None, first.columns[name].serializer, " | ".join(described),
                                  "the subtasks' serializers differ: " + ", ".join(described))
    return StateColumns(merged, any(d.ttl for d in decisions))


_R = registry
#: Each composite's Arrow type, from its nested serializers' (None: no decoded type; the column is JSON text).
_COMPOSITE_TYPES: dict[str, Callable[[SerializerSnapshot], _Typed | None]] = registry.register(registry.ARROW_TYPE, {
    _R.ENUM: lambda s: (pa.string(), None),
    _R.SCALA_ENUM: lambda s: (pa.string(), None) if "enum_names" in s.attributes else None,
    _R.TTL_AWARE: _wrapped_type, _R.SCALA_OPTION: _wrapped_type, _R.EXTERNAL: _wrapped_type,
    _R.POJO: _pojo_type, _R.AVRO: avro.arrow_type,
    _R.LIST: _list_type, _R.ARRAY_LIST: _list_type, _R.SET: _list_type, _R.SCALA_TRAVERSABLE: _list_type,
    _R.MAP: _map_type,
    _R.TUPLE: _tuple_type, _R.SCALA_CASE_CLASS: _tuple_type, _R.SCALA_TUPLE2_CASE_CLASS: _tuple_type,
    _R.ROW: _row_type,
    _R.ROW_DATA: lambda s: _row_data_type(s.attributes.get("logical_types") or [], describe(s)),
    _R.TIMESTAMP_DATA: lambda s: (pa.int64(), None), _R.DECIMAL_DATA: lambda s: (pa.string(), None),
    _R.RAW_VALUE: lambda s: (pa.binary(), None),
    _R.NULLABLE: _nullable_type,
    _R.TTL: _ttl_type, _R.TTL_V2: _ttl_type,
})
