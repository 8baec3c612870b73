"""``repair size``: where a checkpoint's bytes are, per operator, state, subtask, key-group range and file.

Every byte of a checkpoint is counted exactly once, so that the bytes per state add up to the
checkpoint's bytes: its ``_metadata`` plus each distinct file (or file-merging segment) its handles
reference, at the size ``_metadata`` records. The accounting is a list of :class:`Piece` rows, each a
run of bytes with the one state (or pseudo-state in parentheses) it is attributed to:

* an SST belongs to the column family its properties name (``rocksdb.column.family.name``): all of
  its bytes, footer, index, filter and properties included, are that state's. Only the footer, the
  metaindex and the properties block are read (about a KiB per file). An SST whose properties cannot be
  read (damaged), or name no column family, counts under ``(unknown)``; a missing one too, at the size
  ``_metadata`` records;
* the other files of a RocksDB or ForSt instance (MANIFEST, CURRENT, OPTIONS) count under
  ``(rocksdb files)``, the keyed backend's meta data under ``(backend meta)``;
* full snapshots (canonical savepoints, heap backend, RocksDB full snapshots) are split by their
  key-group offsets: the head (meta data) under ``(backend meta)``, each key group's bytes under
  ``(keyed state)``, with the key group: the granularity stops at the key group, a key group's
  sections per state being known only by reading the data;
* operator state files are split by the states' partition offsets (the head, the states' meta
  data, under ``(operator meta)``); raw keyed state (timers RocksDB kept on the heap) by key group
  under ``(raw keyed state)``; raw operator state, channel state and the like under their slot name;
* a changelog file counts under ``(changelog)`` for the first subtask that references it (several
  subtasks' change sets may share one file);
* ``_metadata``'s bytes that are not an inline stream counted above count under ``(_metadata)``.

Every other file is only checked to exist: a missing one keeps its attribution (from ``_metadata``)
and is reported, as a missing or damaged SST is (exit 1).

A checkpoint of a job root is each retained checkpoint; SSTs shared between them are read once.
Nothing is written. Returns a :class:`SizeResult`; its ``to_json()`` is documented in
docs/json-contracts.md, ``to_arrow()`` gives the pieces as an Arrow table.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Callable, Protocol

from repair.errors import FormatError, StorageError, UsageError
from repair.findings import Problem, Severity
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    iter_stream_handles,
)
from repair.formats.rocksdb.table.sst import read_table_properties
from repair.io import storage as st
from repair.io.layout import CHECKPOINT, JOB_ROOT, METADATA_FILE, Layout, ResolvedFile, SnapshotRef, classify, discover
from repair.io.resolved import IN_FLIGHT, close, is_remote, open_resolved
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.results import CommandResult

if TYPE_CHECKING:  # --deep's module (export's readers beneath it) is imported by a --deep run only
    from repair.ops.size_deep import DeepSize

#: What ``--by`` groups by: the :class:`Piece` fields that make a group's key.
GROUPINGS: dict[str, tuple[str, ...]] = {
    "operator": ("operator",),
    "state": ("operator", "state"),
    "subtask": ("operator", "subtask"),
    "key-group": ("operator", "key_group_start", "key_group_end"),
    "file": ("file",),
}

#: On an object store, an SST's last bytes read in one request: its footer, metaindex and properties
#: block are there (RocksDB writes them last), so one GET serves the three reads of its properties.
PROPERTIES_TAIL = 64 << 10

#: On an object store, a directory holding this many of the files whose existence is checked is listed
#: once instead of asking for each file.
LIST_AT_LEAST = 16

UNKNOWN = "(unknown)"
METADATA = "(_metadata)"
ROCKSDB_FILES = "(rocksdb files)"
BACKEND_META = "(backend meta)"
KEYED_STATE = "(keyed state)"
OPERATOR_META = "(operator meta)"
RAW_KEYED = "(raw keyed state)"
CHANGELOG = "(changelog)"
COORDINATOR = "(coordinator)"


@dataclass
class Piece:
    """A run of a checkpoint's bytes attributed to one state (or pseudo-state) of one operator."""

    checkpoint_id: int
    operator: str | None  # uid, else name, else operator id (None for the rest of _metadata)
    operator_id: str | None
    subtask: int | None
    key_group_start: int | None
    key_group_end: int | None
    state: str
    #: shared (an incremental checkpoint's shared files), private (other files), inline (in _metadata),
    #: metadata (the rest of _metadata)
    placement: str
    #: sst | rocksdb-file | backend-meta | key-group | operator-state | raw-keyed | changelog | other | metadata
    kind: str
    file: str | None  # the file's URI; None inside _metadata
    bytes: int
    #: From the SST's properties (None for pieces that are not SSTs, or whose properties are unknown).
    entries: int | None = None
    deletions: int | None = None
    range_deletions: int | None = None
    raw_key_bytes: int | None = None
    raw_value_bytes: int | None = None
    #: ok, or missing / damaged / unreadable (then what the bytes hold is unknown).
    status: str = "ok"

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Group:
    """The pieces of one group (``--by``): bytes, bytes by placement, distinct files, SST counts."""

    key: dict
    bytes: int = 0
    shared_bytes: int = 0
    private_bytes: int = 0
    inline_bytes: int = 0
    metadata_bytes: int = 0
    entries: int = 0
    deletions: int = 0
    range_deletions: int = 0
    unknown_files: int = 0
    _files: set = field(default_factory=set, repr=False)

    def add(self, piece: Piece) -> None:
        self.bytes += piece.bytes
        setattr(self, f"{piece.placement}_bytes", getattr(self, f"{piece.placement}_bytes") + piece.bytes)
        self.entries += piece.entries or 0
        self.deletions += piece.deletions or 0
        self.range_deletions += piece.range_deletions or 0
        if piece.file is not None and piece.file not in self._files:
            self._files.add(piece.file)
            self.unknown_files += piece.status != "ok"

    @property
    def files(self) -> int:
        return len(self._files)

    def to_json(self) -> dict:
        return {**self.key, "bytes": self.bytes, "shared_bytes": self.shared_bytes, "private_bytes": self.private_bytes,
                "inline_bytes": self.inline_bytes, "metadata_bytes": self.metadata_bytes, "files": self.files,
                "entries": self.entries, "deletions": self.deletions, "range_deletions": self.range_deletions,
                "unknown_files": self.unknown_files}


def group_pieces(pieces: list[Piece], by: str) -> list[Group]:
    """The pieces grouped by ``by`` (a key of :data:`GROUPINGS`), largest first."""
    names = GROUPINGS[by]
    groups: dict[tuple, Group] = {}
    for piece in pieces:
        key = tuple(getattr(piece, name) for name in names)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(dict(zip(names, key)))
        group.add(piece)
    return sorted(groups.values(), key=lambda g: (-g.bytes, str(tuple(g.key.values()))))


@dataclass
class CheckpointSize:
    """The accounting of one checkpoint or savepoint."""

    checkpoint_id: int
    metadata_path: str
    kind: str  # checkpoint | savepoint
    metadata_bytes: int
    pieces: list[Piece]

    @property
    def bytes(self) -> int:
        """Every byte of the checkpoint: ``_metadata`` plus each distinct file or segment, as recorded."""
        return sum(p.bytes for p in self.pieces)

    def to_json(self, by: str, top: int | None) -> dict:
        total = group_pieces(self.pieces, "file")  # one group per file; the inline ones and _metadata as one
        groups = group_pieces(self.pieces, by)
        return {
            "checkpoint_id": self.checkpoint_id,
            "metadata_path": self.metadata_path,
            "kind": self.kind,
            "totals": {
                "bytes": self.bytes,
                "files": sum(g.files for g in total),
                "metadata_bytes": self.metadata_bytes,
                **{f"{placement}_bytes": sum(p.bytes for p in self.pieces if p.placement == placement)
                   for placement in ("shared", "private", "inline")},
                "entries": sum(p.entries or 0 for p in self.pieces),
                "unknown_files": sum(g.unknown_files for g in total),
            },
            "groups": [g.to_json() for g in (groups if top is None else groups[:top])],
            "groups_left_off": 0 if top is None else max(0, len(groups) - top),
        }


class _Documented(Protocol):
    def to_json(self, top: int | None) -> dict: ...


class FilesVerdict(CommandResult):
    """The verdict of ``size`` and ``diff`` from their ``findings`` about files: ``ok`` without any
    (missing or damaged: exit 1), ``unknown`` when a file stayed unreadable (exit 2)."""

    findings: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def unknown(self) -> bool:
        """A file stayed unreadable (a storage fault): what it holds is unknown, not bad."""
        return any(f.severity == Severity.UNKNOWN for f in self.findings)


@dataclass
class SizeResult(FilesVerdict):
    source: str
    layout: str  # job-root | checkpoint | savepoint | metadata-file
    by: str
    top: int | None
    checkpoints: list[CheckpointSize]
    #: Bytes read from storage (``_metadata`` files and SST tails): the cost of the accounting.
    bytes_read: int
    findings: list[Problem] = field(default_factory=list)
    #: ``--deep``: what the keyed state of the newest (or the chosen) checkpoint holds, read entry by entry.
    deep: DeepSize | None = None
    #: ``--history``: the growth over the retained checkpoints, per state (a
    #: :class:`repair.ops.size_history.History`, which :func:`repair.ops.size_history.size_history` sets).
    history: _Documented | None = None
    #: ``--html FILE``: where the page was written (absolute), else None.
    html: str | None = None

    def document(self) -> dict:
        return {
            "source": self.source,
            "layout": self.layout,
            "by": self.by,
            "bytes_read": self.bytes_read,
            "checkpoints": [c.to_json(self.by, self.top) for c in self.checkpoints],
            "deep": None if self.deep is None else self.deep.to_json(),
            "history": None if self.history is None else self.history.to_json(self.top),
            "html": self.html,
            "findings": [f.to_json() for f in self.findings],
        }

    def to_arrow(self):
        """Every piece of every checkpoint as a ``pyarrow.Table`` (one row per :class:`Piece`)."""
        import pyarrow as pa

        names = [f.name for f in fields(Piece)]
        pieces = [p for c in self.checkpoints for p in c.pieces]
        return pa.table({name: [getattr(p, name) for p in pieces] for name in names})


class _Counter:
    """Bytes read, added to from several threads."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


class _CountedReads:
    """A random-access source that counts the bytes read through it."""

    def __init__(self, source, counter: _Counter):
        self._source, self._counter = source, counter

    @property
    def size(self) -> int:
        return self._source.size

    def read(self, offset: int, length: int):
        data = self._source.read(offset, length)
        self._counter.add(len(data))
        return data


@dataclass
class _FileFacts:
    """What looking at one file found: its status, and for an SST its column family and counts."""

    status: str
    state: str = UNKNOWN
    entries: int | None = None
    deletions: int | None = None
    range_deletions: int | None = None
    raw_key_bytes: int | None = None
    raw_value_bytes: int | None = None
    problem: Problem | None = None


class _Accounting:
    """The pieces of the checkpoints of one run; SST facts cached by file, so shared SSTs are read once."""

    def __init__(self, storage: st.Storage):
        self.storage = storage
        self.read_counter = _Counter()
        self.findings: list[Problem] = []
        #: What each file is found to be (an SST's facts, or whether another file exists), by file.
        self._found: dict[tuple, _FileFacts] = {}

    # -- one checkpoint -------------------------------------------------------------------------
    def checkpoint(self, snapshot: LoadedSnapshot) -> CheckpointSize:
        pieces = _Pieces(snapshot)
        for op in snapshot.metadata.operators:
            pieces.operator = op
            if op.coordinator_state is not None and pieces.first_time(op.coordinator_state):
                pieces.emit(None, op.coordinator_state, COORDINATOR, "other")
            for sub in op.subtasks:
                if not sub.finished:
                    self._subtask(pieces, sub)
        self._look_at_files(pieces)
        inline = sum(p.bytes for p in pieces.pieces if p.placement == "inline")
        pieces.pieces.append(Piece(pieces.checkpoint_id, None, None, None, None, None, METADATA, "metadata", "metadata",
                                   snapshot.ref.metadata_uri, snapshot.metadata_size - inline))
        return CheckpointSize(pieces.checkpoint_id, snapshot.ref.metadata_uri, snapshot.kind, snapshot.metadata_size,
                              pieces.pieces)

    def _subtask(self, pieces: "_Pieces", sub) -> None:
        index = sub.index
        keyed = sub.managed_keyed_state
        keyed_handles = [keyed]
        if isinstance(keyed, ChangelogBackendHandle):
            keyed_handles = list(keyed.materialized)
            for nested in keyed.non_materialized:
                for _path, handle in iter_stream_handles(nested):
                    if pieces.first_time(handle):
                        pieces.emit(index, handle, CHANGELOG, "changelog", key_groups=_range(keyed.key_groups))
        for handle in keyed_handles:
            if isinstance(handle, IncrementalKeyedHandle):
                self._incremental(pieces, index, handle)
            elif isinstance(handle, KeyGroupsHandle):
                _split_key_groups(pieces, index, handle, head_state=BACKEND_META, state=KEYED_STATE, kind="key-group")
        if isinstance(sub.raw_keyed_state, KeyGroupsHandle):
            _split_key_groups(pieces, index, sub.raw_keyed_state, head_state=RAW_KEYED, state=RAW_KEYED, kind="raw-keyed")
        if isinstance(sub.managed_operator_state, OperatorStateHandle):
            _split_operator_state(pieces, index, sub.managed_operator_state)
        # What the handlers above do not split (raw operator state, channel state ...): whole, by slot.
        for slot, handle in sub.handles():
            for _path, stream in iter_stream_handles(handle):
                if pieces.first_time(stream):
                    pieces.emit(index, stream, f"({slot.split('[')[0].replace('_', ' ')})", "other")

    def _incremental(self, pieces: "_Pieces", index: int, handle: IncrementalKeyedHandle) -> None:
        key_groups = _range(handle.key_groups)
        if handle.meta is not None and pieces.first_time(handle.meta):
            pieces.emit(index, handle.meta, BACKEND_META, "backend-meta", key_groups=key_groups)
        for placement, entries in (("shared", handle.shared), ("private", handle.private)):
            for entry in entries:
                if entry.handle is None or not pieces.first_time(entry.handle):
                    continue
                if entry.local_path.endswith(".sst"):  # its state comes from its properties (_look_at_files)
                    pieces.emit(index, entry.handle, UNKNOWN, "sst", placement=placement, key_groups=key_groups)
                else:
                    pieces.emit(index, entry.handle, ROCKSDB_FILES, "rocksdb-file", placement=placement,
                                key_groups=key_groups)

    # -- SSTs ----------------------------------------------------------------------------------------
    def _look_at_files(self, pieces: "_Pieces") -> None:
        """Each SST's properties read and every other file's existence checked (files shared with a
        checkpoint counted before are not looked at again), :data:`IN_FLIGHT` at once so that a remote
        store's latency overlaps; then each piece gets what was found about its file."""
        wanted: dict[tuple, tuple[ResolvedFile, bool]] = {}
        for piece, resolved in pieces.looked_at():
            key = _file_key(resolved, piece.kind)
            if key not in self._found:
                wanted[key] = (resolved, piece.kind == "sst")
        listed = self._listed_directories([resolved for resolved, is_sst in wanted.values() if not is_sst])
        with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
            found = pool.map(lambda item: self._read_sst(item[0]) if item[1] else self._check_exists(item[0], listed=listed),
                             wanted.values())
            for key, facts in zip(wanted, found):
                self._found[key] = facts
                if facts.problem is not None:
                    self.findings.append(facts.problem)
        for piece, resolved in pieces.looked_at():
            facts = self._found[_file_key(resolved, piece.kind)]
            piece.status = facts.status
            if piece.kind == "sst":
                piece.state = facts.state
                piece.entries, piece.deletions, piece.range_deletions = facts.entries, facts.deletions, facts.range_deletions
                piece.raw_key_bytes, piece.raw_value_bytes = facts.raw_key_bytes, facts.raw_value_bytes

    def _listed_directories(self, files: list[ResolvedFile]) -> dict[str, set[str]]:
        """The names in each remote directory holding at least :data:`LIST_AT_LEAST` of ``files``: one
        listing answers for all of them (a request per file otherwise). A listing that fails answers for
        none (each file is then asked for on its own)."""
        by_directory: dict[str, int] = {}
        for resolved in files:
            if is_remote(resolved):
                directory = st.parent(resolved.uri)
                by_directory[directory] = by_directory.get(directory, 0) + 1
        listed = {}
        for directory, count in by_directory.items():
            if count >= LIST_AT_LEAST:
                try:
                    listed[directory] = {st.basename(entry.path) for entry in self.storage.list_dir(directory)}
                except (StorageError, OSError):
                    continue
        return listed

    def _check_exists(self, resolved: ResolvedFile, error: StorageError | None = None, *,
                      listed: dict[str, set[str]] | None = None) -> _FileFacts:
        """A file that is not an SST: only whether it is there (its pieces' states come from _metadata), from
        its directory's listing in ``listed`` if there, else asked for. With ``error`` (opening it failed):
        missing, or else unreadable."""
        names = None if listed is None or resolved.uri is None else listed.get(st.parent(resolved.uri))
        try:
            present = st.basename(resolved.uri) in names if names is not None else self.storage.stat(resolved.uri) is not None
        except StorageError as stat_error:
            return self._unreadable(resolved.uri, stat_error)
        if not present:
            return self._missing(resolved)
        return _FileFacts("ok") if error is None else self._unreadable(resolved.uri, error)

    def _missing(self, resolved: ResolvedFile) -> _FileFacts:
        return _FileFacts("missing", problem=Problem(
            "missing_file", f"{st.basename(resolved.uri)} is missing: its {resolved.size} bytes (as _metadata records) are "
            "counted, what they hold is unknown", expected=f"{resolved.size} bytes", found="nothing",
            details=(("path", resolved.uri),)))

    @staticmethod
    def _unreadable(where: str, error: StorageError) -> _FileFacts:
        return _FileFacts("unreadable", problem=Problem(
            "unreadable", f"{st.basename(where)}: {error.message}", severity=Severity.UNKNOWN, details=(("path", where),)))

    def _read_sst(self, resolved: ResolvedFile) -> _FileFacts:
        where = resolved.uri or "inline SST"
        try:
            source = open_resolved(self.storage, resolved, tail=PROPERTIES_TAIL)
        except StorageError as error:
            return self._unreadable(where, error) if error.transient else self._check_exists(resolved, error)
        try:
            props = read_table_properties(_CountedReads(source, self.read_counter))
        except StorageError as error:
            return self._unreadable(where, error)
        except FormatError as error:
            return _FileFacts("damaged", problem=Problem(
                "bad_sst", f"{st.basename(where)}: its column family is unknown ({error.message}); its bytes count "
                f"under {UNKNOWN}", offset=error.offset, details=(("path", where),)))
        finally:
            close(source)
        if props is None or not props.column_family_name:
            return _FileFacts("damaged", problem=Problem(
                "bad_sst", f"{st.basename(where)}: no column family in its properties; its bytes count under {UNKNOWN}",
                details=(("path", where),)))
        return _FileFacts("ok", props.column_family_name, props.num_entries, props.num_deletions, props.num_range_deletions,
                         props.raw_key_size, props.raw_value_size)


class _Pieces:
    """The pieces of one checkpoint as they are counted; each file or segment is counted once."""

    def __init__(self, snapshot: LoadedSnapshot):
        self.snapshot = snapshot
        self.checkpoint_id = snapshot.metadata.checkpoint_id
        self.pieces: list[Piece] = []
        self.operator = None  # the operator whose handles are being counted
        self._seen: set[tuple] = set()
        self._looked_at: list[tuple[Piece, ResolvedFile]] = []
        #: Each handle resolved once (by id: the snapshot holds the handles while it is counted).
        self._resolved: dict[int, ResolvedFile | None] = {}

    def looked_at(self) -> list[tuple[Piece, ResolvedFile]]:
        """The pieces whose files are looked at (SSTs, inline ones too, and every file), with where their bytes are."""
        return self._looked_at

    def resolve(self, handle) -> ResolvedFile:
        """Where ``handle``'s bytes are; remembered, since a handle is asked for by :meth:`first_time` and
        :meth:`emit` (and per key group of a full snapshot), and resolving a path is a third of the counting's CPU."""
        key = id(handle)
        if key not in self._resolved:
            self._resolved[key] = self.snapshot.resolver.resolve(handle)
        return self._resolved[key]

    def first_time(self, handle) -> bool:
        """False for a handle whose bytes (a file, a segment) this checkpoint has counted already."""
        resolved = self.resolve(handle)
        if resolved is None:
            return False
        key = ("inline", id(handle)) if resolved.is_inline else (resolved.uri, resolved.start, resolved.size)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def emit(self, subtask: int | None, handle, state: str, kind: str, *, placement: str = "private",
             key_groups: tuple[int, int] | None = None, start: int = 0, length: int | None = None) -> Piece:
        """A piece of ``handle``'s bytes (``length`` from ``start``, else all of them) for ``state``."""
        resolved = self.resolve(handle)
        op = self.operator
        piece = Piece(
            self.checkpoint_id, op.operator_uid or op.operator_name or op.operator_id, op.operator_id, subtask,
            *(key_groups or (None, None)), state, "inline" if resolved.is_inline else placement, kind, resolved.uri,
            resolved.size - start if length is None else length,
        )
        self.pieces.append(piece)
        if kind == "sst" or not resolved.is_inline:
            self._looked_at.append((piece, resolved))
        return piece


def _split_key_groups(pieces: _Pieces, index: int, handle: KeyGroupsHandle, *, head_state: str, state: str, kind: str) -> None:
    """A full snapshot split at its key-group offsets: the head (meta data) up to the first key group,
    then each key group up to the next one's offset (Flink writes them in key-group order)."""
    if handle.delegate is None or not pieces.first_time(handle.delegate):
        return
    size = pieces.resolve(handle.delegate).size
    starts = sorted((offset, handle.key_groups.start + i) for i, offset in enumerate(handle.offsets) if 0 < offset <= size)
    pieces.emit(index, handle.delegate, head_state, "backend-meta" if kind == "key-group" else kind,
                key_groups=_range(handle.key_groups), length=starts[0][0] if starts else size)
    ends = [offset for offset, _ in starts[1:]] + [size]
    for (offset, group), end in zip(starts, ends):
        if end > offset:
            pieces.emit(index, handle.delegate, state, kind, key_groups=(group, group), start=offset, length=end - offset)


def _split_operator_state(pieces: _Pieces, index: int, handle: OperatorStateHandle) -> None:
    """An operator state file split at each state's first partition offset (the head: the states' meta data)."""
    if handle.delegate is None or not pieces.first_time(handle.delegate):
        return
    size = pieces.resolve(handle.delegate).size
    starts = sorted((min(entry.offsets), entry.name) for entry in handle.states if entry.offsets)
    pieces.emit(index, handle.delegate, OPERATOR_META, "operator-state", length=starts[0][0] if starts else size)
    ends = [offset for offset, _ in starts[1:]] + [size]
    for (offset, name), end in zip(starts, ends):
        pieces.emit(index, handle.delegate, name, "operator-state", start=offset, length=end - offset)


def _file_key(resolved: ResolvedFile, kind: str) -> tuple:
    """An SST's bytes (a segment of a file is its own table; an inline one is known by its bytes), or a
    whole other file."""
    if resolved.is_inline:
        return ("inline", resolved.inline)
    return ("sst", resolved.uri, resolved.start, resolved.size) if kind == "sst" else ("file", resolved.uri)


def _range(key_groups) -> tuple[int, int]:
    return (key_groups.start, key_groups.end)


def size(path: str, *, by: str = "state", top: int | None = None, checkpoint: int | None = None,
         storage: st.Storage | None = None, on_progress: Callable[[int, int], None] | None = None,
         deep: bool = False, now: str | None = None, ttl: list[str] | None = None,
         earlier: bool = False) -> SizeResult:
    """The bytes of the snapshot at ``path`` (for a job root: of each retained checkpoint, or ``checkpoint``)
    per operator, state, subtask, key-group range or file (``by``); ``earlier``: for a ``chk-N`` (or its
    ``_metadata``), also of the retained checkpoints before it in its job root (what ``--history`` shows). ``deep``: also read the keyed state
    of the newest of them (:mod:`repair.ops.size_deep`), TTL expiry judged at ``now`` (epoch ms or ISO
    8601; default the current time) with ``ttl`` (``STATE=DURATION`` or ``DURATION``, as ``--ttl``).
    The growth over the checkpoints (``--history``): :func:`repair.ops.size_history.size_history`."""
    if (now is not None or ttl) and not deep:
        raise UsageError("--now and --ttl go with --deep")
    if deep:
        from repair.ops.size_deep import deep_size, parse_time_ms, parse_ttls

        now_ms, ttls = parse_time_ms(now), parse_ttls(ttl)
    if by not in GROUPINGS:
        raise UsageError(f"--by {by!r}: expected one of {', '.join(GROUPINGS)}")
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: expected a positive number")
    storage = storage or st.default_storage()
    layout = discover(path, storage)
    refs, listing_problems = _with_earlier(layout, storage) if earlier else (layout.snapshots, [])
    if checkpoint is not None:
        refs = [r for r in refs if r.number == checkpoint]
        if not refs:
            raise UsageError(f"no chk-{checkpoint} here (retained: {', '.join(str(r.number) for r in layout.snapshots)})")
    measured = measure([(ref, layout.root) for ref in refs], storage, on_progress)
    deep_result = None
    if deep:
        snapshot = load_snapshot(refs[-1], layout.root, storage)
        deep_result = deep_size(snapshot, storage, measured.checkpoints[-1].pieces, now=now_ms, ttls=ttls, top=top)
    return SizeResult(st.absolute(path), layout.kind, by, top, measured.checkpoints, measured.bytes_read,
                      [*listing_problems, *measured.findings], deep_result)


def _with_earlier(layout: Layout, storage: st.Storage) -> tuple[list[SnapshotRef], list[Problem]]:
    """A ``chk-N``'s job root's retained checkpoints up to it, oldest first (the snapshots of any other path
    as they are; a ``chk-N`` whose parent holds no other retained checkpoint alone). A job root that
    cannot be listed leaves the ``chk-N`` alone, with an ``unreadable`` finding (unknown) saying so."""
    if layout.kind not in (CHECKPOINT, METADATA_FILE) or layout.root is None or layout.snapshots[0].number is None:
        return layout.snapshots, []
    newest = layout.snapshots[0]
    try:
        around = classify(layout.root, storage)
    except StorageError as error:
        return [newest], [Problem("unreadable", f"{st.basename(layout.root)}: {error.message}: the history shows "
                                  f"chk-{newest.number} alone", severity=Severity.UNKNOWN, details=(("path", layout.root),))]
    earlier = [ref for ref in around.snapshots if ref.number < newest.number] if around.kind == JOB_ROOT else []
    return [*earlier, newest], []


@dataclass
class Measurement:
    """The accounting of some snapshots: one :class:`CheckpointSize` each, what it cost, what was found."""

    checkpoints: list[CheckpointSize]
    bytes_read: int
    findings: list[Problem]


def measure(snapshots: list[tuple[SnapshotRef, str | None]], storage: st.Storage,
            on_progress: Callable[[int, int], None] | None = None) -> Measurement:
    """Each ``(snapshot, its job root)`` counted, in order; an SST they share is read once."""
    accounting = _Accounting(storage)
    checkpoints = []
    for done, (ref, root) in enumerate(snapshots):
        snapshot = load_snapshot(ref, root, storage)
        accounting.read_counter.add(snapshot.metadata_size)
        checkpoints.append(accounting.checkpoint(snapshot))
        if on_progress is not None:
            on_progress(done + 1, len(snapshots))
    findings = sorted(accounting.findings, key=lambda f: (f.kind, dict(f.details).get("path") or ""))
    return Measurement(checkpoints, accounting.read_counter.value, findings)
