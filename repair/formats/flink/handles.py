"""State handles inside a Flink checkpoint ``_metadata`` file: the model, and walks over it.

A handle is written as a type byte followed by a type-specific body
(:mod:`repair.formats.flink.handle_decoder` reads it, :mod:`repair.formats.flink.handle_encoder` writes
it back byte for byte). The type codes and bodies come from
``org.apache.flink.runtime.checkpoint.metadata.MetadataV2V3SerializerBase`` (``serializeStreamStateHandle``,
``serializeKeyedStateHandle``, ``serializeOperatorStateHandle``) and, for unaligned-checkpoint channel
state, ``ChannelStateHandleSerializerV1``/``V2`` (checked against the flink-dist jars of 1.18.1, 1.20.3 and
2.1.1; the 1.14 changelog layout comes from the research notes, see ``ChangelogLayout``).

The model keeps every value needed to write the same bytes again (exact strings, list order, inline
bytes, which optional fields were present). Paths are data: nothing here resolves or opens them.
"""

from __future__ import annotations

from dataclasses import field
from enum import IntEnum
from typing import Callable, Iterator, Union

from repair.formats.records import record

#: Flink's upper bound of max parallelism, i.e. of key groups (``KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM``).
MAX_KEY_GROUPS = 1 << 15

#: Deepest nesting of keyed handles accepted (changelog handles nest keyed handles). Real files use 2.
MAX_NESTING = 16


class HandleType(IntEnum):
    """Type bytes of ``MetadataV2V3SerializerBase`` (constants of the same names)."""

    NULL = 0
    BYTE_STREAM = 1
    FILE = 2
    KEY_GROUPS = 3
    OPERATOR_STATE = 4  # PARTITIONABLE_OPERATOR_STATE_HANDLE
    INCREMENTAL_KEY_GROUPS = 5
    RELATIVE_FILE = 6  # RELATIVE_STREAM_STATE_HANDLE
    SAVEPOINT_KEY_GROUPS = 7
    CHANGELOG = 8
    CHANGELOG_BYTE_INCREMENT = 9
    CHANGELOG_FILE_INCREMENT = 10
    INCREMENTAL_KEY_GROUPS_V2 = 11
    KEY_GROUPS_V2 = 12
    CHANGELOG_FILE_INCREMENT_V2 = 13
    CHANGELOG_V2 = 14
    SEGMENT_FILE = 15
    EMPTY_SEGMENT_FILE = 16
    SEGMENT_OPERATOR_STATE = 17  # SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE


class ChangelogLayout:
    """Which layout the changelog handle codes 8, 9 and 10 use.

    Flink 1.14 wrote them without sizes and handle ids; 1.15 added ``checkpointedSize``,
    ``materializationId`` and ``stateHandleId`` under the same codes (research notes §4.3, [JAR 1.14.6 vs
    1.15.4]). Both are metadata version 3, so the layout is a property of the writer, not of the file header.
    """

    FLINK_1_14 = "1.14"
    FLINK_1_15 = "1.15+"


@record(frozen=True)
class HandleDialect:
    """Writer-dependent details of the handle encodings that the metadata version does not tell.

    ``channel_subtask_index``: channel handles start with ``int subtaskIndex`` (Flink 1.12+; 1.11 wrote
    none). ``channel_codec``: 1 for ``ChannelStateHandleSerializerV1`` (metadata V3-V5), 2 for
    ``ChannelStateHandleSerializerV2`` (metadata V6, with a type byte per handle).
    """

    channel_subtask_index: bool = True
    channel_codec: int = 1
    changelog_layout: str = ChangelogLayout.FLINK_1_15


# -- model -----------------------------------------------------------------------------------------


def _offset_field() -> int:
    # Where the handle's type byte was in the input; informational, never compared or encoded.
    return field(default=-1, compare=False, repr=False)


@record
class KeyGroupRange:
    """Key groups ``[start, start + count - 1]`` (``KeyGroupRange``, written as ``int start, int count``)."""

    start: int
    count: int

    @property
    def end(self) -> int:
        """Last key group (inclusive); ``start - 1`` for an empty range."""
        return self.start + self.count - 1

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end


@record
class ByteStreamHandle:
    """Code 1, ``ByteStreamStateHandle``: state bytes inline in ``_metadata``.

    ``name`` is the path the file would have had; that file does not exist.
    """

    name: str
    data: bytes
    offset: int = _offset_field()
    type_code = HandleType.BYTE_STREAM

    @property
    def size(self) -> int:
        return len(self.data)


@record
class FileHandle:
    """Code 2, ``FileStateHandle``: an absolute path (a URI such as ``file:/...`` or ``s3://...``)."""

    path: str
    size: int
    offset: int = _offset_field()
    type_code = HandleType.FILE


@record
class RelativeFileHandle:
    """Code 6, ``RelativeFileStateHandle``: a file name relative to the directory holding ``_metadata``."""

    relative_path: str
    size: int
    offset: int = _offset_field()
    type_code = HandleType.RELATIVE_FILE


@record
class SegmentFileHandle:
    """Code 15, ``SegmentFileStateHandle`` (file merging, 1.20+): bytes ``[start, start+size)`` of a file."""

    start: int
    size: int
    scope: int  # CheckpointedStateScope ordinal: 0 EXCLUSIVE, 1 SHARED
    physical_path: str
    logical_file_id: str
    offset: int = _offset_field()
    type_code = HandleType.SEGMENT_FILE

    @property
    def scope_name(self) -> str:
        return ("EXCLUSIVE", "SHARED")[self.scope]


@record
class EmptySegmentFileHandle:
    """Code 16, ``EmptySegmentFileStateHandle``: the singleton "no bytes" segment; no body."""

    offset: int = _offset_field()
    type_code = HandleType.EMPTY_SEGMENT_FILE
    size = 0


@record
class KeyGroupsHandle:
    """Codes 3, 7 and 12: a full snapshot of key groups (``KeyGroupsStateHandle``).

    ``offsets[i]`` is the position of key group ``key_groups.start + i`` in the delegate stream (0 = empty
    key group). Code 7 is ``KeyGroupsSavepointStateHandle`` (canonical savepoints), 12 adds
    ``state_handle_id``. Code 3 may also sit where a stream handle is expected (1.13+).
    """

    type_code: int
    key_groups: KeyGroupRange
    offsets: list[int]
    delegate: "StreamHandle | None"
    state_handle_id: str | None = None
    offset: int = _offset_field()

    @property
    def size(self) -> int | None:
        return None if self.delegate is None else getattr(self.delegate, "size", None)


@record
class LocalFile:
    """One entry of an incremental handle's shared or private list: local file name and its handle."""

    local_path: str
    handle: "StreamHandle | None"


@record
class IncrementalKeyedHandle:
    """Codes 5 and 11, ``IncrementalRemoteKeyedStateHandle``: one RocksDB/ForSt native checkpoint.

    ``shared`` lists the files later checkpoints may share (the ``*.sst`` files of incremental
    checkpoints), ``private`` the others: MANIFEST, CURRENT and OPTIONS, and every SST of a full
    checkpoint (incremental checkpoints off), which shares nothing. :attr:`sst_files` has the SSTs of
    both. ``meta`` holds the ``KeyedBackendSerializationProxy``. ``checkpointed_size`` and
    ``state_handle_id`` exist in code 11 only (None for code 5).
    """

    type_code: int
    checkpoint_id: int
    backend_id: str
    key_groups: KeyGroupRange
    checkpointed_size: int | None
    meta: "StreamHandle | None"
    shared: list[LocalFile]
    private: list[LocalFile]
    state_handle_id: str | None
    offset: int = _offset_field()

    @property
    def sst_files(self) -> list[LocalFile]:
        """Every ``*.sst`` file of the instance, shared or private, in handle order."""
        return [entry for entry in (*self.shared, *self.private) if entry.local_path.endswith(".sst")]


@record
class ChangelogBackendHandle:
    """Codes 8 and 14, ``ChangelogStateBackendHandle``: materialized plus non-materialized keyed handles.

    1.14 code 8 has neither sizes nor ids (those fields are None); code 14 adds ``checkpoint_id``.
    ``None`` entries in ``materialized`` are kept (Flink logs and skips them).
    """

    type_code: int
    key_groups: KeyGroupRange
    checkpointed_size: int | None
    materialized: list["KeyedHandle | None"]
    non_materialized: list["KeyedHandle | None"]
    materialization_id: int | None
    checkpoint_id: int | None
    state_handle_id: str | None
    offset: int = _offset_field()


@record
class StateChange:
    """One change of an in-memory changelog handle; ``key_group`` -1 marks a metadata change."""

    key_group: int
    data: bytes


@record
class InMemoryChangelogHandle:
    """Code 9, ``InMemoryChangelogStateHandle``: changes inline (``state_handle_id`` is None for 1.14)."""

    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: list[StateChange]
    state_handle_id: str | None
    offset: int = _offset_field()
    type_code = HandleType.CHANGELOG_BYTE_INCREMENT


@record
class OffsetHandle:
    """A stream handle with the offset of the change set inside it."""

    position: int
    handle: "StreamHandle | None"


@record
class ChangelogStreamHandle:
    """Codes 10 and 13, ``ChangelogStateHandleStreamImpl``: changelog files written by the DSTL.

    ``checkpointed_size`` and ``state_handle_id`` are None for 1.14; ``storage_identifier`` exists in 13 only.
    """

    type_code: int
    key_groups: KeyGroupRange
    handles: list[OffsetHandle]
    state_size: int
    checkpointed_size: int | None
    state_handle_id: str | None
    storage_identifier: str | None
    offset: int = _offset_field()


#: ``OperatorStateHandle.Mode`` by ordinal.
OPERATOR_STATE_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


@record
class OperatorStateEntry:
    """One named operator state in an operator state handle: distribution mode and partition offsets."""

    name: str
    mode: int
    offsets: list[int]

    @property
    def mode_name(self) -> str:
        return OPERATOR_STATE_MODES[self.mode]


@record
class OperatorStateHandle:
    """Codes 4 (``OperatorStreamStateHandle``) and 17 (``FileMergingOperatorStreamStateHandle``, 1.20+).

    ``states`` keeps the order of the file (Flink writes a ``HashMap``). For code 17, ``task_owned_dir``,
    ``shared_dir`` and ``is_empty`` are set and the delegate is a segment handle.
    """

    type_code: int
    states: list[OperatorStateEntry]
    delegate: "StreamHandle | None"
    task_owned_dir: str | None = None
    shared_dir: str | None = None
    is_empty: bool | None = None
    offset: int = _offset_field()


@record
class ChannelStateHandle:
    """In-flight data of one input channel (``kind`` "input": gate, channel) or result subpartition
    ("output": partition, subpartition) of an unaligned checkpoint.

    ``subtask_index`` is None when the writer (Flink 1.11) wrote none.
    """

    kind: str
    subtask_index: int | None
    index_a: int  # gateIdx or partitionIdx
    index_b: int  # inputChannelIdx or subPartitionIdx
    offsets: list[int]
    state_size: int
    delegate: "StreamHandle | None"
    offset: int = _offset_field()


@record
class MergedChannelStateHandle:
    """Codec V2 types 3/4 (2.1+): several channels' state in one delegate.

    ``serialized_offsets`` is kept opaque (its inner layout is not documented in the notes).
    """

    kind: str
    subtask_index: int
    state_size: int
    delegate: "StreamHandle | None"
    serialized_offsets: bytes
    offset: int = _offset_field()


StreamHandle = Union[
    ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle, KeyGroupsHandle
]
KeyedHandle = Union[
    KeyGroupsHandle, IncrementalKeyedHandle, ChangelogBackendHandle, InMemoryChangelogHandle, ChangelogStreamHandle
]
AnyChannelHandle = Union[ChannelStateHandle, MergedChannelStateHandle]


# -- traversal -------------------------------------------------------------------------------------


def iter_stream_handles(handle, path: str = "") -> Iterator[tuple[str, StreamHandle]]:
    """Every stream handle reachable from ``handle`` (any handle type), with a readable path to it.

    Container handles (key groups, incremental, changelog, operator and channel handles) are walked into;
    only their stream handles are yielded.
    """
    if handle is None:
        return
    if isinstance(handle, (ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle)):
        yield path, handle
    elif isinstance(handle, KeyGroupsHandle):
        yield from iter_stream_handles(handle.delegate, path + "/delegate")
    elif isinstance(handle, IncrementalKeyedHandle):
        yield from iter_stream_handles(handle.meta, path + "/meta")
        for kind, files in (("shared", handle.shared), ("private", handle.private)):
            for entry in files:
                yield from iter_stream_handles(entry.handle, f"{path}/{kind}/{entry.local_path}")
    elif isinstance(handle, ChangelogBackendHandle):
        for i, nested in enumerate(handle.materialized):
            yield from iter_stream_handles(nested, f"{path}/materialized[{i}]")
        for i, nested in enumerate(handle.non_materialized):
            yield from iter_stream_handles(nested, f"{path}/non_materialized[{i}]")
    elif isinstance(handle, ChangelogStreamHandle):
        for i, item in enumerate(handle.handles):
            yield from iter_stream_handles(item.handle, f"{path}/handles[{i}]")
    elif isinstance(handle, (OperatorStateHandle, ChannelStateHandle, MergedChannelStateHandle)):
        yield from iter_stream_handles(handle.delegate, path + "/delegate")
    elif isinstance(handle, InMemoryChangelogHandle):
        return
    else:
        raise TypeError(f"not a state handle: {type(handle).__name__}")


def map_stream_handles(handle, fn: "Callable[[StreamHandle], StreamHandle | None]"):
    """``handle`` with every stream handle ``s`` reachable from it replaced by ``fn(s)``.

    Container handles are updated in place and returned; a stream handle is returned as ``fn`` maps it.
    Used to rewrite paths (``repair relocate``) before re-encoding with :class:`HandleEncoder`.
    """
    if handle is None:
        return None
    if isinstance(handle, (ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle, EmptySegmentFileHandle)):
        return fn(handle)
    if isinstance(handle, (KeyGroupsHandle, OperatorStateHandle, ChannelStateHandle, MergedChannelStateHandle)):
        handle.delegate = map_stream_handles(handle.delegate, fn)
    elif isinstance(handle, IncrementalKeyedHandle):
        handle.meta = map_stream_handles(handle.meta, fn)
        for entry in (*handle.shared, *handle.private):
            entry.handle = map_stream_handles(entry.handle, fn)
    elif isinstance(handle, ChangelogBackendHandle):
        handle.materialized = [map_stream_handles(h, fn) for h in handle.materialized]
        handle.non_materialized = [map_stream_handles(h, fn) for h in handle.non_materialized]
    elif isinstance(handle, ChangelogStreamHandle):
        for item in handle.handles:
            item.handle = map_stream_handles(item.handle, fn)
    elif not isinstance(handle, InMemoryChangelogHandle):
        raise TypeError(f"not a state handle: {type(handle).__name__}")
    return handle
