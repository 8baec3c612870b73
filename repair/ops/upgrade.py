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

Keyed and operator state alike (a ``ListState<Object>`` of operator state is Kryo too).

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

from repair.errors import FormatError, RepairError, UnsupportedSerializerError, UsageError
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.kryo_upgrade import KryoColumn, kryo_columns, kryo_snapshots, pojo_collection_fields
from repair.formats.flink.metadata import OperatorState
from repair.formats.flink.operator_selection import find_operator
from repair.formats.flink.pojo_upgrade import CollectionField, FieldTypes, state_pojo
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.outputs import new_output
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.export.sources import SOURCES, source_for
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
    pojo_fields: dict[tuple[str, str], tuple[CollectionField, ...]] = {}
    for op in metadata.operators:
        states, pojos = _operator_states(snapshot, storage, op)
        result.states += [s for s in states if check or (s.operator_id, s.state) not in skipped]
        pojo_fields.update((key, fields) for key, fields in pojos.items() if key not in skipped)
    if check or out is None or result.refused:
        return result
    result.written = upgrade_savepoint(path, out, metadata_version=RELEASES[to], pojo_fields=pojo_fields, drop_states=dropped,
                                       workers=workers, master=master, storage=storage)
    return result


def _drops(operators: list[OperatorState], dropped: list[str]) -> set[tuple[str, str]]:
    """``(operator id, state)`` of each ``OPERATOR/STATE`` to leave out (uid, name or operator id)."""
    found = set()
    for value in dropped:
        operator, slash, state = value.rpartition("/")
        if not slash or not operator or not state:
            raise UsageError(f"a state to drop is OPERATOR/STATE (uid, name or operator id, then the state's name), not {value!r}")
        found.add((find_operator(operators, operator).operator_id, state))
    return found


def _operator_states(snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState
                     ) -> tuple[list[StateUpgrade], dict[tuple[str, str], tuple[CollectionField, ...]]]:
    """Every keyed and operator state of ``op``, judged from its snapshots and the rows of every subtask,
    and the POJO states with collection fields to rewrite, with their fields' element types."""
    found: dict[str, StateUpgrade] = {}
    pojos: dict[str, FieldTypes] = {}
    for sub in op.subtasks:
        for slot in SLOTS:
            handle = getattr(sub, slot)
            source = source_for(slot, handle) if handle is not None else None
            if source is None or source.declines(snapshot, storage, handle):
                continue
            plan = source.plan(snapshot, storage, op, sub)
            columns: dict[str, list[KryoColumn]] = {}
            for meta, _ in plan.states:
                judged = found.get(meta.name)
                if judged is None:
                    judged = found[meta.name] = _judge_snapshots(op, meta, plan.key_serializer)
                    pojo = state_pojo(meta)
                    if judged.action == REWRITTEN and pojo is not None:
                        pojos[meta.name] = FieldTypes(pojo)
                if judged.action != REFUSED:
                    columns[meta.name] = kryo_columns(meta, plan.key_serializer)
            wanted = {name for name, kryo in columns.items() if kryo or name in pojos}
            if not wanted:
                continue
            for stream in SOURCES[source.name].streams(snapshot, storage, op, sub, wanted):
                _judge_rows(found[stream.name], columns[stream.name], stream.rows, pojos.get(stream.name))
    rewritten = {}
    for name, types in pojos.items():
        fields, why = types.result()
        judged = found[name]
        if why is not None:
            judged.action, judged.reason = REFUSED, f"{judged.reason}; but {why}: {_WAY_OUT.format(op.label, name)}"
        elif judged.action == REWRITTEN:
            rewritten[(op.operator_id, name)] = fields
    return list(found.values()), rewritten


def _judge_snapshots(op: OperatorState, meta: StateMetaInfo, key_serializer: SerializerSnapshot | None) -> StateUpgrade:
    """The verdict the serializer snapshots alone give (the rows may turn ``same values`` into ``different values``)."""
    label = op.label
    judged = StateUpgrade(label, op.operator_id, meta.name, meta.kind, SAME, KEPT, "no Kryo value, nothing Flink 2.x reads otherwise")
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


def _judge_rows(judged: StateUpgrade, columns: list[KryoColumn], rows: Iterable[dict], pojo: FieldTypes | None) -> None:
    """Read every row's Kryo columns: a value whose Kryo 5 bytes differ makes ``different values``;
    bytes that cannot be converted make ``unknown`` (refused). A POJO's values tell its collection
    fields' element types."""
    for row in rows:
        judged.rows += 1
        if pojo is not None and row.get("value_raw") is not None:
            pojo.add(row["value_raw"])
        differs = False
        for column in columns:
            data = row.get(column.raw)
            if data is None:
                continue
            try:
                converted = column.kryo5(data)
            except UnsupportedSerializerError as error:
                judged.outcome, judged.action = UNKNOWN, REFUSED
                judged.reason = (f"{column.raw}: {error.detail or error}: the job's own layout, not converted; "
                                 f"{_WAY_OUT.format(judged.operator, judged.state)}")
                return
            except FormatError as error:
                raise RepairError(f"state {judged.state!r} of {judged.operator}: {column.raw} is no Kryo 2.24 value ({error})") from None
            if converted != data:
                differs = True
                if column.raw not in judged.columns:
                    judged.columns.append(column.raw)
        if differs:
            judged.rows_differing += 1
            if judged.outcome == FAILS:  # a POJO's: its Kryo key or map key is rewritten too
                continue
            judged.outcome, judged.action = DIFFERENT, REWRITTEN
            judged.reason = ("Kryo values Kryo 5 reads otherwise (Float, Double, Short, Character, enums, collections): "
                             "Flink 2.x restores them without an error and reads other values")
