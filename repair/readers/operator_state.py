"""Read the operator (non-keyed) state of one subtask: list, union list and broadcast states.

The interface matches :mod:`repair.readers.rocksdb`: one stream per state, here an
:class:`OperatorStateStream` (a :class:`~repair.readers.rocksdb.StateStream` that also carries the
state's distribution mode and partition offsets), with rows shaped as
:mod:`repair.formats.flink.operator_state` describes (``key_group``, ``key`` and ``namespace`` None;
``value``/``value_raw`` and ``list_index`` for list elements; ``user_key``/``user_key_raw`` and
``value``/``value_raw`` for broadcast entries).

An operator state file is read whole (Flink holds operator state in memory on every subtask, so these
files are small); :data:`MAX_OPERATOR_STATE_BYTES` bounds it. Raw operator state (the
``raw_operator_state`` slot) is opaque bytes an operator wrote itself and is not read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterator

from repair.errors import RepairError
from repair.formats.flink.handles import OperatorStateHandle
from repair.formats.flink.operator_state import OperatorStateFile, OperatorStateInfo
from repair.io import storage as st
from repair.io.resolved import read_resolved
from repair.io.snapshot import LoadedSnapshot
from repair.readers.full_snapshot import named_rows
from repair.readers.kryo_generation import mark_kryo_generation
from repair.readers.rocksdb import StateStream

#: Operator state files larger than this are refused (a StorageError), as they are read whole.
MAX_OPERATOR_STATE_BYTES = 1 << 30


@dataclass
class OperatorStateStream(StateStream):
    """The rows of one operator state of one subtask, with the handle's distribution mode
    (``SPLIT_DISTRIBUTE``, ``UNION`` or ``BROADCAST``) and partition offsets (one per list element; one
    for a broadcast state)."""

    mode: str = "SPLIT_DISTRIBUTE"
    offsets: tuple[int, ...] = ()


def read_operator_file(snapshot: LoadedSnapshot, storage: st.Storage, handle: OperatorStateHandle) -> OperatorStateFile | None:
    """The decoded operator state file of ``handle`` (its meta data and the layout of its states); None
    for a handle without states or bytes (e.g. the empty file-merging handles of keyed operators)."""
    resolved = snapshot.resolver.resolve(handle.delegate)
    if not handle.states or resolved is None or resolved.size == 0:
        return None
    try:
        file = OperatorStateFile(read_resolved(storage, resolved, max_size=MAX_OPERATOR_STATE_BYTES), handle.states)
        mark_kryo_generation(snapshot, file.meta)
        return file
    except RepairError as error:
        raise error.in_source(_name(snapshot, handle)) from None


def read_operator_states(snapshot: LoadedSnapshot, storage: st.Storage, handle: OperatorStateHandle) -> list[OperatorStateInfo]:
    """The states of ``handle`` (name, kind, mode, offsets, serializers), in name order, without rows."""
    file = read_operator_file(snapshot, storage, handle)
    return [] if file is None else list(file.states)


def iter_operator_handle(snapshot: LoadedSnapshot, storage: st.Storage, handle: OperatorStateHandle,
                         *, states: Collection[str] | None = None) -> Iterator[OperatorStateStream]:
    """One :class:`OperatorStateStream` per state of one subtask's operator state ``handle`` of
    ``snapshot``, in state-name order; ``states`` limits it to those names. Errors name the file."""
    file = read_operator_file(snapshot, storage, handle)
    if file is None:
        return
    for state in file.states:
        if states is None or state.name in states:
            rows = named_rows(file.rows(state.name), _name(snapshot, handle))
            yield OperatorStateStream(state.name, state.kind, state.meta, rows, mode=state.mode, offsets=state.offsets)


def _name(snapshot: LoadedSnapshot, handle: OperatorStateHandle) -> str:
    return snapshot.resolver.resolve(handle.delegate).uri or f"inline operator state of {snapshot.ref.metadata_uri}"
