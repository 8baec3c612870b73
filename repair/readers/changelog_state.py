"""The keyed state of a changelog subtask as Flink would restore it: materialized rows plus the changes.

A subtask of the changelog state backend (``ChangelogStateBackendHandle``) holds a materialized snapshot
(an incremental RocksDB or a heap key-groups handle, or nothing before the first materialization) and
the changes logged since. :func:`replay_subtask` replays the changelog per state
(:class:`~repair.formats.flink.changelog.replay.StateReplay`), keeping only its net effect in memory;
:func:`iter_changelog_handle` then streams each state's materialized rows with that effect applied, the
way :mod:`repair.readers.rocksdb` streams a plain RocksDB instance, and adds the states only the
changelog holds.

Like Flink (``ChangelogBackendLogApplier``), data changes of key groups outside the subtask's range
(rescaling leftovers) are not applied; they are counted (:attr:`StateStream.changelog`). A state whose changes
cannot be applied (no key serializer recorded anywhere, a serializer this toolkit cannot decode,
namespaces merged with the job's reduce or aggregate function) is in :attr:`SubtaskReplay.unreplayable`
with the reason; export lists it as skipped instead of writing rows that would be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterator

from repair.errors import FormatError
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.changelog.dstl import MetadataChange
from repair.formats.flink.changelog.replay import NotReplayable, StateReplay
from repair.formats.flink.handles import ChangelogBackendHandle, IncrementalKeyedHandle
from repair.formats.flink.metadata import OperatorState
from repair.io import storage as st
from repair.io.snapshot import LoadedSnapshot
from repair.readers.changelog import (
    NO_KEY_SERIALIZER,
    decode_subtask_change,
    iter_subtask_changes,
    keyed_handle_meta,
    materialized_handles,
    operator_key_serializer,
    with_states,
)
from repair.readers.full_snapshot import iter_key_groups_handle
from repair.readers.rocksdb import StateStream, iter_incremental_handle


@dataclass
class SubtaskReplay:
    """One subtask's changelog replayed: its states and the net effect of their changes."""

    #: The key serializer snapshot the changes were split with (None: none recorded in the operator).
    key_serializer: object
    #: Every state of the subtask by name: the materialized meta data, replaced by the changelog's
    #: registration where it has one (the newer).
    states: dict[str, StateMetaInfo] = field(default_factory=dict)
    replays: dict[str, StateReplay] = field(default_factory=dict)
    #: States whose changes cannot be applied, and why.
    unreplayable: dict[str, str] = field(default_factory=dict)
    #: Data changes of key groups outside the subtask's range, per state (not applied, as by Flink).
    outside_key_groups: dict[str, int] = field(default_factory=dict)


def replay_subtask(snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, keyed: ChangelogBackendHandle,
                   *, states: Collection[str] | None = None) -> SubtaskReplay:
    """Replay the changelog of ``keyed`` (a subtask of ``op``); ``states`` limits it to those names.

    Raises :class:`~repair.errors.RepairError` for files that cannot be read or bytes that do not decode;
    states whose changes cannot be applied go to :attr:`SubtaskReplay.unreplayable`."""
    handles = materialized_handles(keyed)
    if len(handles) > 1:
        raise FormatError("materialized state of a changelog subtask", keyed.offset, "one handle",
                          f"{len(handles)} handles (a checkpoint taken right after rescaling)")
    changes = [decode_subtask_change(snapshot, change) for change in iter_subtask_changes(snapshot, storage, keyed)]
    result = SubtaskReplay(operator_key_serializer(snapshot, storage, op, keyed, changes))
    meta = keyed_handle_meta(snapshot, storage, handles[0]) if handles else None
    if meta is not None:
        result.states.update((state.name, state) for state in meta.states)
    for change, state in with_states(changes):
        if isinstance(change, MetadataChange):
            result.states[state.name] = state
            continue
        name = state.name
        if (states is not None and name not in states) or name in result.unreplayable:
            continue
        if not keyed.key_groups.start <= change.key_group <= keyed.key_groups.end:
            result.outside_key_groups[name] = result.outside_key_groups.get(name, 0) + 1
            continue
        try:
            replay = result.replays.get(name)
            if replay is None:
                if result.key_serializer is None and state.kind != "priority-queue":
                    result.unreplayable[name] = NO_KEY_SERIALIZER
                    continue
                replay = result.replays[name] = StateReplay(state, result.key_serializer)
            replay.apply(change)
        except NotReplayable as error:
            result.unreplayable[name] = str(error)
            result.replays.pop(name, None)
    return result


def iter_changelog_handle(snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, keyed: ChangelogBackendHandle,
                          *, states: Collection[str] | None = None, engine: str = "auto") -> Iterator[StateStream]:
    """The state streams of a changelog subtask: each materialized state's rows with the changes applied
    (materialized rows first, then the rows of every scope the log touched), then the states only the
    changelog holds. ``engine`` reads a materialized RocksDB instance (see
    :func:`~repair.readers.rocksdb.iter_incremental_handle`). A state that cannot be replayed raises."""
    replay = replay_subtask(snapshot, storage, op, keyed, states=states)
    wanted = [name for name in (states if states is not None else replay.states) if name in replay.states]
    for name in wanted:
        if name in replay.unreplayable:
            raise FormatError(f"changes of state {name!r}", keyed.offset, "changes this toolkit can apply", replay.unreplayable[name])
    done = set()
    for stream in _materialized_streams(snapshot, storage, op, keyed, wanted, engine):
        done.add(stream.name)
        _apply(stream, replay)
        yield stream
    for name in wanted:
        if name not in done:
            state = replay.states[name]
            stream = StateStream(name, state.kind, state, iter(()))
            _apply(stream, replay)
            yield stream


def _materialized_streams(snapshot: LoadedSnapshot, storage: st.Storage, op: OperatorState, keyed: ChangelogBackendHandle,
                          states: list[str], engine: str) -> Iterator[StateStream]:
    for handle in materialized_handles(keyed):
        if isinstance(handle, IncrementalKeyedHandle):
            yield from iter_incremental_handle(snapshot, storage, handle, op.max_parallelism, states=states, engine=engine)
        else:
            yield from iter_key_groups_handle(snapshot, storage, handle, op.max_parallelism, states=states)


def _apply(stream: StateStream, replay: SubtaskReplay) -> None:
    """Give ``stream`` the rows after its state's changes (they are read row by row, not column-wise)."""
    state_replay = replay.replays.get(stream.name)
    stream.changelog = {"changes": state_replay.changes if state_replay else 0, "scopes": state_replay.touched if state_replay else 0,
                        "outside_key_groups": replay.outside_key_groups.get(stream.name, 0)}
    if state_replay is not None and state_replay.touched:
        stream.rows = state_replay.rows(stream.rows)
        stream.entries = None
