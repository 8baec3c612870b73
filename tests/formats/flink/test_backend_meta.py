"""Tests of repair.formats.flink.backend_meta, flink_serializers and flink_keygroups.

Evidence: the meta data streams and canonical-savepoint key-group files of the real fixtures, checked
against fixture.json / expected.json and the fixture job's source (state types); streams written by
Flink 2.1.1's own KeyedBackendSerializationProxy / OperatorBackendSerializationProxy /
SnappyStreamCompressionDecorator (tests/data/flink_metadata, see GenerateBackendMetaSamples.java) for
serializer classes and compression the jobs do not use, including a snapshot class the decoder cannot know.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repair.errors import FormatError, RepairError
from repair.formats.bytes.java_io import ByteWriter
from repair.formats.flink.backend_meta import (
    decode_backend_meta,
    decode_keyed_backend_meta,
    decode_operator_backend_meta,
)
from repair.formats.flink.full_snapshot.canonical import iter_key_group_entries
from repair.formats.flink.handles import IncrementalKeyedHandle, KeyGroupRange, KeyGroupsHandle
from repair.formats.flink.keygroups import (
    assign_key_group,
    java_long_hash,
    java_string_hash,
    key_group_prefix_bytes,
    operator_id_for_uid,
)
from repair.formats.flink.metadata import decode_metadata
from repair.formats.flink.serializers import POJO_SNAPSHOT, describe
from tests._flink_state_files import SAMPLES, all_metadata, fixture_info, handle_bytes, metadata_id
from tests.conftest import FIXTURE_NAMES, fixture_spec, materialized, timers_in_raw_keyed_state

#: The DataStream fixture job's checkpoints (the SQL job's states are checked in test_sql_export.py).
REAL = [item for item in all_metadata() if item[0].name in FIXTURE_NAMES]

#: Value types of the fixture job's keyed states (fixtures/job/src/fixturejob/Per*Function.java, Per*Window.java).
JOB_VALUE_TYPES = {
    "count": "Long",
    "last-tag": "String",
    "tags": "List<String>",
    "amount-by-tag": "Map<String, Long>",
    "total": "Long",
    "recent-tag": "TTL<String>",
    "balance": "Long",
    "amounts": "List<Long>",
    "stats": "Tuple2<Long, Long>",
    "user-by-wave": "Map<Integer, String>",
    "profile": "POJO fixturejob.AccountProfile",
    "small": "Short",
    "tiny": "Byte",
    "positive": "Boolean",
    "ratio": "Double",
    "ratio32": "Float",
    "initial": "Character",
    "tag-bytes": "byte[]",
    "wave": "Enum fixturejob.Wave",
    "last-row": "TTL<Row<String, Long, Double>>",
    "recent-small": "List<Short>",
    "ratio32-by-tag": "Map<String, Float>",
    "ratio-by-initial": "Map<Character, Double>",
    "checks": "List<Tuple2<String, Boolean>>",
    "rows": "List<Row<Integer, String>>",
    # the window operators' states (names that repeat across operators: by operator)
    ("per-account-window", "window-contents"): "Tuple3<Long, Long, String>",  # the AggregateFunction's accumulator
    ("per-user-count-window", "window-contents"): "List<POJO fixturejob.Record>",
    ("per-user-count-window", "count"): "Long",  # CountTrigger's
}
KEY_TYPES = {"String": "String", "Long": "Long", "Integer": "Integer"}


def _keyed_meta_bytes(fixture_dir, path, handle) -> bytes:
    if isinstance(handle, IncrementalKeyedHandle):
        return handle_bytes(fixture_dir, path, handle.meta)
    return handle_bytes(fixture_dir, path, handle.delegate)


@pytest.mark.parametrize("item", REAL, ids=metadata_id)
def test_real_keyed_meta_matches_fixture(item):
    fixture_dir, path = item
    info = fixture_info(fixture_dir)
    m = decode_metadata(path.read_bytes())
    for uid, spec in info["keyed_operators"].items():
        op = m.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            handle = materialized(sub.managed_keyed_state)
            if handle is None:
                continue  # a changelog before its first materialization: no meta data (tests/readers/test_changelog.py)
            data = _keyed_meta_bytes(fixture_dir, path, handle)
            meta = decode_backend_meta(data)
            assert meta.complete and meta.problems == [] and not meta.resynchronized
            # each state's meta info bytes (what write-savepoint copies between subtasks) start with its
            # name, and together with the head they are the proxy, byte for byte
            infos = [meta.state_info_bytes(data, s.name) for s in meta.states]
            assert [info[2:2 + len(s.name.encode())] for info, s in zip(infos, meta.states)] == [s.name.encode() for s in meta.states]
            assert data[: meta.states[0].offset] + b"".join(infos) == data[: meta.end_offset]
            # snapshot compression frames key groups (full snapshots); RocksDB instances compress their SSTs
            compressed = fixture_spec(fixture_dir)["snapshot_compression"] and isinstance(handle, KeyGroupsHandle)
            assert meta.proxy_version == 6 and meta.key_group_compression is compressed
            assert describe(meta.key_serializer) == KEY_TYPES[spec["key_type"]]
            if isinstance(handle, IncrementalKeyedHandle):
                assert meta.end_offset == len(data)  # the meta stream is exactly the proxy
            else:
                assert meta.end_offset == min(o for o in handle.offsets if o)  # key-group data follows

            by_name = {s.name: s for s in meta.states}
            timers = {n for n, s in by_name.items() if s.kind == "priority-queue"}
            assert {n: s.kind for n, s in by_name.items() if n not in timers} == spec["states"]
            if timers_in_raw_keyed_state(fixture_dir) and isinstance(handle, IncrementalKeyedHandle):
                assert timers == set()  # in the raw keyed state instead (tests/readers/test_raw_timers.py)
            for service in spec["timer_services"] if not timers_in_raw_keyed_state(fixture_dir) or isinstance(handle, KeyGroupsHandle) else ():
                assert f"_timer_state/event_{service}" in timers
            for name in timers:
                state = by_name[name]
                assert state.is_timer_state and state.options == []
                assert [k for k, _ in state.serializers] == ["VALUE_SERIALIZER"]
                assert state.describe_value() == f"Timer<{spec['key_type']}, {spec['namespace']}>"
            for name in spec["states"]:
                state = by_name[name]
                assert state.backend_type_name == "KEY_VALUE"
                assert state.keyed_state_type == spec["states"][name].upper()
                assert state.describe_value() == JOB_VALUE_TYPES.get((uid, name), JOB_VALUE_TYPES.get(name))
                assert describe(state.serializer("NAMESPACE_SERIALIZER")) == spec["namespace"]
                assert state.has_ttl == (name in spec["ttl_states"])


def test_real_pojo_snapshot_fields():
    fixture_dir, path = REAL[0]
    m = decode_metadata(path.read_bytes())
    handle = m.operator(operator_id_for_uid("per-account")).subtasks[0].managed_keyed_state
    profile = decode_backend_meta(_keyed_meta_bytes(fixture_dir, path, handle)).state("profile")
    pojo = profile.serializer("VALUE_SERIALIZER")
    assert pojo.class_name == POJO_SNAPSHOT and pojo.attributes["pojo_class"] == "fixturejob.AccountProfile"
    assert [(f.name, f.declaring_class, describe(f.snapshot)) for f in pojo.pojo_fields] == [
        ("owner", "fixturejob.AccountProfile", "String"),
        ("updates", "fixturejob.AccountProfile", "Long"),
    ]


@pytest.mark.parametrize("item", REAL, ids=metadata_id)
def test_real_operator_meta_matches_fixture(item):
    fixture_dir, path = item
    info = fixture_info(fixture_dir)
    m = decode_metadata(path.read_bytes())
    expected = dict(info["operator_states"], records={"SourceReaderState": "list"})
    for uid, states in expected.items():
        (sub,) = m.operator(operator_id_for_uid(uid)).subtasks
        handle = sub.managed_operator_state
        data = handle_bytes(fixture_dir, path, handle.delegate)
        meta = decode_operator_backend_meta(data)
        assert meta.problems == [] and meta.broadcast_states == []
        major, minor = (int(x) for x in info["flink_version"].split(".")[:2])
        # 1.18 added a compression flag to the operator proxy without changing its version.
        assert meta.compression is (fixture_spec(fixture_dir)["snapshot_compression"] if (major, minor) >= (1, 18) else None)
        assert {s.name: s.kind for s in meta.operator_states} == {n: "operator-list" for n in states}
        # The handle's offsets point behind the meta data.
        assert all(o >= meta.end_offset for e in handle.states for o in e.offsets)
    (seen,) = [s for s in decode_operator_backend_meta(handle_bytes(fixture_dir, path, m.operator(operator_id_for_uid("records")).subtasks[0].managed_operator_state.delegate)).operator_states]
    assert seen.describe_value() == "byte[]"


# -- full-snapshot key groups of the real canonical savepoints ---------------------------------------


def _string_value(data: bytes, pos: int) -> tuple[str, int]:
    """StringSerializer / StringValue.writeString: varint(len + 1), then each char as a varint."""

    def varint(p: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            b = data[p]
            p += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value, p

    length, pos = varint(pos)
    chars = []
    for _ in range(length - 1):
        c, pos = varint(pos)
        chars.append(c)
    text = b"".join(c.to_bytes(2, "big") for c in chars).decode("utf-16-be", "surrogatepass")
    return text, pos


def _is_canonical_savepoint(path) -> bool:
    props = decode_metadata(path.read_bytes()).properties
    return props is not None and props.savepoint_format == "CANONICAL"


CANONICAL = [item for item in REAL if item[1].parent.name.startswith("savepoint-") and _is_canonical_savepoint(item[1])]


@pytest.mark.parametrize("item", CANONICAL, ids=metadata_id)
def test_real_canonical_savepoint_key_groups_match_expected_state(item):
    fixture_dir, path = item
    expected = json.loads((fixture_dir / "expected.json").read_text())["keyed"]
    m = decode_metadata(path.read_bytes())
    for uid, key_kind in (("per-user", "String"), ("per-account", "Long")):
        op = m.operator(operator_id_for_uid(uid))
        counts: dict[str, int] = {}
        values: dict[str, int] = {}
        value_state = "count" if uid == "per-user" else "balance"
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            assert isinstance(handle, KeyGroupsHandle)
            data = handle_bytes(fixture_dir, path, handle.delegate)
            meta = decode_keyed_backend_meta(data)
            prefix = key_group_prefix_bytes(op.max_parallelism)
            for e in iter_key_group_entries(data, handle.key_groups, handle.offsets, compressed=meta.key_group_compression, state_count=len(meta.states)):
                assert e.key_group in handle.key_groups
                assert int.from_bytes(e.key[:prefix], "big") == e.key_group
                name = meta.states[e.kv_state_id].name
                counts[name] = counts.get(name, 0) + 1
                if name == value_state:
                    if key_kind == "String":
                        key, end = _string_value(e.key, prefix)
                        key_hash = java_string_hash(key)
                    else:
                        (number,) = struct.unpack_from(">q", e.key, prefix)
                        key, end = str(number), prefix + 8
                        key_hash = java_long_hash(number)
                    assert e.key[end:] == b"\x00"  # VoidNamespace
                    assert assign_key_group(key_hash, op.max_parallelism) == e.key_group
                    values[key] = struct.unpack(">q", e.value)[0]
        state = expected[uid]
        assert values == {k: v[value_state] for k, v in state.items() if value_state in v}
        if uid == "per-user":
            assert counts["amount-by-tag"] == sum(len(v.get("amount-by-tag", {})) for v in state.values())
            assert counts["_timer_state/event_user-timers"] == sum(len(v.get("timers", [])) for v in state.values())
        else:
            assert counts["user-by-wave"] == sum(len(v.get("user-by-wave", {})) for v in state.values())
            assert counts["profile"] == sum(1 for v in state.values() if "profile" in v)


def test_canonical_savepoints_exist():
    assert CANONICAL, "no canonical savepoint among the fixtures"


# -- samples written by Flink's own classes ------------------------------------------------------------


def test_many_serializer_classes_and_an_unknown_one():
    data = (SAMPLES / "keyed_meta_many_serializers.bin").read_bytes()
    meta = decode_keyed_backend_meta(data)
    assert meta.declared_state_count == 8 and len(meta.states) == 8
    # The unknown snapshot's payload is skipped to the state's next serializer key: nothing else is lost.
    assert meta.complete and not meta.resynchronized and meta.end_offset == len(data)
    summary = {s.name: (s.kind, s.describe_value()) for s in meta.states}
    assert summary == {
        "tuple": ("value", "Tuple2<Long, String>"),
        "pojos": ("list", "List<POJO GenerateBackendMetaSamples$Profile>"),
        "enum-by-window": ("map", "Map<Enum GenerateBackendMetaSamples$Color, Kryo GenerateBackendMetaSamples$Opaque>"),
        "row": ("reducing", "Row<Integer, String>"),
        "odd": ("value", "GenerateBackendMetaSamples$OddSnapshot"),
        "either": ("aggregating", "Either<Nullable<Long>, Array<String>>"),
        "string-value": ("value", "Value org.apache.flink.types.StringValue"),
        "_timer_state/event_window-timers": ("priority-queue", "Timer<String, TimeWindow>"),
    }
    odd = meta.state("odd")
    assert odd.unknown_snapshot_class == "GenerateBackendMetaSamples$OddSnapshot"
    assert "GenerateBackendMetaSamples$OddSnapshot" in odd.problem and "offset" in odd.problem
    assert [key for key, _ in odd.serializers] == ["VALUE_SERIALIZER", "NAMESPACE_SERIALIZER"]
    assert odd.serializer("VALUE_SERIALIZER").attributes["undecoded"] and describe(odd.serializer("NAMESPACE_SERIALIZER")) == "VoidNamespace"
    assert len(meta.problems) == 1 and "'odd'" in meta.problems[0]
    assert describe(meta.state("enum-by-window").serializer("NAMESPACE_SERIALIZER")) == "TimeWindow"
    enum = meta.state("enum-by-window").serializer("VALUE_SERIALIZER").nested[0]
    assert enum.attributes["enum_constants"] == ["RED", "GREEN", "BLUE"]
    row = meta.state("row").serializer("VALUE_SERIALIZER")
    assert row.outer_version == 4 and row.attributes["supports_row_kind"] is True
    nullable = meta.state("either").serializer("VALUE_SERIALIZER").nested[0]
    assert nullable.attributes["null_padding_length"] == 8
    pojo = meta.state("pojos").serializer("VALUE_SERIALIZER").nested[0]
    # Flink 2.x serializes List fields of POJOs with null support (NullableSerializer around a ListSerializer).
    assert [(f.name, describe(f.snapshot), f.problem) for f in pojo.pojo_fields] == [
        ("owner", "String", None),
        ("tags", "Nullable<List<Nullable<String>>>", None),
        ("updates", "Long", None),
    ]


def test_unknown_key_serializer_keeps_the_states():
    meta = decode_keyed_backend_meta((SAMPLES / "keyed_meta_unknown_key_serializer.bin").read_bytes())
    assert meta.key_serializer.class_name == "GenerateBackendMetaSamples$OddSnapshot" and meta.resynchronized
    assert "undecoded" in meta.key_serializer.attributes and meta.complete
    assert "OddSnapshot" in meta.problems[0]
    assert [(s.name, s.kind) for s in meta.states] == [("tuple", "value"), ("pojos", "list")]
    assert meta.declared_state_count == 2


def test_operator_meta_with_union_and_broadcast_states():
    data = (SAMPLES / "operator_meta.bin").read_bytes()
    meta = decode_operator_backend_meta(data)
    assert meta.compression is True and meta.end_offset == len(data)
    assert [(s.name, s.kind, s.describe_value()) for s in meta.operator_states] == [
        ("offsets", "operator-list", "Long"),
        ("everyone", "union-list", "byte[]"),
    ]
    (rules,) = meta.broadcast_states
    assert (rules.name, rules.kind, rules.backend_type_name) == ("rules", "broadcast", "BROADCAST")
    assert describe(rules.serializer("KEY_SERIALIZER")) == "String" and rules.describe_value() == "Boolean"
    # Before 1.18 the same version (6) had no compression flag.
    old = data[:4] + data[5:]
    old_meta = decode_operator_backend_meta(old)
    assert old_meta.compression is None and old_meta.end_offset == len(old)
    assert [s.name for s in old_meta.operator_states] == ["offsets", "everyone"]


def test_snappy_compressed_full_snapshot():
    data = (SAMPLES / "full_snapshot_snappy.bin").read_bytes()
    offsets = [int(x) for x in (SAMPLES / "full_snapshot_snappy.offsets").read_text().split()]
    meta = decode_keyed_backend_meta(data)
    assert meta.key_group_compression is True and meta.end_offset == offsets[0]
    summary: dict[tuple[int, int], list] = {}
    for e in iter_key_group_entries(data, KeyGroupRange(10, 4), offsets, compressed=True, state_count=len(meta.states)):
        assert e.key[0] == e.key_group
        s = summary.setdefault((e.key_group, e.kv_state_id), [0, 0, None])
        s[0] += 1
        s[1] += len(e.value)
        s[2] = e.key[1:].decode()
    expected = {}
    for line in (SAMPLES / "full_snapshot_snappy.expected").read_text().splitlines():
        kg, state, n, value_bytes, last = line.split()
        expected[(int(kg), int(state))] = [int(n), int(value_bytes), last]
    assert summary == expected


def test_snappy_damage_is_a_format_error_with_offset():
    data = bytearray((SAMPLES / "full_snapshot_snappy.bin").read_bytes())
    offsets = [int(x) for x in (SAMPLES / "full_snapshot_snappy.offsets").read_text().split()]
    block = offsets[2]
    data[block + 40] ^= 0x10
    with pytest.raises(FormatError) as err:
        list(iter_key_group_entries(bytes(data), KeyGroupRange(10, 4), offsets, compressed=True))
    assert block <= err.value.offset < offsets[3]
    with pytest.raises(FormatError) as err:
        list(iter_key_group_entries(bytes(data), KeyGroupRange(10, 4), [5, 0, 0, len(data) + 3], compressed=True))
    assert err.value.field.startswith("snappy")


# -- hand-built corner cases and errors ------------------------------------------------------------------


def _simple_v2_meta() -> bytes:
    """Proxy version 6 whose key serializer is a legacy version-2 simple snapshot (with its UTF)."""
    w = ByteWriter()
    w.i32(6)
    w.bool(False)
    w.i32(2)
    w.utf("org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot")
    w.i32(2)
    w.utf("org.apache.flink.api.common.typeutils.base.LongSerializer")
    w.i16(0)
    return w.getvalue()


def test_legacy_simple_snapshot_version_2():
    meta = decode_keyed_backend_meta(_simple_v2_meta())
    assert describe(meta.key_serializer) == "Long" and meta.key_serializer.version == 2
    assert meta.key_serializer.attributes["legacy_class"].endswith("LongSerializer")
    assert meta.complete and meta.states == []


def test_legacy_composite_snapshot_without_magic():
    """A composite snapshot of version <= 2 has no magic; its outer payload is read with that version."""
    w = ByteWriter()
    w.i32(6)
    w.bool(True)
    w.i32(2)
    w.utf("org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot")
    w.i32(2)
    w.utf("org.apache.flink.api.java.tuple.Tuple2")  # outer payload: the tuple class
    w.i32(1333245)  # NestedSerializersSnapshotDelegate
    w.i32(1)
    w.i32(2)
    for simple in ("Long", "String"):
        w.utf(f"org.apache.flink.api.common.typeutils.base.{simple}Serializer${simple}SerializerSnapshot")
        w.i32(3)
    w.i16(0)
    meta = decode_keyed_backend_meta(w.getvalue())
    key = meta.key_serializer
    assert key.outer_version == 2 and key.attributes["tuple_class"] == "org.apache.flink.api.java.tuple.Tuple2"
    assert describe(key) == "Tuple2<Long, String>" and meta.key_group_compression is True and meta.complete


def test_backend_meta_errors_name_offsets():
    with pytest.raises(FormatError) as err:
        decode_keyed_backend_meta(struct.pack(">i", 3) + bytes(10))
    assert (err.value.field, err.value.offset) == ("keyed backend proxy version", 0)
    real_dir, real_path = REAL[0]
    handle = decode_metadata(real_path.read_bytes()).operators[0].subtasks[0].managed_keyed_state
    data = _keyed_meta_bytes(real_dir, real_path, handle)
    meta = decode_keyed_backend_meta(data)
    with pytest.raises(FormatError):
        decode_keyed_backend_meta(data[: len(data) // 2])
    # Corrupt the composite magic of the first composite snapshot (List<String> of 'tags' or similar).
    at = data.find(struct.pack(">i", 911108))
    assert at > 0
    bad = bytearray(data)
    bad[at + 3] ^= 0xFF
    with pytest.raises(FormatError) as err:
        decode_keyed_backend_meta(bytes(bad))
    assert (err.value.field, err.value.offset) == ("composite snapshot magic number", at)
    # Backend state type out of range.
    state = meta.states[0]
    type_at = state.offset + 2 + len(state.name.encode())
    bad = bytearray(data)
    bad[type_at : type_at + 4] = struct.pack(">i", 9)
    with pytest.raises(FormatError) as err:
        decode_keyed_backend_meta(bytes(bad))
    assert (err.value.field, err.value.offset, err.value.found) == ("backend state type", type_at, 9)


# -- mutations -------------------------------------------------------------------------------------------

_META_INPUTS = [
    (SAMPLES / name).read_bytes()
    for name in ("keyed_meta_many_serializers.bin", "keyed_meta_unknown_key_serializer.bin", "operator_meta.bin")
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_backend_meta_only_raises_repair_errors(data):
    raw = bytearray(data.draw(st.sampled_from(_META_INPUTS)))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[pos] ^= 1 << data.draw(st.integers(0, 7))
        else:
            del raw[pos:]
            if not raw:
                raw = bytearray(b"\x00")
    for decode in (decode_keyed_backend_meta, decode_operator_backend_meta):
        try:
            result = decode(bytes(raw))
        except RepairError:
            continue
        assert result.proxy_version in (5, 6)


_SNAPPY = (SAMPLES / "full_snapshot_snappy.bin").read_bytes()
_SNAPPY_OFFSETS = [int(x) for x in (SAMPLES / "full_snapshot_snappy.offsets").read_text().split()]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(_SNAPPY_OFFSETS[0], len(_SNAPPY) - 1), st.integers(0, 7), st.booleans())
def test_damaged_key_group_stream_only_raises_repair_errors(pos, bit, compressed):
    raw = bytearray(_SNAPPY)
    raw[pos] ^= 1 << bit
    try:
        for entry in iter_key_group_entries(bytes(raw), KeyGroupRange(10, 4), _SNAPPY_OFFSETS, compressed=compressed, state_count=2):
            assert len(entry.key) + len(entry.value) <= len(raw) * 32
    except RepairError:
        pass
