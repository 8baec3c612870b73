"""Where checkpoints are: layout discovery and resolution of the paths a ``_metadata`` names.

A path given by the user may be a job checkpoint root (``chk-*/``, ``shared/``, ``taskowned/``), one
``chk-N`` directory, a ``_metadata`` file, or a savepoint directory. :func:`discover` says which and
lists the snapshots (checkpoints or savepoints) found there.

``_metadata`` records absolute paths of where Flink wrote each file (``file:/var/...``,
``s3://bucket/...``). A checkpoint copied to another host, bucket or directory still names the old
place. :class:`PathResolver` maps every handle to where its bytes are *now*: when the snapshot is
read somewhere other than where it was written, the ``<job-id>/shared/<file>``, ``<job-id>/chk-N/<file>``
or ``<job-id>/taskowned/<file>`` tail of each recorded path is resolved against the root being read,
and the result says that it was relocated. The rule depends only on the recorded paths and where the
snapshot is read, never on which of several places happens to exist, so the answer is reproducible.

One exception: the changelog state backend's files (``<dstl.dfs.base-path>/<job-id>/dstl/<uuid>``). Their
base is configured apart from the checkpoint directory, often elsewhere, so a ``dstl/`` file is read
from the job root being read only when it is there (copied along with the checkpoint; file names are
random UUIDs, so a file of that name is that file), and otherwise where it was recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from repair.errors import StorageError
from repair.formats.flink.handles import (
    ByteStreamHandle,
    EmptySegmentFileHandle,
    FileHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from repair.io import storage as st

METADATA = "_metadata"
_CHK = re.compile(r"^chk-(\d+)$")
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
#: Directories directly below a job's checkpoint root that hold state files.
_ANCHORS = ("shared", "taskowned")
#: ``StateChangeFsUploader.PATH_SUB_DIR``: the changelog's files, below ``<dstl base>/<job-id>/``.
CHANGELOG_DIR = "dstl"


@dataclass(frozen=True)
class SnapshotRef:
    """One checkpoint or savepoint on storage: the directory holding its ``_metadata``."""

    directory: str
    metadata_uri: str
    #: N of a ``chk-N`` directory; None for savepoints and other directory names.
    number: int | None

    @property
    def name(self) -> str:
        return st.basename(self.directory)


@dataclass
class Layout:
    """What a user-given path is, and the snapshots in it (oldest first)."""

    kind: str  # "job-root" | "checkpoint" | "savepoint" | "metadata-file"
    path: str
    #: The job's checkpoint root (holding ``chk-*`` and ``shared/``), when the path is in one.
    root: str | None
    snapshots: list[SnapshotRef]
    #: ``chk-N`` directories without ``_metadata`` (in progress, failed, or half deleted).
    incomplete: list[str] = field(default_factory=list)


def discover(path: str, storage: st.Storage | None = None) -> Layout:
    """Classify ``path`` and list its snapshots; :class:`StorageError` if it holds none."""
    storage = storage or st.default_storage()
    info = storage.stat(path)
    if info is None:
        raise StorageError("no such file or directory", source=path)
    if not info.is_dir:
        if st.basename(path) != METADATA:
            raise StorageError(f"not a {METADATA} file, checkpoint or savepoint directory", source=path)
        directory = st.parent(path)
        return _single(directory, storage, "metadata-file", path, metadata_uri=path)
    if storage.stat(st.join(path, METADATA)) is not None:
        kind = "checkpoint" if _CHK.match(st.basename(path)) else "savepoint"
        return _single(path, storage, kind, path)

    snapshots, incomplete = [], []
    job_dirs = []
    for entry in storage.list_dir(path):
        name = st.basename(entry.path)
        match = _CHK.match(name)
        if entry.is_dir and match:
            metadata = st.join(entry.path, METADATA)
            if storage.stat(metadata) is not None:
                snapshots.append(SnapshotRef(entry.path, metadata, int(match[1])))
            else:
                incomplete.append(entry.path)
        elif entry.is_dir and _JOB_ID.match(name):
            job_dirs.append(name)
    if not snapshots:
        hint = ""
        if job_dirs:
            hint = f"; it holds job directories, pass one of them: {', '.join(sorted(job_dirs)[:5])}"
        elif incomplete:
            hint = f"; {len(incomplete)} chk-* directories have no {METADATA} (incomplete checkpoints)"
        raise StorageError(f"no {METADATA}, chk-* checkpoint or savepoint found{hint}", source=path)
    snapshots.sort(key=lambda ref: ref.number)
    return Layout("job-root", path, path, snapshots, sorted(incomplete))


def _single(directory: str, storage: st.Storage, kind: str, path: str, metadata_uri: str | None = None) -> Layout:
    name = st.basename(directory)
    match = _CHK.match(name)
    ref = SnapshotRef(directory, metadata_uri or st.join(directory, METADATA), int(match[1]) if match else None)
    root = st.parent(directory) if match else None
    return Layout(kind, path, root, [ref])


# -- resolving handles ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedFile:
    """Where the bytes of one stream handle are now.

    Inline handles have ``inline`` bytes and no ``uri``. External ones have the ``uri`` to read and,
    for file-merging segments, the byte range ``[start, start + size)`` inside it.
    """

    size: int
    uri: str | None = None
    inline: bytes | None = None
    start: int = 0
    #: The path as ``_metadata`` records it (absolute for file handles, relative for type 6).
    recorded: str | None = None
    #: True when ``uri`` differs from the recorded absolute path because the snapshot was moved.
    relocated: bool = False

    @property
    def is_inline(self) -> bool:
        return self.inline is not None


class PathResolver:
    """Resolves the stream handles of one snapshot to readable locations (see the module docstring)."""

    def __init__(self, snapshot: SnapshotRef, root: str | None, storage: st.Storage | None = None):
        self.snapshot = snapshot
        self.storage = storage
        #: The directory the snapshot is read from, and the job root around it (None for savepoints).
        self.root = root
        #: Set after resolving: (recorded root, actual root) when the snapshot was moved.
        self.moves: dict[str, str] = {}
        #: Job ids named by the recorded paths resolved so far (``<base>/<job-id>/shared/...``).
        self.recorded_job_ids: set[str] = set()

    def resolve(self, handle) -> ResolvedFile | None:
        """The location of ``handle``'s bytes; None for a null handle."""
        if handle is None:
            return None
        if isinstance(handle, ByteStreamHandle):
            return ResolvedFile(size=len(handle.data), inline=handle.data, recorded=handle.name)
        if isinstance(handle, EmptySegmentFileHandle):
            return ResolvedFile(size=0, inline=b"")
        if isinstance(handle, RelativeFileHandle):
            uri = st.resolve_within(self.snapshot.directory, handle.relative_path)
            return ResolvedFile(size=handle.size, uri=uri, recorded=handle.relative_path)
        if isinstance(handle, FileHandle):
            uri, relocated = self.locate(handle.path)
            return ResolvedFile(size=handle.size, uri=uri, recorded=handle.path, relocated=relocated)
        if isinstance(handle, SegmentFileHandle):
            uri, relocated = self.locate(handle.physical_path)
            return ResolvedFile(
                size=handle.size, uri=uri, start=handle.start, recorded=handle.physical_path, relocated=relocated
            )
        raise TypeError(f"not a stream handle: {type(handle).__name__}")

    def locate(self, recorded: str) -> tuple[str, bool]:
        """Where the file recorded as ``recorded`` (an absolute path or URI) is read now."""
        split = split_recorded_path(recorded)
        if split is None:
            return normalize_uri(recorded), False
        recorded_base, job_id, tail = split
        self.recorded_job_ids.add(job_id)
        recorded_root = st.join(recorded_base, job_id)
        if self.root is None or _same_place(recorded_root, self.root):
            return normalize_uri(recorded), False
        if st.basename(self.root) == job_id:
            # This job's own files, recorded under another base: the checkpoint was copied or moved.
            actual_root = self.root
        else:
            # Another job's files (a job restored from an older job's checkpoint, or a _metadata that
            # `repair relocate` pointed at files elsewhere): read them next to the root being read if
            # that job's directory was copied along, else where they were recorded.
            actual_root = st.join(st.parent(self.root), job_id)
            if self.storage is None or self.storage.stat(st.join(actual_root, *tail)) is None:
                return normalize_uri(recorded), False
        if _same_place(recorded_root, actual_root):
            return normalize_uri(recorded), False
        if tail[0] == CHANGELOG_DIR:
            candidate = st.join(actual_root, *tail)
            if self.storage is None or self.storage.stat(candidate) is None:
                return normalize_uri(recorded), False
            return candidate, True
        self.moves[normalize_uri(recorded_root)] = actual_root
        return st.join(actual_root, *tail), True


def split_recorded_path(recorded: str) -> tuple[str, str, list[str]] | None:
    """``(base, job_id, tail)`` of a path like ``<base>/<job-id>/shared/<file>``, else None.

    The anchor is the last ``shared``, ``taskowned``, ``dstl`` or ``chk-N`` segment preceded by a 32-hex job id.
    """
    location = st.parse_location(recorded)
    prefix, path = location.prefix, location.path
    segments = path.split("/")
    for i in range(len(segments) - 2, 0, -1):
        segment = segments[i]
        if (segment in _ANCHORS or segment == CHANGELOG_DIR or _CHK.match(segment)) and _JOB_ID.match(segments[i - 1]):
            base = prefix + "/".join(segments[: i - 1]) if i > 1 else prefix + "/"
            return base or "/", segments[i - 1], [s for s in segments[i:] if s]
    return None


def normalize_uri(uri: str) -> str:
    """``file:/x`` and ``file:///x`` become the local path ``/x``; other URIs stay as they are."""
    location = st.parse_location(uri)
    if location.kind == "local":
        return location.fs_path
    return uri


def _same_place(a: str, b: str) -> bool:
    return normalize_uri(a).rstrip("/") == normalize_uri(b).rstrip("/")


def is_rocksdb_dir(path: str, storage: st.Storage | None = None) -> bool:
    """Whether ``path`` is a directory that looks like a RocksDB DB (not a checkpoint or job root)."""
    storage = storage or st.default_storage()
    info = storage.stat(path)
    if info is None or not info.is_dir:
        return False
    names = {st.basename(e.path) for e in storage.list_dir(path)}
    if METADATA in names or any(n.startswith("chk-") for n in names):
        return False
    return "CURRENT" in names or any(n.startswith("MANIFEST-") or n.endswith(".sst") for n in names)
