"""Full snapshots of the heap state backend (repair.formats.flink.full_snapshot.heap and flink_heap_rows).

Real checkpoints and native savepoints of Flink 1.20 (uncompressed, inline in ``_metadata``) and 2.1
(Snappy-compressed, external files) must give exactly expected.json; then damage to their bytes must
give a FormatError at the right place, never a wrong row, a traceback of another kind or a hang.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from fixtures import state_model
from repair.errors import FormatError, RepairError, UnsupportedSerializerError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.full_snapshot import canonical_stream as flink_keygroup_stream
from repair.formats.flink.full_snapshot.heap import detect_heap_layout, index_heap_key_groups
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder
from repair.formats.flink.handles import KeyGroupsHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import read_resolved
from repair.io.snapshot import load_snapshot
from repair.readers.full_snapshot import iter_full_snapshot
from tests.conftest import FIXTURE_NAMES, FIXTURES, fixture_info, fixture_spec, logs_state_changes
from tests.savepoint_testlib import canonical_dir, damaged_after, full_snapshot_state, snappy_framed

KEYED_UIDS = tuple(state_model.KEYED_OPERATORS)
#: Heap-backend fixtures whose keyed state is key-group streams (under a changelog it is materialized
#: state plus changes: tests/ops/test_changelog_export.py).
HEAP = [name for name in FIXTURE_NAMES if fixture_spec(FIXTURES / name)["state_backend"] == "hashmap" and not logs_state_changes(FIXTURES / name)]
#: (fixture, which): the newest checkpoint of each heap fixture and its native savepoint, if any.
SOURCES = [(name, "checkpoint") for name in HEAP] + [(name, "native") for name in HEAP if "NATIVE" in fixture_info(FIXTURES / name)["savepoints"]]
UNCOMPRESSED = next(name for name in HEAP if not fixture_spec(FIXTURES / name)["snapshot_compression"])
COMPRESSED = next(name for name in HEAP if fixture_spec(FIXTURES / name)["snapshot_compression"])


def _load(name: str, which: str):
    storage = st.default_storage()
    if which == "checkpoint":
        root = FIXTURES / name / "checkpoints" / fixture_info(FIXTURES / name)["job_id"]
        layout = discover(str(root), storage)
        return load_snapshot(layout.snapshots[-1], layout.root, storage), storage
    layout = discover(str(FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"][which.upper()]), storage)
    return load_snapshot(layout.snapshots[0], layout.root, storage), storage


@lru_cache(maxsize=None)
def _subtasks(name: str, which: str = "checkpoint") -> list[tuple[str, int, bytes, KeyGroupsHandle, int]]:
    """(uid, subtask, delegate bytes, handle, max parallelism) of every keyed subtask."""
    snapshot, storage = _load(name, which)
    out = []
    for uid in KEYED_UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            assert isinstance(handle, KeyGroupsHandle) and handle.type_code == 12
            out.append((uid, sub.index, read_resolved(storage, snapshot.resolver.resolve(handle.delegate)), handle, op.max_parallelism))
    return out


def _rows(data: bytes, handle, max_parallelism: int, meta=None) -> list[tuple[str, list[dict]]]:
    meta = meta or decode_keyed_backend_meta(data)
    return [(s.name, list(s.rows)) for s in iter_full_snapshot(BytesSource(data), meta, handle.key_groups, handle.offsets, max_parallelism)]


# -- real snapshots ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "which"), SOURCES, ids=[f"{n}:{w}" for n, w in SOURCES])
def test_heap_snapshots_match_expected_json(name, which, read_only_guard):
    read_only_guard(FIXTURES / name)
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    low, high = fixture_info(FIXTURES / name)["generated_between_ms"]
    snapshot, storage = _load(name, which)
    keyed, ttl_timestamps, kinds = full_snapshot_state(snapshot, storage)
    assert keyed == {uid: expected["keyed"][uid] for uid in KEYED_UIDS}
    assert {"value", "list", "map", "reducing", "aggregating", "priority-queue"} <= kinds
    assert ttl_timestamps and all(low <= ts <= high for ts in ttl_timestamps)


def test_the_layout_is_told_apart_by_the_bytes():
    """Heap checkpoints (compressed or not) read as the heap layout; canonical savepoints, also one the
    heap backend wrote, as the canonical layout."""
    for name, which in SOURCES:
        for _, _, data, handle, _ in _subtasks(name, which):
            meta = decode_keyed_backend_meta(data)
            assert detect_heap_layout(BytesSource(data), handle.key_groups, handle.offsets, compressed=meta.key_group_compression)
    for name in ("flink-1.20-default", "flink-2.1-default", UNCOMPRESSED):
        snapshot, storage = _load_dir(canonical_dir(name))
        for op in snapshot.metadata.operators:
            for sub in op.subtasks:
                handle = sub.managed_keyed_state
                if isinstance(handle, KeyGroupsHandle):
                    data = read_resolved(storage, snapshot.resolver.resolve(handle.delegate))
                    assert detect_heap_layout(BytesSource(data), handle.key_groups, handle.offsets, compressed=False) is False


def _load_dir(directory: Path):
    storage = st.default_storage()
    layout = discover(str(directory), storage)
    return load_snapshot(layout.snapshots[0], layout.root, storage), storage


@pytest.mark.parametrize("read_size", [3, 64])
def test_tiny_reads_give_the_same_rows(read_size, monkeypatch):
    """Records spanning many reads: the window grows and keeps its offsets."""
    expected = [_rows(data, handle, mp) for _, _, data, handle, mp in _subtasks(UNCOMPRESSED)]
    monkeypatch.setattr(flink_keygroup_stream, "READ_SIZE", read_size)
    assert [_rows(data, handle, mp) for _, _, data, handle, mp in _subtasks(UNCOMPRESSED)] == expected


def _compressed_copy(data: bytes, handle, chunk: int, *, extra: bytes = b"") -> tuple[bytes, KeyGroupsHandle]:
    """``data`` with each state block of each key group re-framed as its own Snappy stream (``extra``
    appended to the last block's payload) and the compression flag set."""
    meta = decode_keyed_backend_meta(data)
    decoders = [HeapStateDecoder(s, meta.key_serializer) for s in meta.states]
    index = index_heap_key_groups(BytesSource(data), handle.key_groups, handle.offsets, compressed=False, decoders=decoders)
    blocks = sorted((run.start, run.end) for runs in index.runs.values() for run in runs)
    head = bytearray(data[: meta.end_offset])
    assert head[4] == 0  # KeyedBackendSerializationProxy: int version, bool usingKeyGroupCompression
    head[4] = 1
    out, offsets = bytearray(head), []
    for i, offset in enumerate(handle.offsets):
        offsets.append(len(out))
        out += data[offset : offset + 4]  # int keyGroup, not compressed
        for start, end in (b for b in blocks if offset < b[0] and b[1] <= (handle.offsets[i + 1] if i + 1 < len(handle.offsets) else len(data))):
            payload = data[start:end] + (extra if end == len(data) else b"")
            out += snappy_framed(payload, chunk)
    return bytes(out), dataclasses.replace(handle, offsets=offsets)


@pytest.mark.parametrize("chunk", [7, 65536])
def test_snappy_framed_blocks_give_the_same_rows(chunk):
    for _, _, data, handle, mp in _subtasks(UNCOMPRESSED)[:2]:
        packed, packed_handle = _compressed_copy(data, handle, chunk)
        assert detect_heap_layout(BytesSource(packed), packed_handle.key_groups, packed_handle.offsets, compressed=True)
        assert _rows(packed, packed_handle, mp) == _rows(data, handle, mp)


def test_real_compressed_snapshots_have_one_stream_per_state_and_key_group():
    for _, _, data, handle, _ in _subtasks(COMPRESSED):
        meta = decode_keyed_backend_meta(data)
        assert meta.key_group_compression
        decoders = [HeapStateDecoder(s, meta.key_serializer) for s in meta.states]
        index = index_heap_key_groups(BytesSource(data), handle.key_groups, handle.offsets, compressed=True, decoders=decoders)
        assert sorted(index.runs) == list(range(len(meta.states)))
        assert all(len(runs) == handle.key_groups.count for runs in index.runs.values())


# -- damage -----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    """(bytes, handle, max parallelism) of a per-user subtask of the uncompressed fixture (String keys,
    lists, maps, TTL, timers)."""
    _, _, data, handle, mp = _subtasks(UNCOMPRESSED)[0]
    return data, handle, mp


def _error(data: bytes, handle, mp: int, meta=None) -> FormatError:
    with pytest.raises(FormatError) as info:
        _rows(data, handle, mp, meta)
    return info.value


def _block(handle, which: int = 1) -> tuple[int, int]:
    """(key group, offset) of a key group with a number above 0 (``which``-th of the range)."""
    return handle.key_groups.start + which, handle.offsets[which]


def test_a_block_of_another_key_group(real):
    data, handle, mp = real
    key_group, offset = _block(handle)
    bad = bytearray(data)
    bad[offset : offset + 4] = struct.pack(">i", key_group + 1)
    error = _error(bytes(bad), handle, mp)
    assert (error.field, error.offset, error.found) == (f"key group {key_group}", offset, key_group + 1)
    assert "heap state backend's layout" in str(error)


def test_bad_state_ids(real):
    data, handle, mp = real
    key_group, offset = _block(handle)
    state_count = len(decode_keyed_backend_meta(data).states)
    bad = bytearray(data)
    bad[offset + 4 : offset + 6] = struct.pack(">H", state_count)
    error = _error(bytes(bad), handle, mp)
    assert (error.field, error.offset, error.found) == (f"key group {key_group} kv state id", offset + 4, state_count)
    # the second block of the key group claims the first block's state
    meta = decode_keyed_backend_meta(data)
    decoders = [HeapStateDecoder(s, meta.key_serializer) for s in meta.states]
    index = index_heap_key_groups(BytesSource(data), handle.key_groups, handle.offsets, compressed=False, decoders=decoders)
    runs = sorted((run.start, state_id) for state_id, rs in index.runs.items() for run in rs if run.key_group == key_group)
    (_, first_id), (second_at, _) = runs[0], runs[1]
    bad = bytearray(data)
    bad[second_at : second_at + 2] = struct.pack(">H", first_id)
    error = _error(bytes(bad), handle, mp)
    assert (error.field, error.offset, error.expected) == (f"key group {key_group} kv state id", second_at, "a state not yet written in this key group")


def test_counts_beyond_the_bytes(real):
    data, handle, mp = real
    key_group, offset = _block(handle)
    for value in (0x7FFFFFFF, -1):
        bad = bytearray(data)
        bad[offset + 6 : offset + 10] = struct.pack(">i", value)
        error = _error(bytes(bad), handle, mp)
        assert error.offset == offset + 6 and error.found == value
        assert error.field.startswith(f"key group {key_group} record count of state ")


def test_truncated_and_extended_data(real):
    data, handle, mp = real
    last = max(handle.offsets)
    error = _error(data[:-3], handle, mp)
    assert error.field.startswith(f"key group {handle.key_groups.end}") and last < error.offset <= len(data) - 3
    error = _error(data + b"\x00", handle, mp)  # a block head that is not there
    assert error.field == f"key group {handle.key_groups.end} kv state id" and error.offset == len(data)


def test_bytes_after_the_records_of_a_compressed_block(real):
    data, handle, mp = real
    packed, packed_handle = _compressed_copy(data, handle, 64, extra=b"\x00")
    error = _error(packed, packed_handle, mp)
    assert error.field.startswith(f"key group {handle.key_groups.end}, state ") and error.found == "more bytes"


def test_only_the_identifier_that_opens_a_key_group_is_compared(real):
    """Flink reads a compressed key group as one Snappy stream (one xerial SnappyFramedInputStream over the
    streams its writer started per state): the first identifier must be exact, a later one is a chunk of
    length 6 whose text xerial skips. Real Flink 2.1 restores exact state past a flipped byte there
    (damage matrix: flink-2.1-heap-p3-snappy/key-groups/flipped)."""
    from repair.formats.flink.full_snapshot.canonical import SNAPPY_STREAM_IDENTIFIER

    data, handle, mp = real
    packed, packed_handle = _compressed_copy(data, handle, 64)
    rows = _rows(packed, packed_handle, mp)
    key_group, first = _block(packed_handle)
    later = packed.index(SNAPPY_STREAM_IDENTIFIER, first + 4 + len(SNAPPY_STREAM_IDENTIFIER))
    assert later < packed_handle.offsets[2]  # the second stream of the same key group
    bad = bytearray(packed)
    bad[later + 6] ^= 0xFF  # its text: skipped, as by Flink
    assert _rows(bytes(bad), packed_handle, mp) == rows
    bad = bytearray(packed)
    bad[later + 1] = 7  # its length: xerial throws 'stream identifier chunk with invalid length'
    assert "snappy" in _error(bytes(bad), packed_handle, mp).field
    bad = bytearray(packed)
    bad[first + 4 + 6] ^= 0xFF  # the text of the identifier that opens the key group: 'invalid stream header'
    error = _error(bytes(bad), packed_handle, mp)
    assert (error.field, error.offset) == (f"key group {key_group} snappy stream identifier", first + 4)


def _streams(data: bytes, handle, mp: int, meta) -> dict[str, list[dict] | FormatError]:
    """Each state's rows, or the error reading them raised (the other states are still read)."""
    out: dict[str, list[dict] | FormatError] = {}
    for stream in iter_full_snapshot(BytesSource(data), meta, handle.key_groups, handle.offsets, mp):
        try:
            out[stream.name] = list(stream.rows)
        except FormatError as error:
            out[stream.name] = error
    return out


@pytest.mark.parametrize("compressed", [False, True])
def test_a_serializer_without_a_decoder_costs_only_the_states_it_hides(real, compressed):
    """Records of heap snapshots carry no lengths: a value of a serializer no decoder here reads (Kryo,
    a custom one) cannot be skipped. Its state raises naming it; uncompressed, so do the states whose
    blocks come after it in a key group (they cannot be found), while the states before it read exactly
    as before; compressed, every block is a Snappy stream of its own and only its state is lost."""
    data, handle, mp = real
    if compressed:
        data, handle = _compressed_copy(data, handle, 64)
    meta = decode_keyed_backend_meta(data)
    decoders = [HeapStateDecoder(s, meta.key_serializer) for s in meta.states]
    index = index_heap_key_groups(BytesSource(data), handle.key_groups, handle.offsets, compressed=compressed, decoders=decoders)
    key_group = handle.key_groups.start
    order = [state_id for _, state_id in sorted((run.start, state_id) for state_id, runs in index.runs.items() for run in runs if run.key_group == key_group)]
    # the unknown serializer: a value state's with states written before and after it in the key group
    hidden = next(i for i in order[1:-1] if meta.states[i].serializer("VALUE_SERIALIZER") is not None and meta.states[i].kind == "value")
    state = meta.states[hidden]
    unknown = dataclasses.replace(state, serializers=[(k, SerializerSnapshot("com.example.KryoLike", 1) if k == "VALUE_SERIALIZER" else v)
                                                      for k, v in state.serializers])
    changed = dataclasses.replace(meta, states=[unknown if s is state else s for s in meta.states])
    baseline = dict(_rows(data, handle, mp))
    assert any(baseline[meta.states[i].name] for i in order[: order.index(hidden)]), "a state before it holds rows"

    got = _streams(data, handle, mp, changed)
    assert set(got) == set(baseline)
    error = got[state.name]
    assert isinstance(error, UnsupportedSerializerError) and error.class_name == "com.example.KryoLike"
    assert f"state {state.name!r}" in str(error) and "have no lengths" in str(error)
    after = set(order[order.index(hidden) + 1:]) if not compressed else set()
    for state_id, other in enumerate(meta.states):
        if state_id == hidden:
            continue
        if state_id in after:
            assert isinstance(got[other.name], UnsupportedSerializerError), other.name
            assert f"state {other.name!r}: its block in key group" in str(got[other.name])
            assert "comes after a record that cannot be read" in str(got[other.name])
        else:
            assert got[other.name] == baseline[other.name], other.name
    assert compressed or after, "the test needs a state written after the unknown one"


_FUZZ = _subtasks(UNCOMPRESSED)[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(hst.data())
def test_damaged_snapshots_only_raise_repair_errors(data):
    """Bit flips and cuts anywhere after the meta data, plain or compressed: rows or a RepairError."""
    _, _, raw, handle, mp = _FUZZ
    if data.draw(hst.booleans()):
        raw, handle = _compressed_copy(raw, handle, 200)
    meta = decode_keyed_backend_meta(raw)
    try:
        _rows(damaged_after(data, raw, meta.end_offset), handle, mp, meta)
    except RepairError:
        pass


def test_export_of_the_other_states_works_and_of_the_hidden_one_fails_cleanly(tmp_path, monkeypatch, read_only_guard, capsys):
    """End to end on the uncompressed heap fixture with an unknown serializer: ``repair export`` of the
    whole checkpoint exits 2 naming the serializer and leaves no output; ``--state`` of a state written
    before it in every key group exports exactly what the fixture's expected.json holds for it."""
    from repair.cli.app import main
    from repair.readers import full_snapshot as savepoint_reader

    _, _, data, handle, _ = _subtasks(UNCOMPRESSED)[0]
    meta = decode_keyed_backend_meta(data)
    decoders = [HeapStateDecoder(s, meta.key_serializer) for s in meta.states]
    index = index_heap_key_groups(BytesSource(data), handle.key_groups, handle.offsets, compressed=False, decoders=decoders)
    order = [i for _, i in sorted((run.start, i) for i, runs in index.runs.items() for run in runs if run.key_group == handle.key_groups.start)]
    hidden = [i for i in order if meta.states[i].kind == "value"][1]  # the order is the backend's, it varies per run
    hidden_name = meta.states[hidden].name
    before = [meta.states[i].name for i in order[: order.index(hidden)] if meta.states[i].kind == "value"]
    assert before, "the test needs a value state written before the hidden one"
    real = savepoint_reader.decode_keyed_backend_meta

    def with_an_unknown_value_serializer(data, **options):
        meta = real(data, **options)
        unknown = [dataclasses.replace(s, serializers=[(k, SerializerSnapshot("com.example.KryoLike", 1) if k == "VALUE_SERIALIZER" else v)
                                                       for k, v in s.serializers]) if s.name == hidden_name else s for s in meta.states]
        return dataclasses.replace(meta, states=unknown)

    monkeypatch.setattr(savepoint_reader, "decode_keyed_backend_meta", with_an_unknown_value_serializer)
    root = FIXTURES / UNCOMPRESSED / "checkpoints" / fixture_info(FIXTURES / UNCOMPRESSED)["job_id"]
    read_only_guard(FIXTURES / UNCOMPRESSED)
    uid = KEYED_UIDS[0]
    assert main(["export", str(root), "--out", str(tmp_path / "all"), "--operator", uid, "--workers", "1"]) == 2
    assert not (tmp_path / "all").exists()
    said = capsys.readouterr()
    assert "com.example.KryoLike" in said.out + said.err and "Traceback" not in said.out + said.err

    state = before[0]
    assert main(["export", str(root), "--out", str(tmp_path / "one"), "--operator", uid, "--state", state, "--workers", "1"]) == 0
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "one", filters=[("state", "=", state)])
    assert table.num_rows
    expected = json.loads((FIXTURES / UNCOMPRESSED / "expected.json").read_text())["keyed"][uid]
    assert {row["key"]: row["value"] for row in table.to_pylist()} == {k: v[state] for k, v in expected.items() if state in v}
