"""Load one snapshot (checkpoint or savepoint) from storage: its decoded ``_metadata`` and resolver.

Every operation starts here. Errors name the ``_metadata`` URI; the bytes its handles point to are read
through :mod:`repair.io.resolved`.
"""

from __future__ import annotations

from dataclasses import dataclass

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
