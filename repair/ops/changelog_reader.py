"""Reading a subtask's state changelog: the change sets its checkpoint names, in order.

A ``ChangelogBackendHandle``'s non-materialized part lists, per handle, ``(file, offset)`` pieces, one
change set each, in the order Flink applies them on restore. Several pieces (of this subtask and of
others) share a DSTL file; each file is read and decompressed once per call. The changes are decoded by
:mod:`repair.formats.flink_changelog`; this module only finds and reads the bytes.
"""

from __future__ import annotations

from typing import Iterator

from repair import storage as st
from repair.errors import RepairError
from repair.formats.flink_backend_meta import StateMetaInfo
from repair.formats.flink_changelog import METADATA, MetadataChange, StateChange, changelog_stream, decode_change, read_change_set
from repair.formats.flink_handles import ChangelogBackendHandle, ChangelogStreamHandle, InMemoryChangelogHandle
from repair.snapshot import MAX_SMALL_FILE_BYTES, LoadedSnapshot

_METADATA_CODE = bytes((METADATA,))


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


def changelog_states(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle) -> list[StateMetaInfo]:
    """The states the changelog registers (METADATA changes), by name, the last registration winning."""
    states: dict[str, StateMetaInfo] = {}
    for change in iter_subtask_changes(snapshot, storage, keyed):
        if change.data[:1] != _METADATA_CODE:  # data changes are not decoded here
            continue
        decoded = decode_change(change)
        if isinstance(decoded, MetadataChange):
            states[decoded.state.name] = decoded.state
    return list(states.values())
