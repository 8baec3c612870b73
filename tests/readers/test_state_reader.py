"""Logical keyed state of real Flink checkpoints (LSM resolution + value decoding) against expected.json,
plus hand-built corner cases: range tombstones, single deletes, merge operand order, corrupt tables."""

from __future__ import annotations

import json
import os
import struct
from functools import lru_cache

import pytest

from fixtures import state_model
from repair.errors import FormatError, RepairError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.values import TtlValue, UnsupportedSerializerError, decoder_for, read_string_value
from repair.formats.rocksdb.lsm import LsmStats, resolve_lsm, resolve_versions
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.sst import InternalEntry, RangeTombstone, open_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.readers.raw_timers import iter_raw_timers_handle
from repair.readers.rocksdb import read_incremental_handle
from tests.conftest import FIXTURES, ROCKSDB_FIXTURE_NAMES, fixture_info
from tests.state_testlib import LONG, STRING, VOID_NS, B, _string_value, add_row, state_meta_info

KEYED_UIDS = tuple(state_model.KEYED_OPERATORS)


# -- real fixtures -----------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _decoded(name: str, index: int) -> tuple[dict, list[int]]:
    """(state in expected.json's shape, every TTL timestamp) of retained checkpoint ``index``."""
    storage = st.default_storage()
    root = FIXTURES / name / "checkpoints"
    layout = discover(str(root / next(iter(os.listdir(root)))), storage)
    snapshot = load_snapshot(layout.snapshots[index], layout.root, storage)
    keyed: dict[str, dict] = {}
    ttl_timestamps: list[int] = []
    for uid in KEYED_UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        per_key: dict[str, dict] = {}
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            result = read_incremental_handle(snapshot, storage, handle, op.max_parallelism)
            for state, rows in result.rows.items():
                stats = result.stats[state]
                assert stats.accounted() == stats.entries
                for row in rows:
                    assert row["error"] is None
                    assert row["key_group"] in handle.key_groups
                    add_row(per_key.setdefault(str(row["key"]), {}), row)
                    if row["ttl_timestamp"] is not None:
                        ttl_timestamps.append(row["ttl_timestamp"])
            if sub.raw_keyed_state is not None:  # RocksDB with timers on the heap: the timers are there
                for stream in iter_raw_timers_handle(snapshot, storage, sub.raw_keyed_state):
                    for row in stream.rows:
                        assert row["error"] is None and row["key_group"] in handle.key_groups
                        add_row(per_key.setdefault(str(row["key"]), {}), row)
        for entry in per_key.values():
            state_model.sort_timers(entry)
        keyed[uid] = dict(sorted(per_key.items()))
    return keyed, ttl_timestamps




@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES)
def test_newest_checkpoint_matches_expected_json(name):
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    keyed, ttl_timestamps = _decoded(name, -1)
    for uid in KEYED_UIDS:
        assert keyed[uid] == expected["keyed"][uid], uid
    low, high = fixture_info(FIXTURES / name)["generated_between_ms"]
    assert ttl_timestamps and all(low <= ts <= high for ts in ttl_timestamps)


@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES)
@pytest.mark.parametrize("index", [0, 1])
def test_older_retained_checkpoints_match_state_model(name, index):
    info = fixture_info(FIXTURES / name)
    number = info["retained_checkpoints"][index]
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    expected = state_model.expected_state(records[: info["records_per_checkpoint"][str(number)]])
    keyed, _ = _decoded(name, index)
    for uid in KEYED_UIDS:
        assert keyed[uid] == expected["keyed"][uid], uid


# -- value decoders ----------------------------------------------------------------------------------

BYTES = SerializerSnapshot(B + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot", 3)
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"




@pytest.mark.parametrize("text", ["", "a", "jürgen", "用户-1", "emoji-\U0001F600", "x" * 200, None])
def test_string_value_round_trip(text):
    data = b"\xff" + _string_value(text) + b"\xee"
    value, end = decoder_for(STRING).decode(data, 1)
    assert value == text and end == len(data) - 1


def test_string_value_truncated_names_offset():
    data = _string_value("héllo")[:-1]
    with pytest.raises(FormatError) as info:
        read_string_value(ByteReader(data))
    assert "string" in info.value.field


def test_ttl_timer_and_unknown_decoders():
    ttl = SerializerSnapshot(TTL, 3, nested=[LONG, STRING])
    data = struct.pack(">q", 1234) + _string_value("v")
    assert decoder_for(ttl).decode_all(data) == TtlValue(1234, "v")
    timer = SerializerSnapshot("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", 3, nested=[LONG, VOID_NS])
    data = struct.pack(">Q", (5 ^ (1 << 63))) + struct.pack(">q", -7) + b"\x00"
    value = decoder_for(timer).decode_all(data)
    assert (value.timestamp, value.key, value.namespace) == (5, -7, None)
    unknown = decoder_for(SerializerSnapshot("com.example.MySerializerSnapshot", 1))
    with pytest.raises(UnsupportedSerializerError, match="cannot decode com.example.MySerializerSnapshot"):
        unknown.decode(b"\x00", 0)
    assert decoder_for(BYTES).decode_all(b"\x00\x00\x00\x02ab") == b"ab"


# -- LSM resolution corner cases ---------------------------------------------------------------------


def _versions(*items: tuple[int, int, bytes]) -> list[InternalEntry]:
    return [InternalEntry(b"k", seqno, kind, value) for seqno, kind, value in items]


def test_merge_operands_join_oldest_first_after_their_base():
    stats = LsmStats()
    entries = _versions((9, ValueType.MERGE, b"c"), (3, ValueType.VALUE, b"a"), (5, ValueType.MERGE, b"b"), (1, ValueType.VALUE, b"old"))
    assert resolve_versions(b"k", entries, [], stats) == b"a,b,c"
    assert (stats.live, stats.merged, stats.shadowed) == (1, 2, 1)
    # operands above a delete start a fresh list; the delete hides everything older
    stats = LsmStats()
    entries = _versions((8, ValueType.MERGE, b"y"), (7, ValueType.MERGE, b"x"), (6, ValueType.DELETION, b""), (2, ValueType.VALUE, b"z"))
    assert resolve_versions(b"k", entries, [], stats) == b"x,y"
    assert (stats.live, stats.merged, stats.tombstones, stats.shadowed) == (1, 1, 1, 1)


def test_single_delete_and_range_tombstones_hide_older_entries():
    stats = LsmStats()
    assert resolve_versions(b"k", _versions((4, ValueType.SINGLE_DELETION, b""), (2, ValueType.VALUE, b"v")), [], stats) is None
    assert (stats.tombstones, stats.shadowed, stats.live) == (1, 1, 0)
    covering = [RangeTombstone(b"a", b"z", 10)]
    stats = LsmStats()
    assert resolve_versions(b"k", _versions((9, ValueType.VALUE, b"v"), (3, ValueType.MERGE, b"m")), covering, stats) is None
    assert stats.range_deleted == 2
    # a newer write survives the range tombstone; the end key is exclusive
    stats = LsmStats()
    assert resolve_versions(b"k", _versions((11, ValueType.MERGE, b"n"), (9, ValueType.VALUE, b"v")), covering, stats) == b"n"
    assert resolve_versions(b"z", _versions((1, ValueType.VALUE, b"v")), covering, LsmStats()) == b"v"


def test_unknown_value_type_and_conflicting_duplicates_raise():
    with pytest.raises(FormatError, match="BLOB_INDEX"):
        resolve_versions(b"k", _versions((3, ValueType.BLOB_INDEX, b"x")), [], LsmStats())
    with pytest.raises(FormatError, match="sequence number 0"):
        resolve_versions(b"k", _versions((0, ValueType.VALUE, b"a"), (0, ValueType.VALUE, b"b")), [], LsmStats())


def _table(family: str, entries, tombstones=()) -> bytes:
    return build_table(
        [(InternalKey(k, s, t), v) for k, s, t, v in sorted(entries, key=lambda e: (e[0], -e[1]))],
        TableOptions(column_family_name=family, column_family_id=1),
        range_tombstones=[(InternalKey(a, s, ValueType.RANGE_DELETION), b) for a, b, s in tombstones],
    )


def test_tables_with_range_tombstones_resolve_per_column_family():
    older = _table("tags", [(b"\x01a", 1, ValueType.VALUE, b"x"), (b"\x02b", 2, ValueType.VALUE, b"y"), (b"\x03c", 3, ValueType.VALUE, b"z")])
    newer = _table("tags", [(b"\x01a", 7, ValueType.MERGE, b"w")], tombstones=[(b"\x02", b"\x03", 6)])
    other = _table("count", [(b"\x01a", 4, ValueType.VALUE, b"1")])
    tables = [(n, open_table(BytesSource(d))) for n, d in (("older", older), ("newer", newer), ("other", other))]
    families = resolve_lsm(tables)
    assert families["tags"].items == [(b"\x01a", b"x,w"), (b"\x03c", b"z")]
    assert families["tags"].stats.range_deleted == 1 and families["tags"].stats.entries == 4
    assert families["count"].items == [(b"\x01a", b"1")]


def test_corrupt_table_raises_a_typed_error_naming_the_file():
    data = bytearray(_table("tags", [(b"\x01" + bytes([i]), i + 1, ValueType.VALUE, b"v" * 20) for i in range(50)]))
    data[10] ^= 0xFF  # inside the first data block: its checksum no longer matches
    with pytest.raises(RepairError) as info:
        resolve_lsm([("broken.sst", open_table(BytesSource(bytes(data))))])
    assert "broken.sst" in str(info.value)


# -- key layout corner cases -------------------------------------------------------------------------




def test_ambiguity_suffixes_and_list_elements():
    # String key and byte[] namespace are both variable length: both lengths follow as suffixes
    list_of_strings = SerializerSnapshot(B + "ListSerializerSnapshot", 3, nested=[STRING])
    decoder = KeyedStateDecoder(state_meta_info("s", "LIST", list_of_strings, BYTES), STRING, 300)
    key_bytes, ns_bytes = _string_value("k"), b"\x00\x00\x00\x01\x09"
    key = b"\x01\x2c" + key_bytes + bytes([len(key_bytes)]) + ns_bytes + bytes([len(ns_bytes)])
    value = _string_value("a,b") + b"," + _string_value("") + b"," + _string_value(",")
    rows = decoder.rows(key, value)
    assert [(r["key_group"], r["key"], r["namespace"], r["list_index"], r["value"]) for r in rows] == [
        (300, "k", b"\x09", 0, "a,b"), (300, "k", b"\x09", 1, ""), (300, "k", b"\x09", 2, ","),
    ]
    with pytest.raises(FormatError, match="length suffix"):
        decoder.rows(key[:-1] + b"\x07", value)
    with pytest.raises(FormatError, match="list delimiter"):
        decoder.rows(key, _string_value("a") + b";" + _string_value("b"))


def test_unknown_value_serializer_keeps_raw_bytes():
    unknown = SerializerSnapshot("com.example.MySerializerSnapshot", 1)
    decoder = KeyedStateDecoder(state_meta_info("v", "VALUE", unknown, VOID_NS), LONG, 128)
    key = b"\x05" + struct.pack(">q", 42) + b"\x00"
    (row,) = decoder.rows(key, b"\x01\x02")
    assert row["value"] is None and row["value_raw"] == b"\x01\x02" and "cannot decode" in row["error"]


def test_keys_outside_the_handle_key_group_range_are_dropped_and_counted():
    from repair.formats.flink.backend_meta import KeyedBackendMeta
    from repair.formats.flink.handles import KeyGroupRange
    from repair.readers.rocksdb import read_keyed_instance

    meta = KeyedBackendMeta(6, False, LONG, 1, [state_meta_info("balance", "VALUE", LONG, VOID_NS)])
    mine = b"\x05" + struct.pack(">q", 1) + b"\x00"
    foreign = b"\x50" + struct.pack(">q", 2) + b"\x00"
    table = _table("balance", [(mine, 1, ValueType.VALUE, struct.pack(">q", 10)), (foreign, 2, ValueType.VALUE, struct.pack(">q", 20))])
    result = read_keyed_instance([("t.sst", BytesSource(table))], meta, KeyGroupRange(0, 64), 128)
    assert [(r["key_group"], r["key"], r["value"]) for r in result.rows["balance"]] == [(5, 1, 10)]
    assert result.outside_key_groups["balance"] == 1 and result.stats["balance"].live == 2
