"""Read the logical keyed state of one RocksDB instance (one keyed subtask of an incremental checkpoint).

The interface is a stream per state (:class:`StateStream`): its name, kind, meta data and an iterator
of row dicts (:data:`repair.formats.flink.in_rocksdb.keyed_rows.ROW_FIELDS`), one state after the other, so
that memory is bounded by a batch of entries (and, with the python engine, one data block per SST),
never by the state's size. Keyed streams also offer the same entries undecoded, in batches
(:class:`KeyedEntries`), which export decodes column-wise.

Two engines resolve the LSM tree (:data:`ENGINES`):

* ``python``: :func:`iter_keyed_instance`, the pure core (SST sources + backend meta data in, streams
  out) over this toolkit's k-way merge. Every SST entry is accounted for (:attr:`StateStream.stats`,
  complete once its rows are exhausted): live rows, older versions, tombstones, range deletions.
* ``rocksdb``: :func:`iter_rocksdb_instance`, RocksDB itself on a scratch copy
  (:mod:`repair.readers.rocksdb_instance`); only the live entries are known (:attr:`StateStream.live`).

:func:`iter_incremental_handle` feeds either from a loaded snapshot (``auto``: rocksdb where RocksDB can
open the instance as ``_metadata`` describes it). :func:`read_keyed_instance` /
:func:`read_incremental_handle` collect the streams into lists (:class:`KeyedStateResult`), for small
states and tests. Keys outside the handle's key-group range (left there by rescaling) are dropped and
counted in :attr:`StateStream.outside_key_groups`. Corrupt bytes raise; they are never skipped.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Iterator

import pyarrow as pa

from repair.errors import FormatError, RepairError
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.flink.backend_meta import KeyedBackendMeta, StateMetaInfo, decode_keyed_backend_meta
from repair.formats.flink.handles import IncrementalKeyedHandle, KeyGroupRange
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.rocksdb.lsm import LsmStats, iter_column_family, tables_by_column_family
from repair.formats.rocksdb.table.sst import Table, open_table
from repair.io import storage as st
from repair.io.resolved import copies_in_scratch, is_remote, open_resolved, read_resolved, scratch_directory
from repair.io.snapshot import LoadedSnapshot
from repair.readers.kryo_generation import mark_kryo_generation
from repair.readers.rocksdb_instance import InstanceUnavailable, MaterialisedInstance, RocksDbInstance, open_rocksdb_instance


@dataclass
class KeyedEntries:
    """The live RocksDB entries of one keyed state, in key order and in batches, with what decodes them.

    Export decodes the batches column-wise where it can (:mod:`repair.formats.flink.in_rocksdb.keyed_columns`)
    and row by row with :attr:`decoder` otherwise; entries outside :attr:`key_groups` are dropped there
    (and counted in :attr:`StateStream.outside_key_groups`). A batch is its keys and its values, each
    an Arrow binary array."""

    batches: Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]
    decoder: KeyedStateDecoder
    key_serializer: Any
    max_parallelism: int
    key_groups: KeyGroupRange


@dataclass
class StateStream:
    """The rows of one state of one subtask, as an iterator of row dicts.

    This is what export consumes from every reader (keyed RocksDB state here; operator state and
    full-snapshot key-group streams elsewhere): ``rows`` yields dicts with the keys of
    :data:`~repair.formats.flink.in_rocksdb.keyed_rows.ROW_FIELDS`, in a deterministic order, and may be consumed
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
    #: Keyed RocksDB state: the same entries undecoded (consume either these or :attr:`rows`, not both;
    #: None once :attr:`rows` are more than these entries' rows, as with a changelog applied to them).
    entries: KeyedEntries | None = None
    #: Which engine resolved the LSM tree (:data:`ENGINES`; None for sources that are no LSM tree) and,
    #: when ``auto`` fell back to the Python merge, why.
    engine: str | None = None
    engine_reason: str | None = None
    #: Live entries read (the rocksdb engine knows only these; the python engine's are in :attr:`stats`).
    live: int = 0
    #: A changelog subtask's state: the logged changes applied to the rows (see
    #: :mod:`repair.readers.changelog_state`); None for every other source.
    changelog: dict[str, int] | None = None

    def lsm_json(self) -> dict[str, int | None] | None:
        """How the state's RocksDB entries were accounted for (counts RocksDB does not tell are None)."""
        if self.stats is not None:
            return self.stats.to_json()
        if self.engine is None:
            return None
        return {**dict.fromkeys(LsmStats.__dataclass_fields__), "live": self.live}


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


#: Live entries per batch handed to the decoders, and about how many bytes of keys and values.
BATCH_ENTRIES = 65536
BATCH_BYTES = 8 << 20
#: How the LSM tree of an incremental handle is resolved: ``rocksdb`` (RocksDB itself, through rocksdict,
#: on a scratch copy), ``python`` (this toolkit's merge, :mod:`repair.formats.rocksdb.lsm`), or ``auto``
#: (rocksdb where RocksDB can open the instance as the checkpoint describes it, else python).
ENGINES = ("auto", "rocksdb", "python")


def iter_keyed_instance(
    sources: Iterable[tuple[str, RandomAccess]],
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
    engine_reason: str | None = None,
) -> Iterator[StateStream]:
    """One :class:`StateStream` per column family of the instance held by ``sources`` (``(name,
    source)`` of every SST), in column-family name order, resolved by the Python merge; ``states``
    limits it to those names.

    Consume each stream's rows before asking for the next stream. A column family that is no state of
    the meta data raises when it holds live keys, whatever ``states`` says.
    """
    _check_meta(meta)
    for name, tables in tables_by_column_family(_open_tables(sources)).items():
        state = meta.state(name)
        stats = LsmStats()
        if state is None:  # read even when not asked for: live keys of no state must not vanish silently
            _no_live_keys(name, sum(1 for _ in iter_column_family(name, tables, stats)))
            continue
        if states is not None and name not in states:
            continue
        stream = StateStream(name, state.kind, state, iter(()), stats, engine="python", engine_reason=engine_reason)
        _attach(stream, _batched(iter_column_family(name, tables, stats)), meta, key_groups, max_parallelism)
        yield stream


def iter_rocksdb_instance(
    instance: RocksDbInstance,
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
) -> Iterator[StateStream]:
    """Like :func:`iter_keyed_instance`, with RocksDB resolving the LSM tree of an opened instance."""
    _check_meta(meta)
    for name in instance.column_families:
        state = meta.state(name)
        if state is None:
            _no_live_keys(name, sum(len(keys) for keys, _ in instance.entry_batches(name, max_rows=BATCH_ENTRIES, max_bytes=BATCH_BYTES)))
            continue
        if states is not None and name not in states:
            continue
        stream = StateStream(name, state.kind, state, iter(()), None, engine="rocksdb")
        _attach(stream, instance.entry_batches(name, max_rows=BATCH_ENTRIES, max_bytes=BATCH_BYTES), meta, key_groups, max_parallelism)
        yield stream


def _check_meta(meta: KeyedBackendMeta) -> None:
    if not meta.complete:
        raise FormatError("keyed backend meta data", 0, "complete meta data", "; ".join(meta.problems) or "fewer states")


def _no_live_keys(name: str, live: int) -> None:
    if live:
        raise FormatError("column family", 0, "a state of the meta data", f"{name!r} with {live} live keys")


def _batched(items: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
    keys: list[bytes] = []
    values: list[bytes] = []
    size = 0
    for key, value in items:
        keys.append(key)
        values.append(value)
        size += len(key) + len(value)
        if len(keys) >= BATCH_ENTRIES or size >= BATCH_BYTES:
            yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())
            keys, values, size = [], [], 0
    if keys:
        yield pa.array(keys, pa.binary()), pa.array(values, pa.binary())


def _attach(stream: StateStream, batches: Iterator[tuple[pa.BinaryArray, pa.BinaryArray]], meta: KeyedBackendMeta,
            key_groups: KeyGroupRange, max_parallelism: int) -> None:
    """Give ``stream`` its entries (counted in ``live``) and the rows decoded from them."""

    def counted() -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        for keys, values in batches:
            stream.live += len(keys)
            yield keys, values

    decoder = KeyedStateDecoder(stream.meta, meta.key_serializer, max_parallelism)
    stream.entries = KeyedEntries(counted(), decoder, meta.key_serializer, max_parallelism, key_groups)
    stream.rows = _state_rows(stream, stream.entries)


def _state_rows(stream: StateStream, entries: KeyedEntries) -> Iterator[dict[str, Any]]:
    for keys, values in entries.batches:
        yield from decode_batch_rows(stream, keys, values, entries)


def decode_batch_rows(stream: StateStream, keys: pa.BinaryArray, values: pa.BinaryArray, entries: KeyedEntries | None = None) -> list[dict[str, Any]]:
    """The rows of one batch of ``stream``'s entries (``entries``: ``stream.entries`` unless given),
    decoded row by row (the exact path); entries outside the handle's key groups are dropped and counted."""
    entries = entries or stream.entries
    first, last = entries.key_groups.start, entries.key_groups.end
    key_group = entries.decoder.key_group
    decode = entries.decoder.rows
    rows: list[dict[str, Any]] = []
    for key, value in zip(keys.to_pylist(), values.to_pylist()):
        group = key_group(key)
        if not first <= group <= last:
            stream.outside_key_groups += 1
            continue
        rows.extend(decode(key, value, group))
    return rows


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


def read_handle_meta(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle) -> KeyedBackendMeta:
    """The keyed backend meta data (states and serializers) of one incremental handle."""
    meta_file = snapshot.resolver.resolve(handle.meta)
    if meta_file is None:
        raise FormatError("meta data handle", handle.offset, "a handle", "null")
    try:
        return mark_kryo_generation(snapshot, decode_keyed_backend_meta(read_resolved(storage, meta_file), ends_at_data_end=True))
    except RepairError as error:
        raise error.in_source(meta_file.uri or f"inline meta data of {snapshot.ref.metadata_uri}") from None


def iter_incremental_handle(
    snapshot: LoadedSnapshot,
    storage: st.Storage,
    handle: IncrementalKeyedHandle,
    max_parallelism: int,
    *,
    states: Collection[str] | None = None,
    engine: str = "python",
    materialised: MaterialisedInstance | None = None,
) -> Iterator[StateStream]:
    """The state streams of one subtask's incremental RocksDB handle of ``snapshot``, the LSM tree
    resolved by ``engine`` (:data:`ENGINES`). Files stay open until the iteration ends or the generator
    is closed; files on remote stores are read from a local scratch copy, deleted then. ``materialised``:
    the handle's files already placed for RocksDB (:func:`~repair.readers.rocksdb_instance.materialise_instance`)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    meta = read_handle_meta(snapshot, storage, handle)
    with ExitStack() as opened:
        reason = None
        if engine != "python":
            try:
                instance = opened.enter_context(open_rocksdb_instance(snapshot, storage, handle, materialised=materialised))
            except InstanceUnavailable as error:
                if engine == "rocksdb":
                    raise
                reason = error.reason
            else:
                yield from iter_rocksdb_instance(instance, meta, handle.key_groups, max_parallelism, states=states)
                return
        files = []
        for entry in handle.sst_files:
            resolved = snapshot.resolver.resolve(entry.handle)
            if resolved is None:
                raise FormatError("shared file handle", handle.offset, "a handle", f"null for {entry.local_path}")
            files.append((entry, resolved))
        remote = [resolved for _, resolved in files if is_remote(resolved)]
        # remote SSTs are copied to scratch space first, several at once (one request per block otherwise)
        copies = iter(copies_in_scratch(storage, remote, opened.enter_context(scratch_directory("sst"))) if remote else [])
        sources = []
        for entry, resolved in files:
            source = next(copies) if is_remote(resolved) else open_resolved(storage, resolved)
            if hasattr(source, "close"):
                opened.callback(source.close)
            sources.append((resolved.uri or entry.local_path, source))
        yield from iter_keyed_instance(sources, meta, handle.key_groups, max_parallelism, states=states, engine_reason=reason)


def read_incremental_handle(
    snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, max_parallelism: int
) -> KeyedStateResult:
    """The keyed state of one subtask's incremental RocksDB handle of ``snapshot``, in lists."""
    return _collect(iter_incremental_handle(snapshot, storage, handle, max_parallelism))
