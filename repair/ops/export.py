"""``repair export``: the keyed state of a checkpoint or native savepoint as Hive-partitioned Parquet.

One task per keyed subtask (an :class:`IncrementalKeyedHandle`, i.e. one RocksDB instance): the task
re-loads the snapshot, decodes the instance with :func:`read_incremental_handle` and returns its rows as
plain columns (lists of ``str``/``int``/``float``/``bool``/``bytes``/``None``); tasks run in this process,
in a process pool or on Spark (:func:`run_tasks`). The driver decides one Arrow type per column and
state, writes one Parquet file per state and subtask and publishes the whole directory atomically::

    OUT/operator=<uid | name | operator id>/state=<state name, %-encoded>/part-<subtask:05d>.parquet
    OUT/_export.json      (written last: counts, decoding decisions, what was skipped)

Partition values are percent-encoded (``urllib.parse.quote(name, safe="")``: ``/`` -> ``%2F``, ``%`` ->
``%25``, ``:`` -> ``%3A`` ...), as Hive and Spark escape partition values; pyarrow's Hive partitioning
decodes them. Every output name goes through :func:`repair.storage.resolve_within`.

Columns: ``key_group`` int32, ``key``, ``namespace``, ``user_key``, ``value``, ``list_index`` int32,
``ttl_timestamp`` int64, ``timestamp`` int64, ``key_raw``, ``namespace_raw``, ``user_key_raw``,
``value_raw`` binary, ``error`` string. The decoded columns (``key``, ``namespace``, ``user_key``,
``value``) are typed per state: when every decoded value of the column in that state is one primitive
type they keep it (``str`` -> string, ``bool`` -> bool, ``int`` within int64 -> int64, ``float`` ->
float64, ``bytes`` -> binary); otherwise (POJOs, tuples, lists, maps, mixed types, integers beyond
int64) the column is JSON text (``json.dumps``, ``ensure_ascii=False``; bytes inside are hex strings).
A column without any decoded value is an all-null string column. The raw columns always hold the exact
bytes; rows whose value could not be decoded (unsupported serializer) have ``value`` null, the bytes in
``value_raw`` and the reason in ``error``, and the column is listed under ``raw_fallback``.

Out of scope for now (listed under ``skipped``): canonical savepoints and other full-snapshot keyed
state (key-group streams), changelog state, raw keyed state and operator state.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from repair import storage as st
from repair.errors import FormatError, UsageError
from repair.formats.flink_handles import ChangelogBackendHandle, IncrementalKeyedHandle, KeyGroupsHandle
from repair.keygroups import operator_id_for_uid
from repair.layout import SnapshotRef, discover
from repair.ops.runner import default_workers, run_tasks
from repair.snapshot import LoadedSnapshot, load_snapshot

COMMIT_FILE = "_export.json"
FORMAT_VERSION = 1
DECODED_COLUMNS = ("key", "namespace", "user_key", "value")
COLUMNS = (
    "key_group", "key", "namespace", "user_key", "value", "list_index", "ttl_timestamp", "timestamp",
    "key_raw", "namespace_raw", "user_key_raw", "value_raw", "error",
)
_FIXED_TYPES = {
    "key_group": pa.int32(), "list_index": pa.int32(), "ttl_timestamp": pa.int64(), "timestamp": pa.int64(),
    "key_raw": pa.binary(), "namespace_raw": pa.binary(), "user_key_raw": pa.binary(), "value_raw": pa.binary(),
    "error": pa.string(),
}
_PRIMITIVE_TYPES = {"str": pa.string(), "bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "bytes": pa.binary()}
_INT64 = (-(1 << 63), (1 << 63) - 1)


# -- results -------------------------------------------------------------------------------------


@dataclass
class ExportedState:
    state: str
    kind: str
    #: Directory of the state's files, relative to the output (``operator=.../state=...``).
    path: str
    rows_per_subtask: dict[int, int] = field(default_factory=dict)
    #: Arrow type per decoded column: string, int64, bool, float64, binary or json.
    columns: dict[str, str] = field(default_factory=dict)
    #: Python type names of the decoded values per column (what the decoders produced).
    decoded_types: dict[str, list[str]] = field(default_factory=dict)
    #: Decoded columns left null for some rows because the bytes could not be decoded (see ``error``).
    raw_fallback: list[str] = field(default_factory=list)
    rows_with_errors: int = 0
    #: Live keys dropped because they are outside their subtask's key-group range (rescaling leftovers).
    outside_key_groups: int = 0

    @property
    def rows(self) -> int:
        return sum(self.rows_per_subtask.values())

    def to_json(self) -> dict:
        return {
            "state": self.state, "kind": self.kind, "path": self.path, "rows": self.rows,
            "subtasks": {str(k): v for k, v in sorted(self.rows_per_subtask.items())},
            "columns": self.columns, "decoded_types": self.decoded_types, "raw_fallback": self.raw_fallback,
            "rows_with_errors": self.rows_with_errors, "outside_key_groups": self.outside_key_groups,
        }


@dataclass
class ExportedOperator:
    label: str
    operator_id: str
    uid: str | None
    name: str | None
    partition: str
    subtasks: list[int] = field(default_factory=list)
    states: list[ExportedState] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "operator": self.label, "operator_id": self.operator_id, "uid": self.uid, "name": self.name,
            "path": self.partition, "subtasks": self.subtasks, "states": [s.to_json() for s in self.states],
        }


@dataclass
class Skipped:
    operator: str
    operator_id: str
    subtask: int | None
    what: str  # operator-state | raw-operator-state | full-snapshot-keyed-state | changelog | raw-keyed-state
    reason: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ExportResult:
    source: str
    metadata: str
    snapshot: str
    kind: str
    savepoint_format: str | None
    checkpoint_id: int
    out: str
    operators: list[ExportedOperator] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        return True

    @property
    def rows(self) -> int:
        return sum(s.rows for op in self.operators for s in op.states)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "format_version": FORMAT_VERSION, "source": self.source, "metadata": self.metadata,
            "snapshot": self.snapshot, "kind": self.kind, "savepoint_format": self.savepoint_format,
            "checkpoint_id": self.checkpoint_id, "out": self.out, "rows": self.rows, "files": self.files,
            "operators": [op.to_json() for op in self.operators], "skipped": [s.to_json() for s in self.skipped],
        }


# -- tasks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportTask:
    """One keyed subtask to decode; small and picklable (it re-loads the snapshot where it runs)."""

    ref: SnapshotRef
    root: str | None
    operator_id: str
    subtask: int
    storage: st.Storage
    states: tuple[str, ...] | None = None


@dataclass
class StateColumns:
    """The rows of one state of one subtask as columns of plain Python values."""

    kind: str
    columns: dict[str, list]
    #: Python type names seen per decoded column (non-null values only).
    types: dict[str, list[str]]
    #: Decoded columns that are null in some row that has an ``error``.
    raw_fallback: list[str]
    rows_with_errors: int
    outside_key_groups: int
    #: Decoded columns already converted to JSON text in the task (they held non-primitive values).
    json_encoded: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.columns["key_group"])


def export_subtask(task: ExportTask) -> dict[str, StateColumns]:
    """Decode one keyed subtask; columns per state name (runs in a worker or Spark executor)."""
    from repair.ops.state_reader import read_incremental_handle

    snapshot = load_snapshot(task.ref, task.root, task.storage)
    op = snapshot.metadata.operator(task.operator_id)
    sub = next((s for s in op.subtasks if s.index == task.subtask), None) if op is not None else None
    if sub is None or not isinstance(sub.managed_keyed_state, IncrementalKeyedHandle):
        raise FormatError("keyed subtask", 0, f"{task.operator_id}[{task.subtask}]", "absent after re-loading")
    result = read_incremental_handle(snapshot, task.storage, sub.managed_keyed_state, op.max_parallelism)
    out = {}
    for state, rows in result.rows.items():
        if task.states is not None and state not in task.states:
            continue
        out[state] = _to_columns(rows, result.outside_key_groups.get(state, 0))
    return out


def _to_columns(rows: list[dict[str, Any]], outside: int) -> StateColumns:
    columns: dict[str, list] = {name: [row[name] for row in rows] for name in COLUMNS}
    types: dict[str, list[str]] = {}
    fallback: set[str] = set()
    json_encoded: list[str] = []
    for name in DECODED_COLUMNS:
        seen = {type(v).__name__ for v in columns[name] if v is not None}
        types[name] = sorted(seen)
        if seen - _PRIMITIVE_TYPES.keys():  # not all primitive: the whole column becomes JSON text here
            columns[name] = [None if v is None else _json(v) for v in columns[name]]
            json_encoded.append(name)
        if any(row[name] is None and row["error"] is not None and row.get(name + "_raw") for row in rows):
            fallback.add(name)
    errors = sum(row["error"] is not None for row in rows)
    kind = rows[0]["kind"] if rows else ""
    return StateColumns(kind, columns, types, sorted(fallback), errors, outside, json_encoded)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return list(value)
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default)


# -- the operation -------------------------------------------------------------------------------


def partition_value(name: str) -> str:
    """A checkpoint-provided name as a path-safe Hive partition value (percent-encoded)."""
    return urllib.parse.quote(name, safe="")


def export(
    checkpoint: str,
    out: str,
    *,
    operators: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
    master: str | None = None,
    workers: int | None = None,
    storage: st.Storage | None = None,
) -> ExportResult:
    """Export the keyed state of ``checkpoint`` (for a job root: its newest checkpoint) to ``out``.

    ``operators`` (uids, operator ids or names) and ``states`` (state names) filter; a filter value that
    matches nothing is a :class:`UsageError` and nothing is written. ``out`` must not exist (or be empty).
    """
    storage = storage or st.default_storage()
    operators = list(operators or []) or None
    states = list(states or []) or None
    if storage.exists(out) and storage.list_dir(out):
        raise UsageError(f"{out} already exists and is not empty; exports go to a new directory")
    layout = discover(checkpoint, storage)
    ref = layout.snapshots[-1]
    for source in {layout.root or ref.directory, ref.directory}:
        if _inside(out, source):
            raise UsageError(f"--out {out} is inside the input {source}; inputs are never written to")
    snapshot = load_snapshot(ref, layout.root, storage)
    result = ExportResult(
        source=checkpoint, metadata=ref.metadata_uri, snapshot=ref.name, kind=snapshot.kind,
        savepoint_format=snapshot.savepoint_format, checkpoint_id=snapshot.metadata.checkpoint_id, out=out,
    )
    tasks, exported = _plan(snapshot, layout.root, storage, operators, states, result)
    result.operators = exported
    if workers is None:
        workers = min(default_workers(), len(tasks)) if len(tasks) > 2 else 1
    outputs = run_tasks(export_subtask, tasks, workers=workers, master=master)

    # group by operator and state, then decide the column types per state
    by_state: dict[tuple[str, str], dict[int, StateColumns]] = {}
    for task, output in zip(tasks, outputs):
        for state, columns in output.items():
            by_state.setdefault((task.operator_id, state), {})[task.subtask] = columns
    if states is not None:
        found = {state for _, state in by_state}
        missing = [s for s in states if s not in found]
        if missing:
            raise UsageError(f"no state named {', '.join(map(repr, missing))} in the exported operators")

    with storage.publish_dir(out, commit_file=COMMIT_FILE) as publisher:
        for op in exported:
            for state in sorted({s for (op_id, s) in by_state if op_id == op.operator_id}):
                parts = by_state[(op.operator_id, state)]
                entry = _describe_state(op, state, parts)
                types = {name: _arrow_type(entry.columns[name]) for name in DECODED_COLUMNS}
                for subtask, columns in sorted(parts.items()):
                    table = _table(columns, types, entry.columns)
                    name = f"{entry.path}/part-{subtask:05d}.parquet"
                    st.resolve_within(out, name)  # the names are data: they never leave OUT
                    publisher.write(name, _parquet_bytes(table))
                    result.files += 1
                op.states.append(entry)
        if states is not None:  # operators none of whose states was selected are not part of the export
            result.operators = [op for op in result.operators if op.states]
        publisher.write(COMMIT_FILE, json.dumps(result.to_json(), indent=2, ensure_ascii=False).encode() + b"\n")
    return result


def _inside(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it (local paths compared after resolving links)."""
    def norm(p: str) -> str:
        return os.path.realpath(p) if "://" not in p and not p.startswith("file:") else p.rstrip("/")

    path, directory = norm(path), norm(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _plan(snapshot: LoadedSnapshot, root, storage, operators, states, result: ExportResult):
    wanted = None
    if operators is not None:
        wanted = {}
        for value in operators:
            wanted[value] = {value, value.lower(), operator_id_for_uid(value)}
    matched: set[str] = set()
    tasks: list[ExportTask] = []
    exported: list[ExportedOperator] = []
    for op in snapshot.metadata.operators:
        if wanted is not None:
            hits = [v for v, ids in wanted.items() if op.operator_id in ids or v in (op.operator_uid, op.operator_name)]
            if not hits:
                continue
            matched.update(hits)
        label = op.operator_uid or op.operator_name or op.operator_id
        entry = ExportedOperator(label, op.operator_id, op.operator_uid, op.operator_name, f"operator={partition_value(label)}")
        for sub in op.subtasks:
            if sub.finished:
                continue

            def skip(what, reason):
                result.skipped.append(Skipped(label, op.operator_id, sub.index, what, reason))

            if sub.managed_operator_state is not None:
                skip("operator-state", "operator state export is not implemented yet")
            if sub.raw_operator_state is not None:
                skip("raw-operator-state", "raw operator state is opaque bytes")
            if sub.raw_keyed_state is not None:
                skip("raw-keyed-state", "raw keyed state is opaque bytes")
            keyed = sub.managed_keyed_state
            if isinstance(keyed, IncrementalKeyedHandle):
                entry.subtasks.append(sub.index)
                tasks.append(ExportTask(snapshot.ref, root, op.operator_id, sub.index, storage, tuple(states) if states else None))
            elif isinstance(keyed, KeyGroupsHandle):
                skip("full-snapshot-keyed-state", "canonical savepoints and full snapshots are not exported yet")
            elif isinstance(keyed, ChangelogBackendHandle):
                skip("changelog", "changelog state backend handles are not exported yet")
            elif keyed is not None:
                skip(type(keyed).__name__, "unsupported keyed state handle")
        if entry.subtasks:
            exported.append(entry)
    if wanted is not None:
        missing = [v for v in wanted if v not in matched]
        if missing:
            available = ", ".join(op.operator_uid or op.operator_id for op in snapshot.metadata.operators)
            raise UsageError(f"no operator {', '.join(map(repr, missing))} in {snapshot.ref.metadata_uri} (operators: {available})")
    return tasks, exported


def _describe_state(op: ExportedOperator, state: str, parts: dict[int, StateColumns]) -> ExportedState:
    entry = ExportedState(state, next((p.kind for p in parts.values() if p.kind), ""), f"{op.partition}/state={partition_value(state)}")
    for subtask, columns in parts.items():
        entry.rows_per_subtask[subtask] = columns.rows
        entry.rows_with_errors += columns.rows_with_errors
        entry.outside_key_groups += columns.outside_key_groups
    for name in DECODED_COLUMNS:
        seen = sorted({t for p in parts.values() for t in p.types[name]})
        entry.decoded_types[name] = seen
        entry.columns[name] = _column_type(seen, [p.columns[name] for p in parts.values()])
    entry.raw_fallback = sorted({c for p in parts.values() for c in p.raw_fallback})
    return entry


def _column_type(seen: list[str], values: list[list]) -> str:
    """string / int64 / bool / float64 / binary when every value is that primitive, else json."""
    if not seen:
        return "string"
    if len(seen) != 1 or seen[0] not in _PRIMITIVE_TYPES:
        return "json"
    if seen[0] == "int":
        low, high = _INT64
        if any(v is not None and not low <= v <= high for column in values for v in column):
            return "json"
    return str(_PRIMITIVE_TYPES[seen[0]])


def _arrow_type(name: str) -> pa.DataType:
    return pa.string() if name == "json" else {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(),
                                                 "double": pa.float64(), "binary": pa.binary()}[name]


def _table(columns: StateColumns, types: dict[str, pa.DataType], decisions: dict[str, str]) -> pa.Table:
    arrays = {}
    for name in COLUMNS:
        values = columns.columns[name]
        if name in DECODED_COLUMNS:
            if decisions[name] == "json" and name not in columns.json_encoded:
                values = [None if v is None else _json(v) for v in values]
            arrays[name] = pa.array(values, type=types[name])
        else:
            arrays[name] = pa.array(values, type=_FIXED_TYPES[name])
    return pa.table(arrays)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()
