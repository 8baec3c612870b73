"""Every change of a subtask's changelog decoded with its state's serializers (``repair verify``).

The file check (:mod:`repair.ops.verify.file_checks`, kind ``changelog``) proves each DSTL file framed and its
meta data changes decodable, file by file. Data changes name their state by an id that a METADATA
change of the same subtask's log assigned, maybe in an earlier file, so decoding them is a check per
subtask: replay the log in restore order, and split each data change into its key, namespace and
values (:class:`~repair.formats.flink.changelog.dstl.ChangeReader`), which only the right serializers do to
the last byte.

The key serializer is not in the changelog: it comes from the materialized part's meta data, or from a
timer state's ``TimerSerializer`` (which nests it), of this subtask or another of the operator. Without
either, or with a serializer this toolkit cannot decode, the affected states are not checked: a
warning, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from repair.errors import RepairError, UnsupportedSerializerError
from repair.formats.flink.changelog.dstl import ChangeReader, MetadataChange
from repair.formats.flink.handles import ChangelogBackendHandle
from repair.io import storage as st
from repair.io.snapshot import LoadedSnapshot
from repair.readers.changelog import (
    NO_KEY_SERIALIZER,
    decode_subtask_change,
    iter_subtask_changes,
    recorded_key_serializer,
    with_states,
)


@dataclass
class ChangelogCheck:
    """What replaying one subtask's changelog found."""

    changes: int = 0
    #: False when a file could not be read or framed (its own check says why): nothing was replayed.
    replayed: bool = True
    #: The first problem of a data change (the replay stops there).
    error: RepairError | None = None
    #: States whose changes could not be decoded, and why (the first reason).
    unchecked: dict[str, str] = field(default_factory=dict)
    #: The key serializer snapshot the replay used (None: none was recorded or given).
    key_serializer: object = None

    @property
    def lacked_key_serializer(self) -> bool:
        return any(reason == NO_KEY_SERIALIZER for reason in self.unchecked.values())


def check_subtask_changelog(snapshot: LoadedSnapshot, storage: st.Storage, keyed: ChangelogBackendHandle,
                            key_serializer=None) -> ChangelogCheck:
    """Replay one subtask's changelog. ``key_serializer``: the operator's, for when this subtask records
    none (another subtask's :attr:`ChangelogCheck.key_serializer`)."""
    result = ChangelogCheck()
    try:
        changes = [decode_subtask_change(snapshot, change) for change in iter_subtask_changes(snapshot, storage, keyed)]
    except RepairError:
        # A file that cannot be read or framed: the check of that file reports it.
        result.replayed = False
        return result
    try:
        recorded = recorded_key_serializer(snapshot, storage, keyed, changes)
    except RepairError:
        # The materialized part's meta data does not decode: its own check reports it (bad_backend_meta),
        # and the changes are decoded with another subtask's key serializer, if any.
        recorded = None
    key_serializer = result.key_serializer = recorded or key_serializer
    readers: dict[int, ChangeReader] = {}  # by state id, while the id keeps its registration
    try:
        for change, state in with_states(changes):
            result.changes += 1
            if isinstance(change, MetadataChange):
                readers.pop(change.state_id, None)
            elif state.name in result.unchecked:
                pass  # its first problem is recorded; its other changes are not read
            elif key_serializer is None and state.kind != "priority-queue":
                result.unchecked[state.name] = NO_KEY_SERIALIZER
            else:
                try:
                    if change.state_id not in readers:
                        readers[change.state_id] = ChangeReader(state, key_serializer)
                    readers[change.state_id].read(change)
                except UnsupportedSerializerError as error:
                    result.unchecked[state.name] = str(error)
    except RepairError as error:  # a data change that does not decode, or names no registered state
        result.error = error
    return result
