"""What ``repair rebuild-manifest --drop-missing`` loses: per dropped SST, exactly which state, key groups and keys.

An SST that is missing (or truncated, or corrupt) cannot say what it held. The RocksDB instance's
original MANIFEST can: each ``NewFile`` record keeps the file's column family, level, size, smallest
and largest internal keys and sequence numbers. :func:`describe_lost_files` reads them (leniently: a
damaged MANIFEST still tells what its readable records say) and decodes the range's ends into key
groups and Flink keys with the backend meta data (:mod:`repair.formats.flink.in_rocksdb.key_range`). Without a
readable MANIFEST record the range is reported unknown, with the reason; it is never guessed. A
corrupt file's own properties block, when readable, still gives its column family and entry count.

Dropping a file does not always make its keys disappear: where an older file of the same column family
overlaps its key range, those keys show the older value again (or come back after a deletion).
:func:`add_overlaps` lists, per dropped file, the remaining files that may do that (``older``) and
those that hold newer versions of some of its keys, which are then not lost (``newer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from repair.errors import RepairError
from repair.findings import Problem
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import KeyedBackendMeta, decode_keyed_backend_meta
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.flink.in_rocksdb.key_range import BoundaryKey, describe_boundary, key_group_span
from repair.formats.flink.metadata import OperatorState
from repair.formats.rocksdb.files import decode_current, file_number
from repair.formats.rocksdb.manifest import FileMetaData, iter_version_edits
from repair.formats.rocksdb.manifest_builder import SstSummary
from repair.formats.rocksdb.table.properties import TableProperties
from repair.formats.rocksdb.table.salvage import salvage_table
from repair.formats.rocksdb.table.sst import open_table
from repair.io import storage as st
from repair.io.resolved import close, read_resolved
from repair.io.snapshot import LoadedSnapshot
from repair.ops.rebuild.salvage import open_as_it_is
from repair.ops.verify.engine import CheckpointFinding

#: Verify finding kinds of an SST whose bytes are gone; any other error in its bytes makes it "corrupt".
_GONE = {"missing_file": "missing", "truncated_file": "truncated"}
#: No reason to drop data: a size differing from ``_metadata`` (the bytes may be intact), a path that
#: does not resolve (the file may exist elsewhere).
_NOT_A_LOSS = {"size_mismatch", "unresolvable_path"}


def is_sst_file_finding(finding: CheckpointFinding) -> bool:
    """A problem of an SST file's own bytes (not of the MANIFEST's view of it)."""
    ref = finding.reference
    return ref.role == "shared" and (ref.local_name or "").endswith(".sst")


def loss_reason(findings: Iterable[CheckpointFinding]) -> str | None:
    """``missing``, ``truncated``, ``unreadable`` or ``corrupt`` for an SST that ``--drop-missing`` may drop.

    None when its only problem is a size differing from ``_metadata`` (the file may be intact).
    """
    kinds = {f.kind for f in findings}
    for kind, reason in _GONE.items():
        if kind in kinds:
            return reason
    rest = kinds - _NOT_A_LOSS
    if not rest:
        return None
    return "unreadable" if rest == {"unreadable"} else "corrupt"


@dataclass
class Overlap:
    """A remaining file of the same column family whose key range overlaps a dropped file's."""

    local_name: str
    level: int | None
    smallest_seqno: int
    largest_seqno: int
    smallest: bytes  # user keys
    largest: bytes
    #: ``older``: holds older versions of keys in the range (they come back); ``newer``: holds newer ones
    #: (those keys are not lost); ``both``: interleaved sequence numbers.
    relation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "local_name": self.local_name, "level": self.level, "seqnos": [self.smallest_seqno, self.largest_seqno],
            "smallest_user_key": self.smallest.hex(), "largest_user_key": self.largest.hex(), "relation": self.relation,
        }


@dataclass
class LostFile:
    """One SST left out of a rebuilt MANIFEST, and what is known of what it held."""

    checkpoint: int
    operator: str  # uid, name or id, as verify reports it
    operator_id: str
    operator_uid: str | None
    operator_name: str | None
    subtask: int
    subtask_key_groups: tuple[int, int]
    local_name: str
    path: str | None  # where its bytes were expected (None when inline)
    file_size: int  # as _metadata records it
    reason: str  # missing | truncated | corrupt | unreadable
    problems: list[str]
    offset: int | None  # first bad byte, when verify knows it
    column_family: str | None = None
    level: int | None = None
    smallest: BoundaryKey | None = None
    largest: BoundaryKey | None = None
    key_groups: tuple[int, int] | None = None
    smallest_seqno: int | None = None
    largest_seqno: int | None = None
    entries: int | None = None
    #: The column family's id, as the MANIFEST's record of the file says (not in the JSON document: a
    #: salvaged copy of the file is written with it when its own properties are unreadable).
    column_family_id: int | None = None
    #: The file's creation time as the MANIFEST's record says (not in the JSON document: an older copy of a
    #: missing file must carry the same one in its properties, :mod:`repair.ops.rebuild.older`).
    file_creation_time: int | None = None
    #: Where the facts come from: ``MANIFEST-000004`` and/or ``SST properties``.
    sources: list[str] = field(default_factory=list)
    #: Why the key range is unknown (None when known).
    range_unknown: str | None = None
    overlaps: list[Overlap] = field(default_factory=list)
    #: Why overlaps cannot be told (None when they were checked).
    overlaps_unknown: str | None = None
    #: The keys of its entries, with ``list_lost_keys`` (:mod:`repair.ops.rebuild.lost_keys`).
    lost_keys: Any = None
    #: Where its bytes are, and what a salvage of it found (not in the JSON document).
    resolved: Any = field(default=None, repr=False)
    salvage: Any = field(default=None, repr=False)

    @property
    def older_overlaps(self) -> list[Overlap]:
        return [o for o in self.overlaps if o.relation in ("older", "both")]

    @property
    def newer_overlaps(self) -> list[Overlap]:
        return [o for o in self.overlaps if o.relation in ("newer", "both")]

    def warnings(self) -> list[str]:
        """What dropping this file does besides losing its entries, in words."""
        out = []
        if self.older_overlaps:
            names = ", ".join(o.local_name for o in self.older_overlaps)
            out.append(
                f"keys in this range that {names} also hold{'s' if len(self.older_overlaps) == 1 else ''} come back with "
                "their OLDER values (or reappear after a deletion) instead of disappearing"
            )
        if self.newer_overlaps:
            names = ", ".join(o.local_name for o in self.newer_overlaps)
            out.append(f"{names} hold{'s' if len(self.newer_overlaps) == 1 else ''} newer versions of some keys in this range: those are not lost")
        if self.overlaps_unknown:
            out.append(self.overlaps_unknown)
        elif not self.overlaps:
            out.append("no remaining file of this state overlaps the range: every key it held loses this state")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint, "operator": self.operator, "operator_id": self.operator_id,
            "operator_uid": self.operator_uid, "operator_name": self.operator_name, "subtask": self.subtask,
            "subtask_key_groups": list(self.subtask_key_groups), "local_name": self.local_name, "path": self.path,
            "file_size": self.file_size, "reason": self.reason, "problems": self.problems, "offset": self.offset,
            "column_family": self.column_family, "level": self.level,
            "key_groups": list(self.key_groups) if self.key_groups else None,
            "smallest": self.smallest.to_json() if self.smallest else None,
            "largest": self.largest.to_json() if self.largest else None,
            "seqnos": [self.smallest_seqno, self.largest_seqno] if self.smallest_seqno is not None else None,
            "entries": self.entries, "sources": self.sources, "range_unknown": self.range_unknown,
            "overlaps": [o.to_json() for o in self.overlaps], "overlaps_unknown": self.overlaps_unknown,
            "warnings": self.warnings(), "lost_keys": self.lost_keys.to_json() if self.lost_keys is not None else None,
        }


def describe_lost_files(
    snapshot: LoadedSnapshot, op: OperatorState, subtask: int, handle: IncrementalKeyedHandle,
    dropped: dict[str, list[CheckpointFinding]], storage: st.Storage,
) -> list[LostFile]:
    """A :class:`LostFile` per local SST name of ``dropped`` (its verify findings), from the unmodified ``handle``."""
    manifest_name, records, manifest_problem = _manifest_records(snapshot, handle, storage)
    meta, meta_problem = _backend_meta(snapshot, handle, storage)
    entries = {e.local_path: e for e in handle.sst_files}
    lost = []
    for local_name, findings in sorted(dropped.items()):
        entry = entries[local_name]
        resolved = snapshot.resolver.resolve(entry.handle)
        first_offset = next((f.offset for f in findings if f.offset is not None), None)
        item = LostFile(
            snapshot.metadata.checkpoint_id, op.label, op.operator_id,
            op.operator_uid, op.operator_name, subtask, (handle.key_groups.start, handle.key_groups.end), local_name,
            resolved.uri if resolved else None, resolved.size if resolved else 0, loss_reason(findings) or "corrupt",
            sorted({f.message for f in findings}), first_offset, resolved=resolved,
        )
        number = file_number(local_name)
        record = records.get(number) if number is not None else None
        if record is not None:
            cf_id, cf_name, meta_record = record
            item.column_family_id = cf_id
            _from_manifest(item, cf_name, meta_record, manifest_name, meta, op.max_parallelism)
            if meta_problem and item.smallest is not None:
                item.smallest.error = item.largest.error = meta_problem
        else:
            item.range_unknown = manifest_problem or f"{manifest_name} has no record of {local_name}"
        if item.reason != "missing" and resolved is not None:
            _from_properties(item, storage, resolved)
        lost.append(item)
    return lost


def add_overlaps(lost: list[LostFile], remaining: list[SstSummary], levels: dict[str, int]) -> None:
    """Fill each lost file's overlaps with the ``remaining`` SSTs of its instance (``levels`` by local name)."""
    for item in lost:
        if item.column_family is None or item.smallest is None or item.smallest_seqno is None:
            item.overlaps_unknown = (
                "the key range of this file is unknown: any remaining file of this subtask (of its state, if known) may "
                "hold older versions of its keys, which then come back"
            )
            continue
        item.overlaps = overlapping(item.column_family, item.smallest.user_key, item.largest.user_key,
                                    (item.smallest_seqno, item.largest_seqno), remaining, levels)


def overlapping(column_family: str, low: bytes, high: bytes, seqnos: tuple[int, int], remaining: list[SstSummary],
                levels: dict[str, int], exclude: str | None = None) -> list[Overlap]:
    """The ``remaining`` files (but ``exclude``) of ``column_family`` whose user keys overlap ``[low, high]``, each
    with its relation to lost entries of sequence numbers ``seqnos``: older, newer or both."""
    out = []
    for other in remaining:
        if other.column_family_name != column_family or other.local_name == exclude:
            continue
        other_low, other_high = other.smallest_key().user_key, other.largest_key().user_key
        if other_low > high or low > other_high:
            continue
        # Older: it holds entries no newer than the lost ones' newest, possibly older versions of their
        # keys. Newer: it holds entries after the lost ones' oldest, possibly newer versions.
        older = other.smallest_seqno <= seqnos[1]
        newer = other.largest_seqno > seqnos[0]
        relation = "both" if older and newer else ("older" if older else "newer")
        out.append(Overlap(other.local_name, levels.get(other.local_name), other.smallest_seqno, other.largest_seqno,
                           other_low, other_high, relation))
    return sorted(out, key=lambda o: o.local_name)


# -- sources of knowledge -----------------------------------------------------------------------


def _from_manifest(
    item: LostFile, cf_name: str, record: FileMetaData, manifest_name: str, meta: KeyedBackendMeta | None, max_parallelism: int,
) -> None:
    item.sources.append(manifest_name)
    item.column_family, item.level = cf_name, record.level
    item.smallest_seqno, item.largest_seqno = record.smallest_seqno, record.largest_seqno
    item.file_creation_time = record.file_creation_time
    state = meta.state(cf_name) if meta is not None else None
    key_serializer = meta.key_serializer if meta is not None else None
    try:
        item.smallest = describe_boundary(record.smallest, state, key_serializer, max_parallelism)
        item.largest = describe_boundary(record.largest, state, key_serializer, max_parallelism)
    except RepairError as error:
        item.smallest = item.largest = None
        item.range_unknown = f"{manifest_name} records an undecodable key for {item.local_name}: {error.message}"
        return
    item.key_groups = key_group_span(item.smallest, item.largest, max_parallelism)


def _from_properties(item: LostFile, storage: st.Storage, resolved) -> None:
    """Column family and entry count from a damaged file's properties block, when it still reads; else the
    entries counted in its blocks, when every data block and range deletion of it is proven sound (only a
    metadata block is damaged: the count is exact, never ``None`` where it can be known)."""
    try:
        source = open_as_it_is(storage, resolved)
        try:
            props = _properties(source)
            salvage = salvage_table(source) if props is None else None
        finally:
            close(source)
    except RepairError:
        return
    if props is None:
        if salvage is not None and item.largest is not None:
            salvage = salvage.ending_at(item.largest.internal_key)
        if salvage is not None and salvage.entries_lost == 0 and salvage.range_deletions_lost == 0 and salvage.scan_stopped_at is None:
            item.sources.append("SST blocks counted")
            item.entries = len(salvage.entries) + len(salvage.range_tombstones)
        return
    item.sources.append("SST properties")
    item.entries = props.num_entries
    if item.column_family is None:
        item.column_family = props.column_family_name


def _properties(source) -> TableProperties | None:
    try:
        return open_table(source).properties
    except RepairError:
        return None


def _manifest_records(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, storage: st.Storage,
) -> tuple[str, dict[int, tuple[int | None, str, FileMetaData]], str | None]:
    """``(MANIFEST name, {file number: (column family id, name, record)}, why nothing could be read)`` of the original MANIFEST.

    Every ``NewFile`` record of the readable part counts (file numbers are never reused), so a MANIFEST
    damaged after a file's record still tells that file's range.
    """
    private = {e.local_path: e for e in handle.private}
    manifests = sorted((n for n in private if n.startswith("MANIFEST-")), key=lambda n: file_number(n) or 0)
    name = manifests[-1] if manifests else "MANIFEST"
    if "CURRENT" in private:
        try:
            target = decode_current(_read(snapshot, storage, private["CURRENT"].handle))
            name = target if target in private else name
        except RepairError:
            pass
    if name not in private:
        return name, {}, "the checkpoint holds no MANIFEST: the file's column family and key range are unknown"
    try:
        data = _read(snapshot, storage, private[name].handle)
    except RepairError as error:
        return name, {}, f"{name} cannot be read either ({error.message}): the file's column family and key range are unknown"
    problems: list[Problem] = []
    families = {0: "default"}
    records: dict[int, tuple[int | None, str, FileMetaData]] = {}
    try:
        for edit in iter_version_edits(BytesSource(data), strict=False, findings=problems):
            if edit.column_family_add is not None:
                families[edit.column_family] = edit.column_family_add
            for record in edit.new_files:
                known = edit.column_family in families
                family = families[edit.column_family] if known else f"column family {edit.column_family}"
                records[record.number] = (edit.column_family if known else None, family, record)
    except RepairError as error:
        problems.append(Problem.from_error("unreadable", error, message=error.message, offset=error.offset or 0))
    if problems and not records:
        first = problems[0]
        return name, {}, f"{name} is damaged (at offset {first.offset}: {first.message}): the file's column family and key range are unknown"
    why = None
    if problems:
        why = f"{name} is damaged at offset {problems[0].offset} and its readable part has no record of this file"
    return name, records, why


def _backend_meta(snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, storage: st.Storage) -> tuple[KeyedBackendMeta | None, str | None]:
    try:
        return decode_keyed_backend_meta(_read(snapshot, storage, handle.meta)), None
    except RepairError as error:
        return None, f"the backend meta data cannot be read ({error.message}): keys not decoded"


def _read(snapshot: LoadedSnapshot, storage: st.Storage, handle) -> bytes:
    """The bytes of a small private file or stream (bounded by :func:`read_resolved`)."""
    resolved = snapshot.resolver.resolve(handle)
    if resolved is None:
        raise RepairError("null handle")
    return read_resolved(storage, resolved)
