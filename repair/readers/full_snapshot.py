"""Read the keyed state of full snapshots: ``KeyGroupsStateHandle`` (handle codes 3, 7 and 12), written by
canonical savepoints (either backend; :mod:`repair.formats.flink.full_snapshot.canonical_stream`) and by checkpoints and
native savepoints of the heap backend (its own layout, :mod:`repair.formats.flink.full_snapshot.heap`), told
apart by their bytes (:func:`~repair.formats.flink.full_snapshot.heap.detect_heap_layout`). Full checkpoints
of the RocksDB backend are RocksDB instances like incremental ones (Flink 1.20 writes them so).

The interface is the one of :mod:`repair.readers.rocksdb`: one :class:`StateStream` per state with an
iterator of row dicts in the shape of :mod:`repair.formats.flink.in_rocksdb.keyed_rows` (the key/value pairs of a
canonical snapshot are RocksDB keys and values, so :class:`KeyedStateDecoder` decodes them; heap records
go through :class:`~repair.formats.flink.full_snapshot.heap_rows.HeapStateDecoder`), one state after the other. Memory
is bounded by one read buffer and the entries in flight, never by the snapshot: the file is read once to
check its framing and index each state's blocks, then once more, one state at a time.

* :func:`iter_full_snapshot` is the pure core (a random-access source, the backend meta data and the
  handle's key-group offsets in; streams out), meant to run once per keyed subtask.
* :func:`iter_key_groups_handle` feeds it from a loaded snapshot (a file on a remote store is read from
  a local scratch copy, deleted at the end).
* :func:`read_key_groups_meta` reads the meta data only (states, kinds and serializers), e.g. to plan
  column types before reading rows.

Every row carries its block's key group, which lies in the handle's range, so
``outside_key_groups`` is always 0 and ``stats`` None (not an LSM tree). Corrupt bytes raise
:class:`~repair.errors.FormatError` naming the file; they are never skipped.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable, Collection, Iterator

from repair.errors import FormatError, RepairError
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.formats.flink.backend_meta import KeyedBackendMeta, decode_keyed_backend_meta
from repair.formats.flink.full_snapshot.canonical_stream import KeyGroupIndex, index_key_groups, iter_state_entries
from repair.formats.flink.full_snapshot.heap import detect_heap_layout, index_heap_key_groups, iter_heap_state_rows
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder
from repair.formats.flink.handles import KeyGroupRange, KeyGroupsHandle
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.keygroups import key_group_prefix_bytes
from repair.io import storage as st
from repair.io.layout import ResolvedFile
from repair.io.resolved import copy_to_scratch, is_remote, open_resolved, read_resolved, scratch_directory
from repair.io.snapshot import LoadedSnapshot
from repair.readers.kryo_generation import mark_kryo_generation
from repair.readers.rocksdb import StateStream


def _first_block(offsets: list[int]) -> int | None:
    starts = [o for o in offsets if o > 0]
    return min(starts) if starts else None


def read_head_meta(source: RandomAccess, offsets: list[int]) -> KeyedBackendMeta:
    """The keyed backend meta data at the head of a full snapshot's bytes (up to its first key group)."""
    first = _first_block(offsets)
    return decode_keyed_backend_meta(bytes(read_exactly(source, 0, source.size if first is None else first, "keyed backend meta data")),
                                     ends_at_data_end=first is not None)


def iter_full_snapshot(
    source: RandomAccess,
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    offsets: list[int],
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
) -> Iterator[StateStream]:
    """One :class:`StateStream` per state of the full snapshot in ``source`` (the whole delegate, the
    meta data included), in state-name order; ``states`` limits it to those names.

    ``meta`` is the decoded head of ``source``, ``key_groups`` and ``offsets`` the handle's. The framing
    of the whole file is checked before the first stream is returned. Consume each stream's rows
    before asking for the next stream.
    """
    if len(meta.states) != meta.declared_state_count:
        raise FormatError("keyed backend meta data", 0, f"{meta.declared_state_count} states",
                          f"{len(meta.states)} readable ({'; '.join(meta.problems)})")
    first = _first_block(offsets)
    if first is not None and meta.end_offset is not None and first != meta.end_offset:
        raise FormatError("first key-group offset", first, f"{meta.end_offset} (the end of the meta data)", first)
    compressed, prefix_bytes = meta.key_group_compression, key_group_prefix_bytes(max_parallelism)
    heap = detect_heap_layout(source, key_groups, offsets, compressed=compressed)
    index: KeyGroupIndex | None = None
    if heap is None:  # only key group 0 holds data: the layout whose framing checks out
        try:
            index = index_key_groups(source, key_groups, offsets, compressed=compressed, state_count=len(meta.states), prefix_bytes=prefix_bytes)
        except FormatError:
            heap = True
    ordered = sorted(enumerate(meta.states), key=lambda item: item[1].name)
    if heap:
        decoders = [HeapStateDecoder(state, meta.key_serializer) for state in meta.states]
        try:
            heap_index = index_heap_key_groups(source, key_groups, offsets, compressed=compressed, decoders=decoders)
        except FormatError as error:
            error.message += " (key groups read in the heap state backend's layout: each starts with its number as an int)"
            raise
        for state_id, state in ordered:
            if states is None or state.name in states:
                yield StateStream(state.name, state.kind, state, iter_heap_state_rows(source, heap_index, state_id, decoders[state_id]))
        return
    if index is None:
        index = index_key_groups(source, key_groups, offsets, compressed=compressed, state_count=len(meta.states), prefix_bytes=prefix_bytes)
    for state_id, state in ordered:
        if states is not None and state.name not in states:
            continue
        decoder = KeyedStateDecoder(state, meta.key_serializer, max_parallelism)
        yield StateStream(state.name, state.kind, state, _rows(decoder, source, index, state_id))


def _rows(decoder: KeyedStateDecoder, source: RandomAccess, index: KeyGroupIndex, state_id: int) -> Iterator[dict[str, Any]]:
    rows = decoder.rows
    for _, key, value in iter_state_entries(source, index, state_id):
        yield from rows(key, value)


def read_key_groups_meta(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle) -> KeyedBackendMeta:
    """The keyed backend meta data (states and serializers) at the head of a full snapshot."""
    resolved = resolve_delegate(snapshot, handle)
    try:
        first = _first_block(handle.offsets)
        meta = decode_keyed_backend_meta(read_key_groups_meta_bytes(snapshot, storage, handle), ends_at_data_end=first is not None)
        return mark_kryo_generation(snapshot, meta)
    except RepairError as error:
        raise error.in_source(delegate_name(snapshot, resolved)) from None


def read_key_groups_meta_bytes(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle) -> bytes:
    """The bytes of the keyed backend meta data at the head of a full snapshot (up to its first key
    group; the whole stream when every key group is empty)."""
    return read_resolved(storage, resolve_delegate(snapshot, handle), length=_first_block(handle.offsets))


def iter_key_groups_handle(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle, max_parallelism: int,
                           *, states: Collection[str] | None = None) -> Iterator[StateStream]:
    """The state streams of one subtask's full-snapshot handle of ``snapshot`` (the file stays open until
    the iteration ends or the generator is closed; errors name the file)."""
    meta = read_key_groups_meta(snapshot, storage, handle)
    yield from streams_of_delegate(snapshot, storage, handle, lambda source: iter_full_snapshot(
        source, meta, handle.key_groups, handle.offsets, max_parallelism, states=states))


def streams_of_delegate(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle,
                        read: Callable[[RandomAccess], Iterator[StateStream]]) -> Iterator[StateStream]:
    """The streams ``read`` gives from the bytes of a key-groups handle, opened for random access (and
    closed when the iteration ends or the generator is closed); their errors name the file."""
    resolved = resolve_delegate(snapshot, handle)
    name = delegate_name(snapshot, resolved)
    with ExitStack() as opened:
        try:
            source = open_for_reads(storage, resolved, opened)
            for stream in read(source):
                stream.rows = named_rows(stream.rows, name)
                yield stream
        except RepairError as error:
            raise error.in_source(name) from None


def open_for_reads(storage: st.Storage, resolved: ResolvedFile, opened: ExitStack) -> RandomAccess:
    """Random access to a resolved handle's bytes, closed when ``opened`` closes. A file on a remote store
    is first copied to a local scratch directory (deleted then): the readers read in many small pieces."""
    if not is_remote(resolved):
        source = open_resolved(storage, resolved)
    else:
        source = copy_to_scratch(storage, resolved, opened.enter_context(scratch_directory("snapshot")))
    close = getattr(source, "close", None)
    if close is not None:
        opened.callback(close)
    return source


def named_rows(rows: Iterator[dict[str, Any]], name: str) -> Iterator[dict[str, Any]]:
    """``rows``, with ``name`` (the file read) set on the errors they raise."""
    try:
        yield from rows
    except RepairError as error:
        raise error.in_source(name) from None


def resolve_delegate(snapshot: LoadedSnapshot, handle: KeyGroupsHandle) -> ResolvedFile:
    """The bytes of a key-groups handle: its delegate stream handle, resolved."""
    resolved = snapshot.resolver.resolve(handle.delegate) if not isinstance(handle.delegate, KeyGroupsHandle) else None
    if resolved is None:
        found = "null" if handle.delegate is None else type(handle.delegate).__name__
        raise FormatError("key-groups delegate handle", handle.offset, "a stream handle", found).in_source(snapshot.ref.metadata_uri)
    return resolved


def delegate_name(snapshot: LoadedSnapshot, resolved: ResolvedFile) -> str:
    """What errors name as the source of a key-groups handle's bytes."""
    return resolved.uri or f"inline key-group data of {snapshot.ref.metadata_uri}"
