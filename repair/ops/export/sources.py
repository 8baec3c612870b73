"""What export can read from a subtask: one :class:`StateSource` per kind of state handle.

A source says which handle of a subtask it reads (:attr:`StateSource.slot` and :meth:`applies`), lists
the states of that handle with their column decisions from the meta data alone (:meth:`plan`, on the
driver, before any data is read) and streams their rows (:meth:`streams`, in the task: an iterator of
:class:`~repair.readers.rocksdb.StateStream`, one state after the other, each an iterator of row dicts
with the keys of :data:`~repair.formats.flink.in_rocksdb.keyed_rows.ROW_FIELDS`).

To export another kind of state, add a source to :data:`SOURCES`; handles no source applies to are
listed under ``skipped`` (:func:`not_exported` says why), and so are the states a source's plan finds
it cannot export (:attr:`SourcePlan.unexportable`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Iterator

from repair.formats.flink.arrow import StateColumns, keyed_state_columns, operator_state_columns
from repair.formats.flink.backend_meta import KeyedBackendMeta, StateMetaInfo
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
)
from repair.formats.flink.metadata import OperatorState, SubtaskState
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.snapshot import LoadedSnapshot
from repair.readers.changelog_state import iter_changelog_handle, replay_subtask
from repair.readers.full_snapshot import iter_key_groups_handle, read_key_groups_meta
from repair.readers.operator_state import iter_operator_handle, read_operator_states
from repair.readers.raw_timers import (
    iter_raw_timers_handle,
    raw_timer_states,
    read_raw_timer_services,
    timers_or_reason,
)
from repair.readers.rocksdb import StateStream, iter_incremental_handle, read_handle_meta
from repair.readers.rocksdb_instance import MaterialisedInstance

#: The subtask slots export looks at, in this order.
SLOTS = ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state")


@dataclass
class SourcePlan:
    """The states of one subtask's handle, with their column decisions, and those it cannot export."""

    states: list[tuple[StateMetaInfo, StateColumns]]
    #: State name -> why its rows cannot be written (export lists it under ``skipped``).
    unexportable: dict[str, str] = field(default_factory=dict)
    #: Keyed state: the backend's key serializer (None for operator state).
    key_serializer: SerializerSnapshot | None = None


@dataclass(frozen=True)
class StateSource:
    """Reads one kind of state handle: which handles (:attr:`slot`, :attr:`handle_type`), the states
    and their column decisions from meta data alone (:meth:`plan`), and their rows (:meth:`streams`)."""

    #: Short name, carried by tasks (``incremental-keyed``).
    name: str
    #: The :class:`SubtaskState` attribute holding the handle this source reads.
    slot: str
    handle_type: type
    #: ``(snapshot, storage, op, handle) -> SourcePlan``
    _plan: Callable[..., SourcePlan]
    #: ``(snapshot, storage, op, handle, states, engine) -> Iterator[StateStream]``
    _streams: Callable[..., Iterator[StateStream]]
    #: ``(snapshot, storage, handle) -> reason or None``, for handles whose type does not tell whether
    #: this source reads them (it reads their first bytes); None: every handle of the type.
    _declines: Callable[..., str | None] | None = None
    #: Whether the handle is one RocksDB instance whose files can be placed ahead of reading it
    #: (:mod:`repair.ops.export.prefetch`); :meth:`streams` then takes them as ``materialised``.
    instance_ahead: bool = False

    def applies(self, handle: object) -> bool:
        """Whether this source may read ``handle`` (the subtask's handle in :attr:`slot`)."""
        return isinstance(handle, self.handle_type)

    def declines(self, snapshot: LoadedSnapshot, storage: st.Storage, handle: object) -> str | None:
        """Why this source does not read ``handle`` after all (it :meth:`applies`), or None."""
        return self._declines(snapshot, storage, handle) if self._declines is not None else None

    def plan(self, snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, sub: SubtaskState) -> SourcePlan:
        """The states of the subtask's handle and their column decisions, from meta data only."""
        return self._plan(snapshot, storage, op, getattr(sub, self.slot))

    def streams(self, snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, sub: SubtaskState,
                states: Collection[str] | None, *, engine: str = "auto",
                materialised: MaterialisedInstance | None = None) -> Iterator[StateStream]:
        """The rows of the states named ``states`` (None: every state), one stream after the other; ``engine`` resolves
        LSM trees (:data:`~repair.readers.rocksdb.ENGINES`; sources without one ignore it). ``materialised``: the
        instance's files placed ahead (only for an :attr:`instance_ahead` source)."""
        if materialised is not None:
            return self._streams(snapshot, storage, op, getattr(sub, self.slot), states, engine, materialised=materialised)
        return self._streams(snapshot, storage, op, getattr(sub, self.slot), states, engine)


def _keyed_plan(read_meta: Callable[..., KeyedBackendMeta]) -> Callable[..., SourcePlan]:
    def plan(snapshot, storage, op, handle):
        meta = read_meta(snapshot, storage, handle)
        return SourcePlan([(state, keyed_state_columns(state, meta.key_serializer)) for state in meta.states],
                          key_serializer=meta.key_serializer)

    return plan


def _changelog_plan(snapshot, storage, op, handle):
    # The changelog is replayed on the driver too: it registers states, and only a replay tells which
    # states' changes cannot be applied.
    replay = replay_subtask(snapshot, storage, op, handle)
    states = [(state, keyed_state_columns(state, replay.key_serializer)) for name, state in sorted(replay.states.items())
              if name not in replay.unreplayable]
    return SourcePlan(states, dict(replay.unreplayable), key_serializer=replay.key_serializer)


def _raw_timers_plan(snapshot, storage, op, handle):
    return SourcePlan([(state, keyed_state_columns(state, None)) for state in raw_timer_states(read_raw_timer_services(snapshot, storage, handle))])


def _operator_plan(snapshot, storage, op, handle):
    return SourcePlan([(info.meta, operator_state_columns(info.meta)) for info in read_operator_states(snapshot, storage, handle)])


#: Every source, by name.
SOURCES: dict[str, StateSource] = {
    source.name: source
    for source in (
        # keyed state of incremental RocksDB handles (checkpoints and native savepoints)
        StateSource(
            "incremental-keyed", "managed_keyed_state", IncrementalKeyedHandle, _keyed_plan(read_handle_meta),
            lambda snapshot, storage, op, handle, states, engine, materialised=None: iter_incremental_handle(
                snapshot, storage, handle, op.max_parallelism, states=states, engine=engine, materialised=materialised),
            instance_ahead=True,
        ),
        # keyed state of full snapshots (key-group streams): canonical savepoints; heap-backend checkpoints and native savepoints
        StateSource(
            "full-snapshot-keyed", "managed_keyed_state", KeyGroupsHandle, _keyed_plan(read_key_groups_meta),
            lambda snapshot, storage, op, handle, states, engine: iter_key_groups_handle(snapshot, storage, handle, op.max_parallelism, states=states),
        ),
        # keyed state of the changelog state backend: materialized state (RocksDB or heap) plus the changes logged since
        StateSource(
            "changelog-keyed", "managed_keyed_state", ChangelogBackendHandle, _changelog_plan,
            lambda snapshot, storage, op, handle, states, engine: iter_changelog_handle(snapshot, storage, op, handle, states=states, engine=engine),
        ),
        # timers in raw keyed state (RocksDB with timers on the heap): the rows of RocksDB timers
        StateSource(
            "raw-keyed-timers", "raw_keyed_state", KeyGroupsHandle, _raw_timers_plan,
            lambda snapshot, storage, op, handle, states, engine: iter_raw_timers_handle(snapshot, storage, handle, states=states),
            timers_or_reason,
        ),
        # managed operator state: list, union list and broadcast states
        StateSource(
            "operator", "managed_operator_state", OperatorStateHandle, _operator_plan,
            lambda snapshot, storage, op, handle, states, engine: iter_operator_handle(snapshot, storage, handle, states=states),
        ),
    )
}


def source_for(slot: str, handle: object) -> StateSource | None:
    """The source reading ``handle`` found in ``slot``, if any."""
    return next((s for s in SOURCES.values() if s.slot == slot and s.applies(handle)), None)


def not_exported(slot: str, handle: object) -> tuple[str, str]:
    """``(what, reason)`` for ``skipped`` of a handle no source reads."""
    if slot == "managed_operator_state":
        return "operator-state", f"unsupported operator state handle {type(handle).__name__}"
    if slot == "raw_operator_state":
        return "raw-operator-state", "raw operator state is opaque bytes"
    if slot == "raw_keyed_state":
        return "raw-keyed-state", "raw keyed state is opaque bytes (only timers are read from it)"
    return type(handle).__name__, "unsupported keyed state handle"
