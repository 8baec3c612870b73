"""Load one snapshot (checkpoint or savepoint) from storage: its decoded ``_metadata`` and resolver.

Every operation starts here. Errors name the ``_metadata`` URI; the bytes its handles point to are read
through :mod:`repair.io.resolved`.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from repair.errors import RepairError
from repair.formats.flink.handles import FileHandle, SegmentFileHandle
from repair.formats.flink.metadata import CheckpointMetadata, decode_metadata
from repair.io import storage as st
from repair.io.layout import PathResolver, SnapshotRef

#: ``_metadata`` files larger than this are refused (Flink's own are kilobytes to a few hundred MB).
MAX_METADATA_BYTES = 2 << 30


@dataclass
class LoadedSnapshot:
    ref: SnapshotRef
    metadata: CheckpointMetadata
    resolver: PathResolver
    metadata_size: int

    @property
    def kind(self) -> str:
        """``checkpoint``, ``savepoint``, or ``unknown`` (metadata versions without properties)."""
        if self.metadata.is_savepoint is None:
            return "savepoint" if self.ref.number is None else "checkpoint"
        return "savepoint" if self.metadata.is_savepoint else "checkpoint"

    @property
    def savepoint_format(self) -> str | None:
        props = self.metadata.properties
        return props.savepoint_format.lower() if props is not None and props.savepoint_format else None


def load_snapshot(ref: SnapshotRef, root: str | None, storage: st.Storage) -> LoadedSnapshot:
    """Read and decode ``ref``'s ``_metadata``; errors are typed and name the file."""
    data = _read_metadata(ref.metadata_uri, storage)
    try:
        metadata = decode_metadata(data)
    except RepairError as error:
        raise error.in_source(ref.metadata_uri) from None
    return LoadedSnapshot(ref, metadata, PathResolver(ref, root, storage, recorded_paths(metadata)), len(data))


def recorded_paths(metadata: CheckpointMetadata) -> list[str]:
    """Every absolute path ``metadata`` records (file handles and file-merging segments), in file order."""
    paths = []
    for _, handle in metadata.iter_stream_handles():
        if isinstance(handle, FileHandle):
            paths.append(handle.path)
        elif isinstance(handle, SegmentFileHandle):
            paths.append(handle.physical_path)
    return paths


# -- reading each _metadata once per operation -----------------------------------------------------

#: ``(URI, storage options) -> bytes`` of the ``_metadata`` files read while :func:`metadata_read_once`
#: is active in this process (None: not active); ``_read_once_depth`` counts the active blocks.
_read_once: dict[tuple, bytes] | None = None
_read_once_depth = 0
_read_once_lock = threading.Lock()

F = TypeVar("F", bound=Callable)


@contextmanager
def metadata_read_once() -> Iterator[None]:
    """Within the block, each ``_metadata`` this process loads is read from storage once.

    An operation's tasks re-load the snapshot wherever they run; those that run in the driver's own
    process (``--workers 1``) then reuse the bytes the driver read, which saves a request or two per task
    on an object store. A snapshot's ``_metadata`` does not change while an operation reads it (Flink
    writes it once); outside the block every load reads it again, so a later operation sees a file
    replaced meanwhile."""
    global _read_once, _read_once_depth
    with _read_once_lock:
        if _read_once_depth == 0:
            _read_once = {}
        _read_once_depth += 1
    try:
        yield
    finally:
        with _read_once_lock:
            _read_once_depth -= 1
            if _read_once_depth == 0:
                _read_once = None


def reading_metadata_once(function: F) -> F:
    """``function`` run inside :func:`metadata_read_once`."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with metadata_read_once():
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _read_metadata(uri: str, storage: st.Storage) -> bytes:
    cache = _read_once
    if cache is None:
        return storage.read_bytes(uri, max_size=MAX_METADATA_BYTES)
    key = (uri, storage.options)
    data = cache.get(key)
    if data is None:
        data = cache[key] = storage.read_bytes(uri, max_size=MAX_METADATA_BYTES)
    return data
