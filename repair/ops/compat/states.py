"""What one snapshot says about the job that wrote it, for ``repair compat``: per operator its ids, max
parallelism, key serializer and registered states with their serializer snapshots (keyed states from the
backend meta data of every subtask, a changelog's registrations included; operator states from their files),
and the keyed state backend where the snapshot's handles say it."""

from __future__ import annotations

from dataclasses import dataclass, field

from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    HandleType,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
)
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.snapshot import LoadedSnapshot
from repair.ops.compat.rules import HEAP, ROCKSDB
from repair.readers.changelog import keyed_handle_meta, materialized_handles, metadata_changes, recorded_key_serializer
from repair.readers.operator_state import read_operator_states


def backend_of(handle: IncrementalKeyedHandle | KeyGroupsHandle) -> str | None:
    """The backend a keyed handle comes from: RocksDB's are incremental (its checkpoints, full ones too, and
    native savepoints: SST files); a full snapshot of key groups in a checkpoint is the heap backend's; a
    canonical savepoint's (``KeyGroupsSavepointStateHandle``) is every backend's."""
    if isinstance(handle, IncrementalKeyedHandle):
        return ROCKSDB
    return None if handle.type_code == HandleType.SAVEPOINT_KEY_GROUPS else HEAP


@dataclass
class OperatorStates:
    operator_id: str
    uid: str | None
    name: str | None
    parallelism: int
    max_parallelism: int
    #: Whether any subtask holds state (or the operator coordinator state): Flink refuses to drop it silently.
    has_state: bool
    key_serializer: SerializerSnapshot | None = None
    keyed: dict[str, StateMetaInfo] = field(default_factory=dict)
    operator: dict[str, StateMetaInfo] = field(default_factory=dict)
    #: The keyed state backend that wrote the snapshot (:data:`ROCKSDB`, :data:`HEAP`), None where its handles
    #: do not say (a canonical savepoint: every backend writes the same one).
    backend: str | None = None

    @property
    def label(self) -> str:
        """The uid where ``_metadata`` records it (Flink 2.x), else the operator id."""
        return self.uid or self.operator_id


def operator_states(snapshot: LoadedSnapshot, storage: st.Storage) -> list[OperatorStates]:
    """Every operator of ``snapshot`` with its states (a state registered by any subtask counts)."""
    found = []
    for op in snapshot.metadata.operators:
        subtasks = [sub for sub in op.subtasks if not sub.finished]
        holds = op.coordinator_state is not None or any(
            h is not None for sub in subtasks
            for h in (sub.managed_operator_state, sub.raw_operator_state, sub.managed_keyed_state, sub.raw_keyed_state))
        info = OperatorStates(op.operator_id, op.operator_uid, op.operator_name, op.parallelism, op.max_parallelism, holds)
        for sub in subtasks:
            if isinstance(sub.managed_operator_state, OperatorStateHandle):
                for state in read_operator_states(snapshot, storage, sub.managed_operator_state):
                    info.operator.setdefault(state.name, state.meta)
            _keyed(snapshot, storage, sub.managed_keyed_state, info)
        found.append(info)
    return found


def _keyed(snapshot: LoadedSnapshot, storage: st.Storage, keyed, info: OperatorStates) -> None:
    handles = []
    registered: list[StateMetaInfo] = []
    if isinstance(keyed, ChangelogBackendHandle):
        handles = materialized_handles(keyed)
        changes = metadata_changes(snapshot, storage, keyed)
        registered = [change.state for change in changes]
        if info.key_serializer is None:  # the materialized meta data's, or a timer state's in the changelog
            info.key_serializer = recorded_key_serializer(snapshot, storage, keyed, list(changes))
    elif isinstance(keyed, (IncrementalKeyedHandle, KeyGroupsHandle)):
        handles = [keyed]
    for handle in handles:
        info.backend = info.backend or backend_of(handle)
        meta = keyed_handle_meta(snapshot, storage, handle)
        if meta is not None:
            if info.key_serializer is None:
                info.key_serializer = meta.key_serializer
            registered = [*meta.states, *registered]
    for state in registered:
        info.keyed.setdefault(state.name, state)
