"""``repair write-savepoint``: an export's Parquet written back as a canonical savepoint real Flink restores.

Input: an export directory (:mod:`repair.ops.export.job`: ``_export.json`` and a Parquet part per state
and subtask, possibly changed, removed or added by the user) and the checkpoint it was exported from
(named in ``_export.json``; ``source`` overrides where it is now). Output: a new directory holding a
canonical savepoint (the format every state backend restores), published atomically with ``_metadata``
written last.

What is written, per operator of the source's ``_metadata`` (same operator ids, order, master states):

* **Keyed state** (operators with keyed handles): one full-snapshot key-group stream per subtask
  (:mod:`repair.formats.flink.full_snapshot.canonical_writer`) in a file of the savepoint, behind a
  ``KeyGroupsSavepointStateHandle`` (code 7) as Flink's canonical savepoints have. Its head is the
  source's keyed backend meta data, byte for byte (state names, kinds and serializer snapshots; only
  the key-group compression flag is cleared). Its entries come from the Parquet rows: the RocksDB key
  from ``key_raw``, ``namespace_raw`` and ``user_key_raw`` (the length suffixes added where Flink adds
  them), the value from ``value_raw`` (a list's elements joined in ``list_index`` order). Key groups are
  the rows' ``key_group``, checked against the key where its ``hashCode`` is known
  (:mod:`repair.formats.flink.key_hash`), and recomputed from the key when ``max_parallelism`` changes.
  Subtasks own the key-group ranges Flink computes for ``parallelism``.
* **Operator state** (list, union, broadcast), raw operator state, coordinator state: the source's
  handles, their bytes copied (inline bytes stay inline, files are copied into the savepoint). A list
  state whose Parquet part no longer holds the source's rows is written from the part's raw bytes
  (:func:`~repair.formats.flink.operator_state.replace_list_states`: the rest of the file kept); a
  changed broadcast state, or a part added or removed, is refused. Raw keyed state (RocksDB with timers on the heap) is copied likewise
  when key groups and parallelism do not change, and refused otherwise.

Bad input raises a :class:`~repair.errors.RepairError` naming the file and row (a part whose schema does
not match, a key group outside the max parallelism or a key in the wrong key group, duplicate keys of a
value or map state, duplicate list indexes, missing raw bytes) and nothing is published.

Memory: the rows are read once, state by state, and spilled to a local scratch file per new subtask
(each row's key bytes, value bytes and where it came from); then each subtask's entries are collected,
checked for duplicates, sorted and written. Memory holds one subtask's entries of one operator.
"""

from __future__ import annotations

import json
import os
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from repair.errors import FormatError, RepairError, UsageError
from repair.formats.flink.backend_meta import KeyedBackendMeta, StateMetaInfo, decode_keyed_backend_meta
from repair.formats.flink.full_snapshot.canonical_writer import (
    Entry,
    composite_key,
    iter_key_group_stream,
    key_group_prefix,
    list_value,
    meta_without_states,
    uncompressed_meta,
)
from repair.formats.flink.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    HandleType,
    IncrementalKeyedHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    OperatorStateHandle,
    RelativeFileHandle,
)
from repair.formats.flink.key_hash import key_group_of, key_hasher
from repair.formats.flink.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    key_group_prefix_bytes,
    key_group_range_for_operator,
    operator_index_for_key_group,
)
from repair.formats.flink.metadata import CheckpointMetadata, OperatorState, SubtaskState, encode_metadata
from repair.formats.flink.operator_state import replace_list_states
from repair.formats.flink.row_codecs import RowColumn, row_columns, same_value
from repair.formats.flink.savepoint_properties import savepoint_trailer
from repair.formats.flink.value_encoders import EncodeError, encoder_for
from repair.formats.flink.values import Timer, decoder_for
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import read_resolved, scratch_directory
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.edit import find_operator
from repair.readers.full_snapshot import read_key_groups_meta_bytes
from repair.readers.operator_state import iter_operator_handle

__all__ = ["WriteSavepointResult", "rescale", "write_savepoint"]

EXPORT_FILE = "_export.json"
METADATA_FILE = "_metadata"
#: ``_export.json`` format versions this command reads.
EXPORT_FORMAT_VERSIONS = (3,)
#: Export sources whose rows are keyed state written into the key-group streams.
KEYED_SOURCES = ("incremental-keyed", "full-snapshot-keyed", "changelog-keyed")
#: Export sources carried by copying the source's handles (their Parquet is not read).
COPIED_SOURCES = ("operator", "raw-keyed-timers")
#: Metadata versions written (those Flink 1.11 to 2.x restore).
METADATA_VERSIONS = (3, 4, 5, 6)
#: The Parquet columns read, with the Arrow types an export writes them with.
RAW_COLUMNS = {"key_group": pa.int32(), "list_index": pa.int32(), "key_raw": pa.binary(),
               "namespace_raw": pa.binary(), "user_key_raw": pa.binary(), "value_raw": pa.binary()}
#: The decoded columns read where a part has them (raw bytes are encoded from them where absent or stale).
DECODED_COLUMNS = ("key", "namespace", "user_key", "value", "ttl_timestamp", "timestamp")


# -- results -------------------------------------------------------------------------------------


@dataclass
class WrittenState:
    state: str
    kind: str
    #: Rows read from the Parquet parts, and the key/value entries they made (a list's rows make one).
    rows: int = 0
    entries: int = 0
    parts: int = 0
    #: Raw columns written from their decoded column (raw bytes null, or stale), per column.
    encoded: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"state": self.state, "kind": self.kind, "rows": self.rows, "entries": self.entries, "parts": self.parts,
                "encoded": dict(sorted(self.encoded.items()))}


@dataclass
class WrittenOperator:
    operator_id: str
    uid: str | None
    parallelism: int
    max_parallelism: int
    #: ``keyed`` (key-group streams written from the export), ``copied`` (the source's handles only), ``empty``.
    keyed: bool
    states: list[WrittenState] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    #: Keyed states left out (``drop_states``).
    dropped: list[str] = field(default_factory=list)
    #: Operator state handles written anew, list states changed in the Parquet (``<subtask>/<slot>``).
    rewritten: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"operator_id": self.operator_id, "uid": self.uid, "parallelism": self.parallelism,
                "max_parallelism": self.max_parallelism, "keyed": self.keyed,
                "states": [s.to_json() for s in self.states], "copied": self.copied, "dropped": self.dropped,
                "rewritten": self.rewritten}


@dataclass
class WriteSavepointResult:
    #: The export read (None for :func:`rescale`, whose export is temporary).
    export: str | None
    source_metadata: str
    out: str
    metadata_version: int
    checkpoint_id: int
    operators: list[WrittenOperator] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        return True

    @property
    def metadata(self) -> str:
        return st.join(self.out, METADATA_FILE)

    def to_json(self) -> dict:
        return {"ok": self.ok, "export": self.export, "source_metadata": self.source_metadata, "out": self.out,
                "metadata": self.metadata, "metadata_version": self.metadata_version, "savepoint_format": "canonical",
                "checkpoint_id": self.checkpoint_id, "files": self.files,
                "entries": sum(s.entries for op in self.operators for s in op.states),
                "operators": [op.to_json() for op in self.operators]}


# -- the operation -------------------------------------------------------------------------------


def write_savepoint(
    export_dir: str,
    out: str,
    *,
    max_parallelism: int | None = None,
    parallelism: int | None = None,
    source: str | None = None,
    drop_states: Iterable[str] = (),
    storage: st.Storage | None = None,
) -> WriteSavepointResult:
    """Write the export in ``export_dir`` as a canonical savepoint in ``out`` (a new directory).

    ``max_parallelism`` and ``parallelism`` (of every keyed operator; default: the source's) re-assign
    key groups and subtasks; ``source`` is the checkpoint the export was made from when it is no longer
    where ``_export.json`` says; ``drop_states`` (``OPERATOR/STATE``: uid, name or operator id, then a
    keyed state's name) are left out, meta data included.
    """
    storage = storage or st.default_storage()
    for name, value in (("max_parallelism", max_parallelism), ("parallelism", parallelism)):
        if value is not None and not 0 < value <= UPPER_BOUND_MAX_PARALLELISM:
            raise UsageError(f"{name} must be in 1..{UPPER_BOUND_MAX_PARALLELISM}, not {value}")
    manifest = _read_manifest(storage, export_dir)
    snapshot, inputs = _load_source(storage, manifest, source)
    st.refuse_output_inside(out, {export_dir, *inputs})
    metadata = snapshot.metadata
    if metadata.version not in METADATA_VERSIONS:
        raise UsageError(f"the source's _metadata is version {metadata.version}; savepoints are written for versions "
                         f"{', '.join(map(str, METADATA_VERSIONS))} (Flink 1.11 and later)")
    result = WriteSavepointResult(export_dir, snapshot.ref.metadata_uri, out, metadata.version, metadata.checkpoint_id)
    exported = {op["operator_id"]: op for op in manifest.get("operators", [])}
    drops: dict[str, set[str]] = defaultdict(set)
    for value in drop_states:
        operator, slash, state = value.rpartition("/")
        if not slash or not operator or not state:
            raise UsageError(f"a state to drop is OPERATOR/STATE (uid, name or operator id, then the state's name), not {value!r}")
        op = find_operator(metadata.operators, operator)
        if not any(sub.managed_keyed_state is not None for sub in op.subtasks):
            raise UsageError(f"{value}: the operator has no keyed state (operator state is dropped by edit)")
        drops[op.operator_id].add(state)
    with storage.publish_dir(out, commit_file=METADATA_FILE) as publisher:
        writer = _Writer(storage, export_dir, snapshot, publisher, result, drops)
        operators = [writer.operator(op, exported.get(op.operator_id), max_parallelism, parallelism)
                     for op in metadata.operators]
        savepoint = CheckpointMetadata(metadata.version, metadata.checkpoint_id, list(metadata.master_states), operators,
                                       trailer=savepoint_trailer(metadata.version), dialect=metadata.dialect)
        publisher.write(METADATA_FILE, encode_metadata(savepoint))
    return result


def _read_manifest(storage: st.Storage, export_dir: str) -> dict:
    uri = st.join(export_dir, EXPORT_FILE)
    if storage.stat(uri) is None:
        raise UsageError(f"{export_dir} is not an export: it has no {EXPORT_FILE}")
    try:
        manifest = json.loads(storage.read_bytes(uri, max_size=256 << 20))
    except ValueError as error:
        raise FormatError(EXPORT_FILE, 0, "JSON", "unreadable JSON", detail=str(error)).in_source(uri) from None
    if not isinstance(manifest, dict) or manifest.get("format_version") not in EXPORT_FORMAT_VERSIONS:
        found = manifest.get("format_version") if isinstance(manifest, dict) else type(manifest).__name__
        raise FormatError("format_version", 0, f"one of {EXPORT_FORMAT_VERSIONS}", found).in_source(uri)
    return manifest


def _load_source(storage: st.Storage, manifest: dict, source: str | None) -> tuple[LoadedSnapshot, set[str]]:
    """The snapshot the export was made from (``source``, else where ``_export.json`` says), and the
    directories it reads from."""
    where = source or manifest.get("source") or manifest.get("metadata")
    try:
        layout = discover(where, storage)
    except RepairError as error:
        if source is not None:
            raise
        raise UsageError(f"the checkpoint the export was made from cannot be read where {EXPORT_FILE} says ({error}); "
                         f"pass where it is now as the source") from None
    refs = [ref for ref in layout.snapshots if ref.name == manifest.get("snapshot")] or layout.snapshots[-1:]
    ref = refs[-1]
    snapshot = load_snapshot(ref, layout.root, storage)
    if snapshot.metadata.checkpoint_id != manifest.get("checkpoint_id"):
        raise UsageError(f"{ref.metadata_uri} is checkpoint {snapshot.metadata.checkpoint_id}, but the export was made from "
                         f"checkpoint {manifest.get('checkpoint_id')} ({manifest.get('metadata')})")
    return snapshot, {layout.root or ref.directory, ref.directory}


class _Writer:
    """Writes the operators of one savepoint into ``publisher``."""

    def __init__(self, storage: st.Storage, export_dir: str, snapshot: LoadedSnapshot, publisher: st.DirectoryPublisher,
                 result: WriteSavepointResult, drops: dict[str, set[str]]):
        self.storage, self.export_dir, self.snapshot, self.publisher, self.result = storage, export_dir, snapshot, publisher, result
        #: Keyed states to leave out, by operator id.
        self.drops = drops

    def operator(self, op: OperatorState, exported: dict | None, max_parallelism: int | None, parallelism: int | None) -> OperatorState:
        keyed = [sub for sub in op.subtasks if sub.managed_keyed_state is not None]
        new_max = max_parallelism or op.max_parallelism
        new_parallelism = (parallelism or op.parallelism) if keyed else op.parallelism
        label = op.operator_uid or op.operator_id
        if new_max < new_parallelism:
            raise UsageError(f"operator {label}: max parallelism {new_max} is smaller than its parallelism {new_parallelism}")
        rescaled = (new_max, new_parallelism) != (op.max_parallelism, op.parallelism)
        written = WrittenOperator(op.operator_id, op.operator_uid, new_parallelism, new_max, bool(keyed))
        self.result.operators.append(written)
        subtasks = {index: SubtaskState(index) for index in range(new_parallelism)}
        changed = self._changed_operator_states(op, exported)
        for sub in op.subtasks:
            if sub.finished:
                raise UsageError(f"operator {label}: subtask {sub.index} finished; savepoints of finished subtasks are not written")
            for slot in ("managed_operator_state", "raw_operator_state", "raw_keyed_state"):
                handle = getattr(sub, slot)
                if handle is None:
                    continue
                if slot == "raw_keyed_state" and rescaled:
                    raise UsageError(f"operator {label}: raw keyed state (timers on the heap, or an operator's own) "
                                     f"cannot be re-assigned to new key groups or subtasks")
                if sub.index >= new_parallelism:
                    raise UsageError(f"operator {label}: subtask {sub.index} holds {slot.replace('_', ' ')}, "
                                     f"which parallelism {new_parallelism} would drop")
                name = f"{op.operator_id}-{sub.index}-{slot}"
                if slot == "managed_operator_state" and changed.get(sub.index):
                    setattr(subtasks[sub.index], slot, self._rewritten(handle, changed[sub.index], name))
                    written.rewritten.append(f"{sub.index}/{slot}")
                    continue
                setattr(subtasks[sub.index], slot, self._copied(handle, name))
                written.copied.append(f"{sub.index}/{slot}")
        if keyed:
            if exported is None:
                raise UsageError(f"operator {label} has keyed state, but the export does not hold it (exported with a filter?)")
            self._write_keyed(op, keyed, exported, written, subtasks)
        coordinator = op.coordinator_state
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):  # pragma: no cover - always inline
            raise UsageError(f"operator {label}: coordinator state that is not inline")
        kept = [subtasks[i] for i in sorted(subtasks) if any(True for _ in subtasks[i].handles())]
        return OperatorState(op.operator_id, new_parallelism, new_max, coordinator, kept, name=op.name, uid=op.uid)

    def _changed_operator_states(self, op: OperatorState, exported: dict | None) -> dict[int, dict[str, list[bytes]]]:
        """Per subtask, the list states whose Parquet part no longer holds the source's rows, with their
        elements' bytes in ``list_index`` order. Parts added or removed, and changed broadcast states,
        are refused, naming the file."""
        handles = {sub.index: sub.managed_operator_state for sub in op.subtasks if sub.managed_operator_state is not None}
        changed: dict[int, dict[str, list[bytes]]] = defaultdict(dict)
        for state in (exported or {}).get("states", []):
            if state.get("source") != "operator":
                continue
            parts = {st.basename(uri): uri for uri in self._parts(state["path"])}
            expected = {f"part-{index:05d}.parquet" for index in handles}
            for name in sorted(set(parts) ^ expected):
                where = parts.get(name) or st.join(self.export_dir, state["path"], name)
                raise UsageError(f"{where}: operator state {state['state']!r} is written per subtask of the source; "
                                 f"its parts may not be added or removed")
            for index, handle in handles.items():
                streams = list(iter_operator_handle(self.snapshot, self.storage, handle, states={state["state"]}))
                source_rows = [_operator_row(row) for stream in streams for row in stream.rows]
                element = streams[0].meta.serializer("VALUE_SERIALIZER") if streams else None
                part = parts[f"part-{index:05d}.parquet"]
                rows = [(_operator_row(_with_encoded_value(row, element, where)), where) for where, row in _part_rows(self.storage, part)]
                if sorted(source_rows) == sorted(row for row, _ in rows):
                    continue
                if state["kind"] not in ("operator-list", "union-list"):
                    raise UsageError(f"{part}: {state['kind']} state {state['state']!r} was changed; only list states are "
                                     f"written from Parquet, others are copied from the source")
                changed[index][state["state"]] = _list_elements(rows)
        return changed

    def _write_keyed(self, op: OperatorState, keyed: list[SubtaskState], exported: dict, written: WrittenOperator,
                     subtasks: dict[int, SubtaskState]) -> None:
        """The operator's keyed state from the export: one key-group stream per new subtask."""
        new_max, new_parallelism = written.max_parallelism, written.parallelism
        meta = self._keyed_meta(op, keyed)
        dropped = self.drops.get(op.operator_id, set())
        missing = sorted(dropped - {state.name for state in meta[1].states})
        if missing:
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: no keyed state named {', '.join(map(repr, missing))} to drop")
        if dropped:
            trimmed = meta_without_states(meta[0], dropped)
            meta = (trimmed, decode_keyed_backend_meta(trimmed))
            written.dropped = sorted(dropped)
        head = uncompressed_meta(meta[0])
        with scratch_directory("write-savepoint") as scratch, _Spill(scratch, new_max, new_parallelism) as spill:
            self._keyed_pieces(op, exported, meta, written, op.max_parallelism, new_max, spill)
            for index in range(new_parallelism):
                start, end = key_group_range_for_operator(new_max, new_parallelism, index)
                key_groups = KeyGroupRange(start, end - start + 1)
                entries = _subtask_entries(spill.read(index), written.states)
                offsets: list[int] = []
                self._write_stream(op, index, key_groups, iter_key_group_stream(head, key_groups, entries, offsets), offsets, subtasks)

    def _write_stream(self, op: OperatorState, index: int, key_groups: KeyGroupRange, chunks: Iterator[bytes], offsets: list[int],
                      subtasks: dict[int, SubtaskState]) -> None:
        """Write one subtask's key-group stream (``offsets`` is complete once ``chunks`` are consumed)."""
        name = f"keyed-{op.operator_id}-{index}"
        size = 0

        def counted() -> Iterator[bytes]:
            nonlocal size
            for chunk in chunks:
                size += len(chunk)
                yield chunk

        self.publisher.write(name, counted())
        self.result.files += 1
        subtasks[index].managed_keyed_state = KeyGroupsHandle(
            HandleType.SAVEPOINT_KEY_GROUPS, key_groups, list(offsets), RelativeFileHandle(name, size))

    def _rewritten(self, handle: OperatorStateHandle, elements: dict[str, list[bytes]], name: str) -> OperatorStateHandle:
        """``handle``'s operator state file with the list states in ``elements`` replaced, written into the
        savepoint (every other byte of the file kept)."""
        data = read_resolved(self.storage, self.snapshot.resolver.resolve(handle.delegate))
        try:
            data, entries = replace_list_states(data, handle.states, elements)
        except RepairError as error:
            raise error.in_source(name) from None
        self.publisher.write(name, data)
        self.result.files += 1
        return OperatorStateHandle(HandleType.OPERATOR_STATE, entries, RelativeFileHandle(name, len(data)))

    # -- copies of the source's handles ------------------------------------------------------------
    def _copied(self, handle, name: str):
        """``handle`` (operator state or raw keyed state) with its bytes inline as they were, or copied
        into a file of the savepoint behind a relative handle."""
        delegate = handle.delegate
        if isinstance(delegate, KeyGroupsHandle) or delegate is None:
            raise UsageError(f"{name}: a handle without a stream of bytes cannot be copied")
        if not isinstance(delegate, ByteStreamHandle):
            resolved = self.snapshot.resolver.resolve(delegate)
            data = read_resolved(self.storage, resolved)
            self.publisher.write(name, data)
            self.result.files += 1
            delegate = RelativeFileHandle(name, len(data))
        if isinstance(handle, OperatorStateHandle):
            return OperatorStateHandle(HandleType.OPERATOR_STATE, handle.states, delegate)
        if isinstance(handle, KeyGroupsHandle):
            return KeyGroupsHandle(HandleType.KEY_GROUPS, handle.key_groups, list(handle.offsets), delegate)
        raise UsageError(f"{name}: a {type(handle).__name__} cannot be copied into a savepoint")

    # -- keyed state -------------------------------------------------------------------------------
    def _keyed_meta(self, op: OperatorState, subtasks: list[SubtaskState]) -> tuple[bytes, KeyedBackendMeta]:
        """The source's keyed backend meta data (of its first keyed subtask), bytes and decoded; every
        subtask must register the same states."""
        found: list[tuple[bytes, KeyedBackendMeta]] = []
        for sub in subtasks:
            handle = sub.managed_keyed_state
            if isinstance(handle, ChangelogBackendHandle):  # the meta data of its materialized part
                handle = next((h for h in handle.materialized if h is not None), None)
                if handle is None:  # nothing materialized yet: the other subtasks tell
                    continue
            if isinstance(handle, IncrementalKeyedHandle):
                resolved = self.snapshot.resolver.resolve(handle.meta)
                data = read_resolved(self.storage, resolved)
            elif isinstance(handle, KeyGroupsHandle):
                data = read_key_groups_meta_bytes(self.snapshot, self.storage, handle)
            else:
                raise UsageError(f"operator {op.operator_uid or op.operator_id}: keyed state in a {type(handle).__name__} "
                                 f"cannot be written back")
            meta = decode_keyed_backend_meta(data)
            if not meta.complete:
                raise FormatError("keyed backend meta data", 0, "complete meta data", "; ".join(meta.problems)).in_source(
                    f"operator {op.operator_id}, subtask {sub.index}")
            found.append((data[: meta.end_offset], meta))
        if not found:
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: no subtask has materialized keyed state, whose "
                             f"meta data a savepoint needs (a changelog checkpoint taken before the first materialization)")
        names = [[s.name for s in meta.states] for _, meta in found]
        if any(n != names[0] for n in names):
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: its subtasks register different states "
                             f"({'; '.join(sorted({', '.join(n) for n in names}))}); not written")
        return found[0]

    def _keyed_pieces(self, op: OperatorState, exported: dict, meta: tuple[bytes, KeyedBackendMeta], written: WrittenOperator,
                      old_max: int, new_max: int, spill: "_Spill") -> None:
        """Every row of the operator's keyed states as a piece of an entry, spilled to its new subtask
        (``written.states`` gets one :class:`WrittenState` per state, in state id order)."""
        decoded = meta[1]
        dropped = self.drops.get(op.operator_id, set())
        states = {s["state"]: s for s in exported.get("states", []) if s["state"] not in dropped}
        unknown = sorted(name for name, s in states.items() if s.get("source") not in COPIED_SOURCES and decoded.state(name) is None)
        if unknown:
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: state {', '.join(map(repr, unknown))} is in the export "
                             f"but not in the keyed meta data of the source's subtasks (registered after their last "
                             f"materialization?), so it has no serializers to write it with")
        for state_id, info in enumerate(decoded.states):
            entry = states.get(info.name)
            if entry is None:
                raise UsageError(f"operator {op.operator_uid or op.operator_id}: state {info.name!r} is registered in the "
                                 f"source but not in the export")
            if entry.get("source") not in KEYED_SOURCES:
                raise UsageError(f"operator {op.operator_id}: state {info.name!r} was exported from "
                                 f"{entry.get('source')!r}, not from keyed state")
            state = WrittenState(info.name, info.kind)
            written.states.append(state)
            rows = _RowPieces(info, decoded.key_serializer, old_max, new_max)
            for part in self._parts(entry["path"]):
                state.parts += 1
                for where, row in _part_rows(self.storage, part):
                    state.rows += 1
                    spill.add(state_id, rows.piece(row, where))
            state.encoded = rows.encoded

    def _parts(self, path: str) -> list[str]:
        directory = st.resolve_within(self.export_dir, path)
        if self.storage.stat(directory) is None:
            return []
        return sorted(info.path for info in self.storage.list_dir(directory) if not info.is_dir and info.path.endswith(".parquet"))


def _with_encoded_value(row: dict, serializer, where: str) -> dict:
    """``row`` with ``value_raw`` encoded from ``value`` where the raw bytes are null or hold another value
    (a list element changed in the Parquet; serializers :mod:`repair.formats.flink.value_encoders` writes)."""
    encode = encoder_for(serializer)
    if row.get("value") is None or encode is None:
        return row
    raw = row["value_raw"]
    if raw is not None:
        try:
            if same_value(decoder_for(serializer).decode_all(raw, 0, "value"), row["value"]):
                return row
        except RepairError:
            pass
    try:
        return {**row, "value_raw": encode(row["value"])}
    except EncodeError as error:
        raise FormatError("value", 0, "a value the state's serializer writes", repr(row["value"]), detail=str(error)).in_source(where) from None


def _list_elements(rows: list[tuple[tuple, str]]) -> list[bytes]:
    """A list state's elements from its rows (``(list_index, user_key_raw, value_raw)`` and where),
    in index order; indexes must be distinct and the raw bytes there."""
    seen: dict[int, str] = {}
    for (index, _, value), where in rows:
        if index < 0 or not value:
            raise FormatError("value_raw" if index >= 0 else "list_index", 0, "an element's index and raw bytes", "null").in_source(where)
        if index in seen:
            raise FormatError("list_index", 0, "one element per index of a list", f"index {index} again (first at {seen[index]})").in_source(where)
        seen[index] = where
    return [value for (_, _, value), _ in sorted(rows)]


def _operator_row(row: dict) -> tuple:
    """What an operator state row is compared by: its index and raw bytes."""
    return row["list_index"] if row["list_index"] is not None else -1, row["user_key_raw"] or b"", row["value_raw"] or b""


def _part_rows(storage: st.Storage, uri: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of one Parquet part (``where``: file and row number for errors), its schema checked.
    Decoded columns the part lacks, or holds as JSON text, are None in the rows."""
    location = st.parse_location(uri)
    try:
        parquet = pq.ParquetFile(location.fs_path, filesystem=storage.filesystem(location))
    except (OSError, pa.ArrowException) as error:
        raise FormatError("Parquet part", 0, "a Parquet file", "unreadable", detail=str(error)).in_source(uri) from None
    schema = parquet.schema_arrow
    for name, arrow in RAW_COLUMNS.items():
        index = schema.get_field_index(name)
        if index < 0 or schema.field(index).type != arrow:
            found = "no such column" if index < 0 else str(schema.field(index).type)
            raise FormatError(f"column {name!r}", 0, f"{arrow} (the export's schema)", found).in_source(uri)
    decoded = [name for name in DECODED_COLUMNS if schema.get_field_index(name) >= 0
               and (schema.field(name).metadata or {}).get(b"repair.encoding") != b"json"]
    number = 0
    for batch in parquet.iter_batches(columns=[*RAW_COLUMNS, *decoded]):
        for row in batch.to_pylist():
            yield f"{uri}, row {number}", row
            number += 1


class _RowPieces:
    """One state's rows as pieces of entries: key group, full RocksDB key, list index (None but for list
    state) and value bytes, the key group checked or recomputed.

    Each raw column is taken as it is unless its decoded column says otherwise: where the raw bytes are
    null, or decode to another value than the decoded column holds (changed by the user), the decoded
    value is encoded (:mod:`repair.formats.flink.value_encoders`). A null decoded column means "not
    given": the raw bytes are kept."""

    def __init__(self, info: StateMetaInfo, key_serializer, old_max: int, new_max: int):
        self.info, self.kind = info, info.kind
        self.old_max, self.new_max = old_max, new_max
        self.prefix_bytes = key_group_prefix_bytes(new_max)
        self.hasher = key_hasher(key_serializer)
        self.columns = row_columns(info, key_serializer)
        self.suffixes = self.kind != "priority-queue" and decoder_for(key_serializer).is_variable_length and decoder_for(
            info.serializer("NAMESPACE_SERIALIZER")).is_variable_length
        if self.hasher is None and old_max != new_max:
            raise UsageError(f"state {info.name!r}: the key type ({key_serializer.class_name if key_serializer else 'unknown'}) has "
                             f"a hashCode this tool cannot compute, so its key groups for max parallelism {new_max} are unknown")
        #: Raw columns written from their decoded column, per column.
        self.encoded: dict[str, int] = {}

    def _bytes(self, row: dict, name: str, where: str) -> tuple[bytes, Any, bool]:
        """The bytes of raw column ``name`` of ``row``, the value they hold (None when not decoded), and
        whether they were encoded from the decoded column."""
        column: RowColumn = self.columns[name]
        raw = row[column.raw]
        wanted = column.compose(row) if column.encode is not None else None
        if raw is not None:
            if wanted is None:
                return raw, None, False
            try:
                current = column.decode(raw)
            except RepairError:
                current = _UNDECODABLE
            if same_value(current, wanted):
                return raw, current, False
        elif column.encode is None:
            raise FormatError(column.raw, 0, "the raw bytes of the row", "null (no encoder for its serializer)").in_source(where)
        elif wanted is None and (name == "key" or (name == "value" and self.kind != "map")):
            what = "a key" if name == "key" else "a value (remove the row to clear the state)"
            raise FormatError(name, 0, what, f"null, and {column.raw} is null too").in_source(where)
        try:
            data = column.encode(wanted)  # null: a void namespace, or a map entry's null value
        except EncodeError as error:
            raise FormatError(name, 0, "a value the state's serializer writes", repr(wanted), detail=str(error)).in_source(where) from None
        self.encoded[column.raw] = self.encoded.get(column.raw, 0) + 1
        return data, wanted, True

    def _key_group(self, row: dict, key: Any, key_raw: bytes, changed: bool, where: str) -> int:
        """The row's key group for the new max parallelism: computed from the key when its hash is known
        (and, for an unchanged key and max parallelism, checked against the row's), else the row's."""
        recorded = row["key_group"]
        if self.hasher is None:
            if changed:
                raise FormatError("key", 0, "an unchanged key (its hashCode, so its key group, is unknown)", "a changed key").in_source(where)
            if recorded is None or not 0 <= recorded < self.new_max:
                raise FormatError("key_group", 0, f"a key group in 0..{self.new_max - 1}", recorded).in_source(where)
            return recorded
        if key is None:
            try:
                key = self.columns["key"].decode(key_raw)
            except RepairError as error:
                raise error.in_source(where) from None
        if isinstance(key, Timer):
            key = key.key
        group = key_group_of(self.hasher, key, self.new_max)
        if self.old_max == self.new_max and not changed and recorded != group:
            raise FormatError("key_group", 0, f"{group} (the key group of key {key!r})", recorded).in_source(where)
        return group

    def piece(self, row: dict, where: str) -> "Piece":
        key_raw, key, changed = self._bytes(row, "key", where)
        group = self._key_group(row, key, key_raw, changed, where)
        prefix = key_group_prefix(group, self.prefix_bytes)
        if self.kind == "priority-queue":
            return Piece(group, prefix + key_raw, None, b"", where)
        namespace_raw = self._bytes(row, "namespace", where)[0]
        user_key = self._bytes(row, "user_key", where)[0] if self.kind == "map" else None
        key = composite_key(prefix, key_raw, namespace_raw, user_key, suffixes=self.suffixes)
        value = self._bytes(row, "value", where)[0]
        index = row["list_index"] if self.kind == "list" else None
        if self.kind == "list" and index is None:
            raise FormatError("list_index", 0, "the element's index in its list", "null").in_source(where)
        return Piece(group, key, index, value, where)


@dataclass(frozen=True)
class Piece:
    """A row's part of an entry: a value, a timer, a map entry, or one element of a list."""

    key_group: int
    key: bytes
    list_index: int | None
    value: bytes
    where: str


def _subtask_entries(pieces: Iterator[tuple[int, Piece]], states: list[WrittenState]) -> list[Entry]:
    """One subtask's entries from the pieces of its rows (``(state id, piece)``), sorted; a list's
    elements joined in index order; a repeated key or list index is an error naming both rows."""
    values: dict[tuple[int, bytes], Piece] = {}
    lists: dict[tuple[int, bytes], dict[int, Piece]] = defaultdict(dict)
    for state_id, piece in pieces:
        slot = (state_id, piece.key)
        if piece.list_index is None:
            if slot in values:
                what = "timer" if states[state_id].kind == "priority-queue" else "key"
                raise FormatError(f"{what} of state {states[state_id].state!r}", 0, f"one row per {what}",
                                  f"a duplicate of {values[slot].where}").in_source(piece.where)
            values[slot] = piece
            continue
        elements = lists[slot]
        if piece.list_index in elements:
            raise FormatError("list_index", 0, "one element per index of a list",
                              f"index {piece.list_index} again (first at {elements[piece.list_index].where})").in_source(piece.where)
        elements[piece.list_index] = piece
    entries = [Entry(p.key_group, state_id, key, p.value) for (state_id, key), p in values.items()]
    for (state_id, key), elements in lists.items():
        first = next(iter(elements.values()))
        entries.append(Entry(first.key_group, state_id, key, list_value(elements[i].value for i in sorted(elements))))
    for entry in entries:
        states[entry.state_id].entries += 1
    entries.sort()
    return entries


class _Spill:
    """Pieces spilled to one local scratch file per new subtask, so that memory holds one subtask's
    entries at a time, not an operator's."""

    _HEAD = struct.Struct(">iHiIII")  # key group, state id, list index (-1: none), lengths of key, value, where

    def __init__(self, directory: str, max_parallelism: int, parallelism: int):
        self.max_parallelism, self.parallelism = max_parallelism, parallelism
        self._paths = [os.path.join(directory, f"subtask-{i}") for i in range(parallelism)]
        self._files = [open(path, "wb") for path in self._paths]  # noqa: SIM115 - closed in read()

    def add(self, state_id: int, piece: Piece) -> None:
        index = operator_index_for_key_group(self.max_parallelism, self.parallelism, piece.key_group)
        where = piece.where.encode()
        self._files[index].write(self._HEAD.pack(piece.key_group, state_id, -1 if piece.list_index is None else piece.list_index,
                                                 len(piece.key), len(piece.value), len(where)) + piece.key + piece.value + where)

    def read(self, index: int) -> Iterator[tuple[int, Piece]]:
        self._files[index].close()
        head = self._HEAD
        with open(self._paths[index], "rb") as file:
            while True:
                fixed = file.read(head.size)
                if not fixed:
                    break
                group, state_id, list_index, key_size, value_size, where_size = head.unpack(fixed)
                key, value, where = file.read(key_size), file.read(value_size), file.read(where_size).decode()
                yield state_id, Piece(group, key, None if list_index < 0 else list_index, value, where)
        os.remove(self._paths[index])

    def __enter__(self) -> "_Spill":
        return self

    def __exit__(self, *exc_info) -> None:
        for file in self._files:
            file.close()


#: What raw bytes that do not decode are compared as (equal to no value).
_UNDECODABLE = object()


def rescale(
    checkpoint: str,
    out: str,
    *,
    max_parallelism: int | None = None,
    parallelism: int | None = None,
    master: str | None = None,
    workers: int | None = None,
    storage: st.Storage | None = None,
) -> WriteSavepointResult:
    """``checkpoint`` (a snapshot, or a job root's newest) as a canonical savepoint in ``out`` with a new
    max parallelism and/or parallelism: exported to a local scratch directory (deleted afterwards, on
    Spark with ``master``) and written back. The result's ``export`` is None."""
    from repair.ops.export.job import export

    if max_parallelism is None and parallelism is None:
        raise UsageError("rescale needs a new max parallelism or parallelism (or both)")
    storage = storage or st.default_storage()
    layout = discover(checkpoint, storage)
    ref = layout.snapshots[-1]
    st.refuse_output_inside(out, {layout.root or ref.directory, ref.directory})
    if storage.exists(out) and storage.list_dir(out):
        raise UsageError(f"{out} already exists and is not empty; the savepoint goes to a new directory")
    with scratch_directory("rescale") as scratch:
        exported = st.join(scratch, "export")
        export(checkpoint, exported, master=master, workers=workers, storage=storage)
        result = write_savepoint(exported, out, max_parallelism=max_parallelism, parallelism=parallelism,
                                 source=checkpoint, storage=storage)
    result.export = None
    return result
