"""``rebuild-manifest --older PATH``: what other sources of the same job's state still hold of a damaged checkpoint.

Within one job root the retained checkpoints share one physical file per SST: a damaged SST is damaged
in all of them. Copies exist elsewhere only: in a native savepoint (copies of the instance's live files),
in the root of the job that was restored from a checkpoint in NO_CLAIM mode (Flink copies nothing, but
the new job's first checkpoint uploads every live SST again), or in a copy a user made (``relocate
--copy``'s output). Each ``--older`` path (a native savepoint, a directory of savepoints, a job root, a
checkpoint, a copy) is classified by :mod:`repair.io.layout`; every snapshot in it is a source
(:func:`load_older`), read only.

Two things come from them:

* **replacements** (:func:`find_replacements`): a source file that is the damaged (or missing) file's
  intact original. For a damaged file the bytes prove it
  (:func:`repair.formats.rocksdb.table.same_file.intact_original`); for a missing one, the copy verifies
  and has the size ``_metadata`` records and the key range and sequence numbers the instance's MANIFEST
  records for it. The rebuilt checkpoint then holds that copy in the damaged file's place: nothing is lost.
* **the sources' values of lost keys** (:func:`add_older_versions`): for each key ``--list-lost-keys``
  lists, what each source holds of it (its newest entry: what the key held at that snapshot), compared
  with the lost entry by value (its bytes from a sound block, or as its damaged block still reads them):
  the *same value* (recoverable from that source) or *another value*; sequence numbers are not
  compared (a job restored in NO_CLAIM mode may number its writes anew, and compactions set them to 0).
  The value is decoded with the state's serializers where they allow; for a list state an entry is one
  merge operand (the elements one write appended).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import KeyedBackendMeta
from repair.formats.flink.handles import ChangelogBackendHandle, IncrementalKeyedHandle
from repair.formats.flink.in_rocksdb.key_range import plain
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.rocksdb.manifest_builder import describe_sst
from repair.formats.rocksdb.table.block import ValueType, value_type_name
from repair.formats.rocksdb.table.same_file import intact_original
from repair.formats.rocksdb.table.sst import read_table_properties, verify_table
from repair.io import storage as st
from repair.io.layout import SAVEPOINTS_DIR, SNAPSHOT_KINDS, ResolvedFile, classify, normalize_uri
from repair.io.resolved import close, open_resolved, read_resolved
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.rebuild.losses import LostFile
from repair.ops.rebuild.lost_keys import wanted_entries
from repair.ops.rebuild.salvage import open_as_it_is

#: Where replaced SSTs go, relative to the new ``_metadata``: ``replaced/<random>.sst``.
REPLACED_DIR = "replaced"


@dataclass
class OlderSnapshot:
    """One snapshot of an ``--older`` source."""

    given: str  # the path the user gave
    directory: str  # the snapshot's directory
    name: str  # chk-N or the savepoint's directory name
    checkpoint_id: int
    kind: str  # checkpoint | savepoint
    loaded: LoadedSnapshot = field(repr=False)

    def describe(self) -> str:
        return f"{self.directory} ({self.kind} {self.checkpoint_id})"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.directory, "snapshot": self.name, "kind": self.kind, "checkpoint": self.checkpoint_id}


@dataclass
class OlderSources:
    """The snapshots of every ``--older`` path (newest checkpoint id first), and the ones that could not be used."""

    snapshots: list[OlderSnapshot]
    notes: list[str] = field(default_factory=list)
    #: Every place read below the paths (an output may be inside none of them).
    inputs: list[str] = field(default_factory=list)


def load_older(paths: list[str], storage: st.Storage, *, exclude: str | None = None) -> OlderSources:
    """Every snapshot under ``paths`` but the one whose ``_metadata`` is ``exclude`` (the damaged one).

    A path that is not a snapshot, a job root or a directory of savepoints is refused (:class:`StorageError`);
    a snapshot whose ``_metadata`` does not decode is left out, with a note."""
    out = OlderSources([])
    seen = {normalize_uri(st.absolute(exclude))} if exclude else set()
    for path in paths:
        layout = classify(path, storage, accept=SNAPSHOT_KINDS | {SAVEPOINTS_DIR})
        out.inputs.extend(layout.inputs)
        for ref in layout.snapshots:
            if normalize_uri(st.absolute(ref.metadata_uri)) in seen:
                continue
            seen.add(normalize_uri(st.absolute(ref.metadata_uri)))
            try:
                loaded = load_snapshot(ref, layout.root, storage)
            except RepairError as error:
                out.notes.append(f"{ref.directory}: not used, its _metadata does not decode ({error.message})")
                continue
            out.snapshots.append(OlderSnapshot(path, ref.directory, ref.name, loaded.metadata.checkpoint_id, loaded.kind, loaded))
    out.snapshots.sort(key=lambda s: -s.checkpoint_id)
    return out


# -- replacements -------------------------------------------------------------------------------


@dataclass
class Replacement:
    """A damaged or missing SST replaced by its intact original from an older source."""

    operator: str
    subtask: int
    local_name: str
    path: str | None  # the damaged file
    reason: str  # why it was damaged: missing | truncated | corrupt | unreadable
    column_family: str | None
    source: OlderSnapshot
    #: The copy in the source: its local name there, where its bytes are (None when inline), its size.
    copy_local_name: str
    copy_path: str | None
    size: int
    #: How the copy is proven to be the original.
    evidence: str
    #: The copy in the new checkpoint, relative to the new ``_metadata``.
    new_file: str
    #: The bytes to publish (not in the JSON document).
    data: bytes = field(default=b"", repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator, "subtask": self.subtask, "local_name": self.local_name, "path": self.path,
            "reason": self.reason, "column_family": self.column_family, **self.source.to_json(),
            "copy_local_name": self.copy_local_name, "copy_path": self.copy_path, "size": self.size,
            "evidence": self.evidence, "new_file": self.new_file,
        }


def find_replacements(
    sources: OlderSources, operator: str, operator_id: str, subtask: int, handle: IncrementalKeyedHandle,
    lost: list[LostFile], storage: st.Storage,
) -> list[Replacement]:
    """The intact original, in ``sources``, of each ``lost`` file of one instance that has one."""
    out = []
    for item in lost:
        if item.reason == "unreadable":
            continue  # a storage fault, not damage: the file may be intact
        damaged = None if item.reason == "missing" else _bytes_as_they_are(item, storage)
        tried: set[str] = set()  # a file the checkpoints of one root share is compared once
        for snapshot, local_name, resolved in _candidate_files(sources, operator_id, handle):
            if resolved.size != item.file_size or resolved.uri in tried:
                continue
            if resolved.uri is not None:
                tried.add(resolved.uri)
            try:
                copy = read_resolved(storage, resolved)
            except RepairError:
                continue
            evidence = (_same_as_recorded(copy, item) if damaged is None else intact_original(damaged, copy, item.file_size))
            if evidence is None:
                continue
            out.append(Replacement(operator, subtask, item.local_name, item.path, item.reason, item.column_family, snapshot,
                                   local_name, resolved.uri, len(copy), evidence, f"{REPLACED_DIR}/{uuid.uuid4().hex}.sst", copy))
            break
    return out


def _bytes_as_they_are(item: LostFile, storage: st.Storage) -> bytes | None:
    if item.resolved is None:
        return None
    try:
        source = open_as_it_is(storage, item.resolved)
        try:
            return bytes(source.read(0, source.size))
        finally:
            close(source)
    except RepairError:
        return None


def _same_as_recorded(copy: bytes, item: LostFile) -> str | None:
    """For a missing file: whether ``copy`` verifies and has the key range and sequence numbers its MANIFEST record gives."""
    if item.smallest is None or item.largest is None or item.smallest_seqno is None:
        return None
    try:
        if not verify_table(BytesSource(copy)).ok:
            return None
        summary = describe_sst(BytesSource(copy), item.local_name)
        props = read_table_properties(BytesSource(copy))
    except RepairError:
        return None
    if summary.column_family_name != item.column_family:
        return None
    created = props.file_creation_time if props is not None else None
    if item.file_creation_time and created != item.file_creation_time:
        return None  # the record names the second the file was written: another file
    same = (summary.smallest == item.smallest.internal_key.encode() and summary.largest == item.largest.internal_key.encode()
            and (summary.smallest_seqno, summary.largest_seqno) == (item.smallest_seqno, item.largest_seqno))
    if not same:
        return None
    created = f", file creation time ({item.file_creation_time})" if item.file_creation_time else ""
    return (f"the copy verifies, has the recorded size ({item.file_size} bytes), and the column family, smallest and largest "
            f"keys, sequence numbers{created} {', '.join(item.sources[:1]) or 'the MANIFEST'} records for the missing file")


def _candidate_files(sources: OlderSources, operator_id: str, handle: IncrementalKeyedHandle) -> Iterator[tuple[OlderSnapshot, str, ResolvedFile]]:
    """The SSTs of every source instance of the same operator whose key groups overlap ``handle``'s."""
    for snapshot in sources.snapshots:
        for other in _instances(snapshot, operator_id, handle):
            for entry in other.sst_files:
                resolved = snapshot.loaded.resolver.resolve(entry.handle)
                if resolved is not None:
                    yield snapshot, entry.local_path, resolved


def _instances(snapshot: OlderSnapshot, operator_id: str, handle: IncrementalKeyedHandle) -> Iterator[IncrementalKeyedHandle]:
    for op in snapshot.loaded.metadata.operators:
        if op.operator_id != operator_id:
            continue
        for sub in op.subtasks:
            other = sub.managed_keyed_state
            if isinstance(other, ChangelogBackendHandle):
                other = next((h for h in other.materialized if h is not None), None)
            if not isinstance(other, IncrementalKeyedHandle):
                continue
            if other.key_groups.start <= handle.key_groups.end and handle.key_groups.start <= other.key_groups.end:
                yield other


# -- older versions of lost keys ----------------------------------------------------------------


@dataclass
class OlderVersion:
    """A source's version of a lost key: the lost value (recoverable from there) or another."""

    source: OlderSnapshot
    local_name: str  # the file of the source holding it
    seqno: int
    value_type: int
    #: ``same_value``: the same type and value bytes as the lost entry (from its sound block, or as its damaged
    #: block still reads): recoverable from this source; ``other_value``: another value (what the key held at
    #: that snapshot); ``lost_value_unknown``: the lost entry's bytes do not read, so the two cannot be compared.
    relation: str
    #: The value, decoded with the state's serializers (None for a deletion, or when it does not decode).
    value: Any
    value_error: str | None
    value_raw: bytes

    @property
    def recoverable(self) -> bool:
        """The source holds the value that was lost."""
        return self.relation == "same_value"

    def describe(self) -> str:
        where = f"{self.source.directory} ({self.source.kind} {self.source.checkpoint_id}, {self.local_name})"
        shown = "deleted" if self.value_type == ValueType.DELETION else (
            repr(self.value) if self.value_error is None else f"value not decoded: {self.value_error}")
        if self.recoverable:
            return f"recoverable from {where}: {shown}"
        what = "another value" if self.relation == "other_value" else "a value (the lost one's bytes do not read to compare)"
        return f"{what} in {where}: {shown}"

    def to_json(self) -> dict[str, Any]:
        return {**self.source.to_json(), "file": self.local_name, "seqno": self.seqno,
                "type": value_type_name(self.value_type),
                "relation": self.relation, "value": plain(self.value), "value_error": self.value_error,
                "value_raw": self.value_raw.hex()}


def add_older_versions(
    items: list, sources: OlderSources, operator_id: str, handle: IncrementalKeyedHandle, meta: KeyedBackendMeta | None,
    max_parallelism: int, storage: st.Storage,
) -> None:
    """Set ``older`` of every listed lost key of ``items`` (lost and salvaged files of one instance) from ``sources``."""
    wanted: dict[tuple[str, bytes], list] = {}
    for item in items:
        if item.lost_keys is None:
            continue
        for key in item.lost_keys.keys:
            wanted.setdefault((item.column_family or "", key.key.user_key), []).append(key)
    if not wanted:
        return
    found = _versions(sources, operator_id, handle, {cf for cf, _ in wanted}, set(wanted), storage)
    decoders: dict[str, KeyedStateDecoder | None] = {}
    for (cf, user_key), keys in wanted.items():
        versions = found.get((cf, user_key), [])
        for key in keys:
            chosen = _choose(versions, key)
            if chosen is None:
                continue
            relation, (snapshot, local_name, seqno, value_type, raw) = chosen
            value, error = _decode(decoders, cf, meta, max_parallelism, user_key, value_type, raw)
            key.older = OlderVersion(snapshot, local_name, seqno, value_type, relation, value, error, raw)


def _relation(version: tuple, key) -> str:
    """How a source's ``version`` (source, file, seqno, type, value) relates to the lost entry of ``key``.

    By value only: sequence numbers do not compare across job roots (a restored job may number its writes
    anew), and compactions set them to 0."""
    _, _, _, value_type, raw = version
    if key.value is None:
        return "lost_value_unknown"
    return "same_value" if value_type == key.key.value_type and raw == key.value else "other_value"


def _choose(versions: list, key) -> tuple[str, tuple] | None:
    """Each source's version of the key (the newest entry it holds: what the key held at that snapshot), related
    to the lost entry; the one that holds the lost value if any, else the newest source's."""
    newest: dict[int, tuple] = {}
    for version in versions:
        held = newest.get(id(version[0]))
        if held is None or version[2] > held[2]:
            newest[id(version[0])] = version
    related = [(_relation(v, key), v) for v in newest.values()]
    if not related:
        return None
    return min(related, key=lambda r: (r[0] != "same_value", -r[1][0].checkpoint_id))


def _versions(
    sources: OlderSources, operator_id: str, handle: IncrementalKeyedHandle, families: set[str],
    wanted: set[tuple[str, bytes]], storage: st.Storage,
) -> dict[tuple[str, bytes], list]:
    """``(column family, user key) -> [(source, file, seqno, type, value)]`` of the sources' entries of ``wanted``.

    A file the checkpoints of one root share is read once (its entries count for each snapshot holding it)."""
    found: dict[tuple[str, bytes], list] = {}
    read: dict[str, list] = {}  # uri -> its wanted entries
    for snapshot, local_name, resolved in _candidate_files(sources, operator_id, handle):
        entries = read.get(resolved.uri) if resolved.uri is not None else None
        if entries is None:
            entries = _wanted_in(resolved, families, wanted, storage)
            if resolved.uri is not None:
                read[resolved.uri] = entries
        for cf, user_key, seqno, value_type, value in entries:
            found.setdefault((cf, user_key), []).append((snapshot, local_name, seqno, value_type, value))
    return found


def _wanted_in(resolved: ResolvedFile, families: set[str], wanted: set[tuple[str, bytes]], storage: st.Storage) -> list:
    try:
        source = open_resolved(storage, resolved)
        try:
            return [(cf, user_key, e.seqno, e.value_type, bytes(e.value)) for cf, user_key, e in wanted_entries(source, families, wanted)]
        finally:
            close(source)
    except RepairError:
        return []  # a source file that does not read holds nothing we can offer


def _decode(decoders: dict, cf: str, meta: KeyedBackendMeta | None, max_parallelism: int, user_key: bytes, value_type: int,
            raw: bytes) -> tuple[Any, str | None]:
    """A source entry's value, decoded as its state's rows give it (a map entry as ``[map key, value]``, list
    elements as a list); ``(None, why)`` when it cannot be."""
    if value_type == ValueType.DELETION:
        return None, None
    if cf not in decoders:
        state = meta.state(cf) if meta is not None else None
        try:
            decoders[cf] = KeyedStateDecoder(state, meta.key_serializer, max_parallelism) if state is not None else None
        except RepairError:
            decoders[cf] = None
    decoder = decoders[cf]
    if decoder is None:
        return None, "no registered state or serializer for this column family"
    try:
        rows = decoder.rows(user_key, raw)
    except RepairError as error:
        return None, error.message
    errors = [row["error"] for row in rows if row.get("error")]
    if errors:
        return None, str(errors[0])
    if decoder.kind == "list":
        return [row["value"] for row in rows], None
    if decoder.kind == "map":
        return [rows[0]["user_key"], rows[0]["value"]], None
    return rows[0]["value"] if rows else None, None
