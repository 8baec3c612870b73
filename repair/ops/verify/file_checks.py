"""Verification of one physical file (or inline byte stream): the unit of work of ``repair verify``.

A :class:`FileTask` names the bytes (a URI and byte range, or inline bytes) and what they should be
(an SST, a MANIFEST, CURRENT, OPTIONS, Flink's keyed backend meta data, a full snapshot's key-group
stream, or just bytes of a known size). :func:`check_file` reads them once and returns a :class:`FileResult`: the problems found,
how much was checked, and what later cross-checks need (a MANIFEST's live files, CURRENT's target).

Tasks and results are plain picklable dataclasses: they run the same in this process, in a process
pool or in a Spark task.
"""

from __future__ import annotations

from dataclasses import field

from repair.errors import RepairError, StorageError, UnsupportedSerializerError
from repair.findings import Problem, Severity
from repair.formats.bytes.random_access import BytesSource
from repair.formats.records import record
from repair.formats.rocksdb.files import decode_current, parse_options
from repair.formats.rocksdb.manifest import iter_version_edits, replay
from repair.formats.rocksdb.table.sst import FOOTER_SIZE, verify_table
from repair.io import storage as st

#: What a file is expected to be, from its local RocksDB name or its role in a handle.
KINDS = ("sst", "manifest", "current", "options", "backend-meta", "key-groups", "raw-keyed", "changelog", "operator-state", "data")

#: Files checked by reading them whole are bounded (MANIFEST, CURRENT, OPTIONS, meta data).
MAX_WHOLE_FILE = 1 << 30


@record(frozen=True)
class FileTask:
    kind: str
    size: int  # bytes the referencing handle records
    uri: str | None = None
    start: int = 0  # byte offset inside ``uri`` (file-merging segments)
    inline: bytes | None = None
    #: True when ``uri`` holds exactly these bytes (not a segment of a larger file).
    whole_file: bool = True
    #: SSTs: decompress every compressed block (False: checksums only, like ``sst_dump --verify_checksum``).
    decompress: bool = True
    #: Key-group streams (full snapshots, raw keyed state): the handle's ``(first key group, count)``, its
    #: offsets and the max parallelism.
    key_groups: tuple[int, int] | None = None
    offsets: tuple[int, ...] | None = None
    max_parallelism: int | None = None
    #: Operator state: the handle's states (name, distribution mode, offsets).
    operator_states: tuple | None = None
    #: The Kryo generation of the snapshot's Flink (``metadata.generation_of_metadata_version``): Kryo values
    #: in full snapshots and operator state are read in it (None: both generations are tried).
    kryo_generation: int | None = None

    @property
    def key(self) -> tuple:
        """Identity of the physical bytes: each is verified once however many references it has."""
        if self.inline is not None:
            return ("inline", self.kind, self.inline)
        return ("file", self.kind, self.uri, self.start, self.size)


@record
class ManifestSummary:
    """What a MANIFEST says is live: ``{file number: (size, column family name, level)}``."""

    live: dict[int, tuple[int, str, int]] = field(default_factory=dict)
    column_families: list[str] = field(default_factory=list)


@record
class FileResult:
    task: FileTask
    problems: list[Problem] = field(default_factory=list)
    exists: bool = True
    bytes_checked: int = 0
    blocks_checked: int = 0
    #: Of ``bytes_checked``, those no checksum covers (key groups, operator state and changelogs written
    #: without snapshot compression): decoded record by record, but a changed byte inside a value decodes
    #: as another valid value, and Flink restores it as such (damage matrix: heap ``key-groups/flipped``).
    bytes_without_checksum: int = 0
    #: An SST's creation time as RocksDB recorded it in the file (seconds since the epoch; copies keep it).
    created_at: int | None = None
    manifest: ManifestSummary | None = None
    current_target: str | None = None
    #: Changelog (DSTL) files: where each change set starts in the stream, for the handles' offsets.
    change_sets: tuple[int, ...] | None = None
    #: ... False when the stream does not frame to its end (``change_sets`` then holds those before).
    change_sets_framed: bool = True
    #: ... the change stream (decompressed), to read the change sets each checkpoint points at.
    change_stream: bytes | None = None


def check_file(task: FileTask, storage: st.Storage | None = None) -> FileResult:
    """Read ``task``'s bytes once and check them; problems become findings, never exceptions."""
    return check_opened(open_file(task, storage))


@record
class OpenedFile:
    """A task's file opened (:func:`open_file`): on an object store its bytes are read by then (a scan
    reads a file whole in one request when the read buffers have room), so that checking it
    (:func:`check_opened`) waits for no request. ``source`` is None when there is nothing left to check:
    the file is missing, cut short or unreadable, or was checked already, as ``result`` says."""

    result: FileResult
    source: object | None


def open_file(task: FileTask, storage: st.Storage | None = None) -> OpenedFile:
    """The first half of :func:`check_file`: open the file, checking that it exists and has the recorded
    size (inline bytes are at hand), and read what a scan reads first. A file not then in memory as a
    whole (larger than the read buffers' room, a segment of a file) is checked here too: its reads wait
    for the store, better in this (fetching) thread than in the checking one. A storage fault becomes
    an ``unknown`` problem, never a verdict."""
    result = FileResult(task)
    source = None
    try:
        if task.inline is not None:
            source = BytesSource(task.inline)
        else:
            source = _open_checked(task, storage or st.default_storage(), result)
            read_ahead = getattr(source, "read_ahead", None)
            if read_ahead is not None:
                read_ahead()
            if source is not None and not getattr(source, "in_memory", False):
                return OpenedFile(check_opened(OpenedFile(result, source)), None)
    except RepairError as error:
        result.problems.append(_unreadable(error))
        source = _closed(source)
    return OpenedFile(result, source)


def _closed(source) -> None:
    """Close ``source`` (a file that failed after it was opened); None, for nothing is left to check."""
    close = getattr(source, "close", None)
    if close is not None:
        close()
    return None


def check_opened(opened: OpenedFile) -> FileResult:
    """The second half of :func:`check_file`: check the bytes of an opened file, then close it."""
    result, source = opened.result, opened.source
    if source is None:
        return result
    try:
        try:
            _CHECKS[result.task.kind](source, result)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
    except RepairError as error:
        result.problems.append(_unreadable(error))
    return result


def _unreadable(error: RepairError) -> Problem:
    """The finding of an error that stopped a file's check: a storage fault is ``unknown`` (the bytes
    could not be read: not a verdict on them, which nobody saw), any other error an ``error``."""
    if isinstance(error, StorageError):
        return Problem("unreadable", str(error), severity=Severity.UNKNOWN)
    return Problem("unreadable", str(error))


def _open_checked(task: FileTask, storage: st.Storage, result: FileResult):
    """Open the file, checking that it exists and holds the recorded bytes; None when it cannot be read.

    The file is opened for a whole-file scan, with the size ``_metadata`` records (on an object store a
    small file is then read in one request, which also says its true size: no request asks for it); only when it cannot be opened does a ``stat`` tell a missing file (a verdict) from one
    that is there but unreadable (a storage fault, raised: never a verdict)."""
    segment = bool(task.start) or not task.whole_file
    try:
        source = storage.open_input(task.uri, scan=not segment, size=None if segment else task.size)
    except StorageError:
        info = storage.stat(task.uri)
        if info is not None and not info.is_dir:
            raise
        result.exists = False
        what = "a directory instead of a file" if info is not None else "file is missing"
        if task.kind == "manifest" and info is None:
            what += ": RocksDB fails to open with 'MANIFEST-...: No such file or directory'"
        result.problems.append(Problem("missing_file", what, expected=f"{task.size} bytes", found="nothing"))
        return None
    size = source.size
    end = task.start + task.size
    if task.kind == "changelog":
        pass  # the size recorded counts the change stream's bytes (see _check_changelog)
    elif (task.whole_file and size != task.size) or size < end:
        expected = f"{task.size} bytes" if task.whole_file else f"at least {end} bytes"
        kind = "truncated_file" if size < end else "size_mismatch"
        if task.kind == "options":
            # Flink downloads OPTIONS with the other files, but RocksDB never reads it back (see _check_options).
            result.problems.append(Problem(kind, f"OPTIONS file has {size} bytes, _metadata records {task.size}; {OPTIONS_UNUSED}",
                                           expected=expected, found=f"{size} bytes", severity="warning"))
            return source
        result.problems.append(
            Problem(kind, f"file has {size} bytes, _metadata records {task.size}", expected=expected, found=f"{size} bytes")
        )
        if size < end:
            source.close()
            return None
    if segment:
        return _Segment(source, task.start, task.size)
    return source


class _Segment:
    """Bytes ``[start, start + size)`` of a file-merging physical file, as a RandomAccess."""

    def __init__(self, source, start: int, size: int):
        self._source, self._start, self.size = source, start, size
        self.preferred_read_size = getattr(source, "preferred_read_size", None)

    def read(self, offset: int, length: int) -> bytes:
        length = max(min(length, self.size - offset), 0)
        return self._source.read(self._start + offset, length)

    def close(self) -> None:
        self._source.close()


def _whole(source, result: FileResult) -> bytes:
    if source.size > MAX_WHOLE_FILE:
        raise RepairError(f"file of {source.size} bytes is larger than the limit of {MAX_WHOLE_FILE} for this kind")
    data = source.read(0, source.size)
    result.bytes_checked += len(data)
    return data if isinstance(data, bytes) else bytes(data)


def _check_sst(source, result: FileResult) -> None:
    report = verify_table(source, decompress=result.task.decompress)
    # bytes read: the footer (read first, its magic number checked, also when the table cannot be opened), then the blocks
    result.bytes_checked += min(source.size, report.bytes_checked + min(source.size, FOOTER_SIZE))
    result.created_at = report.file_creation_time
    result.blocks_checked += report.blocks_checked
    for finding in report.findings:
        if finding.block_kind == "filter":  # a full filter block: see FILTER_UNUSED
            result.problems.append(Problem(finding.kind, f"{finding.message}; {FILTER_UNUSED}", finding.offset, finding.expected,
                                           finding.found, severity="warning"))
            continue
        result.problems.append(Problem(finding.kind, finding.message, finding.offset, finding.expected, finding.found))


#: Why a damaged bloom filter block is a warning: RocksDB ignores a filter block it cannot read (its filter
#: readers treat the error as "the key may be here"), so reads stay exact; real Flink 1.20 restores exact
#: state from an SST whose filter block has a byte flipped (damage matrix: flink-1.20-bloom-filter/sst-filter).
FILTER_UNUSED = ("RocksDB ignores a filter block it cannot read (every key 'may match': reads stay exact, only slower) "
                 "and the next compaction writes a new one")


def _check_manifest(source, result: FileResult) -> None:
    findings: list = []
    edits = list(iter_version_edits(source, strict=False, findings=findings))
    result.bytes_checked += source.size
    for finding in findings:
        result.problems.append(Problem(f"manifest_{finding.kind}", finding.message, finding.offset))
    version = replay(edits)
    for finding in version.findings:
        result.problems.append(Problem(f"manifest_{finding.kind}", finding.message, finding.offset))
    if not edits:
        result.problems.append(Problem("manifest_empty", "MANIFEST holds no version edit", 0, "at least one record", "none"))
    summary = ManifestSummary()
    for cf, meta in version.live_files():
        summary.live[meta.number] = (meta.file_size, cf.name, meta.level)
    summary.column_families = [cf.name for _, cf in sorted(version.column_families.items())]
    result.manifest = summary


def _check_current(source, result: FileResult) -> None:
    data = _whole(source, result)
    try:
        result.current_target = decode_current(data)
    except RepairError as error:
        result.problems.append(Problem("bad_current", str(error), 0, "MANIFEST-<number>\\n", repr(data[:40])))


#: Why a damaged OPTIONS file is a warning: real Flink 1.20 and 2.x restore exact state from a checkpoint whose
#: OPTIONS file is empty, cut short or garbled (fixtures/damage_matrix.json); only a missing one is refused.
OPTIONS_UNUSED = ("Flink restores without reading it (RocksDB is opened with the options Flink passes), "
                  "but RocksDB's own tools (ldb, sst_dump --options) and a rebuild cannot use it")


def _check_options(source, result: FileResult) -> None:
    data = _whole(source, result)
    try:
        parse_options(data)
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_options", error, message=f"OPTIONS does not parse: {error}; {OPTIONS_UNUSED}",
                                                  severity=Severity.WARNING))


def _check_backend_meta(source, result: FileResult) -> None:
    from repair.formats.flink.backend_meta import decode_keyed_backend_meta

    data = _whole(source, result)
    try:
        decode_keyed_backend_meta(data)
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_backend_meta", error))


def _mark_kryo_generation(meta, task: FileTask) -> None:
    """Read ``meta``'s Kryo values in the generation of the task's snapshot, as export does."""
    from repair.formats.flink.backend_meta import set_meta_kryo_generation

    if task.kryo_generation is not None:
        set_meta_kryo_generation(meta, task.kryo_generation)


def _check_key_groups(source, result: FileResult) -> None:
    """A full snapshot (canonical savepoint, heap-backend checkpoint): its meta data, the framing of every
    key group and every record decoded. Records of a serializer this toolkit cannot decode are framed
    in canonical snapshots (checked); in the heap layout they hide the rest of their key group: their
    state, and the states written after it there, are not checked (one warning, not an error: the bytes
    may well be sound), the other states are."""
    from repair.formats.flink.handles import KeyGroupRange
    from repair.readers.full_snapshot import iter_full_snapshot, read_head_meta

    task = result.task
    unchecked: list[tuple[str, UnsupportedSerializerError]] = []
    try:
        meta = read_head_meta(source, list(task.offsets))
        _mark_kryo_generation(meta, task)
        if not meta.key_group_compression:
            result.bytes_without_checksum += source.size
        for stream in iter_full_snapshot(source, meta, KeyGroupRange(*task.key_groups), list(task.offsets), task.max_parallelism):
            try:
                for _ in stream.rows:
                    pass
            except UnsupportedSerializerError as error:
                unchecked.append((stream.name, error))
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_key_groups", error))
    if unchecked:
        names = ", ".join(repr(name) for name, _ in unchecked)
        first = unchecked[0][1]
        result.problems.append(Problem("not_fully_checked", f"states not checked: {names}; {first}", first.offset, severity="warning"))
    result.bytes_checked += source.size
    result.blocks_checked += sum(1 for offset in task.offsets if offset > 0)


def _check_raw_keyed(source, result: FileResult) -> None:
    """Raw keyed state: when it holds timers (RocksDB with timers on the heap), every key group's timer
    services and every timer decoded; other raw state is the operator's own bytes (size checked only).
    Timers of a key or namespace serializer this toolkit cannot decode cannot be told apart: a warning."""
    from repair.formats.flink.handles import KeyGroupRange
    from repair.readers.raw_timers import first_key_group_services, iter_raw_timers, raw_key_group_blocks

    task = result.task
    key_groups = KeyGroupRange(*task.key_groups)
    try:
        blocks = raw_key_group_blocks(key_groups, list(task.offsets), source.size)
        services = first_key_group_services(source, blocks)
        for stream in iter_raw_timers(source, key_groups, list(task.offsets), services or [], kryo_generation=task.kryo_generation):
            for _ in stream.rows:
                pass
        result.blocks_checked += len(blocks) if services is not None else 0
    except UnsupportedSerializerError as error:
        result.problems.append(Problem("not_fully_checked", f"timers not checked: {error}", error.offset, severity="warning"))
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_raw_timers", error))
    result.bytes_checked += source.size


def _check_changelog(source, result: FileResult) -> None:
    """A changelog (DSTL) file: its change stream, then every change set framed, every change's operation,
    every state's meta data decoded (TTL configuration and default value included).

    Flink reads only the change sets a checkpoint's handles point at (``StateChangeFormat.read`` at each
    offset), never the whole file nor its size: real Flink 2.1 and 2.3 restore exact state from a DSTL file
    cut short, or with a byte flipped or zeroed, outside those change sets (damage matrix). So a file whose
    stream decodes keeps it (:attr:`FileResult.change_stream`) for the caller to read each checkpoint's
    change sets as Flink does; a change set or size that is off elsewhere is a warning here."""
    from repair.formats.flink.changelog.dstl import changelog_stream, decode_change, iter_change_sets

    data = _whole(source, result)
    starts: list[int] = []
    compressed = data[:1] == b"\x01"
    if not compressed:
        result.bytes_without_checksum += len(data)
    where = " (offsets count bytes of the decompressed stream after the flag byte)" if compressed else " (offsets count bytes after the flag byte)"
    try:
        stream = changelog_stream(data)
    except RepairError as error:  # no change set of it can be read
        result.problems.append(Problem.from_error("bad_changelog", error, message=str(error) + where))
        return
    result.change_stream = stream
    if len(stream) != result.task.size:
        # Flink records the stream's length (after the flag byte, uncompressed) as the handle's size.
        kind = "truncated_file" if len(stream) < result.task.size else "size_mismatch"
        result.problems.append(Problem(kind, f"the change stream has {len(stream)} bytes, _metadata records {result.task.size}; "
                                       f"{CHANGE_SETS_READ}", expected=f"{result.task.size} bytes", found=f"{len(stream)} bytes",
                                       severity="warning"))
    try:
        for offset, changes in iter_change_sets(stream):
            starts.append(offset)
            for change in changes:
                decode_change(change)
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_changelog", error, message=f"{error}{where}; {CHANGE_SETS_READ}",
                                                  severity=Severity.WARNING))
        result.change_sets_framed = False
    result.change_sets = tuple(starts)
    result.blocks_checked += len(starts)


#: Why damage in a DSTL file found by reading it whole is only a warning.
CHANGE_SETS_READ = ("Flink reads only the change sets _metadata points at; those are checked for each checkpoint "
                    "(an error if one does not decode)")


def _check_operator_state(source, result: FileResult) -> None:
    """Managed operator state, as Flink's ``OperatorStateRestoreOperation`` reads it: the backend meta data,
    then every element of every state the handle names, at the offsets it records. Elements of a
    serializer this toolkit cannot decode are not checked (a warning)."""
    from repair.formats.flink.operator_state import OperatorStateFile

    data = _whole(source, result)
    if not result.task.operator_states:
        return
    unchecked: list[str] = []
    try:
        file = OperatorStateFile(data, result.task.operator_states)
        _mark_kryo_generation(file.meta, result.task)
        if not file.meta.compression:
            result.bytes_without_checksum += len(data)
        unchecked += file.meta.problems
        for state in file.states:
            for row in file.rows(state.name):
                if row.get("error"):
                    unchecked.append(f"state {state.name!r}: {row['error']}")
                    break
    except RepairError as error:
        result.problems.append(Problem.from_error("bad_operator_state", error))
        return
    if unchecked:
        result.problems.append(Problem("not_fully_checked", "operator state not fully checked: " + "; ".join(unchecked),
                                       severity="warning"))


def _check_data(source, result: FileResult) -> None:
    """Bytes of a known size only (operator state, full snapshots): existence and size were checked."""
    result.bytes_checked += source.size


_CHECKS = {
    "sst": _check_sst,
    "manifest": _check_manifest,
    "current": _check_current,
    "options": _check_options,
    "backend-meta": _check_backend_meta,
    "key-groups": _check_key_groups,
    "raw-keyed": _check_raw_keyed,
    "changelog": _check_changelog,
    "operator-state": _check_operator_state,
    "data": _check_data,
}


def kind_for_local_name(local_name: str | None, role: str) -> str:
    """What the bytes behind a local RocksDB file name (or handle role) should be."""
    if role == "meta":
        return "backend-meta"
    name = local_name or ""
    if name.endswith(".sst"):
        return "sst"
    if name.startswith("MANIFEST-"):
        return "manifest"
    if name == "CURRENT":
        return "current"
    if name.startswith("OPTIONS-"):
        return "options"
    return "data"
