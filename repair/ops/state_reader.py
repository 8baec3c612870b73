"""Read the logical keyed state of one RocksDB instance (one keyed subtask of an incremental checkpoint).

:func:`read_keyed_instance` is the pure core (SST sources + backend meta data in, rows out), meant to
run once per keyed subtask (e.g. inside a Spark task). :func:`read_incremental_handle` feeds it from a
loaded snapshot: it resolves the handle's meta data and shared SSTs (inline, whole files or
file-merging segments).

Every SST entry is accounted for (:class:`KeyedStateResult.stats`): live rows, older versions,
tombstones, range deletions, and keys outside the handle's key-group range (left there by rescaling).
Corrupt bytes raise; they are never skipped.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Iterable

from repair import storage as st
from repair.errors import FormatError, RepairError
from repair.formats.flink_backend_meta import KeyedBackendMeta, decode_keyed_backend_meta
from repair.formats.flink_handles import IncrementalKeyedHandle, KeyGroupRange
from repair.formats.flink_keyed_rows import KeyedStateDecoder
from repair.formats.random_access import BytesSource, RandomAccess
from repair.formats.rocksdb_lsm import LsmStats, resolve_lsm
from repair.formats.sst import open_table
from repair.layout import ResolvedFile
from repair.snapshot import LoadedSnapshot, read_resolved


@dataclass
class KeyedStateResult:
    """Rows per state name, and how the entries of each column family were accounted for."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, LsmStats] = field(default_factory=dict)
    #: Live keys dropped because their key group is outside the handle's range, per state.
    outside_key_groups: dict[str, int] = field(default_factory=dict)


def read_keyed_instance(
    sources: Iterable[tuple[str, RandomAccess]],
    meta: KeyedBackendMeta,
    key_groups: KeyGroupRange,
    max_parallelism: int,
) -> KeyedStateResult:
    """Decode the keyed state held by ``sources`` (``(name, source)`` of every SST of one instance)."""
    if not meta.complete:
        raise FormatError("keyed backend meta data", 0, "complete meta data", "; ".join(meta.problems) or "fewer states")
    sources = list(sources)
    tables = []
    for name, source in sources:
        try:
            tables.append((name, open_table(source)))
        except RepairError as error:
            raise error.in_source(name) from None
    families = resolve_lsm(tables)
    result = KeyedStateResult()
    for name, family in families.items():
        state = meta.state(name)
        if state is None:
            if family.items:
                raise FormatError("column family", 0, "a state of the meta data", f"{name!r} with {len(family.items)} live keys")
            result.stats[name] = family.stats
            continue
        decoder = KeyedStateDecoder(state, meta.key_serializer, max_parallelism)
        rows: list[dict[str, Any]] = []
        outside = 0
        for key, value in family.items:
            if decoder.key_group(key) not in key_groups:
                outside += 1
                continue
            rows.extend(decoder.rows(key, value))
        result.rows[name] = rows
        result.stats[name] = family.stats
        result.outside_key_groups[name] = outside
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


def read_incremental_handle(
    snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, max_parallelism: int
) -> KeyedStateResult:
    """The keyed state of one subtask's incremental RocksDB handle of ``snapshot``."""
    meta_file = snapshot.resolver.resolve(handle.meta)
    if meta_file is None:
        raise FormatError("meta data handle", handle.offset, "a handle", "null")
    try:
        meta = decode_keyed_backend_meta(read_resolved(storage, meta_file))
    except RepairError as error:
        raise error.in_source(meta_file.uri or f"inline meta data of {snapshot.ref.metadata_uri}") from None
    with ExitStack() as opened:
        sources = []
        for entry in handle.shared:
            if not entry.local_path.endswith(".sst"):
                continue
            resolved = snapshot.resolver.resolve(entry.handle)
            if resolved is None:
                raise FormatError("shared file handle", handle.offset, "a handle", f"null for {entry.local_path}")
            source = open_resolved(storage, resolved)
            if hasattr(source, "close"):
                opened.callback(source.close)
            sources.append((resolved.uri or entry.local_path, source))
        return read_keyed_instance(sources, meta, handle.key_groups, max_parallelism)
