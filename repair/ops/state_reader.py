"""Read the logical keyed state of one RocksDB instance (one keyed subtask of an incremental checkpoint).

The interface is a stream per state (:class:`StateStream`): its name, kind, meta data and an iterator
of row dicts (:data:`repair.formats.flink_keyed_rows.ROW_FIELDS`), one state after the other, so
that memory is bounded by one data block per SST and the rows in flight, never by the state's size.

* :func:`iter_keyed_instance` is the pure core (SST sources + backend meta data in, streams out),
  meant to run once per keyed subtask (e.g. inside a Spark task).
* :func:`iter_incremental_handle` feeds it from a loaded snapshot: it resolves the handle's meta data
  and shared SSTs (inline, whole files or file-merging segments) and keeps them open while iterating.
* :func:`read_keyed_instance` / :func:`read_incremental_handle` collect the streams into lists
  (:class:`KeyedStateResult`), for small states and tests.

Every SST entry is accounted for (:attr:`StateStream.stats`, complete once its rows are exhausted):
live rows, older versions, tombstones, range deletions, and keys outside the handle's key-group range
(left there by rescaling; dropped and counted in :attr:`StateStream.outside_key_groups`). Corrupt
bytes raise; they are never skipped.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Iterator

from repair import storage as st
from repair.errors import FormatError, RepairError, StorageError
from repair.formats.flink_backend_meta import KeyedBackendMeta, StateMetaInfo, decode_keyed_backend_meta
from repair.formats.flink_handles import IncrementalKeyedHandle, KeyGroupRange
from repair.formats.flink_keyed_rows import KeyedStateDecoder
from repair.formats.random_access import BytesSource, RandomAccess
from repair.formats.rocksdb_lsm import LsmStats, iter_column_family, tables_by_column_family
from repair.formats.sst import Table, open_table
from repair.layout import ResolvedFile
from repair.snapshot import LoadedSnapshot, read_resolved


@dataclass
class StateStream:
    """The rows of one state of one subtask, as an iterator of row dicts.

    This is what export consumes from every reader (keyed RocksDB state here; operator state and
    full-snapshot key-group streams elsewhere): ``rows`` yields dicts with the keys of
    :data:`~repair.formats.flink_keyed_rows.ROW_FIELDS`, in a deterministic order, and may be consumed
    once. ``meta`` is the state's meta info (its serializers decide the column types). ``stats`` and
    ``outside_key_groups`` are complete once ``rows`` is exhausted (``stats`` is None for sources that
    are not an LSM tree).
    """

    name: str
    kind: str
    meta: StateMetaInfo
    rows: Iterator[dict[str, Any]]
    stats: LsmStats | None = None
    outside_key_groups: int = 0


@dataclass
class KeyedStateResult:
    """Rows per state name, and how the entries of each column family were accounted for."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, LsmStats] = field(default_factory=dict)
    #: Live keys dropped because their key group is outside the handle's range, per state.
    outside_key_groups: dict[str, int] = field(default_factory=dict)


def _open_tables(sources: Iterable[tuple[str, RandomAccess]]) -> list[tuple[str, Table]]:
    tables = []
    for name, source in sources:
        try:
            tables.append((name, open_table(source)))
        except RepairError as error:
            raise error.in_source(name) from None
    return tables


def iter_keyed_instance(
    sources: Iterable[tuple[str, RandomAccess]],
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
) -> Iterator[StateStream]:
    """One :class:`StateStream` per column family of the instance held by ``sources`` (``(name,
    source)`` of every SST), in column-family name order; ``states`` limits it to those names.

    Consume each stream's rows before asking for the next stream. A column family that is no state of
    the meta data raises when it holds live keys, whatever ``states`` says.
    """
    if not meta.complete:
        raise FormatError("keyed backend meta data", 0, "complete meta data", "; ".join(meta.problems) or "fewer states")
    for name, tables in tables_by_column_family(_open_tables(sources)).items():
        state = meta.state(name)
        stats = LsmStats()
        if state is None:  # read even when not asked for: live keys of no state must not vanish silently
            live = sum(1 for _ in iter_column_family(name, tables, stats))
            if live:
                raise FormatError("column family", 0, "a state of the meta data", f"{name!r} with {live} live keys")
            continue
        if states is not None and name not in states:
            continue
        stream = StateStream(name, state.kind, state, iter(()), stats)
        stream.rows = _state_rows(stream, KeyedStateDecoder(state, meta.key_serializer, max_parallelism),
                                  iter_column_family(name, tables, stats), key_groups)
        yield stream


def _state_rows(stream: StateStream, decoder: KeyedStateDecoder, items: Iterator[tuple[bytes, bytes]],
                key_groups: KeyGroupRange) -> Iterator[dict[str, Any]]:
    first, last = key_groups.start, key_groups.end
    key_group = decoder.key_group
    rows = decoder.rows
    for key, value in items:
        group = key_group(key)
        if not first <= group <= last:
            stream.outside_key_groups += 1
            continue
        yield from rows(key, value, group)


def read_keyed_instance(
    sources: Iterable[tuple[str, RandomAccess]],
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    max_parallelism: int,
) -> KeyedStateResult:
    """Decode the keyed state held by ``sources`` (``(name, source)`` of every SST of one instance)."""
    return _collect(iter_keyed_instance(sources, meta, key_groups, max_parallelism))


def _collect(streams: Iterable[StateStream]) -> KeyedStateResult:
    result = KeyedStateResult()
    for stream in streams:
        result.rows[stream.name] = list(stream.rows)
        result.stats[stream.name] = stream.stats
        result.outside_key_groups[stream.name] = stream.outside_key_groups
    return result


class _Window:
    """A :class:`RandomAccess` over ``[start, start + size)`` of another source (file-merging segments)."""

    def __init__(self, source: RandomAccess, start: int, size: int):
        self._source, self._start, self._size = source, start, size

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int):
        length = max(0, min(length, self._size - offset))
        return self._source.read(self._start + offset, length)

    def close(self) -> None:
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


def open_resolved(storage: st.Storage, resolved: ResolvedFile) -> RandomAccess:
    """Random access to a resolved handle's bytes (in memory if inline)."""
    if resolved.inline is not None:
        return BytesSource(resolved.inline)
    file = storage.open_input(resolved.uri)
    if resolved.start == 0 and file.size == resolved.size:
        return file
    return _Window(file, resolved.start, resolved.size)


#: Chunk size of copies to local scratch space.
SCRATCH_CHUNK = 8 << 20


def is_remote(resolved: ResolvedFile) -> bool:
    """Whether a resolved handle's bytes are on a remote store (S3, GCS, HDFS, Azure)."""
    return resolved.inline is None and st.parse_location(resolved.uri).kind != "local"


def copy_to_scratch(storage: st.Storage, resolved: ResolvedFile, scratch: str) -> RandomAccess:
    """A local copy (in directory ``scratch``) of a remote handle's bytes, copied in chunks: SSTs are
    read one small block at a time, which would be one request per block on an object store."""
    handle, path = tempfile.mkstemp(suffix=".sst", dir=scratch)
    with os.fdopen(handle, "wb") as out, storage.open_input(resolved.uri) as file:
        for offset in range(resolved.start, resolved.start + resolved.size, SCRATCH_CHUNK):
            wanted = min(SCRATCH_CHUNK, resolved.start + resolved.size - offset)
            data = file.read(offset, wanted)
            if len(data) != wanted:
                raise StorageError(f"expected {wanted} bytes at offset {offset}, found {len(data)}", source=resolved.uri)
            out.write(data)
    return storage.open_input(path)


def read_handle_meta(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle) -> KeyedBackendMeta:
    """The keyed backend meta data (states and serializers) of one incremental handle."""
    meta_file = snapshot.resolver.resolve(handle.meta)
    if meta_file is None:
        raise FormatError("meta data handle", handle.offset, "a handle", "null")
    try:
        return decode_keyed_backend_meta(read_resolved(storage, meta_file))
    except RepairError as error:
        raise error.in_source(meta_file.uri or f"inline meta data of {snapshot.ref.metadata_uri}") from None


def iter_incremental_handle(
    snapshot: LoadedSnapshot,
    storage: st.Storage,
    handle: IncrementalKeyedHandle,
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
) -> Iterator[StateStream]:
    """The state streams of one subtask's incremental RocksDB handle of ``snapshot`` (files stay open
    until the iteration ends or the generator is closed; files on remote stores are read from a local
    scratch copy, deleted then)."""
    meta = read_handle_meta(snapshot, storage, handle)
    with ExitStack() as opened:
        scratch = None
        sources = []
        for entry in handle.shared:
            if not entry.local_path.endswith(".sst"):
                continue
            resolved = snapshot.resolver.resolve(entry.handle)
            if resolved is None:
                raise FormatError("shared file handle", handle.offset, "a handle", f"null for {entry.local_path}")
            if is_remote(resolved):
                if scratch is None:
                    scratch = opened.enter_context(tempfile.TemporaryDirectory(prefix="repair-sst-"))
                source = copy_to_scratch(storage, resolved, scratch)
            else:
                source = open_resolved(storage, resolved)
            if hasattr(source, "close"):
                opened.callback(source.close)
            sources.append((resolved.uri or entry.local_path, source))
        yield from iter_keyed_instance(sources, meta, handle.key_groups, max_parallelism, states=states)


def read_incremental_handle(
    snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, max_parallelism: int
) -> KeyedStateResult:
    """The keyed state of one subtask's incremental RocksDB handle of ``snapshot``, in lists."""
    return _collect(iter_incremental_handle(snapshot, storage, handle, max_parallelism))
