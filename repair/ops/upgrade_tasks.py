"""``repair upgrade``'s reading of the rows, as tasks (:func:`repair.ops.runner.run_tasks`: in this
process, in a pool of ``--workers`` or on Spark with ``--master``), as export reads them.

One task per subtask handle streams the states the driver asks for (:class:`StateRows`: the raw
columns holding Kryo values, and the POJO whose collection fields' element types the values tell) and
says per state (:class:`RowsJudged`) how many rows it read, how many hold a Kryo value Kryo 5 writes
otherwise and in which columns, the first value that cannot be converted (a class whose Kryo layout is
the job's) and the classes seen in the POJO's collection fields. The driver adds up the subtasks'
(:meth:`RowsJudged.add`); the verdicts are :mod:`repair.ops.upgrade`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from repair.errors import FormatError, RepairError, UnsupportedSerializerError
from repair.formats.flink.handles import iter_stream_handles
from repair.formats.flink.kryo_upgrade import KryoColumn
from repair.formats.flink.pojo_upgrade import FieldTypes
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.layout import SnapshotRef
from repair.io.snapshot import LoadedSnapshot, load_snapshot_shared
from repair.ops.export.sources import SOURCES

__all__ = ["CheckTask", "RowsJudged", "StateRows", "judge_subtask", "task_bytes"]


@dataclass(frozen=True)
class StateRows:
    """What to read of one state's rows: its raw columns holding a Kryo value at their top level, and
    the POJO (the state's value) whose collection fields' element types the values tell, if any."""

    name: str
    columns: tuple[KryoColumn, ...]
    pojo: SerializerSnapshot | None = None


@dataclass(frozen=True)
class CheckTask:
    """One subtask's handle to read; small and picklable (it re-loads the snapshot where it runs)."""

    ref: SnapshotRef
    root: str | None
    storage: st.Storage
    #: The planned ``_metadata``'s :attr:`~repair.io.snapshot.LoadedSnapshot.metadata_digest`.
    metadata_digest: str
    operator_id: str
    #: The operator as the user knows it (uid or name), for errors.
    operator: str
    subtask: int
    #: The :data:`~repair.ops.export.sources.SOURCES` entry reading the handle.
    source: str
    states: tuple[StateRows, ...]


@dataclass
class RowsJudged:
    """One state's rows as read by one task, or added up over the subtasks."""

    rows: int = 0
    #: Rows holding a value whose Kryo 5 bytes differ, and the raw columns holding them (first seen first).
    rows_differing: int = 0
    columns: list[str] = field(default_factory=list)
    #: ``"<column>: <why>"`` of the first value that cannot be converted (the job's own Kryo layout); the
    #: task reads no further row of the state.
    unsupported: str | None = None
    #: The classes seen in the POJO's collection fields (None: no POJO to read).
    field_types: FieldTypes | None = None

    def add(self, other: RowsJudged) -> None:
        """Another subtask's rows of the same state (subtasks added in order: the first refusal stays)."""
        self.rows += other.rows
        self.rows_differing += other.rows_differing
        self.columns += [c for c in other.columns if c not in self.columns]
        self.unsupported = self.unsupported or other.unsupported
        if other.field_types is not None:
            if self.field_types is None:
                self.field_types = other.field_types
            else:
                self.field_types.update(other.field_types)


def judge_subtask(task: CheckTask) -> dict[str, RowsJudged]:
    """Read the rows of ``task``'s states (runs in a worker or Spark executor); per state what they hold."""
    snapshot = load_snapshot_shared(task.ref, task.root, task.storage, task.metadata_digest)
    op = snapshot.metadata.operator(task.operator_id)
    sub = next((s for s in op.subtasks if s.index == task.subtask), None) if op is not None else None
    source = SOURCES[task.source]
    if sub is None or not source.applies(getattr(sub, source.slot)):
        raise FormatError(f"{source.name} subtask", 0, f"{task.operator_id}[{task.subtask}]", "absent after re-loading")
    wanted = {state.name: state for state in task.states}
    judged = {name: RowsJudged(field_types=FieldTypes(state.pojo) if state.pojo is not None else None)
              for name, state in wanted.items()}
    for stream in source.streams(snapshot, task.storage, op, sub, set(wanted)):
        _judge_rows(judged[stream.name], wanted[stream.name], stream.rows, task.operator)
    return judged


def _judge_rows(judged: RowsJudged, state: StateRows, rows, operator: str) -> None:
    """Every row's Kryo columns converted; a POJO's values tell its collection fields' element types."""
    for row in rows:
        judged.rows += 1
        if judged.field_types is not None and row.get("value_raw") is not None:
            judged.field_types.add(row["value_raw"])
        differs = False
        for column in state.columns:
            data = row.get(column.raw)
            if data is None:
                continue
            try:
                converted = column.kryo5(data)
            except UnsupportedSerializerError as error:
                judged.unsupported = f"{column.raw}: {error.detail or error}"
                return
            except FormatError as error:
                raise RepairError(f"state {state.name!r} of {operator}: {column.raw} is no Kryo 2.24 value ({error})") from None
            if converted != data:
                differs = True
                if column.raw not in judged.columns:
                    judged.columns.append(column.raw)
        judged.rows_differing += differs


def task_bytes(snapshot: LoadedSnapshot, task: CheckTask) -> int:
    """The bytes of the handle ``task`` reads: its work, roughly (Spark runs the costliest first)."""
    sub = next(s for s in snapshot.metadata.operator(task.operator_id).subtasks if s.index == task.subtask)
    handle = getattr(sub, SOURCES[task.source].slot)
    return sum(getattr(stream, "size", 0) or 0 for _, stream in iter_stream_handles(handle))
