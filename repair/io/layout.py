"""Where checkpoints are: layout discovery and resolution of the paths a ``_metadata`` names.

A path given by the user may be a job checkpoint root (``chk-*/``, ``shared/``, ``taskowned/``), one
``chk-N`` directory, a ``_metadata`` file, a savepoint directory, a directory of savepoints, a bare
RocksDB directory or a single file. :func:`classify` says which, once for every command, and lists
the snapshots (checkpoints or savepoints) found there; commands ask it and never look themselves.

``_metadata`` records absolute paths of where Flink wrote each file (``file:/var/...``,
``s3://bucket/...``). A checkpoint copied to another host, bucket or directory still names the old
place. :class:`PathResolver` maps every handle to where its bytes are *now*. A recorded path's *root*
is the directory above its ``shared/``, ``taskowned/``, ``dstl/`` or ``chk-N/`` segment; when the
snapshot is read somewhere other than where it was written, each recorded root is placed once, for
all its files (see :meth:`PathResolver._place`): a checkpoint's job root is the parent of its
``chk-N``, whatever it is called, so a job directory copied under any name (``cp -r <job-id>
/backup/p3``), local or on S3, is read where it is, and the result says that it was relocated.
Each root is placed by a few of its files, not file by file, so one missing file is reported
missing where its checkpoint is, and the answer does not change as single files come and go.

One exception: the changelog state backend's files (``<dstl.dfs.base-path>/<job-id>/dstl/<uuid>``). Their
base is configured apart from the checkpoint directory, often elsewhere, so a ``dstl/`` file is read
from the job root being read only when it is there (copied along with the checkpoint; file names are
random UUIDs, so a file of that name is that file), and otherwise where it was recorded.

A moved snapshot moves every recorded root of its job together. A root that is placed where another,
larger recorded root of the same snapshot is placed, whose files are not where it records them but are
there, is no move: it is a damaged path in ``_metadata`` (one byte of one handle's path flipped, say
``/flink/`` read as ``/glink/`` or one character of the job id). So is a path whose ``shared`` segment is
damaged (``.../<root>/sharee/<file>``, no anchor left) when the file is in ``<root>/shared/``, and a
path into another ``chk-M/`` whose files are not there but in the checkpoint's own ``chk-N/``. Real Flink opens the recorded path and
fails; :attr:`PathResolver.misrecorded` names such paths and :attr:`ResolvedFile.misrecorded` marks
their handles (read where the file is, so the rest of the snapshot is still checked, and ``relocate``
rewrites them). A job restored from another job's checkpoint records that job's root beside its own;
its files are where they are recorded (or in that job's directory), so it is never taken for damage.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import field

from repair.errors import StorageError
from repair.formats.flink.handles import (
    ByteStreamHandle,
    EmptySegmentFileHandle,
    FileHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from repair.formats.records import record
from repair.io import storage as st

METADATA = "_metadata"
_CHK = re.compile(r"^chk-(\d+)$")
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
#: Directories directly below a job's checkpoint root that hold state files.
_ANCHORS = ("shared", "taskowned")
#: ``StateChangeFsUploader.PATH_SUB_DIR``: the changelog's files, below ``<dstl base>/<job-id>/``.
CHANGELOG_DIR = "dstl"

#: What a path is (:attr:`Layout.kind`), as :func:`classify` decides it.
JOB_ROOT = "job-root"  # a job's checkpoint root: chk-N directories with a _metadata (and shared/, taskowned/)
CHECKPOINT = "checkpoint"  # a chk-N directory holding _metadata
SAVEPOINT = "savepoint"  # any other directory holding _metadata
METADATA_FILE = "metadata-file"  # a _metadata file itself
SAVEPOINTS_DIR = "savepoints-dir"  # a directory of savepoints (sub-directories holding _metadata, no chk-N)
ROCKSDB_DIR = "rocksdb-dir"  # a bare RocksDB directory (CURRENT, MANIFEST-* or *.sst; no _metadata, no chk-*)
FILE = "file"  # any other single file (an SST, a MANIFEST)
DIRECTORY = "directory"  # a directory holding none of these (empty, only incomplete chk-N, job directories)
#: The kinds that are snapshots or hold them as ``chk-N``: what :func:`discover` accepts.
SNAPSHOT_KINDS = frozenset({JOB_ROOT, CHECKPOINT, SAVEPOINT, METADATA_FILE})


@record(frozen=True)
class SnapshotRef:
    """One checkpoint or savepoint on storage: the directory holding its ``_metadata``."""

    directory: str
    metadata_uri: str
    #: N of a ``chk-N`` directory; None for savepoints and other directory names.
    number: int | None
    #: ``_metadata``'s file time as :func:`classify` found it (None: not asked, or the store has none), so
    #: that nothing asks the store for it again.
    written_at: float | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return st.basename(self.directory)


@record
class Layout:
    """What a user-given path is, and the snapshots in it (oldest first; savepoints by name)."""

    kind: str  # one of JOB_ROOT, CHECKPOINT, SAVEPOINT, METADATA_FILE, SAVEPOINTS_DIR, ROCKSDB_DIR, FILE, DIRECTORY
    path: str
    #: The job's checkpoint root (holding ``chk-*`` and ``shared/``), when the path is in one.
    root: str | None
    snapshots: list[SnapshotRef]
    #: ``chk-N`` directories without ``_metadata`` (in progress, failed, or half deleted).
    incomplete: list[str] = field(default_factory=list)
    #: The size of a single file (FILE, METADATA_FILE).
    size: int | None = None
    #: For a DIRECTORY: what to pass instead (its job directories, its incomplete checkpoints), or "".
    hint: str = ""

    @property
    def inputs(self) -> list[str]:
        """What a command reading this path reads below: the job root around a snapshot, each snapshot's
        directory, the path itself (the places an output must stay out of, :func:`repair.io.outputs.new_output`)."""
        return list(dict.fromkeys([*([self.root] if self.root else []), *(ref.directory for ref in self.snapshots), self.path]))


def classify(path: str, storage: st.Storage | None = None, *, accept: Collection[str] | None = None) -> Layout:
    """What ``path`` is, decided once for every command: one of the kinds above, with its snapshots.

    Reads the path's status, its ``_metadata``'s, and (for a directory without one) its listing once;
    a directory that is neither a job root nor a RocksDB directory also costs one status per
    sub-directory (savepoints). :class:`StorageError` when the path does not exist, or when its kind
    is not one of ``accept`` (when given), saying what it is and what to pass instead.
    """
    storage = storage or st.default_storage()
    layout = _classify(path, storage)
    if accept is not None and layout.kind not in accept:
        raise StorageError(_not_accepted(layout), source=path)
    return layout


def discover(path: str, storage: st.Storage | None = None) -> Layout:
    """:func:`classify` for the commands that read snapshots: a job root, a checkpoint, a savepoint or a
    ``_metadata`` file; :class:`StorageError` for anything else."""
    return classify(path, storage, accept=SNAPSHOT_KINDS)


def _classify(path: str, storage: st.Storage) -> Layout:
    info, metadata_info = _path_and_metadata_status(path, storage)
    if info is None:
        raise StorageError("no such file or directory", source=path)
    if not info.is_dir:
        if st.basename(path) != METADATA:
            return Layout(FILE, path, None, [], size=info.size)
        layout = _single(st.parent(path), METADATA_FILE, path, info, metadata_uri=path)
        layout.size = info.size
        return layout
    if metadata_info is not None:
        return _single(path, CHECKPOINT if _CHK.match(st.basename(path)) else SAVEPOINT, path, metadata_info)

    entries = storage.list_dir(path)
    names = {st.basename(entry.path) for entry in entries}
    snapshots, incomplete, job_dirs, others = [], [], [], []
    for entry in entries:
        name = st.basename(entry.path)
        match = _CHK.match(name)
        if entry.is_dir and match:
            metadata = st.join(entry.path, METADATA)
            metadata_info = storage.stat(metadata)
            if metadata_info is not None:
                snapshots.append(SnapshotRef(entry.path, metadata, int(match[1]), metadata_info.mtime))
            else:
                incomplete.append(entry.path)
        elif entry.is_dir and _JOB_ID.match(name):
            job_dirs.append(name)
        elif entry.is_dir:
            others.append(entry.path)
    if snapshots:
        snapshots.sort(key=lambda ref: ref.number)
        return Layout(JOB_ROOT, path, path, snapshots, sorted(incomplete))
    if not any(n.startswith("chk-") for n in names) and _holds_rocksdb_files(names):
        return Layout(ROCKSDB_DIR, path, None, [])
    if not incomplete:
        infos = {d: storage.stat(st.join(d, METADATA)) for d in sorted(others)}
        savepoints = [SnapshotRef(d, st.join(d, METADATA), None, info.mtime) for d, info in infos.items() if info is not None]
        if savepoints:
            return Layout(SAVEPOINTS_DIR, path, None, savepoints)
    hint = ""
    if job_dirs:
        hint = f"; it holds job directories, pass one of them: {', '.join(sorted(job_dirs)[:5])}"
    elif incomplete:
        hint = f"; {len(incomplete)} chk-* directories have no {METADATA} (incomplete checkpoints)"
    return Layout(DIRECTORY, path, None, [], sorted(incomplete), hint=hint)


def _path_and_metadata_status(path: str, storage: st.Storage) -> tuple[st.FileInfo | None, st.FileInfo | None]:
    """The status of ``path`` and of ``path/_metadata`` (None when ``path`` is no directory). On a remote
    store both are asked at once: each costs a request or two of tens of milliseconds, one after the
    other before anything else can start (on S3 a directory is a HEAD that finds nothing, then a listing)."""
    metadata = st.join(path, METADATA)
    if st.parse_location(path).kind == "local":
        info = storage.stat(path)
        return info, storage.stat(metadata) if info is not None and info.is_dir else None
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="repair-stat") as pool:
        metadata_status = pool.submit(storage.stat, metadata)
        info = storage.stat(path)
        if info is None or not info.is_dir:
            return info, None  # (what the other status found, or a failure of it, does not count)
        return info, metadata_status.result()


def _not_accepted(layout: Layout) -> str:
    """Why a path of this kind is not what the command reads."""
    if layout.kind == FILE:
        return f"not a {METADATA} file, checkpoint or savepoint directory"
    if layout.kind == SAVEPOINTS_DIR:
        names = ", ".join(ref.name for ref in layout.snapshots[:5])
        return f"a directory of savepoints, not one snapshot; pass one of them: {names}"
    if layout.kind == DIRECTORY:
        return f"no {METADATA}, chk-* checkpoint or savepoint found{layout.hint}"
    if layout.kind == ROCKSDB_DIR:
        return f"a RocksDB directory, not a checkpoint or savepoint (no {METADATA})"
    what = {JOB_ROOT: "a job root", CHECKPOINT: "a checkpoint", SAVEPOINT: "a savepoint", METADATA_FILE: f"a {METADATA} file"}
    return f"{what[layout.kind]}, which this command does not read"


def _holds_rocksdb_files(names: set[str]) -> bool:
    return "CURRENT" in names or any(n.startswith("MANIFEST-") or n.endswith(".sst") for n in names)


def _single(directory: str, kind: str, path: str, metadata_info: st.FileInfo, metadata_uri: str | None = None) -> Layout:
    match = _CHK.match(st.basename(directory))
    ref = SnapshotRef(directory, metadata_uri or st.join(directory, METADATA), int(match[1]) if match else None,
                      metadata_info.mtime)
    root = st.parent(directory) if match else None
    return Layout(kind, path, root, [ref])


# -- resolving handles ---------------------------------------------------------------------------


@record(frozen=True)
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
    #: True when the recorded path is damaged: it disagrees with where the snapshot's other files were
    #: written, and ``uri`` is where the file was found (see the module docstring).
    misrecorded: bool = False

    @property
    def is_inline(self) -> bool:
        return self.inline is not None


class PathResolver:
    """Resolves the stream handles of one snapshot to readable locations (see the module docstring)."""

    def __init__(self, snapshot: SnapshotRef, root: str | None, storage: st.Storage | None = None,
                 recorded_paths: list[str] | None = None):
        self.snapshot = snapshot
        self.storage = storage
        #: The directory the snapshot is read from, and the job root around it (None for savepoints).
        self.root = root
        #: Set after resolving: (recorded root, actual root) when the snapshot was moved.
        self.moves: dict[str, str] = {}
        #: Job ids named by the recorded paths resolved so far (``<base>/<job-id>/shared/...``).
        self.recorded_job_ids: set[str] = set()
        #: Every absolute path the ``_metadata`` records, by the root it was recorded under (see :func:`recorded_root`).
        self._by_root: dict[str, list[tuple[str, list[str]]]] = {}
        for path in recorded_paths or ():
            split = recorded_root(path)
            if split is not None and split[1][0] != CHANGELOG_DIR:
                self._by_root.setdefault(normalize_uri(split[0]).rstrip("/"), []).append((path, split[1]))
        #: Recorded root -> the root its files are read from now (None: where they were recorded).
        self._placed: dict[str, str | None] = {}
        #: Damaged recorded paths -> where their files were found (see :meth:`_damaged_roots`).
        self.misrecorded: dict[str, str] = {}
        self._damaged: dict[str, str] | None = None
        #: (recorded root, ``chk-M``) of another checkpoint's directory -> this one's root when M is damaged, else None.
        self._other_checkpoint_dirs: dict[tuple[str, str], str | None] = {}

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
            return ResolvedFile(size=handle.size, uri=uri, recorded=handle.path, relocated=relocated,
                                misrecorded=handle.path in self.misrecorded)
        if isinstance(handle, SegmentFileHandle):
            uri, relocated = self.locate(handle.physical_path)
            return ResolvedFile(
                size=handle.size, uri=uri, start=handle.start, recorded=handle.physical_path, relocated=relocated,
                misrecorded=handle.physical_path in self.misrecorded,
            )
        raise TypeError(f"not a stream handle: {type(handle).__name__}")

    def locate(self, recorded: str) -> tuple[str, bool]:
        """Where the file recorded as ``recorded`` (an absolute path or URI) is read now."""
        split = recorded_root(recorded)
        if split is None:
            found = self._found_beside(recorded)
            if found is not None:
                self.misrecorded[recorded] = found
                return found, False
            return normalize_uri(recorded), False
        root_recorded, tail = split
        genuine = self._damaged_roots().get(normalize_uri(root_recorded).rstrip("/"))
        if genuine is not None:
            found = st.join(genuine, *tail)
            self.misrecorded[recorded] = found
            return found, False
        found = self._in_own_checkpoint_dir(root_recorded, tail)
        if found is not None:
            self.misrecorded[recorded] = found
            return found, False
        job_id = st.basename(root_recorded)
        if _JOB_ID.match(job_id):
            self.recorded_job_ids.add(job_id)
        if self.root is None or _same_place(root_recorded, self.root):
            return normalize_uri(recorded), False
        if tail[0] == CHANGELOG_DIR:
            return self._locate_changelog(recorded, root_recorded, tail)
        actual_root = self._place(root_recorded, tail)
        if actual_root is None or _same_place(root_recorded, actual_root):
            return normalize_uri(recorded), False
        self.moves[normalize_uri(root_recorded)] = actual_root
        return st.join(actual_root, *tail), True

    def _place(self, root_recorded: str, tail: list[str]) -> str | None:
        """Where the files recorded under ``root_recorded`` are read now; decided once per recorded root.

        1. A root named by this job's id (``<base>/<job-id>``) read from a directory of that name: there.
        2. Its files are in the root being read: there. A copied job directory under any name is found
           so: the job root is the parent of ``chk-N``, whatever it is called.
        3. Another job's root (a job restored from an older job's checkpoint): next to the root being
           read, when that job's directory was copied along.
        4. Its files are neither here nor where they were recorded, and it is this checkpoint's own
           root (it holds this ``chk-N``'s files, or it is the only root recorded): the root being read,
           so missing files are reported where they belong.
        Otherwise where they were recorded.
        """
        key = normalize_uri(root_recorded).rstrip("/")
        if key in self._placed:
            return self._placed[key]
        samples = [t for _, t in self._by_root.get(key, [])[:_SAMPLES]] or [tail]
        name = st.basename(key)
        place = None
        if _JOB_ID.match(name) and st.basename(self.root) == name:
            place = self.root
        elif self._any_exists(self.root, samples):
            place = self.root
        elif _JOB_ID.match(name) and self._any_exists(st.join(st.parent(self.root), name), samples):
            place = st.join(st.parent(self.root), name)
        elif self._is_own_root(key) and not self._any_exists(key, samples):
            place = self.root
        self._placed[key] = place
        return place

    def _damaged_roots(self) -> dict[str, str]:
        """Recorded roots that are damaged paths -> where their files are; decided once, over every recorded root.

        Recorded roots placed at the same root now are one root written twice over; the one recording more
        files is the genuine one. Another is damaged when its files are not where it records them but are
        where the genuine one is placed (a moved job root moves all its files: they agree). Roots placed
        apart (another job's, or files still where recorded) are never compared.
        """
        if self._damaged is not None:
            return self._damaged
        self._damaged = {}
        if self.root is None or len(self._by_root) < 2:
            return self._damaged
        together: dict[str, list[str]] = {}
        for key, files in self._by_root.items():
            place = key if _same_place(key, self.root) else (self._place(key, files[0][1]) or key)
            together.setdefault(normalize_uri(place).rstrip("/"), []).append(key)
        for place, keys in together.items():
            if len(keys) < 2:
                continue
            genuine = max(keys, key=lambda k: (len({p for p, _ in self._by_root[k]}), _same_place(k, place), k))
            for key in keys:
                samples = [t for _, t in self._by_root[key][:_SAMPLES]]
                if key != genuine and not self._any_exists(key, samples) and self._any_exists(place, samples):
                    self._damaged[key] = place
        return self._damaged

    def _in_own_checkpoint_dir(self, root_recorded: str, tail: list[str]) -> str | None:
        """Where a file recorded in another ``chk-M/`` of its root is, when that number is damaged: none of the
        files recorded there are there, but they are in this checkpoint's own ``chk-N/``. (A checkpoint may
        rightly reference an older ``chk-M/``: the changelog backend's materialized state; those files are
        there.) Decided once per recorded directory, by a few of its files."""
        number = self.snapshot.number
        match = _CHK.match(tail[0])
        if number is None or self.root is None or self.storage is None or not match or int(match[1]) == number:
            return None
        key = (normalize_uri(root_recorded).rstrip("/"), tail[0])
        if key not in self._other_checkpoint_dirs:
            place = self.root if _same_place(root_recorded, self.root) else (self._place(root_recorded, tail) or root_recorded)
            samples = [t for _, t in self._by_root.get(key[0], []) if t[0] == tail[0]][:_SAMPLES] or [tail]
            own = [[f"chk-{number}", *t[1:]] for t in samples]
            damaged = not self._any_exists(place, samples) and self._any_exists(place, own)
            self._other_checkpoint_dirs[key] = place if damaged else None
        place = self._other_checkpoint_dirs[key]
        return None if place is None else st.join(place, f"chk-{number}", *tail[1:])

    def _found_beside(self, recorded: str) -> str | None:
        """Where the file of a path with no ``shared``/``taskowned``/``chk-N`` segment is, when that segment is
        damaged: ``<root>/<segment>/<file>`` recorded with ``<root>`` a root of this snapshot, the file not
        there but in ``<root>``'s ``shared/``, ``taskowned/`` or this ``chk-N/`` (Flink writes no file of a
        checkpoint elsewhere, so such a path is rare, and looking costs a few requests only for it)."""
        if self.root is None or self.storage is None:
            return None
        location = normalize_uri(recorded)
        key = normalize_uri(st.parent(st.parent(location))).rstrip("/")
        if _same_place(key, self.root):
            place = self.root
        elif key in self._by_root:
            place = self._place(key, self._by_root[key][0][1]) or key
        else:
            return None
        if self.storage.stat(location) is not None:
            return None
        anchors = [*_ANCHORS, *([f"chk-{self.snapshot.number}"] if self.snapshot.number is not None else [])]
        for anchor in anchors:
            candidate = st.join(place, anchor, st.basename(location))
            if self.storage.stat(candidate) is not None:
                return candidate
        return None

    def _is_own_root(self, key: str) -> bool:
        number = self.snapshot.number
        if number is not None and any(t[0] == f"chk-{number}" for _, t in self._by_root.get(key, [])):
            return True
        return list(self._by_root) == [key]

    def _any_exists(self, root: str, tails: list[list[str]]) -> bool:
        if self.storage is None:
            return False
        return any(self.storage.stat(st.join(root, *tail)) is not None for tail in tails)

    def _locate_changelog(self, recorded: str, root_recorded: str, tail: list[str]) -> tuple[str, bool]:
        """A ``dstl/`` file: read from the job root being read only when it was copied there."""
        own = self._place_of_own_job(root_recorded)
        candidate = st.join(own, *tail) if own else None
        if candidate is None or self.storage is None or self.storage.stat(candidate) is None:
            return normalize_uri(recorded), False
        return candidate, True

    def _place_of_own_job(self, root_recorded: str) -> str | None:
        """The root being read if ``root_recorded`` names this job (by its name or where its other files are), else its sibling."""
        name = st.basename(root_recorded)
        if st.basename(self.root) == name:
            return self.root
        for key, files in self._by_root.items():
            if st.basename(key) == name and self._place(key, files[0][1]) == self.root:
                return self.root
        if _JOB_ID.match(name):
            return st.join(st.parent(self.root), name)
        return None


#: How many recorded files of a root are looked for when deciding where that root is now.
_SAMPLES = 3


def recorded_root(recorded: str) -> tuple[str, list[str]] | None:
    """``(root, tail)`` of a path like ``<root>/shared/<file>``, ``<root>/chk-N/<file>``, else None.

    The anchor is the last ``shared``, ``taskowned``, ``dstl`` or ``chk-N`` segment with a directory before it, whatever
    that directory is called (a job id as Flink names it, or any name a copy was given).
    """
    location = st.parse_location(recorded)
    prefix, path = location.prefix, location.path
    segments = path.split("/")
    for i in range(len(segments) - 2, 0, -1):
        segment = segments[i]
        if (segment in _ANCHORS or segment == CHANGELOG_DIR or _CHK.match(segment)) and segments[i - 1]:
            root = prefix + "/".join(segments[:i])
            return root, [s for s in segments[i:] if s]
    return None


def normalize_uri(uri: str) -> str:
    """``file:/x`` and ``file:///x`` become the local path ``/x``; other URIs stay as they are."""
    location = st.parse_location(uri)
    if location.kind == "local":
        return location.fs_path
    return uri


def _same_place(a: str, b: str) -> bool:
    return normalize_uri(a).rstrip("/") == normalize_uri(b).rstrip("/")
