"""``repair orphans``: files in a job's ``shared/`` and ``taskowned/`` that no retained checkpoint references.

Flink deletes the files of a subsumed checkpoint once no retained checkpoint needs them, but a crash,
a failed checkpoint, a cancelled upload or a restart in NO_CLAIM mode leaves files behind that nothing
will ever delete. This operation lists every file below ``<root>/shared/`` and ``<root>/taskowned/``
(file-merging physical files live in ``shared/job_..._op_.../`` and ``taskowned/<tm>/``) and every file
referenced by a retained checkpoint (each ``chk-N`` with a ``_metadata``, handles resolved with the
snapshot's :class:`~repair.io.layout.PathResolver`, a file-merging segment referencing its physical
file). The files nobody references are the orphans.

Flink uploads a checkpoint's files before it writes its ``_metadata``: an orphan at least as new as
the newest retained ``_metadata`` may belong to a checkpoint in progress, and is named as such. Older
orphans are from subsumed or failed checkpoints.

Read-only: nothing is deleted here, or anywhere in this toolkit (docs/commands/orphans.md says how to
delete safely). Returns an :class:`OrphansResult`; its ``to_json()`` is documented in
docs/json-contracts.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from repair.errors import UsageError
from repair.findings import Problem, Severity
from repair.io import storage as st

# Maps ``file:/x``, ``file:///x`` and relative local paths to one absolute form, URIs to themselves.
from repair.io.layout import Layout, discover, normalize_uri
from repair.io.snapshot import load_snapshot
from repair.ops.advice import repair_command
from repair.results import CommandResult

#: Directories below a job root that hold state files shared between checkpoints or owned by TaskManagers.
STATE_DIRS = ("shared", "taskowned")
#: ``could_be_needed_by`` of a new orphan when no ``chk-N`` directory of a checkpoint in progress exists yet.
IN_PROGRESS = "a checkpoint in progress"

_KIND_NAMES = {
    "checkpoint": "a chk-N checkpoint directory",
    "savepoint": "a savepoint directory",
    "metadata-file": "a _metadata file",
}


@dataclass
class Orphan:
    """One file in ``shared/`` or ``taskowned/`` that no retained checkpoint references."""

    path: str  # absolute path or URI
    relative_path: str  # relative to the job root, e.g. ``shared/8c1e...``
    size: int
    mtime: float | None  # seconds since the epoch, when the store reports one
    #: ``chk-N`` (or :data:`IN_PROGRESS`) when the file is not older than the newest retained ``_metadata``.
    could_be_needed_by: str | None
    #: Older than the oldest retained ``_metadata``: from a checkpoint subsumed before any retained one.
    older_than_retained: bool

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "relative_path": self.relative_path,
            "size": self.size,
            "mtime": self.mtime,
            "could_be_needed_by": self.could_be_needed_by,
            "older_than_retained": self.older_than_retained,
        }


@dataclass
class FileCount:
    files: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        self.files += 1
        self.bytes += size

    def to_json(self) -> dict:
        return {"files": self.files, "bytes": self.bytes}


@dataclass
class OrphansResult(CommandResult):
    root: str
    retained_checkpoints: list[int]
    #: ``chk-N`` directories without ``_metadata`` (in progress, failed or half deleted).
    incomplete_checkpoints: list[str]
    oldest_metadata_mtime: float | None
    newest_metadata_mtime: float | None
    orphans: list[Orphan]
    #: Every file in ``shared/`` and ``taskowned/``.
    listed: FileCount
    #: Distinct files the retained checkpoints reference that exist (wherever they are).
    referenced: FileCount
    #: Distinct referenced files that do not exist (``repair verify`` explains them).
    missing: int
    #: The retained checkpoints' ``_metadata`` files.
    metadata: FileCount = field(default_factory=FileCount)
    #: The referenced files that do not exist (``missing`` of them), sorted.
    missing_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No retained checkpoint references a file that does not exist (orphans themselves are no problem)."""
        return not self.missing

    @property
    def findings(self) -> list[Problem]:
        """Referenced files that do not exist (errors: a checkpoint Flink cannot restore) and ``chk-N``
        directories without ``_metadata`` (info: their files are why some orphans exist)."""
        found = [
            Problem("missing_file", f"{st.basename(uri)} is referenced by a retained checkpoint but does not exist: "
                    f"`{repair_command('verify', self.root)}` says which checkpoints it breaks", details=(("path", uri),))
            for uri in self.missing_files
        ]
        found += [
            Problem("incomplete_checkpoint", f"{name} has no _metadata (in progress, failed or half deleted)",
                    severity=Severity.INFO, details=(("path", st.join(self.root, name)),))
            for name in self.incomplete_checkpoints
        ]
        return found

    @property
    def orphaned(self) -> FileCount:
        return FileCount(len(self.orphans), sum(o.size for o in self.orphans))

    @property
    def source(self) -> str:
        return st.absolute(self.root)

    def document(self) -> dict:
        return {
            "source": self.source,
            "root": self.source,  # the same as source (named so before every command had source)
            "retained_checkpoints": self.retained_checkpoints,
            "incomplete_checkpoints": self.incomplete_checkpoints,
            "oldest_metadata_mtime": self.oldest_metadata_mtime,
            "newest_metadata_mtime": self.newest_metadata_mtime,
            "totals": {
                "orphans": self.orphaned.to_json(),
                "referenced": {**self.referenced.to_json(), "missing": self.missing},
                "retained_checkpoints": {
                    "checkpoints": len(self.retained_checkpoints),
                    "files": self.referenced.files + self.metadata.files,
                    "bytes": self.referenced.bytes + self.metadata.bytes,
                },
                "shared_and_taskowned": self.listed.to_json(),
            },
            "orphans": [orphan.to_json() for orphan in self.orphans],
            "findings": [finding.to_json() for finding in self.findings],
        }


def orphans(root: str, *, storage: st.Storage | None = None, on_progress=None) -> OrphansResult:
    """Files below ``root``'s ``shared/`` and ``taskowned/`` that no retained checkpoint references.

    ``root`` must be a job checkpoint root (the directory holding ``chk-*/`` and ``shared/``); anything
    else is a :class:`UsageError`. Reads only. ``on_progress(done, total)`` is called as the retained
    checkpoints' ``_metadata`` files are read.
    """
    storage = storage or st.default_storage()
    layout = _job_root(root, storage)
    files = {normalize_uri(info.path): info for info in storage.list_dir(root, recursive=True) if not info.is_dir}
    referenced = _referenced_files(layout, storage, on_progress)
    present, missing = _count_referenced(referenced, files, root, storage)
    metadata = _metadata_files(layout, files, storage)
    mtimes = [info.mtime for info in metadata if info.mtime is not None]
    oldest, newest = (min(mtimes), max(mtimes)) if mtimes else (None, None)

    in_progress = _in_progress_label(layout)
    state_files = _state_files(root, files)
    found = [
        _orphan(uri, relative, info, oldest, newest, in_progress)
        for uri, (relative, info) in state_files.items()
        if uri not in referenced
    ]
    return OrphansResult(
        root=root,
        retained_checkpoints=[ref.number for ref in layout.snapshots],
        incomplete_checkpoints=[st.basename(d) for d in layout.incomplete],
        oldest_metadata_mtime=oldest,
        newest_metadata_mtime=newest,
        orphans=sorted(found, key=lambda orphan: orphan.relative_path),
        listed=FileCount(len(state_files), sum(info.size for _, info in state_files.values())),
        referenced=present,
        missing=len(missing),
        missing_files=sorted(missing),
        metadata=FileCount(len(metadata), sum(info.size for info in metadata)),
    )


def _job_root(root: str, storage: st.Storage) -> Layout:
    layout = discover(root, storage)
    if layout.kind != "job-root":
        what = _KIND_NAMES.get(layout.kind, layout.kind)
        hint = f"; its job root is {layout.root}" if layout.root else ""
        raise UsageError(
            f"is {what}, not a job checkpoint root (the directory holding chk-*/ and shared/){hint}", source=root
        )
    return layout


def _referenced_files(layout: Layout, storage: st.Storage, on_progress=None) -> set[str]:
    """Absolute URIs of every file a retained checkpoint references (segments: their physical file).

    A ``_metadata`` that cannot be decoded stops the operation: without its references no file could
    safely be called an orphan.
    """
    uris: set[str] = set()
    for done, ref in enumerate(layout.snapshots, 1):
        snapshot = load_snapshot(ref, layout.root, storage)
        for _, handle in snapshot.metadata.iter_stream_handles():
            resolved = snapshot.resolver.resolve(handle)
            if resolved is not None and resolved.uri is not None:
                uris.add(normalize_uri(resolved.uri))
        if on_progress is not None:
            on_progress(done, len(layout.snapshots))
    return uris


def _count_referenced(
    referenced: set[str], files: dict[str, st.FileInfo], root: str, storage: st.Storage
) -> tuple[FileCount, list[str]]:
    """Files and bytes of the referenced files that exist, and the ones that are missing.

    Files below ``root`` are looked up in its listing; others (another job's ``shared/`` after a
    NO_CLAIM restore) are asked for one by one.
    """
    inside = normalize_uri(root).rstrip("/") + "/"
    present, missing = FileCount(), []
    for uri in referenced:
        info = files.get(uri) if uri.startswith(inside) else storage.stat(uri)
        if info is None:
            missing.append(uri)
        else:
            present.add(info.size)
    return present, missing


def _metadata_files(layout: Layout, files: dict[str, st.FileInfo], storage: st.Storage) -> list[st.FileInfo]:
    """The retained checkpoints' ``_metadata`` files (size and mtime); one deleted meanwhile is left out."""
    infos = [files.get(normalize_uri(ref.metadata_uri)) or storage.stat(ref.metadata_uri) for ref in layout.snapshots]
    return [info for info in infos if info is not None]


def _state_files(root: str, files: dict[str, st.FileInfo]) -> dict[str, tuple[str, st.FileInfo]]:
    """The files below ``root/shared/`` and ``root/taskowned/``: absolute URI -> (relative path, info)."""
    found = {}
    for uri, info in files.items():
        relative = _relative(root, info.path)
        if relative.split("/", 1)[0] in STATE_DIRS:
            found[uri] = (relative, info)
    return found


def _relative(root: str, path: str) -> str:
    """``path`` (as :meth:`Storage.list_dir` of ``root`` returns it) relative to ``root``."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def _in_progress_label(layout: Layout) -> str:
    """The ``chk-N`` directories without ``_metadata`` newer than every retained checkpoint, else :data:`IN_PROGRESS`.

    Flink aborts pending checkpoints older than a completed one, so only newer ones can be in progress.
    """
    newest = max(ref.number for ref in layout.snapshots)
    numbered = sorted((_chk_number(d), st.basename(d)) for d in layout.incomplete)
    names = [name for number, name in numbered if number > newest]
    return " or ".join(names) if names else IN_PROGRESS


def _chk_number(directory: str) -> int:
    return int(st.basename(directory)[len("chk-") :])


def _orphan(uri: str, relative: str, info: st.FileInfo, oldest: float | None, newest: float | None, in_progress: str) -> Orphan:
    """An orphan, classified by its age against the retained ``_metadata`` (unknown times count as new)."""
    known = info.mtime is not None and newest is not None
    return Orphan(
        path=uri,
        relative_path=relative,
        size=info.size,
        mtime=info.mtime,
        could_be_needed_by=None if known and info.mtime < newest else in_progress,
        older_than_retained=known and info.mtime < oldest,
    )
