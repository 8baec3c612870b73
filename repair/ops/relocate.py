"""``repair relocate``: a new ``_metadata`` for a checkpoint that was moved, so Flink can restore it.

``_metadata`` records the absolute path of every shared file where Flink wrote it. A checkpoint copied
to another directory, host, bucket or scheme therefore cannot be restored: Flink opens the old paths.
``relocate`` resolves every file where it is now (see :mod:`repair.io.layout`), checks that each exists
with the size ``_metadata`` records, and writes a new job root ``NEW_ROOT`` holding
``<chk-N or savepoint name>/_metadata`` whose paths point to:

- the files where they are now (default), or
- copies next to the new ``_metadata`` (``copy=True``): ``<chk-N>/shared/...``, ``<chk-N>/taskowned/...``,
  ``<chk-N>/dstl/...`` and the files of ``chk-N/`` itself, each recorded *relative* to the ``_metadata``
  (``RelativeFileStateHandle``, as Flink records a savepoint's files; Flink resolves them against the
  directory it restores from). ``NEW_ROOT/<chk-N>`` is then self-contained and movable: moved anywhere,
  it verifies and real Flink restores it as it is. File-merging segments have no relative form: their
  copies go to ``NEW_ROOT/shared/...`` and are recorded by absolute path.

A damaged recorded path (one that disagrees with where the snapshot's other files were written, see
:mod:`repair.io.layout`) is rewritten to where its file is like any other, and said so
(``RelocatedFile.damaged_path``).

Files that ``_metadata`` names relative to its own directory (exclusive state of checkpoints and
native savepoints) are always copied next to the new ``_metadata``. Inline state needs nothing. The
input is never modified; ``NEW_ROOT`` is published whole or not at all.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Callable

from repair.errors import RepairError, UsageError
from repair.findings import Problem
from repair.formats.flink.handles import FileHandle, RelativeFileHandle, SegmentFileHandle
from repair.formats.flink.metadata import decode_metadata, encode_metadata
from repair.io import storage as st
from repair.io.layout import JOB_ROOT, Layout, discover, normalize_uri, recorded_root
from repair.io.outputs import new_output
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.renamed import renamed
from repair.results import CommandResult


@dataclass
class RelocatedFile:
    recorded: str  # the path _metadata recorded
    source: str  # where the bytes are now
    target: str  # the path the new _metadata records
    size: int
    copied: bool
    #: The recorded path was damaged (see :mod:`repair.io.layout`): the new ``_metadata`` records where the file is.
    damaged_path: bool = False

    def to_json(self) -> dict:
        return {"recorded": self.recorded, "source": self.source, "target": self.target, "size": self.size, "copied": self.copied,
                "damaged_path": self.damaged_path}


@dataclass
class MissingFile:
    recorded: str
    source: str
    expected_size: int
    found: str

    def to_json(self) -> dict:
        return {"recorded": self.recorded, "source": self.source, "expected_size": self.expected_size, "found": self.found}

    def finding(self) -> Problem:
        """As `repair verify` names it: a file that is not there, or shorter than ``_metadata`` says."""
        kind, what = ("missing_file", "is missing") if self.found == "missing" else (
            "size_mismatch", f"is {self.found}, _metadata records {self.expected_size} bytes")
        return Problem(kind, f"{st.basename(self.source)} {what}: nothing was written", expected=self.expected_size,
                       found=self.found, details=(("path", self.source),))


@dataclass
class RelocateResult(CommandResult):
    source_metadata: str
    new_root: str
    new_metadata: str | None  # None when nothing was written (files missing)
    files: list[RelocatedFile] = field(default_factory=list)
    missing: list[MissingFile] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    @property
    def source(self) -> str:
        return st.absolute(self.source_metadata)

    @property
    def findings(self) -> list[Problem]:
        """The referenced files that are missing or too short (then nothing was written)."""
        return [m.finding() for m in self.missing]

    def document(self) -> dict:
        copied = [f for f in self.files if f.copied]
        return {
            "source": self.source,
            "out": self.new_root,
            "source_metadata": self.source,  # the same as source, out (named so before every command had them)
            "new_root": self.new_root,
            "new_metadata": self.new_metadata,
            "files": [f.to_json() for f in self.files],
            "missing": [m.to_json() for m in self.missing],
            "copied": {"files": len(copied), "bytes": sum(f.size for f in copied)},
            "findings": [m.finding().to_json() for m in self.missing],
        }


@renamed(to="out")
def relocate(path: str, out: str, *, copy: bool = False, storage: st.Storage | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> RelocateResult:
    """Write ``out/<snapshot>/_metadata`` for the checkpoint or savepoint at ``path`` (see module doc)."""
    storage = storage or st.default_storage()
    snapshot = load_single_snapshot(path, storage, out=out)
    return write_snapshot(snapshot, out, copy=copy, storage=storage, on_progress=on_progress)


def single_snapshot(path: str | Layout, storage: st.Storage, *, out: str) -> Layout:
    """The layout of the one checkpoint or savepoint at ``path`` (or ``path`` itself when it is a
    :class:`~repair.io.layout.Layout`), to be written anew to ``out``.

    A job root is a usage error, and so is an ``out`` that is not new or is inside the input (its job
    root or its own directory, symbolic links resolved): nothing is ever written into a checkpoint.
    """
    layout = path if isinstance(path, Layout) else discover(path, storage)
    if layout.kind == JOB_ROOT:
        raise UsageError("expected one checkpoint (chk-N), savepoint or _metadata file, not a job root", source=layout.path)
    new_output(out, layout.inputs, storage)
    return layout


def load_single_snapshot(path: str | Layout, storage: st.Storage, *, out: str) -> LoadedSnapshot:
    """:func:`single_snapshot`, loaded."""
    layout = single_snapshot(path, storage, out=out)
    return load_snapshot(layout.snapshots[0], layout.root, storage)


def write_snapshot(snapshot: LoadedSnapshot, to: str, *, copy: bool, storage: st.Storage,
                   on_progress: Callable[[int, int], None] | None = None,
                   new_files: dict[str, bytes] | None = None) -> RelocateResult:
    """Write ``snapshot`` (its metadata possibly edited) as ``to/<snapshot dir>/_metadata``.

    Every file handle is resolved where its bytes are now, checked, and rewritten to point there (or
    to a copy under ``to`` with ``copy``); nothing is written when a file is missing. ``to`` was
    checked by :func:`load_single_snapshot` (a new directory outside the input). ``new_files``
    (name relative to the new ``_metadata``'s directory -> bytes) are files the edited metadata refers
    to by :class:`RelativeFileHandle` that exist only in memory (a salvaged SST): written beside it.
    """
    new_files = new_files or {}
    ref = snapshot.ref
    new_root = normalize_uri(to)
    target_dir_name = ref.name
    result = RelocateResult(ref.metadata_uri, new_root, None)
    copies: dict[str, str] = {}  # name under new_root -> source uri

    def relocated(source: str, size: int, recorded: str, relative_target: str | None) -> str | None:
        """Check ``source``; return the path the new _metadata records (None when missing)."""
        damaged = recorded in snapshot.resolver.misrecorded
        info = storage.stat(source)
        if info is None or info.is_dir or info.size < size:
            found = "missing" if info is None else ("a directory" if info.is_dir else f"{info.size} bytes")
            result.missing.append(MissingFile(recorded, source, size, found))
            return None
        if relative_target is None:
            result.files.append(RelocatedFile(recorded, source, flink_path(source), size, False, damaged))
            return flink_path(source)
        st.resolve_within(new_root, relative_target)  # a name from the data never escapes new_root
        copies.setdefault(relative_target, source)
        target = flink_path(st.join(new_root, relative_target))
        result.files.append(RelocatedFile(recorded, source, target, size, True, damaged))
        return target

    def rewrite(handle):
        if isinstance(handle, RelativeFileHandle) and handle.relative_path in new_files:
            return handle
        if isinstance(handle, RelativeFileHandle):
            resolved = snapshot.resolver.resolve(handle)
            relocated(resolved.uri, handle.size, handle.relative_path, posixpath.join(target_dir_name, handle.relative_path))
            return handle
        if isinstance(handle, FileHandle):
            resolved = snapshot.resolver.resolve(handle)
            if copy:  # a copy next to the new _metadata, recorded relative to it: movable with its directory
                name = _relative_copy_name(handle.path, target_dir_name)
                new_path = relocated(resolved.uri, handle.size, handle.path, posixpath.join(target_dir_name, name))
                return RelativeFileHandle(name, handle.size) if new_path else handle
            new_path = relocated(resolved.uri, handle.size, handle.path, None)
            return replace(handle, path=new_path) if new_path else handle
        if isinstance(handle, SegmentFileHandle):
            resolved = snapshot.resolver.resolve(handle)
            end = handle.start + handle.size
            new_path = relocated(resolved.uri, end, handle.physical_path, _copy_name(handle.physical_path, target_dir_name) if copy else None)
            return replace(handle, physical_path=new_path) if new_path else handle
        return handle

    snapshot.metadata.map_stream_handles(rewrite)
    if result.missing:
        return result
    data = encode_metadata(snapshot.metadata)
    try:
        decode_metadata(data)
    except RepairError as error:  # pragma: no cover - the encoder round-trips every fixture
        raise RepairError(f"the rewritten _metadata does not decode: {error}") from None
    metadata_name = f"{target_dir_name}/_metadata"
    with storage.publish_dir(new_root, commit_file=metadata_name) as out:
        for done, (name, source) in enumerate(sorted(copies.items()), 1):
            out.write(name, storage.iter_chunks(source))
            if on_progress:  # ``on_progress(done, total)`` per copied file
                on_progress(done, len(copies))
        for name, contents in sorted(new_files.items()):
            st.resolve_within(new_root, posixpath.join(target_dir_name, name))
            out.write(f"{target_dir_name}/{name}", contents)
        out.write(metadata_name, data)
    result.new_metadata = st.join(new_root, metadata_name)
    return result


def _copy_name(recorded: str, snapshot_dir: str) -> str:
    """Where a copy of the file recorded as ``recorded`` goes under the new root.

    ``<root>/shared/x`` -> ``shared/x``; ``<root>/taskowned/tm/x`` -> ``taskowned/tm/x``;
    ``<root>/chk-N/x`` -> ``<snapshot dir>/x``; any other path -> ``shared/<file name>``.
    """
    split = recorded_root(recorded)
    if split is None:
        return f"shared/{st.basename(recorded)}"
    _root, tail = split
    if tail[0].startswith("chk-"):
        return "/".join([snapshot_dir, *tail[1:]])
    return "/".join(tail)


def _relative_copy_name(recorded: str, snapshot_dir: str) -> str:
    """The name, relative to the new ``_metadata``'s directory, of the copy of a file recorded as ``recorded``:
    ``<root>/chk-N/x`` -> ``x``, ``<root>/shared/x`` -> ``shared/x``, ``<root>/taskowned/tm/x`` -> ``taskowned/tm/x``."""
    name = _copy_name(recorded, snapshot_dir)
    return name[len(snapshot_dir) + 1:] if name.startswith(snapshot_dir + "/") else name


def flink_path(uri: str) -> str:
    """A location as Flink writes it into ``_metadata``: ``file:/abs/path`` for local files, else the URI."""
    location = st.parse_location(uri)
    return "file:" + location.fs_path if location.kind == "local" else uri
