"""Load one snapshot (checkpoint or savepoint) from storage: its decoded ``_metadata`` and resolver.

Every operation starts here. Errors name the ``_metadata`` URI; the bytes its handles point to are read
through :mod:`repair.io.resolved`.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import xxhash

from repair.errors import FormatError, RepairError
from repair.formats.flink.handles import FileHandle, SegmentFileHandle
from repair.formats.flink.metadata import CheckpointMetadata, decode_metadata
from repair.formats.records import record
from repair.io import storage as st
from repair.io.layout import PathResolver, SnapshotRef

#: ``_metadata`` files larger than this are refused (Flink's own are kilobytes to a few hundred MB).
MAX_METADATA_BYTES = 2 << 30


@record
class LoadedSnapshot:
    ref: SnapshotRef
    metadata: CheckpointMetadata
    resolver: PathResolver
    metadata_size: int
    #: The xxh3-64 digest (hex) of the ``_metadata`` bytes: names this version of the file, so a task
    #: can tell that it reads the snapshot its operation planned from (:func:`load_snapshot_shared`).
    metadata_digest: str = ""

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
    return _decoded(ref, root, storage, data, xxhash.xxh3_64_hexdigest(data))


def _decoded(ref: SnapshotRef, root: str | None, storage: st.Storage, data: bytes, digest: str) -> LoadedSnapshot:
    try:
        metadata = decode_metadata(data)
    except RepairError as error:
        raise error.in_source(ref.metadata_uri) from None
    return LoadedSnapshot(ref, metadata, PathResolver(ref, root, storage, recorded_paths(metadata)), len(data), digest)


# -- one decoded snapshot per process for an operation's tasks --------------------------------------

#: The snapshots :func:`load_snapshot_shared` decoded in this process, newest last (at most
#: :data:`_SHARED_KEPT`: an operation reads one snapshot), by ``(metadata URI, storage options, root,
#: digest)``. Emptied when the outermost :func:`metadata_read_once` block of this process ends.
_shared: dict[tuple, LoadedSnapshot] = {}
_shared_lock = threading.Lock()
_SHARED_KEPT = 1


def load_snapshot_shared(ref: SnapshotRef, root: str | None, storage: st.Storage, digest: str) -> LoadedSnapshot:
    """``ref``'s snapshot for a task of an operation that planned from the version of ``_metadata``
    whose :attr:`~LoadedSnapshot.metadata_digest` is ``digest``: read and decoded once per process and
    shared by every task that runs there (callers only read it). Without it each of a job's N subtask
    tasks decodes the whole ``_metadata`` (all N subtasks' handles): quadratic work, and one read of
    the file per task. A ``_metadata`` that is no longer that version is refused (a typed error naming
    it), so a task never reads another checkpoint than the one planned."""
    key = (ref.metadata_uri, storage.options, root, digest)
    with _shared_lock:
        found = _shared.get(key)
    if found is not None:
        return found
    data = _read_metadata(ref.metadata_uri, storage)
    found_digest = xxhash.xxh3_64_hexdigest(data)
    if found_digest != digest:
        raise FormatError("_metadata", 0, f"the version the operation planned from (xxh3-64 {digest})",
                          f"another version (xxh3-64 {found_digest}): the file changed meanwhile").in_source(ref.metadata_uri)
    snapshot = _decoded(ref, root, storage, data, digest)
    with _shared_lock:
        _shared[key] = snapshot
        while len(_shared) > _SHARED_KEPT:
            del _shared[next(iter(_shared))]
    return snapshot


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
                with _shared_lock:
                    _shared.clear()


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
