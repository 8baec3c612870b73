"""Arrow types from Flink serializer snapshots: for every serializer the decoders know, bytes written by
hand in Flink's wire format decode to values the snapshot's Arrow type holds exactly; the others have
no decoded type. (The fixtures cover String, Long, Integer, POJO, Tuple2, List, Map, TTL and timers
end to end in test_export.py.)"""

from __future__ import annotations

import math
import struct

import pyarrow as pa
import pytest

from repair.formats.flink.arrow import (
    ColumnType,
    StateColumns,
    column_converter,
    column_type,
    keyed_state_columns,
    merge_state_columns,
    operator_state_columns,
    to_arrow,
)
from repair.formats.flink.backend_meta import KEYED_STATE_TYPE, OPERATOR_STATE_DISTRIBUTION_MODE, StateMetaInfo
from repair.formats.flink.serializers import (
    ENUM_SNAPSHOT,
    KRYO_SNAPSHOT,
    POJO_SNAPSHOT,
    TTL_AWARE_SNAPSHOT,
    PojoField,
    SerializerSnapshot,
)
from repair.formats.flink.values import decoder_for
from tests.flink_bytes import nullable, row

_B = "org.apache.flink.api.common.typeutils.base."
_F = "org.apache.flink."


def simple(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(_B + f"{name}Serializer${name}SerializerSnapshot", 3)


LONG, STRING, INT = simple("Long"), simple("String"), simple("Int")
VOID_NS = SerializerSnapshot(_F + "runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", 3)
WINDOW = SerializerSnapshot(_F + "streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot", 3)
BYTES = SerializerSnapshot(_B + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot", 3)
TTL = _F + "runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"


def list_of(element) -> SerializerSnapshot:
    return SerializerSnapshot(_B + "ListSerializerSnapshot", 3, nested=[element])


def map_of(key, value) -> SerializerSnapshot:
    return SerializerSnapshot(_B + "MapSerializerSnapshot", 3, nested=[key, value])


def tuple_of(*fields) -> SerializerSnapshot:
    return SerializerSnapshot(_F + "api.java.typeutils.runtime.TupleSerializerSnapshot", 3, nested=list(fields),
                              attributes={"tuple_class": f"org.apache.flink.api.java.tuple.Tuple{len(fields)}"})


def string_value(text: str) -> bytes:
    """``StringValue.writeString`` for BMP-only text below 127 chars (length+1, then one byte per char)."""
    assert all(ord(c) < 0x80 for c in text) and len(text) < 126
    return bytes([len(text) + 1]) + text.encode("ascii")


def row_of(*fields, kinds: bool = True) -> SerializerSnapshot:
    return SerializerSnapshot(_F + "api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot", 3, nested=list(fields),
                              outer_version=4, attributes={"supports_row_kind": kinds})


def nullable_of(inner, padding: int) -> SerializerSnapshot:
    return SerializerSnapshot(_F + "api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot", 3,
                              nested=[inner], outer_version=2, attributes={"null_padding_length": padding})


def set_of(element) -> SerializerSnapshot:
    return SerializerSnapshot(_B + "SetSerializerSnapshot", 3, nested=[element])


ENUM = SerializerSnapshot(ENUM_SNAPSHOT, 3, attributes={"enum_class": "x.Color", "enum_constants": ["RED", "GREEN"]})
POJO = SerializerSnapshot(POJO_SNAPSHOT, 2, attributes={"pojo_class": "x.P"},
                          pojo_fields=[PojoField("when", "x.P", WINDOW), PojoField("tags", "x.P", list_of(STRING))])

CASES = [
    # (snapshot, Flink's bytes, Arrow type, value read back from Arrow)
    (simple("Short"), struct.pack(">h", -5), pa.int16(), -5),
    (simple("Byte"), struct.pack(">b", -128), pa.int8(), -128),
    (INT, struct.pack(">i", -(1 << 31)), pa.int32(), -(1 << 31)),
    (LONG, struct.pack(">q", (1 << 63) - 1), pa.int64(), (1 << 63) - 1),
    (simple("Boolean"), b"\x01", pa.bool_(), True),
    (simple("Float"), struct.pack(">f", 1.5), pa.float32(), 1.5),
    (simple("Double"), struct.pack(">d", -0.25), pa.float64(), -0.25),
    (simple("Char"), struct.pack(">H", 0xFC), pa.string(), "ü"),
    (STRING, string_value("abc"), pa.string(), "abc"),
    (BYTES, struct.pack(">i", 2) + b"\x00\xff", pa.binary(), b"\x00\xff"),
    (WINDOW, struct.pack(">qq", 10, 20), pa.struct([("start", pa.int64()), ("end", pa.int64())]), {"start": 10, "end": 20}),
    (list_of(LONG), struct.pack(">iqq", 2, 7, -7), pa.list_(pa.int64()), [7, -7]),
    (map_of(STRING, LONG), struct.pack(">i", 2) + string_value("a") + b"\x00" + struct.pack(">q", 1) + string_value("b") + b"\x01",
     pa.map_(pa.string(), pa.int64()), [("a", 1), ("b", None)]),
    (tuple_of(LONG, list_of(INT)), struct.pack(">qiii", 3, 2, 4, 5), pa.struct([("f0", pa.int64()), ("f1", pa.list_(pa.int32()))]),
     {"f0": 3, "f1": [4, 5]}),
    (ENUM, struct.pack(">i", 1), pa.string(), "GREEN"),
    (POJO, b"\x02" + b"\x00" + struct.pack(">qq", 1, 2) + b"\x00" + struct.pack(">i", 1) + string_value("t"),
     pa.struct([("when", pa.struct([("start", pa.int64()), ("end", pa.int64())])), ("tags", pa.list_(pa.string()))]),
     {"when": {"start": 1, "end": 2}, "tags": ["t"]}),
    (POJO, b"\x01", None, None),  # a null POJO: a null struct
    (SerializerSnapshot(TTL_AWARE_SNAPSHOT, 1, nested=[LONG]), struct.pack(">q", 9), pa.int64(), 9),
    (row_of(LONG, STRING, list_of(INT)), row("-U", [None, string_value("r"), struct.pack(">ii", 1, 8)]),
     pa.struct([("kind", pa.string()), ("f0", pa.int64()), ("f1", pa.string()), ("f2", pa.list_(pa.int32()))]),
     {"kind": "-U", "f0": None, "f1": "r", "f2": [8]}),
    (row_of(LONG, WINDOW, kinds=False), row(None, [struct.pack(">q", 4), None]),  # legacy mode: no kind
     pa.struct([("kind", pa.string()), ("f0", pa.int64()), ("f1", column_type(WINDOW).arrow)]),
     {"kind": None, "f0": 4, "f1": None}),
    (row_of(), row("+U", []), pa.struct([("kind", pa.string())]), {"kind": "+U"}),
    (nullable_of(LONG, 8), nullable(struct.pack(">q", -3), 8), pa.int64(), -3),
    (nullable_of(LONG, 8), nullable(None, 8), pa.int64(), None),
    (nullable_of(STRING, 0), nullable(string_value("n")), pa.string(), "n"),
    (set_of(STRING), struct.pack(">i", 2) + b"\x00" + string_value("s") + b"\x01", pa.list_(pa.string()), ["s", None]),
    (VOID_NS, b"\x00", pa.null(), None),
]


@pytest.mark.parametrize(("snapshot", "data", "arrow", "expected"), CASES, ids=[f"{i}-{c[0].simple_name}" for i, c in enumerate(CASES)])
def test_decoded_values_fit_the_snapshot_type_exactly(snapshot, data, arrow, expected):
    decision = column_type(snapshot)
    if arrow is not None:
        assert decision.arrow == arrow and decision.reason is None
    decoded = decoder_for(snapshot).decode_all(data)
    array, bad = to_arrow([decoded, None], decision.storage_type, column_converter(decision.arrow))
    assert not bad and array.type == decision.storage_type
    assert array.to_pylist() == [expected, None]
    assert decision.serializer == snapshot.class_name or snapshot.class_name == TTL_AWARE_SNAPSHOT


def test_nan_and_lone_surrogates():
    double = column_type(simple("Double"))
    array, bad = to_arrow([math.nan, math.inf], double.arrow, column_converter(double.arrow))
    assert not bad and math.isnan(array.to_pylist()[0]) and array.null_count == 0
    string = column_type(STRING)
    array, bad = to_arrow(["ok", "\ud83d", "😀"], string.arrow, column_converter(string.arrow))
    assert array.to_pylist() == ["ok", None, "😀"] and list(bad) == [1]
    kryo = column_type(SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "x.K"}))
    array, bad = to_arrow([{"s": "\ud83d", "b": b"\x01", "f": math.nan}], kryo.storage_type, column_converter(kryo.arrow))
    assert not bad and array.to_pylist() == ['{"s": "\\ud83d", "b": "01", "f": NaN}']  # JSON text, escaped where needed


@pytest.mark.parametrize(("snapshot", "reason"), [
    (SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "x.K"}), "Kryo x.K"),
    (SerializerSnapshot("com.acme.CustomSerializerSnapshot", 1), "CustomSerializerSnapshot"),
    (row_of(LONG, SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "x.K"})), "field f1: no decoded type for Kryo x.K"),
    (row_of(LONG, kinds=None), "Row<Long>"),  # a Row snapshot without its outer payload: not ours to guess
    (nullable_of(LONG, -1), "Nullable<Long>"),  # Flink itself refuses a negative padding
    (set_of(SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "x.K"})), "Kryo x.K"),
    (SerializerSnapshot(POJO_SNAPSHOT, 2, attributes={"pojo_class": "x.Q"}, pojo_fields=[PojoField("a", "x.Q", None, "unknown")]),
     "without a readable serializer snapshot: a"),
    (SerializerSnapshot(POJO_SNAPSHOT, 2, attributes={"pojo_class": "x.E"}, pojo_fields=[]), "no fields"),
    (list_of(SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "x.K"})), "Kryo x.K"),
    (map_of(VOID_NS, LONG), "always null"),
])
def test_no_decoded_type_is_json_with_a_reason(snapshot, reason):
    decision = column_type(snapshot)
    assert decision.is_json and decision.storage_type == pa.string() and reason in decision.reason
    assert decision.to_json()["type"] == "json"


def _state(name: str, kind: str, **serializers) -> StateMetaInfo:
    option = (OPERATOR_STATE_DISTRIBUTION_MODE, "UNION") if kind == "UNION" else (KEYED_STATE_TYPE, kind)
    return StateMetaInfo(name, 1 if kind == "UNION" else 0, options=[option], serializers=list(serializers.items()))


def test_state_columns_per_kind():
    ttl_long = SerializerSnapshot(TTL, 3, nested=[LONG, LONG])
    listed = keyed_state_columns(_state("l", "LIST", NAMESPACE_SERIALIZER=WINDOW, VALUE_SERIALIZER=list_of(ttl_long)), STRING)
    assert listed.ttl and listed.columns["value"].arrow == pa.int64() and listed.columns["namespace"].arrow == column_type(WINDOW).arrow
    mapped = keyed_state_columns(_state("m", "MAP", NAMESPACE_SERIALIZER=VOID_NS, VALUE_SERIALIZER=map_of(INT, STRING)), LONG)
    assert (mapped.columns["user_key"].arrow, mapped.columns["value"].arrow, mapped.ttl) == (pa.int32(), pa.string(), False)
    union = operator_state_columns(_state("u", "UNION", VALUE_SERIALIZER=LONG))
    assert union.columns["value"].arrow == pa.int64() and union.columns["key"].arrow == pa.null()


def test_subtasks_that_disagree_make_the_column_json():
    a = StateColumns({"key": column_type(LONG), "namespace": column_type(VOID_NS), "user_key": column_type(None), "value": column_type(INT)})
    b = StateColumns({**a.columns, "value": column_type(LONG)})
    merged = merge_state_columns([a, b, a])
    assert merged.columns["key"] == a.columns["key"]
    assert merged.columns["value"].is_json and "differ" in merged.columns["value"].reason
    assert merge_state_columns([a, a]) == a
    assert isinstance(merged.columns["value"], ColumnType)
