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
  them), the value from ``value_raw`` (a list's elements joined in ``list_index`` order); a raw column
  that is null, or holds another value than its decoded column, is encoded from the decoded column
  (:mod:`repair.ops.write_savepoint.rows`). Key groups are computed from the key where its ``hashCode``
  is known (:mod:`repair.formats.flink.key_hash`; checked against the row's ``key_group`` when the max
  parallelism is kept), else the row's are used (and a new max parallelism refused). Subtasks own the
  key-group ranges Flink computes for ``parallelism``. ``drop_states`` leaves keyed states out, meta
  data included.
* **Operator state** (list, union, broadcast), raw operator state, coordinator state: the source's
  handles, their bytes copied (inline bytes stay inline, files are copied into the savepoint). A list
  or broadcast state whose Parquet part no longer holds the source's rows is written from the part
  (:func:`~repair.formats.flink.operator_state.replace_states`: the rest of the file kept); a part
  added or removed is refused. Raw keyed state the operator wrote itself is copied likewise when key
  groups and parallelism do not change, and refused otherwise.
* **Timers on the heap** (RocksDB with ``timer-service.factory: HEAP``, whose checkpoints write them into
  raw keyed state): written as keyed state, as Flink's canonical savepoint of such a job has them
  (``_timer_state/processing_<service>`` and ``_timer_state/event_<service>`` appended to the meta data,
  :func:`~repair.formats.flink.full_snapshot.raw_timers.timer_state_meta_bytes`), so they are
  re-assigned to key groups and subtasks like every other keyed state.

Bad input raises a :class:`~repair.errors.RepairError` naming the file and row (a part whose schema does
not match, a key group outside the max parallelism or a key in the wrong key group, duplicate keys of a
value or map state, duplicate list indexes, missing raw bytes) and nothing is published.

Tasks and memory (:mod:`repair.ops.write_savepoint.keyed_tasks`): a task per Parquet part spills its
rows' pieces (key bytes, value bytes, where they came from) per new subtask below the output's staging
directory; then a task per new subtask deals its pieces into local bucket files by key group and
writes its stream bucket by bucket, each bucket's entries checked for duplicates and sorted. The tasks
run in this process, in a process pool (``workers``) or on Spark (``master``). Memory holds one
bucket's entries (a key group's, for up to 256 key groups per subtask), not a subtask's.
"""

from __future__ import annotations

import json
import secrets
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from repair.errors import FormatError, RepairError, StorageError, UsageError
from repair.formats.flink.backend_meta import KeyedBackendMeta, decode_keyed_backend_meta, set_meta_kryo_generation
from repair.formats.flink.changelog.dstl import MetadataChange
from repair.formats.flink.full_snapshot.canonical_writer import (
    keyed_meta,
    meta_with_states,
    meta_without_states,
    uncompressed_meta,
)
from repair.formats.flink.full_snapshot.raw_timers import REGISTRATION_ORDER, TimerService, timer_state_meta_bytes
from repair.formats.flink.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    EmptySegmentFileHandle,
    HandleType,
    IncrementalKeyedHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    OperatorStateHandle,
    RelativeFileHandle,
)
from repair.formats.flink.keygroups import UPPER_BOUND_MAX_PARALLELISM, key_group_range_for_operator
from repair.formats.flink.kryo_upgrade import KryoColumn, kryo_columns
from repair.formats.flink.metadata import CheckpointMetadata, OperatorState, SubtaskState, encode_metadata, generation_of_metadata_version
from repair.formats.flink.operator_selection import find_operator_state
from repair.formats.flink.operator_state import replace_states
from repair.formats.flink.pojo_upgrade import CollectionField, PojoColumn, flink2_meta, state_pojo
from repair.formats.flink.savepoint_properties import savepoint_trailer
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.outputs import new_output
from repair.io.resolved import read_resolved, scratch_directory
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.renamed import renamed
from repair.ops.runner import default_workers, run_tasks
from repair.ops.write_savepoint.keyed_tasks import SpillTask, StreamTask, spill_part, write_subtask_stream
from repair.ops.write_savepoint.operator_rows import broadcast_entries, list_elements, operator_row, with_encoded_value
from repair.ops.write_savepoint.rows import RowPieces, kryo5_row, part_rows
from repair.readers.changelog import metadata_changes
from repair.readers.full_snapshot import read_key_groups_meta_bytes
from repair.readers.kryo_generation import mark_kryo_generation
from repair.readers.operator_state import iter_operator_handle
from repair.readers.raw_timers import read_raw_timer_services, timers_or_reason
from repair.results import CommandResult

__all__ = ["WriteSavepointResult", "rescale", "upgrade_savepoint", "write_savepoint"]

EXPORT_FILE = "_export.json"
METADATA_FILE = "_metadata"
#: ``_export.json`` format versions this command reads.
EXPORT_FORMAT_VERSIONS = (3, 4)
#: Export sources whose rows are keyed state written into the key-group streams.
KEYED_SOURCES = ("incremental-keyed", "full-snapshot-keyed", "changelog-keyed", "raw-keyed-timers")
#: Export sources not written as keyed state (operator state: copied, or rewritten where changed).
COPIED_SOURCES = ("operator",)
#: Metadata versions written (those Flink 1.11 to 2.x restore).
METADATA_VERSIONS = (3, 4, 5, 6)
#: Where, below the output's staging directory, an operator's keyed state rows are spilled per new
#: subtask (``_spilled-<operator id>``, deleted once its streams are written).
SHUFFLE_DIR = "_spilled"
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
class WriteSavepointResult(CommandResult):
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

    @property
    def source(self) -> str:
        """The export read; for :func:`rescale`, the checkpoint's ``_metadata``."""
        return st.absolute(self.export or self.source_metadata)

    @property
    def findings(self) -> list:
        """Nothing judged: write-savepoint writes, and reports problems as errors."""
        return []

    def document(self) -> dict:
        return {"source": self.source, "export": self.export, "source_metadata": self.source_metadata, "out": self.out,
                "metadata": self.metadata, "metadata_version": self.metadata_version, "savepoint_format": "canonical",
                "checkpoint_id": self.checkpoint_id, "files": self.files,
                "entries": sum(s.entries for op in self.operators for s in op.states),
                "operators": [op.to_json() for op in self.operators]}


# -- the operation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Upgrade:
    """Written for Flink 2.x from a Flink 1.x source (:func:`upgrade_savepoint`): ``_metadata`` in
    ``metadata_version``, Kryo 2.24 values rewritten as Kryo 5 writes them where Kryo 5 reads them otherwise."""

    metadata_version: int
    #: POJO states with collection fields, by ``(operator id, state)``: their fields' element types.
    pojo_fields: dict[tuple[str, str], tuple[CollectionField, ...]] = field(default_factory=dict)


@renamed(export_dir="path")
def write_savepoint(
    path: str,
    out: str,
    *,
    max_parallelism: int | None = None,
    parallelism: int | None = None,
    source: str | None = None,
    drop_states: Iterable[str] = (),
    workers: int | None = None,
    master: str | None = None,
    storage: st.Storage | None = None,
    _upgrade: _Upgrade | None = None,
) -> WriteSavepointResult:
    """Write the export in ``path`` as a canonical savepoint in ``out`` (a new directory).

    ``max_parallelism`` and ``parallelism`` (of every keyed operator; default: the source's) re-assign
    key groups and subtasks; ``source`` is the checkpoint the export was made from when it is no longer
    where ``_export.json`` says; ``drop_states`` (``OPERATOR/STATE``: uid, name or operator id, then a
    keyed state's name) are left out, meta data included. The keyed state is written by tasks
    (:mod:`repair.ops.write_savepoint.keyed_tasks`) run on Spark with ``master``, else in ``workers``
    processes (default: a pool of one per core when there are more than two tasks); the savepoint is
    the same wherever they run. ``_upgrade``: :func:`upgrade_savepoint`'s (written for Flink 2.x).
    """
    storage = storage or st.default_storage()
    for name, value in (("max_parallelism", max_parallelism), ("parallelism", parallelism)):
        if value is not None and not 0 < value <= UPPER_BOUND_MAX_PARALLELISM:
            raise UsageError(f"{name} must be in 1..{UPPER_BOUND_MAX_PARALLELISM}, not {value}")
    manifest = _read_manifest(storage, path)
    snapshot, inputs = _load_source(storage, manifest, source)
    new_output(out, [path, *inputs], storage)
    metadata = snapshot.metadata
    if metadata.version not in METADATA_VERSIONS:
        raise UsageError(f"the source's _metadata is version {metadata.version}; savepoints are written for versions "
                         f"{', '.join(map(str, METADATA_VERSIONS))} (Flink 1.11 and later)")
    version = _upgrade.metadata_version if _upgrade is not None else metadata.version
    result = WriteSavepointResult(st.absolute(path), st.absolute(snapshot.ref.metadata_uri), out, version, metadata.checkpoint_id)
    exported = {op["operator_id"]: op for op in manifest.get("operators", [])}
    drops: dict[str, set[str]] = defaultdict(set)
    for value in drop_states:
        op, state = find_operator_state(metadata.operators, value)
        if not any(sub.managed_keyed_state is not None for sub in op.subtasks):
            raise UsageError(f"{value}: the operator has no keyed state (operator state is dropped by edit)")
        drops[op.operator_id].add(state)
    with storage.publish_dir(out, commit_file=METADATA_FILE) as publisher:
        writer = _Writer(storage, path, snapshot, publisher, result, drops, workers=workers, master=master, upgrade=_upgrade)
        writer.skipped = [entry for entry in manifest.get("skipped", []) if isinstance(entry, dict)]
        operators = [writer.operator(op, exported.get(op.operator_id), max_parallelism, parallelism)
                     for op in metadata.operators]
        savepoint = CheckpointMetadata(version, metadata.checkpoint_id, list(metadata.master_states), operators,
                                       trailer=savepoint_trailer(version), dialect=metadata.dialect)
        publisher.write(METADATA_FILE, encode_metadata(savepoint))
    return result


def _read_manifest(storage: st.Storage, export_dir: str) -> dict:
    uri = st.join(export_dir, EXPORT_FILE)
    if storage.stat(uri) is None:
        if storage.stat(export_dir) is None:
            raise StorageError("no such file or directory", source=export_dir)
        raise UsageError(f"{export_dir} is not an export: it has no {EXPORT_FILE}")
    try:
        manifest = json.loads(storage.read_bytes(uri, max_size=256 << 20))
    except ValueError as error:
        raise FormatError(EXPORT_FILE, 0, "JSON", "unreadable JSON", detail=str(error)).in_source(uri) from None
    if not isinstance(manifest, dict) or manifest.get("format_version") not in EXPORT_FORMAT_VERSIONS:
        found = manifest.get("format_version") if isinstance(manifest, dict) else type(manifest).__name__
        raise FormatError("format_version", 0, f"one of {EXPORT_FORMAT_VERSIONS}", found).in_source(uri)
    return manifest


def _load_source(storage: st.Storage, manifest: dict, source: str | None) -> tuple[LoadedSnapshot, list[str]]:
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
    return snapshot, layout.inputs


class _Writer:
    """Writes the operators of one savepoint into ``publisher``."""

    def __init__(self, storage: st.Storage, export_dir: str, snapshot: LoadedSnapshot, publisher: st.DirectoryPublisher,
                 result: WriteSavepointResult, drops: dict[str, set[str]], *, workers: int | None = None, master: str | None = None,
                 upgrade: _Upgrade | None = None):
        self.storage, self.export_dir, self.snapshot, self.publisher, self.result = storage, export_dir, snapshot, publisher, result
        #: Written for Flink 2.x (:func:`upgrade_savepoint`): Kryo 2.24 values as Kryo 5 writes them, POJO
        #: collection fields with Flink 2.x's serializers.
        self.upgrade = upgrade
        #: Where the keyed state's tasks run (:func:`~repair.ops.runner.run_tasks`; workers None: a pool when it pays).
        self.workers, self.master = workers, master
        self._shared: str | None = None
        #: Keyed states to leave out, by operator id.
        self.drops = drops
        #: The export's ``skipped`` entries (what it could not export, and why).
        self.skipped: list[dict] = []

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
                if handle is None or isinstance(handle.delegate, EmptySegmentFileHandle):
                    continue  # file merging's placeholder for no state: none, as Flink restores it
                if slot == "raw_keyed_state" and keyed and self._holds_timers(handle):
                    continue  # written as keyed state (_write_keyed)
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
                skipped = sorted({entry.get("reason", "") for entry in self.skipped if entry.get("operator_id") == op.operator_id
                                  and entry.get("what") == "keyed-state"})
                why = f"export skipped it: {'; '.join(skipped)}" if skipped else "exported with a filter?"
                raise UsageError(f"operator {label} has keyed state, but the export does not hold it ({why})")
            self._write_keyed(op, keyed, exported, written, subtasks)
        coordinator = op.coordinator_state
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):  # pragma: no cover - always inline
            raise UsageError(f"operator {label}: coordinator state that is not inline")
        kept = [subtasks[i] for i in sorted(subtasks) if any(True for _ in subtasks[i].handles())]
        return OperatorState(op.operator_id, new_parallelism, new_max, coordinator, kept, name=op.name, uid=op.uid)

    def _changed_operator_states(self, op: OperatorState, exported: dict | None) -> dict[int, dict[str, list[bytes]]]:
        """Per subtask, the states whose Parquet part no longer holds the source's rows, with their
        elements' bytes (a list's values in ``list_index`` order, a broadcast state's entries). Parts
        added or removed are refused, naming the file."""
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
                source_rows = [operator_row(row) for stream in streams for row in stream.rows]
                element = streams[0].meta.serializer("VALUE_SERIALIZER") if streams else None
                upgraded = self._kryo5_columns([stream.meta for stream in streams[:1]])
                part = parts[f"part-{index:05d}.parquet"]
                rows = [(operator_row(with_encoded_value(kryo5_row(row, upgraded, where), element, where)), where)
                        for where, row in part_rows(self.storage, part)]
                if sorted(source_rows) == sorted(row for row, _ in rows):
                    continue
                changed[index][state["state"]] = (broadcast_entries(rows) if state["kind"] == "broadcast"
                                                  else list_elements(rows))
        return changed

    def _kryo5_columns(self, states: list) -> list[KryoColumn]:
        """Upgrading: the Kryo columns of an operator state's rows (its snapshots then read as Kryo 5)."""
        if self.upgrade is None or not states:
            return []
        set_meta_kryo_generation(states, generation_of_metadata_version(self.result.metadata_version))
        return kryo_columns(states[0], None)

    def _write_keyed(self, op: OperatorState, keyed: list[SubtaskState], exported: dict, written: WrittenOperator,
                     subtasks: dict[int, SubtaskState]) -> None:
        """The operator's keyed state from the export: one key-group stream per new subtask."""
        new_max, new_parallelism = written.max_parallelism, written.parallelism
        meta = self._keyed_meta(op, keyed)
        services = self._timer_services(op, keyed)
        if services:
            known = {state.name for state in meta[1].states}
            infos = [timer_state_meta_bytes(service, kind) for service in services for kind in REGISTRATION_ORDER]
            extended = meta_with_states(meta[0], infos)
            meta = (extended, decode_keyed_backend_meta(extended))
            clash = sorted(known & {s.name for s in meta[1].states[len(known):]})
            if clash:
                raise UsageError(f"operator {op.operator_uid or op.operator_id}: timers {', '.join(clash)} are both in "
                                 f"keyed state and in raw keyed state")
        dropped = self.drops.get(op.operator_id, set())
        missing = sorted(dropped - {state.name for state in meta[1].states})
        if missing:
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: no keyed state named {', '.join(map(repr, missing))} to drop")
        if dropped:
            trimmed = meta_without_states(meta[0], dropped)
            meta = (trimmed, decode_keyed_backend_meta(trimmed))
            written.dropped = sorted(dropped)
            if not meta[1].states:  # every keyed state dropped: no keyed state handle, as Flink snapshots an operator
                written.keyed = False  # without keyed state; a key serializer left alone would still be restored and checked
                return
        pojo_columns: dict[int, PojoColumn] = {}
        if self.upgrade is not None:
            meta, pojo_columns = _flink2_pojos(meta, self.upgrade.pojo_fields, op.operator_id)
        head = uncompressed_meta(meta[0])
        parts = self._keyed_parts(op, exported, meta, written)
        staging = self._staging()
        shuffle = f"{SHUFFLE_DIR}-{op.operator_id}"
        generation = generation_of_metadata_version(self.result.metadata_version)
        spill_tasks = [SpillTask(self.storage, staging, part, meta[0], state_id, op.max_parallelism, new_max, new_parallelism,
                                 f"{shuffle}/{state_id}-{number}", generation, self.upgrade is not None, pojo_columns.get(state_id))
                       for state_id, number, part in parts]
        try:
            spilled = self._run(spill_part, spill_tasks)
            for (state_id, _, _), part in zip(parts, spilled):
                state = written.states[state_id]
                state.parts += 1
                state.rows += part.rows
                for column, count in part.encoded.items():
                    state.encoded[column] = state.encoded.get(column, 0) + count
            names = [(s.state, s.kind) for s in written.states]
            stream_tasks = []
            for index in range(new_parallelism):
                start, end = key_group_range_for_operator(new_max, new_parallelism, index)
                stream_tasks.append(StreamTask(self.storage, staging, f"keyed-{op.operator_id}-{index}", index,
                                               KeyGroupRange(start, end - start + 1), head,
                                               [part.files[index] for part in spilled if index in part.files], names))
            streams = self._run(write_subtask_stream, stream_tasks)
        finally:
            self.publisher.discard(shuffle)
        for stream in streams:
            self.publisher.adopt([stream.name])
            self.result.files += 1
            for state, count in zip(written.states, stream.entries):
                state.entries += count
            subtasks[stream.index].managed_keyed_state = KeyGroupsHandle(
                HandleType.SAVEPOINT_KEY_GROUPS, stream_tasks[stream.index].key_groups, list(stream.offsets),
                RelativeFileHandle(stream.name, stream.size))

    def _staging(self) -> str:
        """The publisher's staging directory, shared with the tasks."""
        if self._shared is None:
            self._shared = self.publisher.share()
        return self._shared

    def _run(self, func, tasks: list) -> list:
        workers = self.workers if self.workers is not None else (min(default_workers(), len(tasks)) if len(tasks) > 2 else 1)
        return run_tasks(func, tasks, workers=workers, master=self.master)

    def _rewritten(self, handle: OperatorStateHandle, elements: dict[str, list[bytes]], name: str) -> OperatorStateHandle:
        """``handle``'s operator state file with the list states in ``elements`` replaced, written into the
        savepoint (every other byte of the file kept)."""
        data = read_resolved(self.storage, self.snapshot.resolver.resolve(handle.delegate))
        try:
            data, entries = replace_states(data, handle.states, elements)
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
    def _holds_timers(self, handle) -> bool:
        """Whether a raw keyed state handle holds timers (heap timers of RocksDB), not the operator's own bytes."""
        return isinstance(handle, KeyGroupsHandle) and timers_or_reason(self.snapshot, self.storage, handle) is None

    def _timer_services(self, op: OperatorState, subtasks: list[SubtaskState]) -> list[TimerService]:
        """The timer services whose timers the subtasks' raw keyed state holds (none without); every
        subtask must have the same."""
        found = [read_raw_timer_services(self.snapshot, self.storage, sub.raw_keyed_state) for sub in subtasks
                 if sub.raw_keyed_state is not None and self._holds_timers(sub.raw_keyed_state)]
        if any(services != found[0] for services in found):
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: its subtasks hold timers of different timer "
                             f"services; not written")
        return found[0] if found else []

    def _keyed_meta(self, op: OperatorState, subtasks: list[SubtaskState]) -> tuple[bytes, KeyedBackendMeta]:
        """The keyed backend meta data, bytes and decoded, of every state some subtask of the source
        registers: the first keyed subtask's, with the states only other subtasks register appended (a
        state registered lazily, on the subtasks that needed it). Changelog subtasks add the states their
        changelog registers (METADATA changes) that no materialized meta data holds: registered after the
        last materialization, or before the first (then the meta data is built from the changelog's alone)."""
        label = op.operator_uid or op.operator_id
        found: list[tuple[bytes, KeyedBackendMeta]] = []
        registered: dict[str, MetadataChange] = {}
        for sub in subtasks:
            handle = sub.managed_keyed_state
            if isinstance(handle, ChangelogBackendHandle):
                for change in metadata_changes(self.snapshot, self.storage, handle):
                    registered[change.state.name] = change  # the newest registration, at its first place
                handle = next((h for h in handle.materialized if h is not None), None)
                if handle is None:  # nothing materialized yet
                    continue
            if isinstance(handle, IncrementalKeyedHandle):
                resolved = self.snapshot.resolver.resolve(handle.meta)
                data = read_resolved(self.storage, resolved)
            elif isinstance(handle, KeyGroupsHandle):
                data = read_key_groups_meta_bytes(self.snapshot, self.storage, handle)
            else:
                raise UsageError(f"operator {label}: keyed state in a {type(handle).__name__} cannot be written back")
            meta = decode_keyed_backend_meta(data)
            if not meta.complete:
                raise FormatError("keyed backend meta data", 0, "complete meta data", "; ".join(meta.problems)).in_source(
                    f"operator {op.operator_id}, subtask {sub.index}")
            found.append((data[: meta.end_offset], meta))
        if not found:
            if not registered:
                raise UsageError(f"operator {label}: no subtask has keyed state meta data (materialized, or registered in "
                                 f"its changelog)")
            data = keyed_meta(_key_serializer_bytes(label, registered.values()), [c.info_bytes for c in registered.values()])
            return data, decode_keyed_backend_meta(data)
        data, first = found[0]
        if any(meta.key_serializer != first.key_serializer for _, meta in found):
            raise UsageError(f"operator {label}: its subtasks have different key serializers; not written")
        extra: dict[str, bytes] = {}
        for other_data, meta in found[1:]:
            for info in meta.states:
                if first.state(info.name) is None and info.name not in extra:
                    extra[info.name] = meta.state_info_bytes(other_data, info.name)
        for name, change in registered.items():
            if first.state(name) is None and name not in extra:
                extra[name] = change.info_bytes
        if not extra:
            return found[0]
        data = meta_with_states(data, list(extra.values()))
        return data, decode_keyed_backend_meta(data)

    def _keyed_parts(self, op: OperatorState, exported: dict, meta: tuple[bytes, KeyedBackendMeta],
                     written: WrittenOperator) -> list[tuple[int, int, str]]:
        """The Parquet parts of the operator's keyed states, ``(state id, number, part)`` in state id order
        (``written.states`` gets one :class:`WrittenState` per state, in state id order)."""
        decoded = mark_kryo_generation(self.snapshot, meta[1])  # Kryo values are read and written in the source's generation
        dropped = self.drops.get(op.operator_id, set())
        states = {s["state"]: s for s in exported.get("states", []) if s["state"] not in dropped}
        unknown = sorted(name for name, s in states.items() if s.get("source") not in COPIED_SOURCES and decoded.state(name) is None)
        if unknown:
            raise UsageError(f"operator {op.operator_uid or op.operator_id}: state {', '.join(map(repr, unknown))} is in the export "
                             f"but not in the keyed meta data of the source's subtasks (registered after their last "
                             f"materialization?), so it has no serializers to write it with")
        parts = []
        for state_id, info in enumerate(decoded.states):
            entry = states.get(info.name)
            if entry is None:
                raise UsageError(f"operator {op.operator_uid or op.operator_id}: state {info.name!r} is registered in the "
                                 f"source but not in the export")
            if entry.get("source") not in KEYED_SOURCES:
                raise UsageError(f"operator {op.operator_id}: state {info.name!r} was exported from "
                                 f"{entry.get('source')!r}, not from keyed state")
            written.states.append(WrittenState(info.name, info.kind))
            RowPieces(info, decoded.key_serializer, op.max_parallelism, written.max_parallelism)  # refuses what no task can write
            parts.extend((state_id, number, part) for number, part in enumerate(self._parts(entry["path"])))
        return parts

    def _parts(self, path: str) -> list[str]:
        directory = st.resolve_within(self.export_dir, path)
        if self.storage.stat(directory) is None:
            return []
        return sorted(info.path for info in self.storage.list_dir(directory) if not info.is_dir and info.path.endswith(".parquet"))


def _flink2_pojos(meta: tuple[bytes, KeyedBackendMeta], fields: dict[tuple[str, str], tuple[CollectionField, ...]],
                  operator_id: str) -> tuple[tuple[bytes, KeyedBackendMeta], dict[int, PojoColumn]]:
    """The keyed meta data with the POJO collection fields of ``fields`` given Flink 2.x's serializer
    snapshots, and per state id the column rewriting its values (read with the 1.x snapshot)."""
    data, decoded = meta
    columns: dict[int, PojoColumn] = {}
    for state_id, state in reversed(list(enumerate(decoded.states))):  # from the end: earlier offsets stay valid
        chosen = fields.get((operator_id, state.name))
        pojo = state_pojo(state)
        if chosen and pojo is not None:
            columns[state_id] = PojoColumn(pojo, chosen)
            data = flink2_meta(data, pojo, chosen)
    return (data, decode_keyed_backend_meta(data)) if columns else meta, columns


def _key_serializer_bytes(label: str, changes: Iterable[MetadataChange]) -> bytes:
    """The key serializer snapshot's bytes a changelog records without materialized meta data: nested in
    a timer state's ``TimerSerializerSnapshot`` (key, then namespace serializer)."""
    for change in changes:
        timer = change.state.serializer("VALUE_SERIALIZER") if change.state.is_timer_state else None
        if timer is not None and len(timer.nested) == 2 and 0 <= timer.nested[0].offset < timer.nested[1].offset:
            start, end = (nested.offset - change.info_offset for nested in timer.nested)
            return change.info_bytes[start:end]
    raise UsageError(f"operator {label}: nothing is materialized and its changelog registers no timers, so the key "
                     f"serializer (which its meta data needs) is recorded nowhere")


@renamed(checkpoint="path")
def rescale(
    path: str,
    out: str,
    *,
    max_parallelism: int | None = None,
    parallelism: int | None = None,
    master: str | None = None,
    workers: int | None = None,
    scratch: str | None = None,
    storage: st.Storage | None = None,
) -> WriteSavepointResult:
    """``path`` (a snapshot, or a job root's newest) as a canonical savepoint in ``out`` with a new
    max parallelism and/or parallelism: exported to an intermediate directory (deleted afterwards, on
    Spark with ``master``, or in ``workers`` processes) and written back likewise. The result's ``export`` is None.

    The intermediate export is in local scratch space, or below ``scratch`` (a directory URI that every
    Spark executor reads, e.g. on S3 or HDFS: needed with a Spark cluster whose executors run on other hosts)."""
    from repair.ops.export.job import export

    if max_parallelism is None and parallelism is None:
        raise UsageError("rescale needs a new max parallelism or parallelism (or both)")
    if master is not None and not master.startswith("local") and scratch is None:
        raise UsageError(f"rescale on the Spark cluster {master} needs --scratch DIR: a directory every executor "
                         "reads (e.g. s3://bucket/tmp) for the intermediate export; local scratch space is one host's")
    storage = storage or st.default_storage()
    layout = discover(path, storage)
    new_output(out, layout.inputs, storage)
    if scratch is not None:
        new_output(scratch, layout.inputs, storage, existing=True)
    with _intermediate_directory(scratch, storage) as intermediate:
        exported = st.join(intermediate, "export")
        export(path, exported, master=master, workers=workers, storage=storage)
        result = write_savepoint(exported, out, max_parallelism=max_parallelism, parallelism=parallelism,
                                 source=path, workers=workers, master=master, storage=storage)
    result.export = None
    return result


def upgrade_savepoint(
    path: str,
    out: str,
    *,
    metadata_version: int,
    pojo_fields: dict[tuple[str, str], tuple[CollectionField, ...]] | None = None,
    drop_states: Iterable[str] = (),
    master: str | None = None,
    workers: int | None = None,
    storage: st.Storage | None = None,
) -> WriteSavepointResult:
    """``path`` (a Flink 1.x snapshot) as a canonical savepoint for Flink 2.x in ``out``, as :func:`rescale`
    writes one (an intermediate export, written back): ``_metadata`` in ``metadata_version``, every Kryo
    2.24 key, map key, value and list element that Kryo 5 reads otherwise written as Kryo 5 writes it
    (:func:`repair.formats.flink.kryo_upgrade.kryo5_bytes`), and the POJO collection fields of
    ``pojo_fields`` (``(operator id, state)``: the fields and their element types) with Flink 2.x's
    serializers and snapshots (:mod:`repair.formats.flink.pojo_upgrade`). :func:`repair.ops.upgrade.upgrade`
    checks first what cannot be converted."""
    from repair.ops.export.job import export

    storage = storage or st.default_storage()
    layout = discover(path, storage)
    new_output(out, layout.inputs, storage)
    with _intermediate_directory(None, storage) as intermediate:
        exported = st.join(intermediate, "export")
        export(path, exported, master=master, workers=workers, storage=storage)
        result = write_savepoint(exported, out, source=path, drop_states=drop_states, workers=workers, master=master,
                                 storage=storage, _upgrade=_Upgrade(metadata_version, dict(pojo_fields or {})))
    result.export = None
    return result


@contextmanager
def _intermediate_directory(scratch: str | None, storage: st.Storage) -> Iterator[str]:
    """A new directory for rescale's intermediate export, deleted on exit: local scratch space, or
    below ``scratch`` as the staging area of a publisher that never publishes (its clean-up deletes
    everything written there, and a later run deletes what a killed one left on local disks and HDFS)."""
    if scratch is None:
        with scratch_directory("rescale") as directory:
            yield directory
        return
    area = storage.publish_dir(st.join(scratch, f"repair-rescale-{secrets.token_hex(4)}"), commit_file=None)
    with area:
        try:
            yield area.share()
        finally:
            area.abort()
