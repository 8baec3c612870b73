"""``repair export``: the keyed state of a checkpoint or native savepoint as Hive-partitioned Parquet.

The driver plans, the tasks write, the driver publishes:

1. **Plan** (driver): for every subtask handle a :mod:`~repair.ops.export.sources` source reads
   (incremental RocksDB handles, full snapshots, changelog subtasks, operator state, raw timers) read
   its meta data only (a changelog subtask: its changelog, replayed), and decide
   the Arrow type of every decoded column of every state from the serializer snapshots
   (:mod:`repair.formats.flink.arrow`). Subtasks that disagree (a state not re-registered since its
   serializer changed) make that column JSON text. So every part of a state has the same schema, known
   before any data is read. Handles no source reads are listed under ``skipped``.
2. **Write** (one task per subtask handle, in this process, a process pool or on Spark executors:
   :func:`run_tasks`): the task streams the handle's states (:class:`~repair.readers.rocksdb.StateStream`;
   for RocksDB a k-way merge over the SSTs per column family) and writes one Parquet part per state in
   record batches (:func:`write_state_part`) into the output's staging directory
   (:meth:`DirectoryPublisher.share`), on whatever storage the output is. It returns only counts.
   Every planned state gets a part in every task, empty if the subtask holds no row of it.
3. **Publish** (driver): adopt the parts the tasks report, delete anything else a failed attempt left,
   write ``_export.json`` last and rename the whole into place (object stores: ``_export.json`` is the
   commit file). On an error nothing is published and the staging directory is removed.

Layout::

    OUT/operator=<uid | name | operator id>/state=<state name, %-encoded>/part-<subtask:05d>.parquet
    OUT/_export.json

Partition values are percent-encoded (``urllib.parse.quote(name, safe="")``: ``/`` -> ``%2F``, ``%`` ->
``%25``, ``:`` -> ``%3A`` ...), as Hive and Spark escape partition values; pyarrow's Hive partitioning
decodes them. Every output name goes through :func:`repair.io.storage.resolve_within`.

Columns: see :data:`repair.ops.export.parts.COLUMNS`. Not read yet (listed under ``skipped``): raw
operator state and raw keyed state other than timers (RocksDB with timers on the heap writes them
there: :mod:`repair.readers.raw_timers`), and changelog states whose changes cannot be applied
(:mod:`repair.readers.changelog_state`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from repair.errors import FormatError, UsageError
from repair.formats.flink.arrow import StateColumns, merge_state_columns
from repair.formats.flink.handles import iter_stream_handles
from repair.formats.flink.operator_selection import select_operators
from repair.io import storage as st
from repair.io.layout import SnapshotRef, discover
from repair.io.outputs import new_output
from repair.io.snapshot import LoadedSnapshot, load_snapshot, load_snapshot_shared, reading_metadata_once
from repair.ops.export.parts import (
    COLUMN_CHOICES,
    COLUMNS,
    COLUMNS_KEPT,
    COMPRESSION,
    COMPRESSIONS,
    PartStats,
    StateCounts,
    check_kind,
    write_state_part,
)
from repair.ops.export.prefetch import Ahead, Lane, lanes
from repair.ops.export.sources import SLOTS, SOURCES, not_exported, source_for
from repair.ops.renamed import renamed
from repair.ops.runner import default_workers, run_tasks
from repair.readers.rocksdb import ENGINES
from repair.readers.rocksdb_instance import MaterialisedInstance
from repair.results import CommandResult

__all__ = ["COLUMNS", "COMMIT_FILE", "export", "export_subtask", "partition_value"]

COMMIT_FILE = "_export.json"
FORMAT_VERSION = 4


# -- results -------------------------------------------------------------------------------------


@dataclass
class ExportedState(StateCounts):
    """One state of one operator as exported: where its parts are, its column decisions, and the
    counts of every subtask's part added up."""

    state: str
    kind: str
    #: Directory of the state's files, relative to the output (``operator=.../state=...``).
    path: str
    #: The decision per decoded column (Arrow type and the serializer it came from).
    columns: StateColumns
    #: What it was read from: the :data:`~repair.ops.export.sources.SOURCES` name (``incremental-keyed``,
    #: ``full-snapshot-keyed``, ``raw-keyed-timers``, ``operator``).
    source: str = ""
    rows_per_subtask: dict[int, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.rows_per_subtask.values())

    @property
    def undecoded(self) -> bool:
        """Every row of the state has a decoded column left null beside its raw bytes (``raw_fallback``):
        none of its values was decoded."""
        return self.rows > 0 and bool(self.raw_fallback) and self.rows_with_errors == self.rows

    def add(self, subtask: int, part: PartStats) -> None:
        self.rows_per_subtask[subtask] = part.rows
        self.add_counts(part)

    def to_json(self) -> dict:
        return {
            "state": self.state, "kind": self.kind, "source": self.source, "path": self.path, "rows": self.rows,
            "subtasks": {str(k): v for k, v in sorted(self.rows_per_subtask.items())},
            "ttl": self.columns.ttl, "columns": self.columns.to_json(),
            "rows_with_errors": self.rows_with_errors, "raw_fallback": self.raw_fallback,
            "not_representable": dict(sorted(self.not_representable.items())),
            "outside_key_groups": self.outside_key_groups, "lsm": self.lsm, "changelog": self.changelog, "bytes": self.bytes,
            "batches": {"columnar": self.columnar_batches, "rows": self.row_batches},
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
    #: Per subtask with RocksDB state: the engine that resolved its LSM tree, and why not rocksdb.
    engines: dict[int, dict[str, str | None]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "operator": self.label, "operator_id": self.operator_id, "uid": self.uid, "name": self.name,
            "path": self.partition, "subtasks": self.subtasks, "states": [s.to_json() for s in self.states],
            "engines": {str(k): v for k, v in sorted(self.engines.items())},
        }


@dataclass
class Skipped:
    operator: str
    operator_id: str
    subtask: int | None
    what: str  # operator-state | raw-operator-state | raw-keyed-state | keyed-state (one state) | a handle type
    reason: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ExportResult(CommandResult):
    source: str
    metadata: str
    snapshot: str
    kind: str
    savepoint_format: str | None
    checkpoint_id: int
    out: str
    #: ``--columns``: what was written of each value (:data:`~repair.ops.export.parts.COLUMN_CHOICES`).
    columns: str = COLUMNS_KEPT
    operators: list[ExportedOperator] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        """False when decoded columns were asked for (``columns`` ``decoded``) and a state has none."""
        return not (self.columns == "decoded" and self.undecoded)

    @property
    def rows(self) -> int:
        return sum(s.rows for op in self.operators for s in op.states)

    @property
    def undecoded(self) -> list[tuple[ExportedOperator, ExportedState]]:
        """The states none of whose values was decoded (only raw bytes, the reason in each row's ``error``)."""
        return [(op, state) for op in self.operators for state in op.states if state.undecoded]

    @property
    def findings(self) -> list:
        """Nothing judged: export writes, and reports problems as errors."""
        return []

    def document(self) -> dict:
        return {
            "format_version": FORMAT_VERSION, "source": self.source, "metadata": self.metadata,
            "snapshot": self.snapshot, "kind": self.kind, "savepoint_format": self.savepoint_format,
            "checkpoint_id": self.checkpoint_id, "out": self.out, "columns": self.columns, "rows": self.rows, "files": self.files,
            "operators": [op.to_json() for op in self.operators], "skipped": [s.to_json() for s in self.skipped],
            "undecoded": [{"operator": op.label, "state": state.state, "rows": state.rows, "columns": state.raw_fallback}
                          for op, state in self.undecoded],
        }


# -- tasks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatePlan:
    """One state to write: its name, kind, directory (relative to the output) and column decisions."""

    name: str
    kind: str
    path: str
    columns: StateColumns

    def part(self, subtask: int) -> str:
        return f"{self.path}/part-{subtask:05d}.parquet"


@dataclass(frozen=True)
class ExportTask:
    """One subtask's handle to export; small and picklable (it re-loads the snapshot where it runs)."""

    ref: SnapshotRef
    root: str | None
    operator_id: str
    subtask: int
    storage: st.Storage
    #: The :data:`~repair.ops.export.sources.SOURCES` entry reading the handle.
    source: str
    #: Where the task writes its parts (the output's staging directory).
    staging: str
    states: tuple[StatePlan, ...]
    #: The planned ``_metadata``'s :attr:`~repair.io.snapshot.LoadedSnapshot.metadata_digest`.
    metadata_digest: str
    engine: str = "auto"
    compression: str = COMPRESSION
    #: ``--columns``: :data:`~repair.ops.export.parts.COLUMN_CHOICES`.
    columns: str = COLUMNS_KEPT


@dataclass
class SubtaskExport:
    """What one task wrote: the part of every planned state."""

    operator_id: str
    subtask: int
    parts: dict[str, PartStats]
    #: ``{"engine": ..., "reason": ...}`` of the LSM engine (None: no RocksDB state read).
    engine: dict[str, str | None] | None = None


def export_subtask(task: ExportTask, materialised: MaterialisedInstance | None = None) -> SubtaskExport:
    """Stream one subtask's states into Parquet parts below ``task.staging`` (runs in a worker or Spark
    executor); returns the counts. ``materialised``: its RocksDB instance's files, fetched ahead
    (:mod:`~repair.ops.export.prefetch`)."""
    source = SOURCES[task.source]
    snapshot = load_snapshot_shared(task.ref, task.root, task.storage, task.metadata_digest)
    op = snapshot.metadata.operator(task.operator_id)
    sub = next((s for s in op.subtasks if s.index == task.subtask), None) if op is not None else None
    if sub is None or not source.applies(getattr(sub, source.slot)):
        raise FormatError(f"{source.name} subtask", 0, f"{task.operator_id}[{task.subtask}]", "absent after re-loading")
    plans = {plan.name: plan for plan in task.states}
    parts: dict[str, PartStats] = {}
    engine = None
    for stream in source.streams(snapshot, task.storage, op, sub, set(plans), engine=task.engine, materialised=materialised):
        plan = plans[stream.name]
        check_kind(stream, plan.kind)
        if stream.engine is not None:
            engine = {"engine": stream.engine, "reason": stream.engine_reason}
        parts[plan.name] = write_state_part(task.storage, task.staging, plan.part(task.subtask), plan.columns, stream,
                                            compression=task.compression, kept=task.columns)
    for name, plan in plans.items():  # states this subtask holds no entry of: an empty part
        if name not in parts:
            parts[name] = write_state_part(task.storage, task.staging, plan.part(task.subtask), plan.columns, None,
                                           compression=task.compression, kept=task.columns)
    return SubtaskExport(task.operator_id, task.subtask, parts, engine)


# -- the operation -------------------------------------------------------------------------------


def partition_value(name: str) -> str:
    """A checkpoint-provided name as a path-safe Hive partition value (percent-encoded)."""
    return urllib.parse.quote(name, safe="")


@reading_metadata_once
@renamed(checkpoint="path")
def export(
    path: str,
    out: str,
    *,
    operators: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
    master: str | None = None,
    workers: int | None = None,
    storage: st.Storage | None = None,
    engine: str = "auto",
    compression: str = COMPRESSION,
    columns: str = COLUMNS_KEPT,
    on_progress: Callable[[int, int], None] | None = None,
) -> ExportResult:
    """Export the keyed state of ``path`` (for a job root: its newest checkpoint) to ``out``;
    ``on_progress(done, total)`` is called as subtasks finish.

    ``operators`` (uids, operator ids or names) and ``states`` (state names) filter; a filter value that
    matches nothing is a :class:`UsageError` and nothing is written. ``out`` must not exist (or be empty).
    ``engine`` resolves RocksDB's LSM trees (:data:`~repair.readers.rocksdb.ENGINES`); ``compression``
    is the Parquet codec (:data:`~repair.ops.export.parts.COMPRESSIONS`); ``columns`` what is written of
    each value (:data:`~repair.ops.export.parts.COLUMN_CHOICES`): ``both`` decoded columns beside their
    raw bytes, ``decoded`` raw bytes only where the decoded cell is null, ``raw`` no decoded values.
    """
    if engine not in ENGINES:
        raise UsageError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if compression not in COMPRESSIONS:
        raise UsageError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
    if columns not in COLUMN_CHOICES:
        raise UsageError(f"columns must be one of {', '.join(COLUMN_CHOICES)}, not {columns!r}")
    storage = storage or st.default_storage()
    operators = list(operators or []) or None
    states = list(states or []) or None
    layout = discover(path, storage)
    ref = layout.snapshots[-1]
    new_output(out, layout.inputs, storage)
    snapshot = load_snapshot(ref, layout.root, storage)
    result = ExportResult(
        source=st.absolute(path), metadata=st.absolute(ref.metadata_uri), snapshot=ref.name, kind=snapshot.kind,
        savepoint_format=snapshot.savepoint_format, checkpoint_id=snapshot.metadata.checkpoint_id, out=out,
        columns=columns,
    )
    planner = _Planner(snapshot, layout.root, storage, result)
    planner.select_operators(operators)
    plans = planner.plan_states(states)
    if workers is None:
        workers = min(default_workers(), len(planner.subtasks)) if len(planner.subtasks) > 2 else 1

    with storage.publish_dir(out, commit_file=COMMIT_FILE) as publisher:
        staging = publisher.share()
        tasks = [
            ExportTask(ref, layout.root, op.operator_id, subtask, storage, source, staging, plans[(op.operator_id, source)],
                       metadata_digest=snapshot.metadata_digest, engine=engine, compression=compression, columns=columns)
            for op, subtask, source in planner.subtasks if plans[(op.operator_id, source)]
        ]
        finished = []

        def subtask_done(task: ExportTask, output: SubtaskExport) -> None:
            finished.append(task)
            on_progress(len(finished), len(tasks))

        done = subtask_done if on_progress else None
        cost = functools.partial(_stored_bytes, snapshot)
        if master is None and st.parse_location(ref.metadata_uri).kind != "local":  # the next instance fetched meanwhile
            outputs = _run_fetching_ahead(tasks, workers, done, cost)
        else:
            outputs = run_tasks(export_subtask, tasks, workers=workers, master=master, on_done=done, cost=cost)
        entries: dict[tuple[str, str], ExportedState] = {}
        for op in planner.operators:
            planned = ((p, source) for (op_id, source), ps in plans.items() if op_id == op.operator_id for p in ps)
            for plan, source in sorted(planned, key=lambda item: item[0].name):
                entries[(op.operator_id, plan.name)] = entry = ExportedState(plan.name, plan.kind, plan.path, plan.columns, source)
                op.states.append(entry)
        by_id = {op.operator_id: op for op in planner.operators}
        for output in outputs:
            if output.engine is not None:
                by_id[output.operator_id].engines[output.subtask] = output.engine
            publisher.adopt(part.file for part in output.parts.values())
            for name, part in output.parts.items():
                entries[(output.operator_id, name)].add(output.subtask, part)
                result.files += 1
        result.operators = [op for op in planner.operators if op.states]
        publisher.write(COMMIT_FILE, json.dumps(result.to_json(), indent=2, ensure_ascii=False).encode() + b"\n")
    return result


#: About how many tasks a pool's worker runs in a row, fetching the next one's instance ahead.
TASKS_PER_LANE = 4


def _run_fetching_ahead(tasks: list[ExportTask], workers: int, on_done: Callable | None,
                        cost: Callable[[ExportTask], float]) -> list[SubtaskExport]:
    """:func:`export_subtask` of every task, each process fetching its next task's RocksDB instance while
    it exports one (:mod:`~repair.ops.export.prefetch`): in this process, or in a pool whose workers take
    lanes of about :data:`TASKS_PER_LANE` tasks as they free up (progress is reported, and the work
    balanced, lane by lane; only a lane's first instance is not fetched ahead)."""
    if workers <= 1 or len(tasks) <= 1:
        with Ahead(tasks, export_subtask) as ahead:
            return run_tasks(ahead, tasks, workers=1, on_done=on_done)
    dealt = lanes(tasks, max(workers, len(tasks) // TASKS_PER_LANE), cost)

    def lane_done(lane: list[ExportTask], outputs: list[SubtaskExport]) -> None:
        for task, output in zip(lane, outputs):
            on_done(task, output)

    outputs = run_tasks(Lane(export_subtask), [[tasks[i] for i in lane] for lane in dealt], workers=workers,
                        on_done=lane_done if on_done else None)
    by_index = {i: output for lane, lane_outputs in zip(dealt, outputs) for i, output in zip(lane, lane_outputs)}
    return [by_index[i] for i in range(len(tasks))]


def _stored_bytes(snapshot: LoadedSnapshot, task: ExportTask) -> int:
    """The bytes of the handle ``task`` reads (its files' and inline bytes): its work, roughly."""
    op = snapshot.metadata.operator(task.operator_id)
    sub = next(s for s in op.subtasks if s.index == task.subtask)
    handle = getattr(sub, SOURCES[task.source].slot)
    return sum(getattr(stream, "size", 0) or 0 for _, stream in iter_stream_handles(handle))


class _Planner:
    """Which subtasks and states to export, and the column types of every state (driver side)."""

    def __init__(self, snapshot: LoadedSnapshot, root: str | None, storage: st.Storage, result: ExportResult):
        self.snapshot, self.root, self.storage, self.result = snapshot, root, storage, result
        self.operators: list[ExportedOperator] = []
        #: ``(operator, subtask index, source name)`` of every handle to export, in operator and subtask order.
        self.subtasks: list[tuple[ExportedOperator, int, str]] = []

    def select_operators(self, operators: list[str] | None) -> None:
        chosen = list(self.snapshot.metadata.operators)
        if operators is not None:  # every operator a selector names (select_operators' rule for export)
            selected = select_operators(chosen, operators)
            names = {op.operator_id for ops in selected.values() for op in ops}
            chosen = [op for op in chosen if op.operator_id in names]
            missing = [v for v, ops in selected.items() if not ops]
            if missing:
                available = ", ".join(op.operator_uid or op.operator_id for op in self.snapshot.metadata.operators)
                raise UsageError(f"no operator {', '.join(map(repr, missing))} in {self.snapshot.ref.metadata_uri} (operators: {available})")
        labels = Counter(op.label for op in chosen)
        for op in chosen:
            label = op.label
            if labels[label] > 1:  # two operators of the same name (and no uid): their ids tell them apart
                label = op.operator_id
            entry = ExportedOperator(label, op.operator_id, op.operator_uid, op.operator_name, f"operator={partition_value(label)}")
            self._subtasks(op, entry)
            if entry.subtasks:
                self.operators.append(entry)

    def _subtasks(self, op, entry: ExportedOperator) -> None:
        for sub in op.subtasks:
            if sub.finished:
                continue
            for slot in SLOTS:
                handle = getattr(sub, slot)
                if handle is None:
                    continue
                source = source_for(slot, handle)
                declined = source.declines(self.snapshot, self.storage, handle) if source is not None else None
                if source is None or declined:
                    what, reason = not_exported(slot, handle)
                    self.result.skipped.append(Skipped(entry.label, op.operator_id, sub.index, what, declined or reason))
                    continue
                if sub.index not in entry.subtasks:
                    entry.subtasks.append(sub.index)
                self.subtasks.append((entry, sub.index, source.name))

    def plan_states(self, states: list[str] | None) -> dict[tuple[str, str], tuple[StatePlan, ...]]:
        """The states to write per ``(operator id, source)``, from every subtask's meta data, with their
        column types (one decision per state for all its subtasks)."""
        found: dict[tuple[str, str], dict[str, tuple[str, list[StateColumns]]]] = {}
        unexportable: dict[tuple[str, str], list[tuple[int, str]]] = {}  # (operator id, state) -> [(subtask, reason)]
        for entry, index, source in self.subtasks:
            op = self.snapshot.metadata.operator(entry.operator_id)
            sub = next(s for s in op.subtasks if s.index == index)
            by_name = found.setdefault((entry.operator_id, source), {})
            planned = SOURCES[source].plan(self.snapshot, self.storage, op, sub)
            for name, reason in planned.unexportable.items():
                if states is None or name in states:
                    unexportable.setdefault((entry.operator_id, name), []).append((index, reason))
            for state, columns in planned.states:
                if states is not None and state.name not in states:
                    continue
                kind, decisions = by_name.setdefault(state.name, (state.kind, []))
                if kind != state.kind:
                    raise FormatError(f"state {state.name!r} of {entry.label}", 0, f"a {kind} state in every subtask",
                                      f"a {state.kind} state in subtask {index}")
                decisions.append(columns)
        names: dict[tuple[str, str], str] = {}
        for (op_id, source), by_name in found.items():
            for name in by_name:
                other = names.setdefault((op_id, name), source)
                if other != source:  # both would write operator=.../state=<name>/part-<subtask>.parquet
                    raise FormatError(f"state {name!r} of operator {op_id}", 0, "one state per name", f"{other} and {source} state")
        self._skip_unexportable(found, unexportable)
        if states is not None:
            missing = [s for s in states if not any(s in by_name for by_name in found.values())
                       and not any(name == s for _, name in unexportable)]
            if missing:
                raise UsageError(f"no state named {', '.join(map(repr, missing))} in the exported operators")
        partitions = {op.operator_id: op.partition for op in self.operators}
        return {
            (op_id, source): tuple(
                StatePlan(name, kind, f"{partitions[op_id]}/state={partition_value(name)}", merge_state_columns(decisions))
                for name, (kind, decisions) in sorted(by_name.items())
            )
            for (op_id, source), by_name in found.items()
        }

    def _skip_unexportable(self, found: dict[tuple[str, str], dict], unexportable: dict[tuple[str, str], list[tuple[int, str]]]) -> None:
        """A state some subtask cannot export is exported for none (a partial state would look whole):
        it is listed under ``skipped``, once per subtask that could not, with the reason."""
        labels = {op.operator_id: op.label for op in self.operators}
        for (op_id, name), reasons in sorted(unexportable.items()):
            for by_name in (by_name for (found_op, _), by_name in found.items() if found_op == op_id):
                by_name.pop(name, None)
            for index, reason in reasons:
                self.result.skipped.append(Skipped(labels[op_id], op_id, index, "keyed-state",
                                                   f"state {name!r} (not exported for any subtask): {reason}"))

