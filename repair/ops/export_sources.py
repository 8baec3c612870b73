"""What export can read from a subtask: one :class:`StateSource` per kind of state handle.

A source says which handle of a subtask it reads (:attr:`StateSource.slot` and :meth:`applies`), lists
the states of that handle with their column decisions from the meta data alone (:meth:`plan`, on the
driver, before any data is read) and streams their rows (:meth:`streams`, in the task: an iterator of
:class:`~repair.ops.state_reader.StateStream`, one state after the other, each an iterator of row dicts
with the keys of :data:`~repair.formats.flink_keyed_rows.ROW_FIELDS`).

To export another kind of state (operator state, full-snapshot key-group streams), add a source to
:data:`SOURCES`; handles no source applies to are listed under ``skipped`` (:func:`not_exported` says why).
"""

from __future__ import annotations

from typing import Collection, Iterator, Protocol

from repair import storage as st
from repair.formats.flink_arrow import StateColumns, keyed_state_columns
from repair.formats.flink_backend_meta import StateMetaInfo
from repair.formats.flink_handles import ChangelogBackendHandle, IncrementalKeyedHandle, KeyGroupsHandle
from repair.formats.flink_metadata import OperatorState, SubtaskState
from repair.ops.state_reader import StateStream, iter_incremental_handle, read_handle_meta
from repair.snapshot import LoadedSnapshot

#: The subtask slots export looks at, in this order.
SLOTS = ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state")


class StateSource(Protocol):
    #: Short name, carried by tasks (``incremental-keyed``).
    name: str
    #: The :class:`SubtaskState` attribute holding the handle this source reads.
    slot: str

    def applies(self, handle: object) -> bool:
        """Whether this source reads ``handle`` (the subtask's handle in :attr:`slot`)."""

    def plan(self, snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, sub: SubtaskState) -> list[tuple[StateMetaInfo, StateColumns]]:
        """The states of the subtask's handle and their column decisions, from meta data only."""

    def streams(self, snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, sub: SubtaskState,
                states: Collection[str]) -> Iterator[StateStream]:
        """The rows of the states named ``states``, one stream after the other."""


class IncrementalKeyedSource:
    """Keyed state of incremental RocksDB handles (checkpoints and native savepoints)."""

    name = "incremental-keyed"
    slot = "managed_keyed_state"

    def applies(self, handle: object) -> bool:
        return isinstance(handle, IncrementalKeyedHandle)

    def plan(self, snapshot, storage, op, sub):
        meta = read_handle_meta(snapshot, storage, sub.managed_keyed_state)
        return [(state, keyed_state_columns(state, meta.key_serializer)) for state in meta.states]

    def streams(self, snapshot, storage, op, sub, states):
        return iter_incremental_handle(snapshot, storage, sub.managed_keyed_state, op.max_parallelism, states=states)


#: Every source, by name.
SOURCES: dict[str, StateSource] = {source.name: source for source in (IncrementalKeyedSource(),)}


def source_for(slot: str, handle: object) -> StateSource | None:
    """The source reading ``handle`` found in ``slot``, if any."""
    return next((s for s in SOURCES.values() if s.slot == slot and s.applies(handle)), None)


def not_exported(slot: str, handle: object) -> tuple[str, str]:
    """``(what, reason)`` for ``skipped`` of a handle no source reads."""
    if slot == "managed_operator_state":
        return "operator-state", "operator state export is not implemented yet"
    if slot == "raw_operator_state":
        return "raw-operator-state", "raw operator state is opaque bytes"
    if slot == "raw_keyed_state":
        return "raw-keyed-state", "raw keyed state is opaque bytes"
    if isinstance(handle, KeyGroupsHandle):
        return "full-snapshot-keyed-state", "canonical savepoints and full snapshots are not exported yet"
    if isinstance(handle, ChangelogBackendHandle):
        return "changelog", "changelog state backend handles are not exported yet"
    return type(handle).__name__, "unsupported keyed state handle"
