"""``repair upgrade``: a Flink 1.x checkpoint or savepoint as a canonical savepoint Flink 2.x restores with
the same state, or (``check``) what a restore of it in that 2.x release does today, per state.

Per state, from its serializer snapshots and its bytes (:mod:`repair.formats.flink.kryo_upgrade`):

* ``same values``: nothing Flink 2.x reads otherwise: no Kryo value, or Kryo values whose Kryo 5 bytes
  are their Kryo 2.24 bytes (a ``Long``, a ``String``). ``upgrade`` keeps them as they are;
* ``different values``: Kryo values (keys, map keys, values, list elements) whose Kryo 5 bytes differ
  (a ``Double``, ``Float``, ``Short``, ``Character``, an enum, a collection): Flink 2.x restores them
  without an error and reads other values. ``upgrade`` rewrites them as Kryo 5 writes them;
* ``fails``: a POJO with a field declared ``List``, ``Map`` or ``Set`` (Kryo in 1.x, Flink's own
  serializers in 2.x): the restore fails with ``StateMigrationException``. ``upgrade`` rewrites those
  fields with Flink 2.x's serializers and snapshots (:mod:`repair.formats.flink.pojo_upgrade`: the
  element types from the values), or refuses the state where they cannot be told, naming the field, the
  classes seen and the way out (``--drop-state``);
* ``unknown``: Kryo values of a class whose layout is the job's (a FieldSerializer class, a registered
  serializer), Kryo nested inside another serializer: not predicted; ``upgrade`` refuses them.

Keyed and operator state alike (a ``ListState<Object>`` of operator state is Kryo too). The rows are read
as tasks, one per subtask handle (:mod:`repair.ops.upgrade_tasks`: in this process, in a pool of
``workers`` or on Spark with ``master``, as export's and the write's), and added up here.

Each prediction is held to what real Flink 2.0, 2.1 and 2.3 did with the fixture ``flink-1.20-upgrade``
(``fixtures/upgrade_outcomes.json``). The write is :func:`repair.ops.write_savepoint.rescale`'s route
(an intermediate export written back by write-savepoint's tasks, in-process, in a pool or on Spark, with
its memory bounds), its Kryo columns rewritten as Kryo 5 writes them and ``_metadata`` in the version
the release writes (5 for 2.0, 6 from 2.1). Refusals come before anything is written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable

from repair.errors import UsageError
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.kryo_upgrade import kryo_columns, kryo_snapshots, pojo_collection_fields, scala_snapshots
from repair.formats.flink.metadata import OperatorState
from repair.formats.flink.operator_selection import find_operator_state
from repair.formats.flink.pojo_upgrade import CollectionField, FieldTypes, state_pojo
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.outputs import new_output
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.export.sources import source_for
from repair.ops.runner import default_workers, run_tasks
from repair.ops.upgrade_tasks import CheckTask, RowsJudged, StateRows, judge_subtask, task_bytes
from repair.ops.write_savepoint import WriteSavepointResult, upgrade_savepoint
from repair.results import CommandResult

__all__ = ["RELEASES", "StateUpgrade", "UpgradeResult", "upgrade"]

#: The Flink 2.x releases a savepoint is written for, with the ``_metadata`` version each writes.
RELEASES = {"2.0": 5, "2.1": 6, "2.2": 6, "2.3": 6}
#: What a restore of the source in the release does, per state.
SAME, DIFFERENT, FAILS, UNKNOWN = "same values", "different values", "fails", "unknown"
#: What ``upgrade`` does with the state.
KEPT, REWRITTEN, REFUSED = "kept", "rewritten", "refused"
#: How a refusal ends: the way out, for operator and state.
_WAY_OUT = "drop the state with --drop-state {0}/{1}, or move it with a State Processor API job"
#: Handle slots read (keyed and operator state; raw state is opaque bytes).
SLOTS = ("managed_keyed_state", "managed_operator_state")


@dataclass
class StateUpgrade:
    """One state: what a restore of the source in the release does (``outcome``), why, and what
    ``upgrade`` does with it (``action``)."""

    operator: str
    operator_id: str
    state: str
    kind: str
    outcome: str
    action: str
    reason: str
    #: Raw columns holding Kryo values whose Kryo 5 bytes differ (``key_raw``, ``user_key_raw``, ``value_raw``).
    columns: list[str] = field(default_factory=list)
    #: Rows read, and those holding a value Kryo 5 writes otherwise.
    rows: int = 0
    rows_differing: int = 0
    #: For a refused POJO: the field and its declared class.
    field: str | None = None
    field_class: str | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class UpgradeResult(CommandResult):
    source: str
    metadata: str
    to: str
    check: bool
    source_metadata_version: int
    metadata_version: int
    checkpoint_id: int
    out: str | None = None
    states: list[StateUpgrade] = field(default_factory=list)
    #: Keyed states left out (``drop_states``, ``OPERATOR/STATE``).
    dropped: list[str] = field(default_factory=list)
    #: The savepoint written, None with ``check`` or a refusal.
    written: WriteSavepointResult | None = None
    findings: list = field(default_factory=list)

    @property
    def refused(self) -> list[StateUpgrade]:
        return [s for s in self.states if s.action == REFUSED]

    @property
    def ok(self) -> bool:
        """``check``: every state restores the same values as it is; else: the savepoint was written."""
        if self.check:
            return all(s.outcome == SAME for s in self.states)
        return self.written is not None

    def document(self) -> dict:
        return {"source": self.source, "metadata": self.metadata, "to": self.to, "check": self.check,
                "source_metadata_version": self.source_metadata_version, "metadata_version": self.metadata_version,
                "checkpoint_id": self.checkpoint_id, "out": self.out,
                "summary": {outcome.replace(" ", "_"): sum(s.outcome == outcome for s in self.states)
                            for outcome in (SAME, DIFFERENT, FAILS, UNKNOWN)},
                "states": [s.to_json() for s in self.states], "dropped": self.dropped,
                "written": self.written.to_json() if self.written is not None else None}


def upgrade(
    path: str,
    to: str,
    out: str | None = None,
    *,
    check: bool = False,
    drop_states: Iterable[str] = (),
    workers: int | None = None,
    master: str | None = None,
    storage: st.Storage | None = None,
) -> UpgradeResult:
    """``path`` (a Flink 1.x snapshot, or a job root's newest) for Flink ``to`` (``2.0`` .. ``2.3``): with
    ``check``, what a restore of it in that release does per state; else a canonical savepoint in ``out``
    (a new directory) that the release restores with the same state. ``drop_states`` (``OPERATOR/STATE``)
    are left out. A state that cannot be converted is refused before anything is written (the result's
    ``refused``, exit 1)."""
    if to not in RELEASES:
        raise UsageError(f"the release to upgrade to is one of Flink {', '.join(RELEASES)}, not {to!r}")
    storage = storage or st.default_storage()
    layout = discover(path, storage)
    if check:
        out = None  # nothing is written
    elif out is None:
        raise UsageError("upgrade writes a new savepoint: give its directory (or check only)")
    else:
        new_output(out, layout.inputs, storage)
    ref = layout.snapshots[-1]
    snapshot = load_snapshot(ref, layout.root, storage)
    metadata = snapshot.metadata
    if metadata.version >= min(RELEASES.values()):
        raise UsageError(f"{ref.metadata_uri} was written by Flink 2.x (_metadata version {metadata.version}): "
                         f"there is nothing to upgrade")
    dropped = sorted(set(drop_states))
    result = UpgradeResult(st.absolute(path), st.absolute(ref.metadata_uri), to, check, metadata.version, RELEASES[to],
                           metadata.checkpoint_id, out, dropped=dropped)
    skipped = _drops(metadata.operators, dropped)
    states, pojos, tasks = _plan(snapshot, layout.root, storage)
    readers = workers if workers is not None else (min(default_workers(), len(tasks)) if len(tasks) > 2 else 1)
    outputs = run_tasks(judge_subtask, tasks, workers=readers, master=master, cost=lambda task: task_bytes(snapshot, task))
    rows: dict[tuple[str, str], RowsJudged] = {}
    for task, output in zip(tasks, outputs):  # in operator and subtask order
        for name, judged in output.items():
            rows.setdefault((task.operator_id, name), RowsJudged()).add(judged)
    pojo_fields: dict[tuple[str, str], tuple[CollectionField, ...]] = {}
    for key, judged in states.items():
        fields = _judge_rows(judged, rows.get(key, RowsJudged()), pojos.get(key))
        if fields is not None and key not in skipped:
            pojo_fields[key] = fields
    result.states = [s for key, s in states.items() if check or key not in skipped]
    if check or out is None or result.refused:
        return result
    result.written = upgrade_savepoint(path, out, metadata_version=RELEASES[to], pojo_fields=pojo_fields, drop_states=dropped,
                                       workers=workers, master=master, storage=storage)
    return result


def _drops(operators: list[OperatorState], dropped: list[str]) -> set[tuple[str, str]]:
    """``(operator id, state)`` of each ``OPERATOR/STATE`` to leave out (uid, name or operator id)."""
    found = set()
    for value in dropped:
        op, state = find_operator_state(operators, value)
        found.add((op.operator_id, state))
    return found


def _plan(snapshot: LoadedSnapshot, root: str | None, storage: st.Storage
          ) -> tuple[dict[tuple[str, str], StateUpgrade], dict[tuple[str, str], SerializerSnapshot], list[CheckTask]]:
    """Every keyed and operator state, by ``(operator id, state)``, judged from its snapshots alone; the
    POJOs with collection fields to rewrite (their element types to be told by the rows); and a task per
    subtask handle whose rows are to be read (Kryo values, or such a POJO)."""
    found: dict[tuple[str, str], StateUpgrade] = {}
    pojos: dict[tuple[str, str], SerializerSnapshot] = {}
    tasks: list[CheckTask] = []
    for op in snapshot.metadata.operators:
        for sub in op.subtasks:
            for slot in SLOTS:
                handle = getattr(sub, slot)
                source = source_for(slot, handle) if handle is not None else None
                if source is None or source.declines(snapshot, storage, handle):
                    continue
                plan = source.plan(snapshot, storage, op, sub)
                wanted = []
                for meta, _ in plan.states:
                    key = (op.operator_id, meta.name)
                    judged = found.get(key)
                    if judged is None:
                        judged = found[key] = _judge_snapshots(op, meta, plan.key_serializer)
                        pojo = state_pojo(meta)
                        if judged.action == REWRITTEN and pojo is not None:
                            pojos[key] = pojo
                    columns = tuple(kryo_columns(meta, plan.key_serializer)) if judged.action != REFUSED else ()
                    if columns or key in pojos:
                        wanted.append(StateRows(meta.name, columns, pojos.get(key)))
                if wanted:
                    tasks.append(CheckTask(snapshot.ref, root, storage, snapshot.metadata_digest, op.operator_id, op.label,
                                           sub.index, source.name, tuple(wanted)))
    return found, pojos, tasks


def _judge_snapshots(op: OperatorState, meta: StateMetaInfo, key_serializer: SerializerSnapshot | None) -> StateUpgrade:
    """The verdict the serializer snapshots alone give (the rows may turn ``same values`` into ``different values``)."""
    label = op.label
    judged = StateUpgrade(label, op.operator_id, meta.name, meta.kind, SAME, KEPT, "no Kryo value, nothing Flink 2.x reads otherwise")
    scala_key = scala_snapshots(key_serializer)
    scala = scala_key or [found for name in ("VALUE_SERIALIZER", "KEY_SERIALIZER") for found in scala_snapshots(meta.serializer(name))]
    if scala:
        judged.outcome, judged.action = FAILS, REFUSED
        judged.reason = (f"{'the key serializer' if scala_key else 'a serializer'} {scala[0].describe()} is the Scala API's, "
                         f"which Flink 2.x no longer has: the restore fails (ClassNotFoundException {scala[0].class_name}) and "
                         f"no Flink 2.x serializer reads its bytes; ")
        judged.reason += (f"every keyed state of the operator needs the key: drop them all, its timer states too, with "
                          f"--drop-state {label}/STATE (its keyed state starts empty, with any key type) or the operator with "
                          f"repair edit --drop-operator {label} (it starts empty), or move them with a State Processor API job"
                          if scala_key else
                          _WAY_OUT.format(label, meta.name))
        return judged
    value = meta.serializer("VALUE_SERIALIZER")
    snapshots = [value, *value.nested] if value is not None else []
    for snapshot in snapshots:
        fields = pojo_collection_fields(snapshot)
        if not fields:
            continue
        judged.outcome = FAILS
        judged.field, judged.field_class = fields[0]
        named = ", ".join(f"{name} ({declared})" for name, declared in fields)
        judged.reason = (f"POJO {snapshot.attributes.get('pojo_class') or ''} fields {named}: Kryo in Flink 1.x, Flink's own "
                         f"serializers in 2.x, so the restore fails (StateMigrationException)")
        collections = {id(f.snapshot) for f in snapshot.pojo_fields or [] if f.name in dict(fields)}
        if snapshot is not state_pojo(meta) or any(id(k) not in collections for k in kryo_snapshots(snapshot)):
            judged.action = REFUSED
            judged.reason += ("; only a POJO that is the state's value, list element or map value, without TTL and "
                              f"without other Kryo fields, is converted: {_WAY_OUT.format(label, meta.name)}")
        else:
            judged.action = REWRITTEN
            judged.reason += "; rewritten with Flink 2.x's list, map and set serializers"
        return judged
    tops = {id(column.snapshot) for column in kryo_columns(meta, key_serializer)}
    trees = [s for s in (meta.serializer("VALUE_SERIALIZER"), meta.serializer("KEY_SERIALIZER")) if s is not None]
    if any(id(kryo) not in tops for tree in trees for kryo in kryo_snapshots(tree)):
        judged.outcome, judged.action = UNKNOWN, REFUSED
        judged.reason = f"a Kryo value nested in {trees[0].describe()}: not read apart yet; {_WAY_OUT.format(label, meta.name)}"
        return judged
    if tops:
        judged.reason = "Kryo values Kryo 5 reads as they are (Long, String, ...)"
    return judged


def _judge_rows(judged: StateUpgrade, rows: RowsJudged, pojo: SerializerSnapshot | None) -> tuple[CollectionField, ...] | None:
    """The verdict once every subtask's rows are read: a value that cannot be converted makes ``unknown``
    (refused), a value whose Kryo 5 bytes differ ``different values`` (a failing POJO stays ``fails``).
    For a POJO with collection fields to rewrite, the fields with their element types (None: refused,
    or no such POJO)."""
    judged.rows, judged.rows_differing, judged.columns = rows.rows, rows.rows_differing, list(rows.columns)
    way_out = _WAY_OUT.format(judged.operator, judged.state)
    if rows.unsupported is not None:
        judged.outcome, judged.action = UNKNOWN, REFUSED
        judged.reason = f"{rows.unsupported}: the job's own layout, not converted; {way_out}"
        return None
    if rows.rows_differing and judged.outcome != FAILS:  # a POJO's Kryo key or map key is rewritten with it
        judged.outcome, judged.action = DIFFERENT, REWRITTEN
        judged.reason = ("Kryo values Kryo 5 reads otherwise (Float, Double, Short, Character, enums, collections): "
                         "Flink 2.x restores them without an error and reads other values")
    if pojo is None or judged.action != REWRITTEN:
        return None
    fields, why = (rows.field_types or FieldTypes(pojo)).result()
    if why is not None:
        judged.action, judged.reason = REFUSED, f"{judged.reason}; but {why}: {way_out}"
        return None
    return fields
