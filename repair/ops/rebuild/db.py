"""``repair rebuild-manifest DB_DIR --out NEW_DB``: a bare RocksDB directory rebuilt into a new one that opens.

A TaskManager's working or local-recovery ``db/`` directory whose MANIFEST is gone
(``MANIFEST-000006: No such file or directory``), corrupt, or whose CURRENT is missing: RocksDB will
not open it although the SSTs are intact. ``NEW_DB`` (a new directory, published whole or not at
all) gets copies of the SSTs, a new MANIFEST and CURRENT built from them
(:mod:`repair.formats.rocksdb.manifest_builder`), the OPTIONS file (or a compatible one written from the SST
properties, :mod:`repair.formats.rocksdb.options_writer`), the IDENTITY file, and the WAL files that hold
data. ``DB_DIR`` is only read.

What the old MANIFEST still says is used (:mod:`repair.ops.rebuild.db_evidence`): read intact (CURRENT
deleted, say), its live files are exactly the files taken, and SSTs it does not list are left out
as RocksDB would ignore them; damaged, its readable prefix still names column families and the
files compactions deleted. Column families without files come from it and from the OPTIONS
file's ``[CFOptions "name"]`` sections.

WAL files (``NNNNNN.log``) are copied when they hold records, and the MANIFEST's log number is set to
the oldest of them, so RocksDB replays them on open as it would have: data that only a WAL holds
(a DB written with the WAL on and not flushed) is kept. Flink writes with the WAL disabled; its WALs
are empty and are left out. A WAL entry for a column family the new MANIFEST lacks would be skipped
by RocksDB: that refuses the rebuild (or, with ``drop_missing``, is reported as lost).

Missing (listed by an intact old MANIFEST), truncated, corrupt or unreadable SSTs refuse the rebuild
unless ``drop_missing``; then they are left out and :attr:`RebuildDbResult.lost` names them.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from repair.errors import FormatError, RepairError, StorageError, TruncatedError, UsageError
from repair.findings import Problem, Severity
from repair.formats.rocksdb.files import (
    FileKind,
    OptionsFile,
    file_number,
    parse_file_name,
    parse_options,
    table_file_name,
)
from repair.formats.rocksdb.manifest_builder import (
    FORMATS,
    LevelAssignmentError,
    RebuiltManifest,
    SstSummary,
    build_manifest,
    derive_precedence,
    describe_sst,
)
from repair.formats.rocksdb.options_writer import (
    ROCKSDB_VERSION_FOR_FORMAT,
    TableFacts,
    options_file_name,
    options_for_column_families,
    render_column_family_sections,
    render_options,
    without_db_option,
)
from repair.formats.rocksdb.table.block import TableFormatError
from repair.formats.rocksdb.table.sst import open_table
from repair.formats.rocksdb.wal import WalSummary, summarize_wal
from repair.io import storage as st
from repair.io.layout import ROCKSDB_DIR, Layout, classify
from repair.io.outputs import new_output
from repair.ops.rebuild.db_evidence import (
    ColumnFamilyIds,
    OldManifest,
    assign_column_family_ids,
    choose_format,
    read_current,
    read_old_manifest,
    rocksdb7_markers,
)
from repair.ops.renamed import renamed
from repair.ops.verify.engine import verify
from repair.results import CommandResult

#: Files of ``DB_DIR`` copied as they are, besides SSTs, WALs and OPTIONS.
_COPIED = {FileKind.IDENTITY}
#: OPTIONS files are a few dozen KiB; one larger than this is not read.
_OPTIONS_MAX_BYTES = 16 << 20


# -- result ------------------------------------------------------------------------------------


@dataclass
class ColumnFamilyReport:
    id: int
    name: str
    #: Where the id comes from: "SST properties", "MANIFEST-<n>", "OPTIONS order" or "new id".
    id_source: str
    files: dict[str, int] = field(default_factory=dict)  # SST name -> level
    wal_entries: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class WalReport:
    name: str
    size: int
    included: bool
    why: str
    summary: WalSummary | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "included": self.included, "why": self.why,
                "contents": self.summary.to_json() if self.summary else None}


@dataclass
class SkippedFile:
    """A file of DB_DIR not copied to NEW_DB, and why (no data is lost by it)."""

    name: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class LostItem:
    """Data left out with ``drop_missing``: an SST, or WAL entries of an unknown column family."""

    name: str
    reason: str  # missing | truncated | corrupt | unreadable | unknown_column_family
    message: str
    offset: int | None = None
    column_family: str | None = None
    level: int | None = None
    seqnos: tuple[int, int] | None = None
    #: Where the column family, level and seqnos come from (the old MANIFEST), or None.
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["seqnos"] = list(self.seqnos) if self.seqnos else None
        return out


@dataclass
class OptionsReport:
    action: str  # kept | written
    name: str
    #: For ``kept``: the ``wal_dir`` removed from it; column families it lacked, appended.
    removed_wal_dir: str | None = None
    appended: list[str] = field(default_factory=list)
    #: Why the DB's own OPTIONS was not kept (``written``), e.g. "no OPTIONS file".
    why: str | None = None
    #: For ``written``: per column family, the options written and where each comes from.
    column_families: list = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "name": self.name, "removed_wal_dir": self.removed_wal_dir, "appended": self.appended,
                "why": self.why, "column_families": [c.to_json() for c in self.column_families]}


@dataclass
class RebuildDbResult(CommandResult):
    source: str
    out: str
    format: str | None = None
    format_evidence: list[str] = field(default_factory=list)
    current: str | None = None
    old_manifest: OldManifest | None = None
    options: OptionsReport | None = None
    column_families: list[ColumnFamilyReport] = field(default_factory=list)
    manifest_name: str | None = None
    next_file_number: int | None = None
    last_sequence: int | None = None
    log_number: int | None = None
    wals: list[WalReport] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    lost: list[LostItem] = field(default_factory=list)
    unrepairable: list[str] = field(default_factory=list)
    hint: str | None = None
    warnings: list[str] = field(default_factory=list)
    new_db: str | None = None
    written_files: int = 0
    written_bytes: int = 0
    output_verified: bool | None = None

    @property
    def status(self) -> str:
        """``rebuilt`` (written, verified clean, nothing lost), ``rebuilt_with_losses`` (``drop_missing`` left data
        out), ``not_clean`` (written, but verify finds problems) or ``not_rebuilt`` (nothing written)."""
        if self.new_db is None:
            return "not_rebuilt"
        if not self.output_verified:
            return "not_clean"
        return "rebuilt_with_losses" if self.lost else "rebuilt"

    @property
    def ok(self) -> bool:
        return self.status == "rebuilt"

    @property
    def findings(self) -> list[Problem]:
        """``unrepairable``, ``lost`` and ``warnings`` in the common finding shape."""
        found = [Problem("unrepairable", text) for text in self.unrepairable]
        found += [Problem("data_dropped", f"{item.name} left out ({item.reason}): {item.message}", offset=item.offset,
                          details=(("local_name", item.name), ("column_family", item.column_family)))
                  for item in self.lost]
        found += [Problem("rebuild_warning", text, severity=Severity.WARNING) for text in self.warnings]
        return found

    def document(self) -> dict[str, Any]:
        return {
            "status": self.status, "kind": "rocksdb-dir", "source": self.source, "out": self.out,
            "new_db": self.new_db,
            "format": self.format, "format_evidence": self.format_evidence, "current": self.current,
            "old_manifest": self.old_manifest.to_json() if self.old_manifest else None,
            "options": self.options.to_json() if self.options else None,
            "manifest": self.manifest_name, "next_file_number": self.next_file_number, "last_sequence": self.last_sequence,
            "log_number": self.log_number,
            "column_families": [c.to_json() for c in self.column_families],
            "wals": [w.to_json() for w in self.wals],
            "skipped": [s.to_json() for s in self.skipped],
            "lost": [item.to_json() for item in self.lost],
            "unrepairable": self.unrepairable, "hint": self.hint, "warnings": self.warnings,
            "written": {"files": self.written_files, "bytes": self.written_bytes} if self.new_db else None,
            "output_verified": self.output_verified,
            "findings": [finding.to_json() for finding in self.findings],
        }


# -- the operation -----------------------------------------------------------------------------


@dataclass
class _Sst:
    info: st.FileInfo
    name: str
    summary: SstSummary
    facts: TableFacts
    markers: list[str]


@dataclass
class _Options:
    """The DB's own newest OPTIONS file that parses."""

    name: str
    parsed: OptionsFile
    text: str


@renamed(db_dir="path")
def rebuild_db(
    path: str | Layout, out: str, *, format: str | None = None, drop_missing: bool = False, storage: st.Storage | None = None,
) -> RebuildDbResult:
    """Rebuild the RocksDB directory ``path`` into the new directory ``out``; see the module docstring.

    ``format`` (``frocksdb6`` or ``frocksdb8``) overrides the MANIFEST format chosen from the evidence.
    Raises only for unusable input (not a RocksDB directory, ``out`` not new or inside it, unreadable listing).
    ``path`` may be the :class:`~repair.io.layout.Layout` :func:`~repair.io.layout.classify` gave for it.
    """
    storage = storage or st.default_storage()
    if format is not None and format not in FORMATS:
        raise UsageError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    layout = path if isinstance(path, Layout) else classify(path, storage)
    if layout.kind != ROCKSDB_DIR:
        raise UsageError(f"not a RocksDB directory (no CURRENT, MANIFEST or SST file): a {layout.kind}", source=layout.path)
    db_dir = layout.path
    new_output(out, layout.inputs, storage)
    result = RebuildDbResult(st.absolute(db_dir), out)
    files = _inventory(db_dir, storage, result)
    result.current, target = read_current(files.get("CURRENT"), storage)
    old = result.old_manifest = read_old_manifest(files, target, storage)
    ssts = _scan_ssts(files, old, drop_missing, storage, result)
    options = _read_options(files, storage, result)
    result.wals = _summarize_wals(files, old, storage)
    if not result.unrepairable:
        cf_ids = _column_families(ssts, old, options, drop_missing, result)
    if result.unrepairable:
        return _with_hint(result)

    result.format, result.format_evidence, disagreement = choose_format(
        format, options.parsed if options else None, options.name if options else None, old, [(s.name, s.markers) for s in ssts])
    result.warnings += [disagreement] if disagreement else []
    numbers = {n for info in files.values() if (n := _number(info)) is not None}
    if old.version is not None and old.version.next_file_number:
        numbers.add(old.version.next_file_number - 1)  # numbers the old DB handed out already
    options_file = _options_file(options, ssts, cf_ids, numbers, result)
    included = [files[w.name] for w in result.wals if w.included]
    log_number = min((_number(i) for i in included), default=None)  # RocksDB replays the WALs from there
    last_sequence = max([s.summary.largest_seqno for s in ssts] + [old.last_sequence()])
    try:
        rebuilt = _build(ssts, cf_ids.pairs(), result.format, numbers, log_number, last_sequence, storage)
    except (LevelAssignmentError, UsageError) as error:
        result.unrepairable.append(f"the SSTs cannot be put on levels RocksDB accepts: {error.message}")
        return result
    result.manifest_name, result.next_file_number = rebuilt.manifest_name, rebuilt.next_file_number
    result.last_sequence, result.log_number = rebuilt.last_sequence, rebuilt.log_number
    result.column_families = _column_family_reports(rebuilt, ssts, cf_ids, result.wals)

    with storage.publish_dir(out, commit_file="CURRENT") as publisher:
        copied = [s.info for s in ssts] + included + [i for i in files.values() if _kind(i) in _COPIED]
        for info in copied:
            _copy(publisher, storage, info, result)
        for name, data in (options_file, (rebuilt.manifest_name, rebuilt.manifest), ("CURRENT", rebuilt.current)):
            _write(publisher, name, data, result)
    result.new_db = out
    result.output_verified = verify(out, storage=storage).ok
    return result


def _column_families(ssts: list[_Sst], old: OldManifest, options: _Options | None, drop_missing: bool,
                     result: RebuildDbResult) -> ColumnFamilyIds:
    """Ids for every known column family; WAL entries of unknown ones refuse the rebuild (or are lost)."""
    cf_ids = assign_column_family_ids(
        [(s.summary.column_family_id, s.summary.column_family_name) for s in ssts], old,
        list(options.parsed.cf_options) if options else [],
    )
    result.warnings += cf_ids.warnings
    if options is None and old.version is None:
        result.warnings.append(
            "no OPTIONS file and no readable MANIFEST: column families without SSTs are not known and are missing from "
            "NEW_DB (create them when opening it: create_missing_column_families)")
    _check_wal_column_families(result, cf_ids.ids, drop_missing)
    return cf_ids


def _options_file(options: _Options | None, ssts: list[_Sst], cf_ids: ColumnFamilyIds, numbers: set[int],
                  result: RebuildDbResult) -> tuple[str, bytes]:
    """``(name, bytes)`` of NEW_DB's OPTIONS file: the DB's own, adjusted, or one written from the SSTs.

    A written file takes a number above every other (added to ``numbers``).
    """
    if options is not None:
        return options.name, _kept_options(options, ssts, cf_ids.ordered_names(), result).encode("utf-8")
    number = max(numbers | {s.summary.number for s in ssts}, default=0) + 1
    numbers.add(number)
    derived = options_for_column_families([s.facts for s in ssts], cf_ids.ordered_names())
    why = result.options.why if result.options else "no OPTIONS file"
    result.options = OptionsReport("written", options_file_name(number), why=why, column_families=derived)
    return result.options.name, render_options(ROCKSDB_VERSION_FOR_FORMAT[result.format], derived)


def _kind(info: st.FileInfo) -> FileKind | None:
    parsed = parse_file_name(st.basename(info.path))
    return parsed.kind if parsed else None


def _number(info: st.FileInfo) -> int | None:
    parsed = parse_file_name(st.basename(info.path))
    return parsed.number if parsed else None


def _inventory(db_dir: str, storage: st.Storage, result: RebuildDbResult) -> dict[str, st.FileInfo]:
    """The directory's files by name; notes what will not be copied."""
    files = {}
    for info in storage.list_dir(db_dir):
        name = st.basename(info.path)
        if info.is_dir:
            result.skipped.append(SkippedFile(name + "/", "a directory: RocksDB keeps no data in subdirectories of its own"))
            continue
        files[name] = info
        kind = _kind(info)
        if kind == FileKind.BLOB:
            result.unrepairable.append(f"{name}: blob files (integrated BlobDB) are not supported: the SSTs may point into them")
        elif kind is None:
            result.skipped.append(SkippedFile(name, "not a RocksDB file"))
        elif kind == FileKind.TEMP:
            result.skipped.append(SkippedFile(name, "a temporary file RocksDB deletes on open"))
    return files


def _scan_ssts(files: dict[str, st.FileInfo], old: OldManifest, drop_missing: bool, storage: st.Storage,
               result: RebuildDbResult) -> list[_Sst]:
    """Describe every SST to take; the others are skipped (not live) or lost/unrepairable (damaged)."""
    live = old.live_files() if old.intact else None
    taken: list[_Sst] = []
    for name, info in sorted(files.items()):
        if _kind(info) != FileKind.TABLE:
            continue
        number = _number(info)
        if live is not None and number not in live:
            newer = old.version.next_file_number is not None and number >= old.version.next_file_number
            what = "newer than the MANIFEST: an unfinished flush or compaction output" if newer else "obsolete or unfinished"
            result.skipped.append(SkippedFile(name, f"not a live file of {old.name}: RocksDB ignores it ({what})"))
            continue
        if number in old.deleted:
            result.skipped.append(SkippedFile(name, f"{old.name} records its deletion (an obsolete compaction input)"))
            continue
        try:
            with storage.open_input(info.path) as source:
                summary = describe_sst(source, name)
                table = open_table(source)
                taken.append(_Sst(info, name, summary, TableFacts.from_table(table), rocksdb7_markers(table)))
        except RepairError as error:
            _damaged(result, name, _reason(error), error, drop_missing, old)
            continue
        if live is not None and live[number].file_size != info.size:
            result.warnings.append(f"{name}: {old.name} records {live[number].file_size} bytes, the file has {info.size}; "
                                   "the file reads as a whole SST and is taken with its size")
    for number, meta in sorted((live or {}).items()):
        name = table_file_name(number)
        if name not in files:
            _damaged(result, name, "missing", StorageError("file is missing"), drop_missing, old)
    return taken


def _reason(error: RepairError) -> str:
    if isinstance(error, StorageError):
        return "unreadable"
    if isinstance(error, TruncatedError) or (isinstance(error, TableFormatError) and error.kind in ("truncated", "truncated_file")):
        return "truncated"
    if isinstance(error, FormatError):
        return "corrupt"
    return "unusable"


def _damaged(result: RebuildDbResult, name: str, reason: str, error: RepairError, drop_missing: bool, old: OldManifest) -> None:
    """An SST that is missing or does not read: lost with ``drop_missing``, else it refuses the rebuild."""
    message = error.message
    droppable = reason in ("missing", "truncated", "corrupt", "unreadable")
    if drop_missing and droppable:
        meta = old.file(file_number(name))
        item = LostItem(name, reason, message, error.offset)
        if meta is not None:
            cf, fmeta = meta
            item.column_family, item.level = cf, fmeta.level
            item.seqnos, item.source = (fmeta.smallest_seqno, fmeta.largest_seqno), old.name
        result.lost.append(item)
        return
    suffix = " [--drop-missing can rebuild without it]" if droppable else ""
    result.unrepairable.append(f"{name}: {reason}: {message}{suffix}")


def _with_hint(result: RebuildDbResult) -> RebuildDbResult:
    if any(line.endswith("[--drop-missing can rebuild without it]") for line in result.unrepairable):
        result.hint = ("Some SST files or WAL entries are missing, corrupt or unusable. A TaskManager's directory is a cache: "
                       "restoring the last checkpoint is usually better (repair fallback). Otherwise --drop-missing rebuilds "
                       "without them: their data is lost, and keys they last updated may come back with older values "
                       "from other files.")
    return result


def _read_options(files: dict[str, st.FileInfo], storage: st.Storage, result: RebuildDbResult) -> _Options | None:
    """The newest OPTIONS file that parses; ``None`` when there is none (why goes to ``result.options``)."""
    names = sorted((n for n, i in files.items() if _kind(i) == FileKind.OPTIONS), key=lambda n: _number(files[n]), reverse=True)
    rejected = []
    for i, name in enumerate(names):
        try:
            text = storage.read_bytes(files[name].path, max_size=_OPTIONS_MAX_BYTES).decode("utf-8")
            options = _Options(name, parse_options(text), text)
        except (RepairError, UnicodeDecodeError) as error:
            rejected.append(f"{name} does not parse ({getattr(error, 'message', error)})")
            result.skipped.append(SkippedFile(name, "does not parse"))
            continue
        result.skipped += [SkippedFile(older, f"an older OPTIONS file ({name} is kept)") for older in names[i + 1:]]
        return options
    if rejected:
        result.options = OptionsReport("written", "", why="; ".join(rejected))
    return None


def _kept_options(options: _Options, ssts: list[_Sst], cf_names: list[str], result: RebuildDbResult) -> str:
    """The DB's OPTIONS without ``wal_dir``, plus sections for column families it lacks."""
    text, wal_dir = without_db_option(options.text, "wal_dir")
    report = result.options = OptionsReport("kept", options.name, removed_wal_dir=wal_dir)
    if wal_dir and st.basename(wal_dir.rstrip("/")) != st.basename(result.source.rstrip("/")):
        result.warnings.append(
            f"{options.name} sets wal_dir={wal_dir}: the copy leaves it out, so RocksDB keeps NEW_DB's WAL files in NEW_DB. "
            "If that directory was not this DB's own, its WAL files are not included.")
    missing = [cf for cf in cf_names if cf not in options.parsed.cf_options]
    if missing:
        report.appended = missing
        report.column_families = options_for_column_families([s.facts for s in ssts], missing)
        text = text.rstrip("\n") + "\n" + render_column_family_sections(report.column_families).decode("utf-8")
    return text


def _summarize_wals(files: dict[str, st.FileInfo], old: OldManifest, storage: st.Storage) -> list[WalReport]:
    """Which WAL files to copy: those holding records, not older than an intact old MANIFEST's log numbers."""
    reports = []
    keep_from = old.min_log_number() if old.intact else None
    for name, info in sorted(files.items()):
        if _kind(info) != FileKind.WAL:
            continue
        number = _number(info)
        if keep_from is not None and number < keep_from:
            reports.append(WalReport(name, info.size, False, f"older than the log number {keep_from} of {old.name}: already flushed"))
            continue
        if info.size == 0:
            reports.append(WalReport(name, 0, False, "empty (Flink writes with the WAL disabled)"))
            continue
        with storage.open_input(info.path) as source:
            summary = summarize_wal(source, number)
        if not summary.holds_data:
            why = "holds no records" + (f" ({summary.problem} at offset {summary.problem_offset})" if summary.problem else "")
            reports.append(WalReport(name, info.size, False, why, summary))
            continue
        why = "holds data RocksDB replays on open"
        if summary.compressed:
            why += " (compressed: contents not inspected)"
        reports.append(WalReport(name, info.size, True, why, summary))
    return reports


def _check_wal_column_families(result: RebuildDbResult, ids: dict[int, tuple[str, str]], drop_missing: bool) -> None:
    """WAL entries of a column family id the new MANIFEST does not have would be skipped by RocksDB."""
    for wal in result.wals:
        if not wal.included or wal.summary is None:
            continue
        if wal.summary.problem:
            result.warnings.append(
                f"{wal.name}: {wal.summary.problem} at offset {wal.summary.problem_offset}: RocksDB's point-in-time recovery "
                "replays the records before it only (as it would have in the original directory)")
        for cf_id, count in sorted(wal.summary.entries_by_column_family.items()):
            if cf_id not in ids:
                message = (f"{count} entries for column family id {cf_id}, whose name is not known (no SST, MANIFEST or OPTIONS "
                           "names it): RocksDB skips them")
                if drop_missing:
                    result.lost.append(LostItem(wal.name, "unknown_column_family", message))
                else:
                    result.unrepairable.append(f"{wal.name}: {message} [--drop-missing can rebuild without it]")
            elif ids[cf_id][1] in ("OPTIONS order", "new id"):
                result.warnings.append(
                    f"{wal.name}: {count} entries for column family id {cf_id}, taken as {ids[cf_id][0]!r} "
                    f"by {ids[cf_id][1]}: no SST or MANIFEST records that id")


def _build(ssts: list[_Sst], pairs: list[tuple[int, str]], format_: str, numbers: set[int], log_number: int | None,
           last_sequence: int, storage: st.Storage) -> RebuiltManifest:
    """The MANIFEST; overlapping files whose seqno ranges interleave are ordered by their keys."""
    summaries = [s.summary for s in ssts]
    kwargs = dict(format=format_, existing_numbers=numbers, log_number=log_number, last_sequence=last_sequence)
    try:
        return build_manifest(summaries, pairs, **kwargs)
    except LevelAssignmentError:
        with ExitStack() as stack:
            sources = {s.summary.number: stack.enter_context(storage.open_input(s.info.path)) for s in ssts}
            precedence = derive_precedence(sources, summaries)
        return build_manifest(summaries, pairs, precedence=precedence, **kwargs)


def _column_family_reports(rebuilt: RebuiltManifest, ssts: list[_Sst], cf_ids, wals: list[WalReport]) -> list[ColumnFamilyReport]:
    reports = []
    for cf_id, name in rebuilt.column_families:
        levels = rebuilt.levels[cf_id].levels
        files = {s.name: levels[s.summary.number] for s in ssts if s.summary.column_family_id == cf_id}
        entries = sum(w.summary.entries_by_column_family.get(cf_id, 0) for w in wals if w.included and w.summary)
        reports.append(ColumnFamilyReport(cf_id, name, cf_ids.ids[cf_id][1], files, entries))
    return reports


def _chunks_of_size(chunks: Iterable[bytes], expected: int, uri: str) -> Iterator[bytes]:
    """``chunks``, failing when they do not add up to ``expected`` bytes (the file changed while read)."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        yield chunk
    if total != expected:
        raise StorageError(f"changed while being copied ({expected} bytes when listed, {total} read): is RocksDB still "
                           "running on this directory?", source=uri)


def _copy(publisher, storage: st.Storage, info: st.FileInfo, result: RebuildDbResult) -> None:
    publisher.write(st.basename(info.path), _chunks_of_size(storage.iter_chunks(info.path), info.size, info.path))
    result.written_files += 1
    result.written_bytes += info.size


def _write(publisher, name: str, data: str | bytes, result: RebuildDbResult) -> None:
    data = data.encode("utf-8") if isinstance(data, str) else data
    publisher.write(name, data)
    result.written_files += 1
    result.written_bytes += len(data)
