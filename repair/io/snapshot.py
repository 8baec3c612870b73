"""Load one snapshot (checkpoint or savepoint) from storage: its decoded ``_metadata`` and resolver.

Every operation starts here. Errors name the ``_metadata`` URI; reads of state files go through
:func:`read_resolved`, which bounds sizes before reading.
"""

from __future__ import annotations

from dataclasses import dataclass

from repair.errors import RepairError, StorageError
from repair.formats.flink.handles import FileHandle, SegmentFileHandle
from repair.formats.flink.metadata import CheckpointMetadata, decode_metadata
from repair.io import storage as st
from repair.io.layout import PathResolver, ResolvedFile, SnapshotRef

#: ``_metadata`` files larger than this are refused (Flink's own are kilobytes to a few hundred MB).
MAX_METADATA_BYTES = 2 << 30
#: Files read whole into memory (meta data streams, MANIFEST, CURRENT, OPTIONS) are bounded by this.
MAX_SMALL_FILE_BYTES = 256 << 20


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
    data = storage.read_bytes(ref.metadata_uri, max_size=MAX_METADATA_BYTES)
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


def read_resolved(
    storage: st.Storage, resolved: ResolvedFile, *, length: int | None = None, max_size: int = MAX_SMALL_FILE_BYTES
) -> bytes:
    """The bytes of a resolved handle (inline, a whole file, or a file-merging segment).

    ``length`` reads only that many leading bytes (e.g. the meta data at the head of a full snapshot).
    """
    wanted = resolved.size if length is None else min(length, resolved.size)
    if resolved.inline is not None:
        return resolved.inline[:wanted]
    if wanted > max_size:
        raise StorageError(f"state file of {wanted} bytes is larger than the limit of {max_size}", source=resolved.uri)
    with storage.open_input(resolved.uri) as file:
        data = file.read(resolved.start, wanted)
    if len(data) != wanted:
        raise StorageError(
            f"expected {resolved.size} bytes at offset {resolved.start} as _metadata records, found {len(data)}",
            source=resolved.uri,
        )
    return data
