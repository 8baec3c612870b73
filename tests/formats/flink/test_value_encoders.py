"""repair.formats.flink.value_encoders and row_codecs: encode(decode(b)) == b for every raw column of
every row real Flink wrote in the fixtures (keys, namespaces, map keys, values, list elements, map
values, TTL values, timers), the decoded Parquet columns give the same values as the raw bytes, and
decode(encode(x)) == x for generated values."""

from __future__ import annotations

import math
import struct
from decimal import Context, Decimal
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repair.formats.flink.row_codecs import same_value
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.value_encoders import EncodeError, encode_string_value, encoder_for
from repair.formats.flink.values import decoder_for
from tests.encoder_testlib import round_trip_raw_columns

if TYPE_CHECKING:
    from repair.formats.flink.table_types import SqlType

_B = "org.apache.flink.api.common.typeutils.base."


def _snapshot(kind: str) -> SerializerSnapshot:
    return SerializerSnapshot(_B + f"{kind}Serializer${kind}SerializerSnapshot", 1)




@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.1-p3-external-xxh3-zstd", "flink-1.20-heap", "flink-1.20-sql",
                                  "flink-2.3-sql", "flink-1.20-sql-heap"])
def test_every_raw_column_flink_wrote_encodes_back_to_its_bytes(name, tmp_path):
    checked, covered = round_trip_raw_columns(name, tmp_path)
    assert checked > 1000
    if "sql" in name:  # RowData keys and values (ARRAY, MAP, ROW kinds, TTL), StringData, External
        assert {"RowDataSerializer", "ExternalSerializer", "StringDataSerializer", "TtlStateFactory"} <= covered, covered
        return
    assert {"StringSerializer", "LongSerializer", "IntSerializer", "ShortSerializer", "ByteSerializer", "BooleanSerializer",
            "DoubleSerializer", "FloatSerializer", "CharSerializer", "BytePrimitiveArraySerializer", "TtlStateFactory",
            "TimerSerializerSnapshot", "TimeWindow"} <= covered




@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=50))
def test_strings_round_trip(text):
    decoder = decoder_for(_snapshot("String"))
    assert decoder.decode_all(encode_string_value(text)) == text


@pytest.mark.parametrize("kind, strategy", [
    ("Long", st.integers(-(2**63), 2**63 - 1)), ("Int", st.integers(-(2**31), 2**31 - 1)),
    ("Short", st.integers(-(2**15), 2**15 - 1)), ("Byte", st.integers(-128, 127)), ("Boolean", st.booleans()),
    ("Double", st.floats(allow_nan=True)), ("Float", st.floats(width=32, allow_nan=True)),
    ("Char", st.characters(max_codepoint=0xFFFF, blacklist_categories=())),
])
def test_simple_values_round_trip(kind, strategy):
    encode, decoder = encoder_for(_snapshot(kind)), decoder_for(_snapshot(kind))

    @given(strategy)
    def check(value):
        assert same_value(decoder.decode_all(encode(value)), value)

    check()


@pytest.mark.parametrize("kind, value", [
    ("Long", 2**63), ("Int", 2**31), ("Short", 40000), ("Byte", 128), ("Long", "1"), ("Int", True), ("Long", None),
    ("Float", 1e39), ("Float", 0.1), ("Char", "ab"), ("Boolean", 1),
])
def test_values_the_serializer_cannot_write_are_refused(kind, value):
    with pytest.raises(EncodeError):
        encoder_for(_snapshot(kind))(value)


def test_null_strings_and_special_floats():
    assert encode_string_value(None) == b"\x00"
    assert decoder_for(_snapshot("String")).decode_all(b"\x00") is None
    nan = encoder_for(_snapshot("Double"))(float("nan"))
    assert math.isnan(struct.unpack(">d", nan)[0])
    assert encoder_for(_snapshot("Float"))(float("-inf")) == struct.pack(">f", float("-inf"))


def _sql(root: str, *children, nullable: bool = True, **params) -> SqlType:
    from repair.formats.flink.table_types import SqlType

    return SqlType(root, nullable, dict(params), list(children), [f"n{i}" for i in range(len(children))] if root == "ROW" else None)


_ROW_TYPES = [
    _sql("BIGINT"), _sql("VARCHAR"), _sql("SMALLINT"), _sql("BOOLEAN"), _sql("DOUBLE"),
    _sql("DECIMAL", precision=30, scale=5), _sql("DECIMAL", precision=10, scale=2), _sql("TIMESTAMP_WITHOUT_TIME_ZONE", precision=9),
    _sql("TIMESTAMP_WITH_LOCAL_TIME_ZONE", precision=3), _sql("VARBINARY"), _sql("ARRAY", _sql("INTEGER")),
    _sql("ARRAY", _sql("VARCHAR")), _sql("MAP", _sql("VARCHAR"), _sql("BIGINT")), _sql("MULTISET", _sql("VARCHAR")),
    _sql("ROW", _sql("INTEGER"), _sql("VARCHAR")),
]
_texts = st.text(alphabet=st.characters(max_codepoint=0x10FFFF, blacklist_categories=("Cs",)), max_size=12)
_ROW_VALUES = st.fixed_dictionaries({
    "kind": st.sampled_from(["+I", "-U", "+U", "-D"]),
    "f0": st.none() | st.integers(-(2**63), 2**63 - 1), "f1": st.none() | _texts, "f2": st.none() | st.integers(-(2**15), 2**15 - 1),
    "f3": st.none() | st.booleans(), "f4": st.none() | st.floats(allow_nan=False),
    "f5": st.none() | st.integers(-(10**30) + 1, 10**30 - 1).map(lambda u: format(Decimal(u).scaleb(-5, Context(prec=40)), "f")),
    "f6": st.none() | st.integers(-(10**10) + 1, 10**10 - 1).map(lambda u: format(Decimal(u).scaleb(-2), "f")),
    "f7": st.none() | st.integers(-(2**62), 2**62), "f8": st.none() | st.integers(-(2**63), 2**63 - 1),
    "f9": st.none() | st.binary(max_size=12), "f10": st.none() | st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=40),
    "f11": st.none() | st.lists(st.none() | _texts, max_size=5),
    "f12": st.none() | st.lists(st.tuples(_texts, st.none() | st.integers(-(2**63), 2**63 - 1)), max_size=4),
    "f13": st.none() | st.lists(st.tuples(_texts, st.integers(1, 2**31 - 1)), max_size=4),
    "f14": st.none() | st.fixed_dictionaries({"kind": st.just("+I"), "f0": st.none() | st.integers(-(2**31), 2**31 - 1), "f1": st.none() | _texts}),
})


@given(_ROW_VALUES)
def test_row_data_round_trips(row):
    from repair.formats.flink.serializers import ROW_DATA_SNAPSHOT

    snapshot = SerializerSnapshot(ROW_DATA_SNAPSHOT, 3, attributes={"logical_types": _ROW_TYPES})
    decoded = decoder_for(snapshot).decode_all(encoder_for(snapshot)(row))
    assert same_value(decoded, row), (decoded, row)


@pytest.mark.parametrize("field, value", [("f0", "1"), ("f5", "1.0000001"), ("f6", "123456789012"), ("f1", b"x"), ("f5", "NaN"),
                                          ("f12", [("a",)]), ("kind", "+X")])
def test_row_data_values_the_types_cannot_hold_are_refused(field, value):
    from repair.formats.flink.serializers import ROW_DATA_SNAPSHOT

    snapshot = SerializerSnapshot(ROW_DATA_SNAPSHOT, 3, attributes={"logical_types": _ROW_TYPES})
    row = {"kind": "+I", **{f"f{i}": None for i in range(len(_ROW_TYPES))}, field: value}
    with pytest.raises(EncodeError):
        encoder_for(snapshot)(row)
