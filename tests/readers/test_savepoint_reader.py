"""Keyed state of full snapshots (canonical savepoints): streamed per state and decoded into rows.

Evidence: the canonical savepoints of the real fixtures (Flink 1.20 and 2.1) against expected.json
(values, list order, map entries, TTL timestamps, timers of both keyed operators), the streaming reader
against the in-memory key-group decoder on the same files, and the same files re-framed as Snappy
streams (as Flink's SnappyStreamCompressionDecorator frames them) and damaged.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from repair.errors import FormatError, RepairError, TruncatedError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.full_snapshot import canonical_stream as flink_keygroup_stream
from repair.formats.flink.full_snapshot.canonical import SNAPPY_STREAM_IDENTIFIER, iter_key_group_entries
from repair.formats.flink.full_snapshot.canonical_stream import index_key_groups, iter_state_entries
from repair.formats.flink.handles import RelativeFileHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import read_resolved
from repair.io.snapshot import load_snapshot
from repair.readers.full_snapshot import iter_full_snapshot, iter_key_groups_handle
from tests.conftest import FIXTURES, fixture_info
from tests.savepoint_testlib import KEYED_UIDS, canonical_dir, damaged_after, full_snapshot_state, snappy_framed

SAVEPOINT_FIXTURES = ("flink-1.20-default", "flink-2.1-default")




def _load(directory: Path):
    storage = st.default_storage()
    layout = discover(str(directory), storage)
    return load_snapshot(layout.snapshots[0], layout.root, storage), storage


@lru_cache(maxsize=None)
def _subtasks(name: str) -> list[tuple[str, int, bytes, object, int]]:
    """(uid, subtask, delegate bytes, handle, max parallelism) of every keyed subtask of the canonical savepoint."""
    snapshot, storage = _load(canonical_dir(name))
    out = []
    for uid in KEYED_UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            assert handle.type_code == 7  # KeyGroupsSavepointStateHandle
            data = read_resolved(storage, snapshot.resolver.resolve(handle.delegate))
            out.append((uid, sub.index, data, handle, op.max_parallelism))
    return out


# -- real canonical savepoints ---------------------------------------------------------------------------------




@pytest.mark.parametrize("name", SAVEPOINT_FIXTURES)
def test_canonical_savepoint_matches_expected_json(name, read_only_guard):
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    low, high = fixture_info(FIXTURES / name)["generated_between_ms"]
    directory = read_only_guard(canonical_dir(name))
    snapshot, storage = _load(directory)
    assert snapshot.savepoint_format == "canonical"
    keyed, ttl_timestamps, _ = full_snapshot_state(snapshot, storage)
    assert keyed == {uid: expected["keyed"][uid] for uid in KEYED_UIDS}
    assert ttl_timestamps and all(low <= ts <= high for ts in ttl_timestamps)


def _entries_in_memory(data: bytes, handle, meta) -> dict[int, list[tuple[int, bytes, bytes]]]:
    by_state: dict[int, list] = {}
    for e in iter_key_group_entries(data, handle.key_groups, handle.offsets, compressed=meta.key_group_compression,
                                    state_count=len(meta.states)):
        by_state.setdefault(e.kv_state_id, []).append((e.key_group, e.key, e.value))
    return by_state


def _streamed(data: bytes, handle, meta, max_parallelism: int) -> dict[int, list[tuple[int, bytes, bytes]]]:
    source = BytesSource(data)
    index = index_key_groups(source, handle.key_groups, handle.offsets, compressed=meta.key_group_compression,
                             state_count=len(meta.states), prefix_bytes=1 if max_parallelism <= 128 else 2)
    streamed = {i: list(iter_state_entries(source, index, i)) for i in range(len(meta.states))}
    assert all(len(v) == index.entries(i) for i, v in streamed.items())
    return {i: v for i, v in streamed.items() if v}


@pytest.mark.parametrize("read_size", [flink_keygroup_stream.READ_SIZE, 5])
def test_streamed_entries_equal_the_in_memory_decoder(read_size, monkeypatch):
    """Per state, the two-pass streaming reader returns what the whole-file decoder returns, also when
    every read is a few bytes (runs, keys and values then span many reads)."""
    monkeypatch.setattr(flink_keygroup_stream, "READ_SIZE", read_size)
    for name in SAVEPOINT_FIXTURES:
        for _, _, data, handle, max_parallelism in _subtasks(name):
            meta = decode_keyed_backend_meta(data)
            assert _streamed(data, handle, meta, max_parallelism) == _entries_in_memory(data, handle, meta)


def test_state_filter_reads_only_the_named_states():
    snapshot, storage = _load(canonical_dir("flink-2.1-default"))
    op = snapshot.metadata.operator(operator_id_for_uid("per-account"))
    handle = op.subtasks[1].managed_keyed_state
    streams = list(iter_key_groups_handle(snapshot, storage, handle, op.max_parallelism, states={"balance", "nope"}))
    assert [s.name for s in streams] == ["balance"]
    rows = list(streams[0].rows)
    assert rows and all(r["kind"] == "value" and isinstance(r["key"], int) for r in rows)


# -- Snappy-framed copies of the real files --------------------------------------------------------------------






def _compressed_copy(data: bytes, handle, chunk: int) -> tuple[bytes, list[int]]:
    """``data`` with every key-group block re-framed as its own Snappy stream and the proxy's compression
    flag set, and the new offsets."""
    starts = sorted(o for o in handle.offsets if o)
    ends = dict(zip(starts, starts[1:] + [len(data)]))
    head = bytearray(data[: starts[0]])
    assert head[4] == 0  # KeyedBackendSerializationProxy: int version, bool usingKeyGroupCompression
    head[4] = 1
    out, offsets = bytearray(head), []
    for offset in handle.offsets:
        if offset == 0:
            offsets.append(0)
            continue
        offsets.append(len(out))
        out += snappy_framed(data[offset : ends[offset]], chunk)
    return bytes(out), offsets


@pytest.mark.parametrize("chunk", [65536, 37])
def test_compressed_blocks_give_the_same_rows(chunk):
    """Runs that start inside a chunk and span many chunks: the same entries and rows as uncompressed."""
    for _, _, data, handle, max_parallelism in _subtasks("flink-2.1-default"):
        meta = decode_keyed_backend_meta(data)
        packed, offsets = _compressed_copy(data, handle, chunk)
        packed_handle = dataclasses.replace(handle, offsets=offsets)
        packed_meta = decode_keyed_backend_meta(packed)
        assert packed_meta.key_group_compression
        assert _streamed(packed, packed_handle, packed_meta, max_parallelism) == _entries_in_memory(data, handle, meta)
        plain = {s.name: list(s.rows) for s in iter_full_snapshot(BytesSource(data), meta, handle.key_groups, handle.offsets, max_parallelism)}
        compressed = {s.name: list(s.rows) for s in iter_full_snapshot(BytesSource(packed), packed_meta, handle.key_groups, offsets, max_parallelism)}
        assert compressed == plain and sum(map(len, plain.values())) > 0


def test_corrupt_snappy_chunk_names_the_chunk():
    _, _, data, handle, max_parallelism = _subtasks("flink-2.1-default")[0]
    packed, offsets = _compressed_copy(data, handle, 64)
    packed_handle = dataclasses.replace(handle, offsets=offsets)
    block = sorted(o for o in offsets if o)[1]
    chunk = block + len(SNAPPY_STREAM_IDENTIFIER)
    bad = bytearray(packed)
    bad[chunk + 4] ^= 0x20  # the CRC of the block's first chunk
    error = _error(bytes(bad), packed_handle, max_parallelism)
    assert (error.field, error.offset) == ("snappy chunk checksum", chunk + 4)
    bad = bytearray(packed)
    bad[block] = 0x00  # the stream identifier
    error = _error(bytes(bad), packed_handle, max_parallelism)
    assert (error.field, error.offset) == ("snappy stream identifier", block)
    bad = bytearray(packed)
    bad[chunk + 1 : chunk + 4] = (1 << 20).to_bytes(3, "little")  # a chunk longer than the block
    error = _error(bytes(bad), packed_handle, max_parallelism)
    assert isinstance(error, TruncatedError) and (error.field, error.offset) == ("snappy chunk", chunk + 4)


# -- damaged copies of the real files ---------------------------------------------------------------------------


def _index(data: bytes, handle, max_parallelism: int, meta=None):
    meta = meta or decode_keyed_backend_meta(data)
    return [(s.name, list(s.rows)) for s in iter_full_snapshot(BytesSource(data), meta, handle.key_groups, handle.offsets, max_parallelism)]


def _first_block(handle) -> tuple[int, int]:
    """(key group, offset) of the first non-empty key group."""
    return next((handle.key_groups.start + i, o) for i, o in enumerate(handle.offsets) if o)


def _last_block(handle) -> tuple[int, int]:
    return max(((handle.key_groups.start + i, o) for i, o in enumerate(handle.offsets) if o), key=lambda t: t[1])


@pytest.fixture(scope="module")
def real():
    """(delegate bytes, handle, max parallelism) of a per-user subtask (String keys, timers, TTL, lists, maps)."""
    _, _, data, handle, max_parallelism = _subtasks("flink-2.1-default")[0]
    return data, handle, max_parallelism


def _error(data: bytes, handle, max_parallelism: int, meta=None) -> FormatError:
    with pytest.raises(FormatError) as info:
        _index(data, handle, max_parallelism, meta)
    return info.value


def test_truncated_stream(real):
    data, handle, max_parallelism = real
    key_group, offset = _last_block(handle)
    error = _error(data[:-5], handle, max_parallelism)
    assert isinstance(error, TruncatedError)
    assert error.field.startswith(f"key group {key_group} ") and offset < error.offset < len(data)


def test_bad_state_id(real):
    data, handle, max_parallelism = real
    key_group, offset = _first_block(handle)
    bad = bytearray(data)
    bad[offset : offset + 2] = struct.pack(">H", 99)
    error = _error(bytes(bad), handle, max_parallelism)
    assert (error.field, error.offset, error.found) == (f"key group {key_group} kv state id", offset, 99)


def test_length_beyond_the_file(real):
    data, handle, max_parallelism = real
    key_group, offset = _first_block(handle)
    for value in (0x7FFFFFFF, -1):
        bad = bytearray(data)
        bad[offset + 2 : offset + 6] = struct.pack(">i", value)
        error = _error(bytes(bad), handle, max_parallelism)
        assert error.offset == offset + 2 + (4 if value > 0 else 0)
        assert error.field == f"key group {key_group} key" + ("" if value > 0 else " length")


def test_offsets_that_do_not_fit_the_blocks(real):
    data, handle, max_parallelism = real
    present = [i for i, o in enumerate(handle.offsets) if o]
    # two key groups' offsets swapped: each block's keys carry the other key group
    swapped = list(handle.offsets)
    swapped[present[0]], swapped[present[1]] = swapped[present[1]], swapped[present[0]]
    error = _error(data, dataclasses.replace(handle, offsets=swapped), max_parallelism)
    assert error.field == f"key group {handle.key_groups.start + present[0]} key-group prefix"
    assert error.offset == handle.offsets[present[1]] + 2
    # an offset past the end of the file
    beyond = list(handle.offsets)
    beyond[present[-1]] = len(data) + 10
    error = _error(data, dataclasses.replace(handle, offsets=beyond), max_parallelism)
    assert (error.field, error.offset) == (f"offset of key group {handle.key_groups.start + present[-1]}", len(data) + 10)
    # the first block must start where the meta data ends
    early = list(handle.offsets)
    early[present[0]] -= 1
    error = _error(data, dataclasses.replace(handle, offsets=early), max_parallelism)
    assert error.field == "first key-group offset"


def test_bytes_after_the_end_mark(real):
    data, handle, max_parallelism = real
    key_group, _ = _last_block(handle)
    error = _error(data + b"\x00", handle, max_parallelism)
    assert (error.field, error.offset) == (f"key group {key_group} end", len(data))


def test_a_canonical_block_behind_an_int_key_group_is_read_as_heap_layout_and_named(real):
    """A block starting with ``int keyGroup`` is the heap backend's layout (tests/readers/test_heap_snapshot.py):
    canonical bytes behind it do not fit that layout, and the error says which layout was expected."""
    data, handle, max_parallelism = real
    key_group, offset = next((g, o) for g, o in ((handle.key_groups.start + i, o) for i, o in enumerate(handle.offsets)) if o and g > 0)
    after = sorted(o for o in handle.offsets if o > offset)[0]
    heap_like = data[:offset] + struct.pack(">i", key_group) + data[offset:after]
    offsets = [offset if handle.key_groups.start + i == key_group else 0 for i in range(handle.key_groups.count)]
    error = _error(heap_like, dataclasses.replace(handle, offsets=offsets), max_parallelism)
    assert error.field.startswith(f"key group {key_group}") and "heap state backend's layout" in str(error)


def test_meta_data_without_all_states(real):
    data, handle, max_parallelism = real
    meta = decode_keyed_backend_meta(data)
    fewer = dataclasses.replace(meta, states=meta.states[:-1], problems=["state 'x': cannot read"])
    error = _error(data, handle, max_parallelism, fewer)
    assert error.field == "keyed backend meta data" and "cannot read" in error.found


def _to_files(snapshot, directory: Path) -> dict[str, int]:
    """Move every keyed subtask's inline key-group data into a file of ``directory`` (what Flink does above
    the inline threshold): the handles then name those files. Returns file name -> size."""
    files = {}
    for op in snapshot.metadata.operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            if handle is None:
                continue
            name = f"{op.operator_id}-{sub.index}"
            (directory / name).write_bytes(handle.delegate.data)
            files[name] = handle.delegate.size
            handle.delegate = RelativeFileHandle(name, handle.delegate.size)
    return files


def _rows_of(snapshot, storage) -> dict:
    out = {}
    for uid in KEYED_UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            for stream in iter_key_groups_handle(snapshot, storage, sub.managed_keyed_state, op.max_parallelism):
                out[(uid, sub.index, stream.name)] = list(stream.rows)
    return out


def test_state_files_local_and_on_s3_give_the_same_rows(tmp_path, s3, s3_storage):
    original = canonical_dir("flink-2.1-default")
    inline = _rows_of(*_load(original))
    copy = tmp_path / original.name
    shutil.copytree(original, copy)
    snapshot, storage = _load(copy)
    _to_files(snapshot, copy)
    assert _rows_of(snapshot, storage) == inline
    # the same files on an object store are read from a local scratch copy
    bucket = s3.new_bucket({f"sp/{p.name}": p.read_bytes() for p in copy.iterdir()})
    layout = discover(f"s3://{bucket}/sp", s3_storage)
    remote = load_snapshot(layout.snapshots[0], layout.root, s3_storage)
    for op in remote.metadata.operators:
        for sub in op.subtasks:
            if sub.managed_keyed_state is not None:
                sub.managed_keyed_state.delegate = RelativeFileHandle(f"{op.operator_id}-{sub.index}", sub.managed_keyed_state.delegate.size)
    assert _rows_of(remote, s3_storage) == inline


def test_damaged_file_names_the_file(tmp_path):
    copy = tmp_path / "savepoint"
    shutil.copytree(canonical_dir("flink-1.20-default"), copy)
    snapshot, storage = _load(copy)
    _to_files(snapshot, copy)
    op = snapshot.metadata.operator(operator_id_for_uid("per-account"))
    handle = op.subtasks[0].managed_keyed_state
    path = copy / handle.delegate.relative_path
    _, offset = _first_block(handle)
    bad = bytearray(path.read_bytes())
    bad[offset : offset + 2] = b"\x00\x63"
    path.write_bytes(bytes(bad))
    with pytest.raises(FormatError) as info:
        list(iter_key_groups_handle(snapshot, storage, handle, op.max_parallelism))
    assert str(path) in str(info.value) and f"kv state id at offset {offset}" in str(info.value)
    # inline data is named by its _metadata
    inline, _ = _load(canonical_dir("flink-1.20-default"))
    handle = inline.metadata.operator(operator_id_for_uid("per-account")).subtasks[0].managed_keyed_state
    handle.delegate = dataclasses.replace(handle.delegate, data=bytes(bad))
    with pytest.raises(FormatError) as info:
        list(iter_key_groups_handle(inline, storage, handle, op.max_parallelism))
    assert str(info.value).startswith(f"inline key-group data of {inline.ref.metadata_uri}: ")


_FUZZ = _subtasks("flink-2.1-default")[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(hst.data())
def test_damaged_streams_only_raise_repair_errors(data):
    """Bit flips and cuts anywhere after the meta data, plain or compressed: rows or a RepairError."""
    _, _, raw, handle, max_parallelism = _FUZZ
    meta = decode_keyed_backend_meta(raw)
    if data.draw(hst.booleans()):
        raw, offsets = _compressed_copy(raw, handle, 200)
        handle = dataclasses.replace(handle, offsets=offsets)
        meta = decode_keyed_backend_meta(raw)
    try:
        _index(damaged_after(data, raw, meta.end_offset), handle, max_parallelism, meta)
    except RepairError:
        pass


