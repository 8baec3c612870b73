"""Reading a subtask's state changelog: the change sets its checkpoint names, in order, and its key serializer.

A ``ChangelogBackendHandle``'s non-materialized part lists, per handle, ``(file, offset)`` pieces, one
change set each, in the order Flink applies them on restore. Several pieces (of this subtask and of
others) share a DSTL file; each file is read and decompressed once per call. The changes are decoded by
:mod:`repair.formats.flink.changelog.dstl`; this module only finds and reads the bytes.

The changelog does not record the key serializer: :func:`operator_key_serializer` finds it in the
materialized part's meta data, or in a timer state's ``TimerSerializer`` (which nests it), of this
subtask or another subtask of the operator.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from repair.errors import FormatError, RepairError
from repair.formats.flink.backend_meta import KeyedBackendMeta, StateMetaInfo
from repair.formats.flink.changelog.dstl import (
    METADATA,
    DataChange,
    MetadataChange,
    StateChange,
    changelog_stream,
    decode_change,
    read_change_set,
)
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    ChangelogStreamHandle,
    IncrementalKeyedHandle,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
)
from repair.formats.flink.metadata import OperatorState
from repair.io import storage as st
from repair.io.resolved import MAX_SMALL_FILE_BYTES
from repair.io.snapshot import LoadedSnapshot
from repair.readers.full_snapshot import read_key_groups_meta
from repair.readers.kryo_generation import mark_kryo_generation
from repair.readers.rocksdb import read_handle_meta

_METADATA_CODE = bytes((METADATA,))

#: Why a state's changes cannot be split into key and namespace.
NO_KEY_SERIALIZER = "no key serializer recorded (no materialized state and no timers)"


def changelog_pieces(keyed: ChangelogBackendHandle) -> list[tuple[object, int]]:
    """``(stream handle, offset)`` of every change set of the subtask's changelog, in restore order."""
    pieces = []
    for handle in keyed.non_materialized:
        if isinstance(handle, ChangelogStreamHandle):
            pieces.extend((piece.handle, piece.position) for piece in handle.handles)
    return pieces


def iter_subtask_changes(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle) -> Iterator[StateChange]:
    """Every change of the subtask's non-materialized state, in the order Flink applies them.

    Changes kept in ``_metadata`` (``InMemoryChangelogHandle``) come with offset 0. Errors name the file.
    """
    streams: dict[str, bytes] = {}
    for handle in keyed.non_materialized:
        if isinstance(handle, InMemoryChangelogHandle):
            for change in handle.changes:
                yield StateChange(change.key_group, change.data, 0)
            continue
        if not isinstance(handle, ChangelogStreamHandle):
            continue
        for piece in handle.handles:
            resolved = snapshot.resolver.resolve(piece.handle)
            where = resolved.uri or "a changelog file kept in _metadata"
            try:
                stream = streams.get(where)
                if stream is None:
                    data = resolved.inline if resolved.inline is not None else storage.read_bytes(resolved.uri, max_size=MAX_SMALL_FILE_BYTES)
                    stream = streams[where] = changelog_stream(data)
                changes, _ = read_change_set(stream, piece.position)
            except RepairError as error:
                raise error.in_source(where) from None
            yield from changes


def with_states(changes: Iterable[MetadataChange | DataChange]) -> Iterator[tuple[MetadataChange | DataChange, StateMetaInfo]]:
    """Each decoded change of a subtask's log, in order, with the state it is about: a METADATA change's
    own; a data change's, the state the latest METADATA change before it registered its state id to.

    Raises :class:`~repair.errors.FormatError` at a data change whose state id nothing registered."""
    registered: dict[int, StateMetaInfo] = {}
    for change in changes:
        if isinstance(change, MetadataChange):
            registered[change.state_id] = change.state
        elif change.state_id not in registered:
            raise FormatError("state id", change.offset - 2, "the id of a state a METADATA change registered before",
                              f"{change.state_id} ({change.operation} in key group {change.key_group})")
        yield change, registered[change.state_id]


def decode_subtask_change(snapshot: LoadedSnapshot, change: StateChange) -> MetadataChange | DataChange:
    """One change of ``snapshot``'s changelog, decoded; a registered state's Kryo serializers are marked
    with the Kryo generation of ``snapshot``'s Flink."""
    decoded = decode_change(change)
    if isinstance(decoded, MetadataChange):
        mark_kryo_generation(snapshot, [decoded.state])
    return decoded


def changelog_states(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle) -> list[StateMetaInfo]:
    """The states the changelog registers (METADATA changes), by name, the last registration winning."""
    states: dict[str, StateMetaInfo] = {}
    for change in iter_subtask_changes(snapshot, storage, keyed):
        if change.data[:1] != _METADATA_CODE:  # data changes are not decoded here
            continue
        decoded = decode_subtask_change(snapshot, change)
        if isinstance(decoded, MetadataChange):
            states[decoded.state.name] = decoded.state
    return list(states.values())


def metadata_changes(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle) -> list[MetadataChange]:
    """The METADATA changes of the subtask's changelog, in order (state registrations, with the bytes of
    their meta info)."""
    return [decoded for change in iter_subtask_changes(snapshot, storage, keyed) if change.data[:1] == _METADATA_CODE
            for decoded in (decode_subtask_change(snapshot, change),) if isinstance(decoded, MetadataChange)]


def materialized_handles(keyed: ChangelogBackendHandle) -> list[IncrementalKeyedHandle | KeyGroupsHandle]:
    """The handles of the subtask's materialized state that this toolkit reads (Flink skips null ones)."""
    return [h for h in keyed.materialized if isinstance(h, (IncrementalKeyedHandle, KeyGroupsHandle))]


def keyed_handle_meta(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle | KeyGroupsHandle) -> KeyedBackendMeta | None:
    """The keyed backend meta data of a RocksDB or heap keyed handle (None: an incremental handle without one)."""
    if isinstance(handle, KeyGroupsHandle):
        return read_key_groups_meta(snapshot, storage, handle)
    return read_handle_meta(snapshot, storage, handle) if handle.meta is not None else None


def recorded_key_serializer(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle,
                            changes: list[MetadataChange | DataChange]):
    """The key serializer snapshot one subtask's checkpoint records: in its materialized meta data, or
    nested in a timer state's serializer its changelog registers; None if neither."""
    for handle in materialized_handles(keyed):
        meta = keyed_handle_meta(snapshot, storage, handle)
        if meta is not None:
            return meta.key_serializer
    for change in changes:
        if isinstance(change, MetadataChange) and change.state.is_timer_state:
            timer = change.state.serializer("VALUE_SERIALIZER")
            if timer is not None and len(timer.nested) == 2:
                return timer.nested[0]
    return None


def operator_key_serializer(snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, keyed: ChangelogBackendHandle,
                            changes: list[MetadataChange | DataChange]):
    """The key serializer of ``keyed`` (one subtask of ``op``; ``changes``: its decoded changelog): its
    own, else the first another subtask of the operator records (every subtask has the same); None if
    no subtask records one."""
    own = recorded_key_serializer(snapshot, storage, keyed, changes)
    if own is not None:
        return own
    for sub in op.subtasks:
        other = sub.managed_keyed_state
        if other is not keyed:
            found = _handle_key_serializer(snapshot, storage, other)
            if found is not None:
                return found
    return None


def _handle_key_serializer(snapshot: LoadedSnapshot, storage: st.Storage, handle: object):
    """The key serializer a subtask's keyed handle records, if it records one."""
    if isinstance(handle, ChangelogBackendHandle):
        metadata = [decode_subtask_change(snapshot, c) for c in iter_subtask_changes(snapshot, storage, handle) if c.data[:1] == _METADATA_CODE]
        return recorded_key_serializer(snapshot, storage, handle, metadata)
    if isinstance(handle, (IncrementalKeyedHandle, KeyGroupsHandle)):
        meta = keyed_handle_meta(snapshot, storage, handle)
        return meta.key_serializer if meta is not None else None
    return None
