"""Column-wise decoding (repair.formats.flink.in_rocksdb.keyed_columns) against the row-by-row decoder.

Every fixture entry is covered by tests/ops/test_export.py (both engines write identical Parquet and no
batch goes row by row there). Here: the layouts the fixtures do not have, built by hand — length
suffixes, TimeWindow namespaces, 2-byte key-group prefixes, every vectorized primitive, strings of
every length class and of non-ASCII text, chars of 1, 2 and 3 UTF-8 bytes, TTL, null map values, long
lists, lists, sets and maps inside values (empty, longer than the round limit, nested), keys outside the
handle's key groups — and bytes the column-wise path must refuse (ColumnarMiss) so that the row path
decides. The real fixtures' Char, List and Map states are checked here batch by batch as well.
"""

from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest

from repair.errors import FormatError
from repair.formats.flink.arrow import keyed_state_columns
from repair.formats.flink.backend_meta import KEYED_STATE_TYPE, StateMetaInfo
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.flink.in_rocksdb import keyed_columns as flink_keyed_columns
from repair.formats.flink.in_rocksdb.keyed_columns import (
    MAX_LIST_STEPS,
    ColumnarMiss,
    ColumnarStateDecoder,
    field_reader,
)
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import PojoField, SerializerSnapshot
from repair.formats.flink.values import decoder_for
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.export.parts import COLUMNS, PartStats, _BatchWriter
from repair.readers.rocksdb import iter_incremental_handle
from tests.conftest import FIXTURES, ROCKSDB_FIXTURE_NAMES
from tests.flink_bytes import nullable, row, string_value

_B = "org.apache.flink.api.common.typeutils.base."


def _simple(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(_B + f"{name}Serializer${name}SerializerSnapshot", 3)


STRING, LONG, INT, SHORT, BYTE, BOOLEAN, DOUBLE, FLOAT, CHAR = (
    _simple(n) for n in ("String", "Long", "Int", "Short", "Byte", "Boolean", "Double", "Float", "Char"))
ENUM = SerializerSnapshot(_B + "EnumSerializer$EnumSerializerSnapshot", 3,
                          attributes={"enum_class": "com.example.Wave", "enum_constants": ["FIRST", "SECOND", "THIRD"]})
BYTES = SerializerSnapshot(_B + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot", 3)
VOID_NS = SerializerSnapshot("org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", 3)
WINDOW = SerializerSnapshot("org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot", 3)
GLOBAL_WINDOW = SerializerSnapshot("org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", 1)
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
TIMER = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"


def _ttl(inner: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(TTL, 2, nested=[LONG, inner])


def _list(inner: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(_B + "ListSerializerSnapshot", 1, nested=[inner])


def _map(key: SerializerSnapshot, value: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(_B + "MapSerializerSnapshot", 1, nested=[key, value])


def _state(kind: str, value: SerializerSnapshot, namespace: SerializerSnapshot = VOID_NS, backend: int = 0) -> StateMetaInfo:
    return StateMetaInfo("s", backend, options=[(KEYED_STATE_TYPE, kind)],
                         serializers=[("NAMESPACE_SERIALIZER", namespace), ("VALUE_SERIALIZER", value)])


# -- writers, independent of the decoders --------------------------------------------------------


sv = string_value


def suffix(length: int) -> bytes:
    """``writeVariableIntBytes``: lowest byte first, at least one byte."""
    out = bytearray([length & 0xFF])
    length >>= 8
    while length:
        out.append(length & 0xFF)
        length >>= 8
    return bytes(out)


def q(n: int) -> bytes:
    return struct.pack(">q", n)


def _both(state: StateMetaInfo, key_serializer, entries, max_parallelism=128, groups=(0, 127), *, nans=False):
    """The column-wise batch; asserts it equals the row-wise one (``nans``: float bits compared, as
    NaN equals nothing)."""
    columns = keyed_state_columns(state, key_serializer)
    keys = [k for k, _ in entries]
    values = [v for _, v in entries]
    decoded, outside = ColumnarStateDecoder(state, key_serializer, max_parallelism, columns).decode(keys, values, *groups)
    writer = _BatchWriter(columns, PartStats("x"))
    fast = pa.record_batch([decoded[name] for name in COLUMNS], schema=writer.schema)
    rows = KeyedStateDecoder(state, key_serializer, max_parallelism)
    expected = [r for k, v in entries if groups[0] <= rows.key_group(k) <= groups[1] for r in rows.rows(k, v)]
    exact = writer.record_batch(expected)
    if nans:
        bits = [b.column("value").buffers()[1].to_pybytes() for b in (fast, exact)]
        assert bits[0] == bits[1]
        assert fast.drop_columns(["value"]).equals(exact.drop_columns(["value"]))
    else:
        assert fast.equals(exact), (fast.to_pylist()[:3], exact.to_pylist()[:3])
    assert outside == sum(1 for k, _ in entries if not groups[0] <= rows.key_group(k) <= groups[1])
    return fast


def _miss(state, key_serializer, entries, max_parallelism=128):
    columns = keyed_state_columns(state, key_serializer)
    with pytest.raises(ColumnarMiss):
        ColumnarStateDecoder(state, key_serializer, max_parallelism, columns).decode(
            [k for k, _ in entries], [v for _, v in entries], 0, max_parallelism - 1)


# -- layouts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 125, 126, 127, 128, 300, 16382, 16383, 16384, 70000])
def test_string_keys_of_every_varint_length(length):
    texts = ["a" * length, "b" * length + "x", None if length == 0 else "c" * (length - 1)]
    entries = [(bytes([7]) + sv(t) + b"\x00", q(i)) for i, t in enumerate(texts)]
    batch = _both(_state("VALUE", LONG), STRING, entries)
    assert batch.column("key").to_pylist() == texts


def test_non_ascii_strings_among_ascii_ones_go_through_the_exact_reader():
    texts = ["plain", "grüße", "日本語テキスト", "😀 emoji", "x" * 200 + "é", "ascii again"]
    entries = [(bytes([i]) + sv(t) + b"\x00", sv(t[::-1])) for i, t in enumerate(texts)]
    batch = _both(_state("VALUE", STRING), STRING, entries)
    assert batch.column("key").to_pylist() == texts
    assert batch.column("value").to_pylist() == [t[::-1] for t in texts]


def test_length_suffixes_when_key_and_namespace_are_both_variable_length():
    entries = [(bytes([1]) + sv(k) + suffix(len(sv(k))) + sv(ns) + suffix(len(sv(ns))), q(i))
               for i, (k, ns) in enumerate([("k", "n"), ("key" * 100, "ns" * 150), ("", "x")])]
    batch = _both(_state("VALUE", LONG, namespace=STRING), STRING, entries)
    assert batch.column("namespace").to_pylist() == ["n", "ns" * 150, "x"]
    # a wrong suffix is the row path's to report
    bad = [(bytes([1]) + sv("k") + suffix(9) + sv("n") + suffix(2), q(0))]
    _miss(_state("VALUE", LONG, namespace=STRING), STRING, bad)
    with pytest.raises(FormatError):
        KeyedStateDecoder(_state("VALUE", LONG, namespace=STRING), STRING, 128).rows(*bad[0])


def test_time_window_namespace_and_two_byte_key_group_prefix():
    entries = [(struct.pack(">H", 200 + i) + q(i * 7) + q(1000 * i) + q(1000 * i + 999), struct.pack(">i", -i)) for i in range(5)]
    batch = _both(_state("VALUE", INT, namespace=WINDOW), LONG, entries, max_parallelism=300, groups=(0, 299))
    assert batch.column("namespace").to_pylist()[1] == {"start": 1000, "end": 1999}
    assert batch.column("key_group").to_pylist() == [200, 201, 202, 203, 204]


@pytest.mark.parametrize("kind", ["LIST", "REDUCING"])
def test_global_window_namespace_is_one_zero_byte_decoded_as_null(kind):
    """countWindow state (the window's list, CountTrigger's count): GlobalWindow.Serializer writes one
    byte 0 and has length 0, so a String key has no length suffixes (as with VoidNamespace)."""
    state = _state(kind, _list(LONG) if kind == "LIST" else LONG, namespace=GLOBAL_WINDOW)
    value = (lambda i: q(i) + b"," + q(-i)) if kind == "LIST" else q
    entries = [(bytes([i]) + sv(k) + b"\x00", value(i)) for i, k in enumerate(["user-01", "", "jürgen", "x" * 300])]
    batch = _both(state, STRING, entries)
    assert batch.schema.field("namespace").type == pa.null() and batch.column("namespace").null_count == batch.num_rows
    assert batch.column("namespace_raw").to_pylist() == [b"\x00"] * batch.num_rows
    assert batch.column("key").to_pylist()[:2] == (["user-01", "user-01"] if kind == "LIST" else ["user-01", ""])
    assert batch.column("error").null_count == batch.num_rows
    columns = keyed_state_columns(state, STRING).columns["namespace"]
    assert (columns.arrow, columns.describes) == (pa.null(), "GlobalWindow")


@pytest.mark.parametrize("namespace", [b"\x01", b"\xff", b""])
def test_a_global_window_byte_other_than_0_is_an_error_and_a_columnar_miss(namespace):
    state = _state("VALUE", LONG, namespace=GLOBAL_WINDOW)
    bad = (bytes([1]) + q(5) + namespace, q(1))
    _miss(state, LONG, [(bytes([1]) + q(4) + b"\x00", q(0)), bad])
    with pytest.raises(FormatError) as raised:
        KeyedStateDecoder(state, LONG, 128).rows(*bad)
    assert raised.value.offset == 9  # after the key-group prefix and the key
    if namespace:
        assert "global window" in str(raised.value) and f"0x{namespace[0]:02x}" in str(raised.value)
    decoder = decoder_for(GLOBAL_WINDOW)  # the heap backend's and canonical savepoints' reader
    assert decoder.decode(b"\x00", 0) == (None, 1) and decoder.length == 0 and not decoder.is_variable_length
    with pytest.raises(FormatError):
        decoder.decode(b"\x00" + namespace, 1)  # a bad byte, or none left


@pytest.mark.parametrize(("serializer", "encode", "values"), [
    (LONG, q, [0, -1, 2**63 - 1, -(2**63)]),
    (INT, lambda v: struct.pack(">i", v), [0, -1, 2**31 - 1, -(2**31)]),
    (SHORT, lambda v: struct.pack(">h", v), [0, -1, 32767, -32768]),
    (BYTE, lambda v: struct.pack(">b", v), [0, -1, 127, -128]),
    (BOOLEAN, lambda v: bytes([v]), [True, False]),
    (DOUBLE, lambda v: struct.pack(">d", v), [0.0, -0.0, 1.5e300, float("inf"), float("-inf")]),
    (FLOAT, lambda v: struct.pack(">f", v), [0.0, -0.0, 1.5, 3.4028234663852886e38, 2.0**-149, float("-inf")]),
    (ENUM, lambda v: struct.pack(">i", ["FIRST", "SECOND", "THIRD"].index(v)), ["THIRD", "FIRST", "SECOND", "THIRD"]),
    (BYTES, lambda v: struct.pack(">i", len(v)) + v, [b"", b"\x00\xff", b"x" * 1000]),
])
def test_every_vectorized_value_type(serializer, encode, values):
    assert not field_reader(serializer, keyed_state_columns(_state("VALUE", serializer), LONG).columns["value"].arrow).last_only  # column-wise
    entries = [(bytes([3]) + q(i) + b"\x00", encode(v)) for i, v in enumerate(values)]
    batch = _both(_state("VALUE", serializer), LONG, entries)
    assert batch.column("value").to_pylist() == values


def test_enum_ordinals_outside_the_constants_are_left_to_the_row_path():
    for ordinal in (3, -1):
        entries = [(bytes([3]) + q(0) + b"\x00", struct.pack(">i", 0)), (bytes([3]) + q(1) + b"\x00", struct.pack(">i", ordinal))]
        _miss(_state("VALUE", ENUM), LONG, entries)


def test_nan_doubles_keep_their_bits():
    payloads = [struct.pack(">Q", 0x7FF8000000000000), struct.pack(">Q", 0x7FF0000000000001), struct.pack(">Q", 0xFFF8000000000123)]
    entries = [(bytes([3]) + q(i) + b"\x00", p) for i, p in enumerate(payloads)]
    batch = _both(_state("VALUE", DOUBLE), LONG, entries, nans=True)
    raw = batch.column("value").buffers()[1].to_pybytes()
    assert [raw[8 * i : 8 * i + 8] for i in range(3)] == [p[::-1] for p in payloads]  # little-endian in Arrow


def test_ttl_values_list_elements_and_map_values():
    ttl_string = _ttl(STRING)
    entries = [(bytes([1]) + q(i) + b"\x00", q(1700000000000 + i) + sv(f"v{i}")) for i in range(4)]
    batch = _both(_state("VALUE", ttl_string), LONG, entries)
    assert batch.column("ttl_timestamp").to_pylist() == [1700000000000 + i for i in range(4)]
    lists = [(bytes([1]) + q(i) + b"\x00", b",".join(q(100 + j) + q(j * i) for j in range(i + 1))) for i in range(5)]
    batch = _both(_state("LIST", _list(_ttl(LONG))), LONG, lists)
    assert batch.column("list_index").to_pylist() == [j for i in range(5) for j in range(i + 1)]
    maps = [(bytes([1]) + q(i // 3) + b"\x00" + sv(f"uk{i}"), b"\x01" if i % 2 else b"\x00" + q(5) + struct.pack(">i", i)) for i in range(9)]
    batch = _both(_state("MAP", _map(STRING, _ttl(INT))), LONG, maps)
    assert batch.column("value").to_pylist() == [None if i % 2 else i for i in range(9)]
    assert batch.column("ttl_timestamp").to_pylist() == [None if i % 2 else 5 for i in range(9)]


def test_string_lists_and_lists_longer_than_the_round_limit():
    lists = [(bytes([1]) + q(i) + b"\x00", b",".join(sv(f"e{i}-{j}") for j in range(i + 1))) for i in range(6)]
    _both(_state("LIST", _list(STRING)), LONG, lists)
    long = [(bytes([1]) + q(0) + b"\x00", b",".join(sv(f"s{j}") for j in range(MAX_LIST_STEPS + 1)))]
    _miss(_state("LIST", _list(STRING)), STRING, long)  # the row path takes it (one row per element)
    assert len(KeyedStateDecoder(_state("LIST", _list(STRING)), LONG, 128).rows(*long[0])) == MAX_LIST_STEPS + 1


def test_list_state_whose_every_list_holds_one_element():
    """Lists of one element each keep their rows in place (no reordering): the same rows as the row
    path, for elements of variable and of fixed width, with and without TTL, long keys included."""
    keys = [bytes([1]) + sv("user-" + "u" * 300 + str(i)) + b"\x00" for i in range(5)]
    strings = [(key, sv("é" if i == 2 else f"tag-{i}")) for i, key in enumerate(keys)]
    batch = _both(_state("LIST", _list(STRING)), STRING, strings)
    assert batch.column("list_index").to_pylist() == [0] * 5
    assert batch.column("value").to_pylist() == ["tag-0", "tag-1", "é", "tag-3", "tag-4"]
    assert batch.column("key").to_pylist() == ["user-" + "u" * 300 + str(i) for i in range(5)]
    _both(_state("LIST", _list(_ttl(STRING))), STRING, [(key, q(7) + sv(f"t{i}")) for i, key in enumerate(keys)])
    longs = _both(_state("LIST", _list(LONG)), STRING, [(key, q(i)) for i, key in enumerate(keys)])
    assert longs.column("value").to_pylist() == list(range(5))
    _both(_state("LIST", _list(_ttl(LONG))), STRING, [(key, q(7) + q(i)) for i, key in enumerate(keys)])


def test_list_state_of_fixed_width_elements_is_read_at_once_whatever_its_length():
    """Elements of a fixed width (Long; TTL Long: 16 bytes) need no rounds: lists far longer than the
    round limit stay column-wise, among short ones."""
    lengths = [1, 3, MAX_LIST_STEPS + 1, 1000, 2]
    lists = [(bytes([1]) + q(i) + b"\x00", b",".join(q(i * 10_000 + j) for j in range(n))) for i, n in enumerate(lengths)]
    batch = _both(_state("LIST", _list(LONG)), LONG, lists)
    assert batch.column("list_index").to_pylist() == [j for n in lengths for j in range(n)]
    assert batch.column("value").to_pylist()[-2:] == [40_000, 40_001]
    ttl = [(bytes([1]) + q(i) + b"\x00", b",".join(q(7) + q(j) for j in range(n))) for i, n in enumerate(lengths)]
    assert _both(_state("LIST", _list(_ttl(LONG))), LONG, ttl).column("ttl_timestamp").null_count == 0
    assert _both(_state("LIST", _list(LONG)), LONG, []).num_rows == 0


@pytest.mark.parametrize("value", [
    pytest.param(q(1) + b"," + q(2)[:7], id="a length that is no whole number of elements"),
    pytest.param(q(1) + b";" + q(2), id="a wrong delimiter"),
    pytest.param(q(1) + b"," + q(2) + b",", id="a trailing delimiter"),
    pytest.param(b"", id="no element"),
])
def test_malformed_fixed_width_list_state_is_left_to_the_row_path(value):
    good = (bytes([1]) + q(0) + b"\x00", q(1) + b"," + q(2))
    _both(_state("LIST", _list(LONG)), LONG, [good])
    _miss(_state("LIST", _list(LONG)), LONG, [good, (bytes([1]) + q(1) + b"\x00", value)])


def test_timers():
    timer = SerializerSnapshot(TIMER, 2, nested=[STRING, VOID_NS])
    state = StateMetaInfo("_timer_state/event_t", 3, options=[], serializers=[("VALUE_SERIALIZER", timer)])  # PRIORITY_QUEUE
    entries = [(bytes([9]) + struct.pack(">Q", (ts & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63)) + sv(f"user{ts}") + b"\x00", b"")
               for ts in (-5, 0, 1700000000000, 2**63 - 1)]
    batch = _both(state, STRING, entries)
    assert batch.column("timestamp").to_pylist() == [-5, 0, 1700000000000, 2**63 - 1]


def test_keys_outside_the_key_groups_are_dropped_and_counted():
    entries = [(bytes([g]) + q(g) + b"\x00", q(g)) for g in range(0, 40, 3)]
    batch = _both(_state("VALUE", LONG), LONG, entries, groups=(10, 20))
    assert batch.column("key").to_pylist() == [12, 15, 18]


# -- bytes the column-wise path must leave to the row path ------------------------------------------


@pytest.mark.parametrize("entry", [
    (bytes([1]) + q(1), q(1)),                         # no namespace byte
    (bytes([1]) + q(1) + b"\x01", q(1)),               # a namespace byte that is not 0
    (bytes([1]) + q(1) + b"\x00" + b"extra", q(1)),    # bytes after the namespace
    (bytes([1]) + q(1) + b"\x00", q(1)[:5]),           # a truncated value
    (bytes([1]) + q(1) + b"\x00", q(1) + b"x"),        # bytes after the value
    (b"", q(1)),                                       # no key-group prefix
])
def test_malformed_entries_are_left_to_the_row_path(entry):
    good = [(bytes([1]) + q(0) + b"\x00", q(0))]
    _miss(_state("VALUE", LONG), LONG, good + [entry])
    with pytest.raises(FormatError):
        KeyedStateDecoder(_state("VALUE", LONG), LONG, 128).rows(*entry)


def test_truncated_strings_and_four_byte_lengths_are_left_to_the_row_path():
    _miss(_state("VALUE", LONG), STRING, [(bytes([1]) + sv("abcdef")[:-2] + b"\x00", q(0))])
    huge = bytes([1]) + bytes([0x81, 0x80, 0x80, 0x01]) + b"\x00"  # 2,097,153 - 1 chars announced
    _miss(_state("VALUE", LONG), STRING, [(huge, q(0))])


def h(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def f32(x: float) -> bytes:
    return struct.pack(">f", x)


def char(c: str) -> bytes:
    """``CharSerializer``: the UTF-16 code unit, big-endian (one char of the BMP, or a lone surrogate)."""
    return struct.pack(">H", ord(c))


#: One char of each UTF-8 length (1, 2 and 3 bytes), the edges of each range included.
CHARS = "a\x00\x7f\x80ü\u07ff\u0800用\ud7ff\ue000\uffff"


def test_char_values_and_keys_are_read_column_wise_in_one_two_and_three_utf8_bytes():
    assert not field_reader(CHAR, pa.string()).last_only
    entries = [(bytes([1]) + q(i) + b"\x00", char(c)) for i, c in enumerate(CHARS)]
    batch = _both(_state("VALUE", CHAR), LONG, entries)
    assert batch.column("value").to_pylist() == list(CHARS)
    assert all(len(c.encode("utf-8")) == n for c, n in zip("a\x80\u0800", (1, 2, 3)))
    keys = [(bytes([1]) + char(c) + b"\x00", q(i)) for i, c in enumerate(CHARS)]  # a fixed-width key: no suffix
    assert _both(_state("VALUE", LONG), CHAR, keys).column("key").to_pylist() == list(CHARS)
    ascii_only = [(bytes([1]) + q(i) + b"\x00", char(c)) for i, c in enumerate("Flink")]
    assert _both(_state("VALUE", CHAR), LONG, ascii_only).column("value").to_pylist() == list("Flink")



def test_the_char_table_holds_every_code_unit_as_its_char_and_no_surrogate():
    """The table ``Character`` values are looked up in, built from offsets computed by width, against
    ``chr`` of every UTF-16 code unit."""
    table = flink_keyed_columns._char_table()
    table.validate(full=True)
    assert table.to_pylist() == [None if 0xD800 <= unit <= 0xDFFF else chr(unit) for unit in range(1 << 16)]

@pytest.mark.parametrize("unit", [0xD800, 0xDBFF, 0xDC00, 0xDFFF])
def test_lone_surrogate_chars_are_left_to_the_row_path(unit):
    """Arrow strings are UTF-8, which has no lone surrogates: the column-wise path misses, and the row
    path writes null with the reason in ``error`` (and keeps the bytes)."""
    state = _state("VALUE", CHAR)
    entries = [(bytes([1]) + q(0) + b"\x00", char("a")), (bytes([1]) + q(1) + b"\x00", struct.pack(">H", unit))]
    _miss(state, LONG, entries)
    rows = KeyedStateDecoder(state, LONG, 128)
    exact = _BatchWriter(keyed_state_columns(state, LONG), PartStats("x")).record_batch(
        [r for k, v in entries for r in rows.rows(k, v)]).to_pylist()
    assert exact[1]["value"] is None and "not representable" in exact[1]["error"]
    assert exact[1]["value_raw"] == struct.pack(">H", unit)
    _miss(_state("MAP", _map(CHAR, DOUBLE)), LONG, [(bytes([1]) + q(0) + b"\x00" + struct.pack(">H", unit), b"\x00" + q(0))])


def test_serializers_without_a_column_reader_are_decoded_per_row_by_their_fast_path(monkeypatch):
    """The per-row fallback (``row_read``): valid where the value ends its bytes; keys of such a
    serializer send the whole state down the row path."""
    monkeypatch.delitem(flink_keyed_columns._VECTOR, CHAR.class_name)
    assert field_reader(CHAR, pa.string()).last_only
    entries = [(bytes([1]) + q(i) + b"\x00", char(c)) for i, c in enumerate("aü用z")]
    _both(_state("VALUE", CHAR), LONG, entries)
    entries = [(bytes([1]) + q(i) + b"\x00", row("+U", [char(chr(0x41 + i)), None if i % 2 else sv("x")])) for i in range(4)]
    _both(_state("VALUE", _row(CHAR, STRING)), LONG, entries)
    with pytest.raises(ColumnarMiss):
        ColumnarStateDecoder(_state("VALUE", LONG), CHAR, 128, keyed_state_columns(_state("VALUE", LONG), CHAR))


def test_json_columns_are_left_to_the_row_path():
    unknown = SerializerSnapshot("com.example.MySerializerSnapshot", 1)
    with pytest.raises(ColumnarMiss):
        ColumnarStateDecoder(_state("VALUE", LONG), unknown, 128, keyed_state_columns(_state("VALUE", LONG), unknown))


# -- lists, sets and maps inside values ------------------------------------------------------------

SET = _B + "SetSerializerSnapshot"


def _set(inner: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(SET, 1, nested=[inner])


def seq(items: list[bytes]) -> bytes:
    """``ListSerializer``: ``int size``, then the elements."""
    return i32(len(items)) + b"".join(items)


def set_of(items: list[bytes | None]) -> bytes:
    """``SetSerializer`` (Flink 2.x): ``int size``, then per element ``bool isNull`` and the element if not null."""
    return i32(len(items)) + b"".join(nullable(item) for item in items)


def map_of(entries: list[tuple[bytes, bytes | None]]) -> bytes:
    """``MapSerializer``: ``int size``, then per entry the key, ``bool isNull`` and the value if not null."""
    return i32(len(entries)) + b"".join(k + nullable(v) for k, v in entries)


def _values(values: list[bytes]) -> list[tuple[bytes, bytes]]:
    return [(bytes([1]) + q(i) + b"\x00", v) for i, v in enumerate(values)]


def _column_wise(state: StateMetaInfo, key=LONG) -> bool:
    """Whether the state's value is read column-wise (not by the per-row fallback)."""
    decoder = ColumnarStateDecoder(state, key, 128, keyed_state_columns(state, key))
    return not decoder.value.last_only


LIST_LENGTHS = [0, 1, 3, 0, 2, MAX_LIST_STEPS, MAX_LIST_STEPS + 1, 200, 1]


def test_lists_of_fixed_width_elements_of_any_length():
    state = _state("VALUE", _list(SHORT))
    assert _column_wise(state)
    shorts = [[(i * 1000 + j) % 65536 - 32768 for j in range(n)] for i, n in enumerate(LIST_LENGTHS)]
    batch = _both(state, LONG, _values([seq([h(v) for v in vs]) for vs in shorts]))
    assert batch.schema.field("value").type == pa.list_(pa.int16())
    assert batch.column("value").to_pylist() == shorts
    assert _both(state, LONG, _values([seq([]), seq([])])).column("value").to_pylist() == [[], []]
    assert _both(state, LONG, []).num_rows == 0


def test_elements_not_as_wide_as_their_serializer_says_are_left_to_the_row_path():
    """A Nullable padded to 8 bytes around an Int (4 bytes): its length says 9 bytes, a non-null value
    takes 5. The row path reads the elements one after the other; the column-wise one, placing them 9
    bytes apart, must miss. The bytes are chosen so that everything else fits at the wrong places."""
    element = _nullable(INT, 8)
    # a List then a String: placed 9 bytes apart, the list would end at byte 22, where the String's
    # last char (0x01) reads as an empty String ending the value
    pair = SerializerSnapshot(TUPLE, 2, nested=[_list(element), STRING])
    entries = _values([seq([nullable(i32(5)), nullable(i32(256))]) + sv("abcdefg\x01")])
    _miss(_state("VALUE", pair), LONG, entries)
    assert KeyedStateDecoder(_state("VALUE", pair), LONG, 128).rows(*entries[0])[0]["value"] == [[5, 256], "abcdefg\x01"]
    # list state: one element of 5 bytes and 4 more bytes, which the row path refuses (no delimiter)
    entries = _values([nullable(i32(5)) + bytes(4)])
    _miss(_state("LIST", _list(element)), LONG, entries)
    with pytest.raises(FormatError):
        KeyedStateDecoder(_state("LIST", _list(element)), LONG, 128).rows(*entries[0])


def test_lists_of_variable_width_elements_in_rounds_and_the_longest_one_by_one():
    """Rows with more elements than the round limit are read by the list's fast path, the others in
    rounds; non-ASCII strings by the exact reader; the values come back in row order."""
    state = _state("VALUE", _list(STRING))
    assert _column_wise(state)
    texts = [[f"{i}-{j}" + ("ü" if (i + j) % 5 == 0 else "") for j in range(n)] for i, n in enumerate(LIST_LENGTHS)]
    texts[2][1] = None  # a null String element (length 0)
    batch = _both(state, LONG, _values([seq([sv(t) for t in ts]) for ts in texts]))
    assert batch.column("value").to_pylist() == texts
    every_row_long = _values([seq([sv(str(j)) for j in range(MAX_LIST_STEPS + 1 + i)]) for i in range(3)])
    _both(state, LONG, every_row_long)


def test_sets_hold_null_elements():
    state = _state("VALUE", _set(INT))
    assert _column_wise(state)
    sets = [[1, None, 3], [], [None], [4], list(range(MAX_LIST_STEPS + 1))]
    batch = _both(state, LONG, _values([set_of([None if v is None else i32(v) for v in vs]) for vs in sets]))
    assert batch.column("value").to_pylist() == sets


def test_maps_with_null_values_empty_maps_and_long_maps():
    state = _state("VALUE", _map(STRING, FLOAT))
    assert _column_wise(state)
    maps = [[("a", 1.5), ("b", None), ("ü", -0.25)], [], [("x", None)], [(f"k{j}", float(j)) for j in range(MAX_LIST_STEPS + 1)],
            [("", 2.0)], [("same", 1.0), ("same", 2.0)]]
    batch = _both(state, LONG, _values([map_of([(sv(k), None if v is None else f32(v)) for k, v in m]) for m in maps]))
    assert batch.schema.field("value").type == pa.map_(pa.string(), pa.float32())
    assert batch.column("value").to_pylist() == maps


def test_a_null_map_key_is_left_to_the_row_path():
    """An Arrow map key is never null: the row path writes the map as null with the reason."""
    state = _state("VALUE", _map(STRING, FLOAT))
    entries = _values([map_of([(sv("a"), f32(1.0))]), map_of([(sv(None), f32(1.0))])])
    _miss(state, LONG, entries)
    rows = KeyedStateDecoder(state, LONG, 128)
    exact = _BatchWriter(keyed_state_columns(state, LONG), PartStats("x")).record_batch(
        [r for k, v in entries for r in rows.rows(k, v)]).to_pylist()
    assert exact[1]["value"] is None and "null key" in exact[1]["error"]


@pytest.mark.parametrize(("snapshot", "value"), [
    pytest.param(_list(SHORT), i32(3) + h(1) + h(2), id="fixed width: fewer elements than the size"),
    pytest.param(_list(SHORT), i32(1 << 30) + h(1), id="fixed width: a size larger than the bytes left"),
    pytest.param(_list(SHORT), i32(-1), id="fixed width: a negative size"),
    pytest.param(_list(SHORT), i32(1) + h(1) + b"x", id="fixed width: bytes after the list"),
    pytest.param(_list(STRING), i32(2) + sv("a"), id="fewer elements than the size"),
    pytest.param(_list(STRING), i32(5) + sv("a") + sv("b"), id="a size larger than the bytes left"),
    pytest.param(_list(STRING), i32(-2) + sv("a"), id="a negative size"),
    pytest.param(_list(STRING), i32(MAX_LIST_STEPS + 1) + sv("a") * MAX_LIST_STEPS, id="a long list one element short"),
    pytest.param(_list(STRING), i32(1), id="no element"),
    pytest.param(_set(INT), i32(1) + b"\x02" + i32(1), id="a set null flag that is not 0 or 1"),
    pytest.param(_map(STRING, FLOAT), i32(2) + sv("a") + b"\x01" + sv("b"), id="a map entry without its null flag"),
    pytest.param(_map(STRING, FLOAT), i32(3) + sv("a") + b"\x01", id="a map size larger than the bytes left"),
    pytest.param(_map(STRING, FLOAT), i32(-1), id="a negative map size"),
    pytest.param(_map(STRING, FLOAT), i32(1) + sv("a") + b"\x00" + f32(1.0)[:3], id="a truncated map value"),
])
def test_malformed_lists_sets_and_maps_are_left_to_the_row_path(snapshot, value):
    """Never a wrong value: the column-wise path misses, and the row path raises a FormatError."""
    state = _state("VALUE", snapshot)
    good = {_list(SHORT).class_name: seq([h(1)]), SET: set_of([i32(1)])}.get(snapshot.class_name, None)
    if snapshot.class_name == _map(STRING, FLOAT).class_name:
        good = map_of([(sv("a"), f32(1.0))])
    elif snapshot.nested[0] == STRING:
        good = seq([sv("a")])
    entries = _values([good, value])
    _both(state, LONG, entries[:1])
    _miss(state, LONG, entries)
    with pytest.raises(FormatError):
        KeyedStateDecoder(state, LONG, 128).rows(*entries[1])


def test_lists_and_maps_nested_in_tuples_pojos_rows_nullables_ttl_and_each_other():
    pair = SerializerSnapshot(TUPLE, 2, nested=[_list(SHORT), _map(CHAR, _list(STRING))])
    value = _row(pair, _nullable(_list(_list(INT)), 0), _pojo(tags=_set(STRING)))
    state = _state("VALUE", _ttl(value))
    assert _column_wise(state)
    values = []
    for i in range(8):
        first = seq([h(j) for j in range(i)])
        second = map_of([(char(c), None if (i + n) % 3 == 0 else seq([sv(c * k) for k in range(n)]))
                          for n, c in enumerate("aü用"[: i % 4])])
        nested = None if i == 5 else nullable(seq([seq([i32(k) for k in range(j)]) for j in range(i % 3)]))
        pojo = None if i == 6 else b"\x02" + (b"\x01" if i == 2 else b"\x00" + set_of([sv("t"), None][: i % 3]))
        values.append(q(1_700_000_000_000 + i) + row(KINDS[i % 4], [first + second, nested, pojo]))
    batch = _both(state, LONG, _values(values))
    assert batch.column("value").to_pylist()[3]["f0"] == {"f0": [0, 1, 2], "f1": [("a", None), ("ü", [""]), ("用", ["", "用"])]}
    assert batch.column("ttl_timestamp").to_pylist()[7] == 1_700_000_000_007


def test_list_keys_and_map_state_of_char_keys_and_map_values():
    key = _list(INT)
    entries = [(bytes([2]) + (k := seq([i32(j) for j in range(i)])) + suffix(len(k)) + sv("ns") + suffix(3), q(i)) for i in range(4)]
    state = _state("VALUE", LONG, namespace=STRING)
    decoder = ColumnarStateDecoder(state, key, 128, keyed_state_columns(state, key))
    assert not decoder.key.last_only
    assert _both(state, key, entries).column("key").to_pylist() == [list(range(i)) for i in range(4)]
    state = _state("MAP", _map(CHAR, _map(STRING, DOUBLE)))
    decoder = ColumnarStateDecoder(state, LONG, 128, keyed_state_columns(state, LONG))
    assert not decoder.user_key.last_only and not decoder.value.last_only
    maps = [(bytes([1]) + q(i // 3) + b"\x00" + char(c), b"\x01" if i == 4 else b"\x00" + map_of([(sv("r"), None if i % 2 else q(i))]))
            for i, c in enumerate("abcüé用")]
    _both(state, LONG, maps)


POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
TUPLE = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"


def _pojo(**fields: SerializerSnapshot) -> SerializerSnapshot:
    return SerializerSnapshot(POJO, 2, pojo_fields=[PojoField(name, "a.B", snapshot) for name, snapshot in fields.items()],
                              attributes={"pojo_class": "a.B"})


def test_pojos_with_null_pojos_null_fields_and_nested_tuples():
    pair = SerializerSnapshot(TUPLE, 2, nested=[LONG, STRING])
    pojo = _pojo(owner=STRING, updates=LONG, window=pair)

    def encode(owner, updates, window):
        out = b"\x02"
        for value, write in ((owner, sv), (updates, q), (window, lambda w: q(w[0]) + sv(w[1]))):
            out += b"\x01" if value is None else b"\x00" + write(value)
        return out

    values = [encode("ann", 3, (7, "x")), b"\x01", encode(None, 5, None), encode("bob", None, (8, "ÿ")), b"\x03"]
    entries = [(bytes([1]) + q(i) + b"\x00", v) for i, v in enumerate(values)]
    batch = _both(_state("VALUE", pojo), LONG, entries)
    assert batch.column("value").to_pylist() == [
        {"owner": "ann", "updates": 3, "window": {"f0": 7, "f1": "x"}}, None,
        {"owner": None, "updates": 5, "window": None}, {"owner": "bob", "updates": None, "window": {"f0": 8, "f1": "ÿ"}}, None]
    # a subclass (flags without the no-subclass bit) is the row path's: it keeps the bytes and says why
    _miss(_state("VALUE", pojo), LONG, [(bytes([1]) + q(0) + b"\x00", b"\x00" + b"a.Sub")])


def test_tuple_keys_are_vectorized_too():
    pair = SerializerSnapshot(TUPLE, 2, nested=[INT, STRING])
    entries = [(bytes([2]) + struct.pack(">i", i) + sv(f"k{i}") + b"\x00", q(i)) for i in range(4)]
    batch = _both(_state("VALUE", LONG), pair, entries)
    assert batch.column("key").to_pylist()[3] == {"f0": 3, "f1": "k3"}


ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
NULLABLE = "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot"
KINDS = ("+I", "-U", "+U", "-D")


def _row(*fields: SerializerSnapshot, kinds: bool = True) -> SerializerSnapshot:
    return SerializerSnapshot(ROW, 3, nested=list(fields), outer_version=4 if kinds else 2,
                              attributes={"supports_row_kind": kinds})


def _nullable(inner: SerializerSnapshot, padding: int) -> SerializerSnapshot:
    return SerializerSnapshot(NULLABLE, 3, nested=[inner], outer_version=2, attributes={"null_padding_length": padding})


def test_the_row_writer_writes_what_real_flink_writes():
    """Bytes ``RowSerializer`` and ``NullableSerializer`` of Flink 1.15.4 and 2.1.1 wrote (the same in
    both), so that the hand-built rows below are Flink's."""
    i32 = lambda n: struct.pack(">i", n)  # noqa: E731
    assert row("+I", [q(1), sv("a"), i32(2)]).hex() == "000000000000000001026100000002"
    assert row("-U", [None, sv("b"), i32(3)]).hex() == "a0026200000003"
    assert row("+U", [q(4), None, None]).hex() == "580000000000000004"
    assert row("-D", [None, None, None]).hex() == "f8"
    assert row("-D", [None] * 10).hex() == "fff0"
    tens = [None if i % 3 == 0 else q(i) for i in range(10)]
    assert row("+U", tens)[:2].hex() == "6490" and row(None, tens[:9])[:2].hex() == "9200"
    assert nullable(None, 8).hex() == "010000000000000000" and nullable(q(5), 8).hex() == "000000000000000005"


def test_rows_of_every_kind_with_null_fields():
    snapshot = _row(LONG, STRING, INT)
    cases = [("+I", (1, "a", 2)), ("-U", (None, "b", 3)), ("+U", (4, None, None)), ("-D", (None, None, None)),
             ("+I", (5, "ü", 6)), ("-D", (-7, "", None))]
    entries = [(bytes([1]) + q(i) + b"\x00",
                row(kind, [None if v is None else w(v) for v, w in zip(values, (q, sv, lambda n: struct.pack(">i", n)))]))
               for i, (kind, values) in enumerate(cases)]
    batch = _both(_state("VALUE", snapshot), LONG, entries)
    assert batch.schema.field("value").type == pa.struct(
        [("kind", pa.string()), ("f0", pa.int64()), ("f1", pa.string()), ("f2", pa.int32())])
    assert batch.column("value").to_pylist() == [
        {"kind": kind, "f0": values[0], "f1": values[1], "f2": values[2]} for kind, values in cases]


@pytest.mark.parametrize(("fields", "kinds"), [(6, True), (7, True), (10, True), (15, True), (8, False), (9, False), (1, False)])
def test_rows_whose_masks_fill_or_overflow_a_byte(fields, kinds):
    """2 kind bits + 6 fields fill one byte exactly, 7 and more take a second one; legacy masks have no
    kind bits (8 fields: one full byte, 9: two). Field 2 is null in every row (an empty column read)."""
    snapshot = _row(*([LONG] * fields), kinds=kinds)
    entries, expected = [], []
    for i in range(2 * fields):
        values = [None if j == 2 or (i + j) % 3 == 0 else 1000 * i + j for j in range(fields)]
        kind = KINDS[i % 4] if kinds else None
        entries.append((bytes([1]) + q(i) + b"\x00", row(kind, [None if v is None else q(v) for v in values])))
        expected.append({"kind": kind, **{f"f{j}": v for j, v in enumerate(values)}})
    assert len(row(None if not kinds else "+I", [None] * fields)) == (fields + 2 * kinds + 7) // 8
    batch = _both(_state("VALUE", snapshot), LONG, entries)
    assert batch.column("value").to_pylist() == expected


def test_row_keys_nested_rows_tuples_and_pojos_in_rows():
    pair = SerializerSnapshot(TUPLE, 2, nested=[LONG, STRING])
    key = _row(STRING, INT)
    value = _row(_row(LONG, kinds=False), pair, _pojo(name=STRING))
    entries = []
    for i in range(5):
        k = row("+I", [sv(f"k{i}"), None if i == 3 else struct.pack(">i", i)])
        ns = sv(f"n{i}")
        v = row(KINDS[i % 4], [row(None, [q(i) if i % 2 else None]), None if i == 1 else q(i) + sv("t"),
                               None if i == 2 else b"\x02" + (b"\x01" if i == 4 else b"\x00" + sv("p"))])
        entries.append((bytes([1]) + k + suffix(len(k)) + ns + suffix(len(ns)), v))
    batch = _both(_state("VALUE", value, namespace=STRING), key, entries)
    assert batch.column("key").to_pylist()[3] == {"kind": "+I", "f0": "k3", "f1": None}
    assert batch.column("value").to_pylist()[1] == {"kind": "-U", "f0": {"kind": None, "f0": 1}, "f1": None, "f2": {"name": "p"}}
    assert batch.column("value").to_pylist()[4]["f2"] == {"name": None}


def test_rows_with_fields_left_to_the_fast_path_and_rows_in_lists_and_maps():
    # Char has no column-wise reader: a Row value holding one is decoded per row by its fast path
    entries = [(bytes([1]) + q(i) + b"\x00", row("+U", [struct.pack(">H", 0x41 + i), None if i % 2 else sv("x")])) for i in range(4)]
    _both(_state("VALUE", _row(CHAR, STRING)), LONG, entries)
    lists = [(bytes([1]) + q(i) + b"\x00", b",".join(row(KINDS[j % 4], [q(j), None]) for j in range(i + 1))) for i in range(4)]
    batch = _both(_state("LIST", _list(_row(LONG, STRING))), LONG, lists)
    assert batch.column("value").to_pylist()[2] == {"kind": "-U", "f0": 1, "f1": None}
    maps = [(bytes([1]) + q(0) + b"\x00" + sv(f"u{i}"), b"\x01" if i == 2 else b"\x00" + row("-D", [None, sv("v")])) for i in range(4)]
    _both(_state("MAP", _map(STRING, _row(LONG, STRING))), LONG, maps)


def test_nullable_values_with_and_without_padding():
    entries = [(bytes([1]) + q(i) + b"\x00", nullable(None if i % 2 else q(i), padding=8)) for i in range(6)]
    batch = _both(_state("VALUE", _nullable(LONG, 8)), LONG, entries)
    assert batch.column("value").to_pylist() == [0, None, 2, None, 4, None]
    entries = [(bytes([1]) + q(i) + b"\x00", row("+I", [nullable(None if i == 1 else sv(f"s{i}")), q(i)])) for i in range(3)]
    batch = _both(_state("VALUE", _row(_nullable(STRING, 0), LONG)), LONG, entries)
    assert batch.column("value").to_pylist()[1] == {"kind": "+I", "f0": None, "f1": 1}
    everything_null = [(bytes([1]) + q(i) + b"\x00", nullable(None, padding=4)) for i in range(3)]
    assert _both(_state("VALUE", _nullable(INT, 4)), LONG, everything_null).column("value").null_count == 3


@pytest.mark.parametrize(("snapshot", "value"), [
    pytest.param(_row(LONG, STRING), row("+I", [q(1), sv("a")])[:1], id="no field bytes after the mask"),
    pytest.param(_row(LONG, STRING), b"", id="no mask"),
    pytest.param(_row(LONG, STRING), bytes([0b0000_0001]) + q(1) + sv("a"), id="an unused mask bit set"),
    pytest.param(_row(*[LONG] * 7), row("+I", [None] * 7)[:1], id="the second mask byte missing"),
    pytest.param(_row(*[LONG] * 7), bytes([0b0011_1111, 0b1100_0000]), id="an unused bit of the second byte"),
    pytest.param(_row(LONG, kinds=False), bytes([0b0100_0000]) + q(1), id="legacy: only the first bit is used"),
    pytest.param(_row(LONG, STRING), row("+I", [q(1), sv("abc")])[:-1], id="a truncated field"),
    pytest.param(_row(LONG, STRING), row("+I", [q(1), None]) + b"x", id="bytes after the row"),
    pytest.param(_nullable(LONG, 8), b"\x02" + q(1), id="a null flag that is not 0 or 1"),
    pytest.param(_nullable(LONG, 8), b"\x01" + bytes(7) + b"\x01", id="padding that is not 0"),
    pytest.param(_nullable(LONG, 8), b"\x01" + bytes(7), id="short padding"),
])
def test_malformed_rows_and_nullables_are_left_to_the_row_path(snapshot, value):
    """Never a wrong value: the column-wise path misses, and the row path raises a FormatError."""
    state = _state("VALUE", snapshot)
    good = [(bytes([1]) + q(0) + b"\x00", row("+I", [q(1), sv("a")]) if snapshot.class_name == ROW and len(snapshot.nested) == 2
             else _good_value(snapshot))]
    _both(state, LONG, good)
    _miss(state, LONG, good + [(bytes([1]) + q(1) + b"\x00", value)])
    with pytest.raises(FormatError):
        KeyedStateDecoder(state, LONG, 128).rows(bytes([1]) + q(1) + b"\x00", value)


def _good_value(snapshot: SerializerSnapshot) -> bytes:
    if snapshot.class_name == NULLABLE:
        return nullable(q(5), padding=8)
    return row("+I" if snapshot.attributes["supports_row_kind"] else None, [q(i) for i in range(len(snapshot.nested))])


def test_a_row_with_an_undecodable_field_is_json_and_left_to_the_row_path():
    kryo = SerializerSnapshot("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", 2,
                              attributes={"type_class": "x.K"})
    state = _state("VALUE", _row(LONG, kryo))
    columns = keyed_state_columns(state, LONG)
    assert columns.columns["value"].is_json and "field f1" in columns.columns["value"].reason
    with pytest.raises(ColumnarMiss):
        ColumnarStateDecoder(state, LONG, 128, columns)
    rows = KeyedStateDecoder(state, LONG, 128)
    (decoded,) = rows.rows(bytes([1]) + q(1) + b"\x00", row("-U", [q(3), None]))  # the Kryo field is null
    assert decoded["value"] == {"kind": "-U", "f0": 3, "f1": None} and decoded["error"] is None
    (kept,) = rows.rows(bytes([1]) + q(1) + b"\x00", row("+I", [q(3), b"\x01"]))
    assert kept["value"] is None and "cannot decode" in kept["error"] and kept["value_raw"] == row("+I", [q(3), b"\x01"])


# -- the real fixtures -----------------------------------------------------------------------------

#: ``per-type`` states (fixtures/job PerTypeFunction) whose values used to be read per row.
PER_TYPE_STATES = ("initial", "recent-small", "ratio32-by-tag", "ratio-by-initial")
@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES)
def test_per_type_chars_lists_and_maps_of_real_flink_are_read_column_wise(name):
    """Character values and map keys, a List of Short and a Map of String to Float written by real
    Flink: every field column-wise (no per-row fallback), every batch equal to the row path's."""
    storage = st.default_storage()
    root = FIXTURES / name / "checkpoints"
    layout = discover(str(root / next(iter(os.listdir(root)))), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    op = snapshot.metadata.operator(operator_id_for_uid("per-type"))
    handles = [s.managed_keyed_state for s in op.subtasks]
    assert handles and all(isinstance(h, IncrementalKeyedHandle) for h in handles)
    seen: dict[str, int] = {}
    for handle in handles:
        for stream in iter_incremental_handle(snapshot, storage, handle, op.max_parallelism, states=PER_TYPE_STATES):
            entries = stream.entries
            columns = keyed_state_columns(stream.meta, entries.key_serializer)
            decoder = ColumnarStateDecoder(stream.meta, entries.key_serializer, entries.max_parallelism, columns)
            fields = [decoder.key, decoder.namespace, decoder.value] + ([decoder.user_key] if stream.kind == "map" else [])
            assert not any(f.last_only for f in fields), stream.name
            for keys, values in entries.batches:
                batch = _both(stream.meta, entries.key_serializer, list(zip(keys.to_pylist(), values.to_pylist())), entries.max_parallelism,
                              (entries.key_groups.start, entries.key_groups.end))
                seen[stream.name] = seen.get(stream.name, 0) + batch.num_rows
    assert sorted(seen) == sorted(PER_TYPE_STATES) and all(seen.values()), seen
