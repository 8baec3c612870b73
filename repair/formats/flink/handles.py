"""State handles inside a Flink checkpoint ``_metadata`` file: model, decoder, encoder.

A handle is written as a type byte followed by a type-specific body. The type codes and bodies come from
``org.apache.flink.runtime.checkpoint.metadata.MetadataV2V3SerializerBase`` (``serializeStreamStateHandle``,
``serializeKeyedStateHandle``, ``serializeOperatorStateHandle``) and, for unaligned-checkpoint channel
state, ``ChannelStateHandleSerializerV1``/``V2`` (checked against the flink-dist jars of 1.18.1, 1.20.3 and
2.1.1; the 1.14 changelog layout comes from the research notes, see ``ChangelogLayout``).

Everything here is pure: bytes in through a :class:`~repair.formats.bytes.binary.ByteReader`, dataclasses out,
and back through a :class:`~repair.formats.bytes.java_io.ByteWriter`. The model keeps every value needed to
write the same bytes again (exact strings, list order, inline bytes, which optional fields were present).
Paths are data: nothing here resolves or opens them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable, Iterator, Union

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import ByteWriter, read_utf

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


@dataclass(frozen=True)
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


@dataclass
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


@dataclass
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


@dataclass
class FileHandle:
    """Code 2, ``FileStateHandle``: an absolute path (a URI such as ``file:/...`` or ``s3://...``)."""

    path: str
    size: int
    offset: int = _offset_field()
    type_code = HandleType.FILE


@dataclass
class RelativeFileHandle:
    """Code 6, ``RelativeFileStateHandle``: a file name relative to the directory holding ``_metadata``."""

    relative_path: str
    size: int
    offset: int = _offset_field()
    type_code = HandleType.RELATIVE_FILE


@dataclass
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


@dataclass
class EmptySegmentFileHandle:
    """Code 16, ``EmptySegmentFileStateHandle``: the singleton "no bytes" segment; no body."""

    offset: int = _offset_field()
    type_code = HandleType.EMPTY_SEGMENT_FILE
    size = 0


@dataclass
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


@dataclass
class LocalFile:
    """One entry of an incremental handle's shared or private list: local file name and its handle."""

    local_path: str
    handle: "StreamHandle | None"


@dataclass
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


@dataclass
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


@dataclass
class StateChange:
    """One change of an in-memory changelog handle; ``key_group`` -1 marks a metadata change."""

    key_group: int
    data: bytes


@dataclass
class InMemoryChangelogHandle:
    """Code 9, ``InMemoryChangelogStateHandle``: changes inline (``state_handle_id`` is None for 1.14)."""

    key_groups: KeyGroupRange
    from_sequence: int
    to_sequence: int
    changes: list[StateChange]
    state_handle_id: str | None
    offset: int = _offset_field()
    type_code = HandleType.CHANGELOG_BYTE_INCREMENT


@dataclass
class OffsetHandle:
    """A stream handle with the offset of the change set inside it."""

    position: int
    handle: "StreamHandle | None"


@dataclass
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


@dataclass
class OperatorStateEntry:
    """One named operator state in an operator state handle: distribution mode and partition offsets."""

    name: str
    mode: int
    offsets: list[int]

    @property
    def mode_name(self) -> str:
        return OPERATOR_STATE_MODES[self.mode]


@dataclass
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


@dataclass
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


@dataclass
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

_STREAM_CODES = (0, 1, 2, 3, 6, 15, 16)
_KEYED_CODES = (0, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14)
_OPERATOR_CODES = (0, 4, 17)

# Smallest encodings, used to bound list counts before anything is allocated.
_MIN_STREAM_HANDLE = 1
_MIN_LOCAL_FILE = 2 + _MIN_STREAM_HANDLE
_MIN_OPERATOR_ENTRY = 2 + 1 + 4
_MIN_CHANGE = 4 + 4
_MIN_OFFSET_HANDLE = 8 + _MIN_STREAM_HANDLE


# -- decoding ----------------------------------------------------------------------------------------


class HandleDecoder:
    """Decodes handles from ``reader`` under one :class:`HandleDialect`.

    ``seen_channel_state`` and ``seen_changelog_v1_codes`` record whether the dialect-dependent encodings
    were met, so that a caller can retry with another dialect only when it matters.
    """

    def __init__(self, reader: ByteReader, dialect: HandleDialect):
        self.r = reader
        self.dialect = dialect
        self.seen_channel_state = False
        self.seen_changelog_v1_codes = False
        self._depth = 0

    # key-group ranges and offsets
    def key_group_range(self, field_name: str) -> KeyGroupRange:
        r = self.r
        at = r.offset
        start = r.i32(field_name + " start key group")
        count = r.i32(field_name + " number of key groups")
        if start < 0 or count < 0 or start + count > MAX_KEY_GROUPS:
            raise FormatError(field_name, at, f"a key-group range within [0, {MAX_KEY_GROUPS})", f"start {start}, count {count}")
        return KeyGroupRange(start, count)

    def longs(self, count: int, field_name: str) -> list[int]:
        r = self.r
        if count * 8 > r.remaining:
            raise FormatError(field_name, r.offset, f"{count} longs (bytes left: {r.remaining})", "fewer bytes")
        return [r.i64(field_name) for _ in range(count)]

    def _size(self, field_name: str, minimum: int = -1) -> int:
        at = self.r.offset
        value = self.r.i64(field_name)
        if value < minimum:
            raise FormatError(field_name, at, f"a size >= {minimum}", value)
        return value

    # stream handles
    def stream_handle(self, field_name: str) -> StreamHandle | None:
        """``deserializeStreamStateHandle``: codes 0, 1, 2, 3, 6, 15, 16 (read as an unsigned byte)."""
        r = self.r
        at = r.offset
        code = r.u8(field_name + " type")
        if code == HandleType.NULL:
            return None
        if code == HandleType.BYTE_STREAM:
            name = read_utf(r, field_name + " handle name")
            length = r.count(field_name + " inline length")
            return ByteStreamHandle(name, r.raw(length, field_name + " inline bytes"), offset=at)
        if code == HandleType.FILE:
            size = self._size(field_name + " size")  # size first (FileStateHandle)
            return FileHandle(read_utf(r, field_name + " path"), size, offset=at)
        if code == HandleType.RELATIVE_FILE:
            path = read_utf(r, field_name + " relative path")  # path first (RelativeFileStateHandle)
            return RelativeFileHandle(path, self._size(field_name + " size"), offset=at)
        if code == HandleType.KEY_GROUPS:
            return self._key_groups_body(code, at, field_name)
        if code == HandleType.SEGMENT_FILE:
            start = self._size(field_name + " segment start", 0)
            size = self._size(field_name + " segment size", 0)
            scope_at = r.offset
            scope = r.i32(field_name + " segment scope")
            if scope not in (0, 1):
                raise FormatError(field_name + " segment scope", scope_at, "0 (EXCLUSIVE) or 1 (SHARED)", scope)
            path = read_utf(r, field_name + " segment file path")
            return SegmentFileHandle(start, size, scope, path, read_utf(r, field_name + " logical file id"), offset=at)
        if code == HandleType.EMPTY_SEGMENT_FILE:
            return EmptySegmentFileHandle(offset=at)
        raise FormatError(field_name + " type", at, f"a stream handle type {_STREAM_CODES}", code)

    def _key_groups_body(self, code: int, at: int, field_name: str) -> KeyGroupsHandle:
        key_groups = self.key_group_range(field_name + " key groups")
        offsets = self.longs(key_groups.count, field_name + " key-group offsets")
        delegate = self._nested(self.stream_handle, field_name + " delegate")
        handle_id = read_utf(self.r, field_name + " state handle id") if code == HandleType.KEY_GROUPS_V2 else None
        return KeyGroupsHandle(code, key_groups, offsets, delegate, handle_id, offset=at)

    def _nested(self, read, field_name: str):
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise FormatError(field_name, self.r.offset, f"handles nested at most {MAX_NESTING} deep", "deeper nesting")
        try:
            return read(field_name)
        finally:
            self._depth -= 1

    def local_files(self, field_name: str) -> list[LocalFile]:
        """``deserializeHandleAndLocalPathList`` (same bytes as 1.11-1.15's StateHandleID map)."""
        r = self.r
        count = r.count(field_name + " count", item_size=_MIN_LOCAL_FILE)
        out = []
        for _ in range(count):
            local = read_utf(r, field_name + " local file name")
            out.append(LocalFile(local, self._nested(self.stream_handle, field_name + " handle")))
        return out

    # keyed handles
    def keyed_handle(self, field_name: str) -> KeyedHandle | None:
        """``deserializeKeyedStateHandle``."""
        r = self.r
        at = r.offset
        code = r.u8(field_name + " type")
        if code == HandleType.NULL:
            return None
        if code in (HandleType.KEY_GROUPS, HandleType.SAVEPOINT_KEY_GROUPS, HandleType.KEY_GROUPS_V2):
            return self._key_groups_body(code, at, field_name)
        if code in (HandleType.INCREMENTAL_KEY_GROUPS, HandleType.INCREMENTAL_KEY_GROUPS_V2):
            return self._incremental_body(code, at, field_name)
        if code in (HandleType.CHANGELOG, HandleType.CHANGELOG_V2):
            return self._changelog_backend_body(code, at, field_name)
        if code == HandleType.CHANGELOG_BYTE_INCREMENT:
            return self._in_memory_changelog_body(at, field_name)
        if code in (HandleType.CHANGELOG_FILE_INCREMENT, HandleType.CHANGELOG_FILE_INCREMENT_V2):
            return self._changelog_stream_body(code, at, field_name)
        raise FormatError(field_name + " type", at, f"a keyed state handle type {_KEYED_CODES}", code)

    def _incremental_body(self, code: int, at: int, field_name: str) -> IncrementalKeyedHandle:
        r = self.r
        v2 = code == HandleType.INCREMENTAL_KEY_GROUPS_V2
        checkpoint_id = r.i64(field_name + " checkpoint id")
        backend_id = read_utf(r, field_name + " backend id")
        key_groups = self.key_group_range(field_name + " key groups")
        checkpointed_size = r.i64(field_name + " checkpointed size") if v2 else None
        meta = self._nested(self.stream_handle, field_name + " meta data handle")
        shared = self.local_files(field_name + " shared state")
        private = self.local_files(field_name + " private state")
        handle_id = read_utf(r, field_name + " state handle id") if v2 else None
        return IncrementalKeyedHandle(
            code, checkpoint_id, backend_id, key_groups, checkpointed_size, meta, shared, private, handle_id, offset=at
        )

    def _keyed_list(self, field_name: str) -> list[KeyedHandle | None]:
        count = self.r.count(field_name + " count", item_size=1)
        return [self._nested(self.keyed_handle, field_name) for _ in range(count)]

    def _changelog_backend_body(self, code: int, at: int, field_name: str) -> ChangelogBackendHandle:
        r = self.r
        old = code == HandleType.CHANGELOG and self.dialect.changelog_layout == ChangelogLayout.FLINK_1_14
        if code == HandleType.CHANGELOG:
            self.seen_changelog_v1_codes = True
        key_groups = self.key_group_range(field_name + " key groups")
        checkpointed_size = None if old else r.i64(field_name + " checkpointed size")
        materialized = self._keyed_list(field_name + " materialized")
        non_materialized = self._keyed_list(field_name + " non-materialized")
        materialization_id = None if old else r.i64(field_name + " materialization id")
        checkpoint_id = r.i64(field_name + " checkpoint id") if code == HandleType.CHANGELOG_V2 else None
        handle_id = None if old else read_utf(r, field_name + " state handle id")
        return ChangelogBackendHandle(
            code, key_groups, checkpointed_size, materialized, non_materialized, materialization_id, checkpoint_id, handle_id, offset=at
        )

    def _in_memory_changelog_body(self, at: int, field_name: str) -> InMemoryChangelogHandle:
        r = self.r
        self.seen_changelog_v1_codes = True
        old = self.dialect.changelog_layout == ChangelogLayout.FLINK_1_14
        key_groups = self.key_group_range(field_name + " key groups")
        first = r.i64(field_name + " from sequence number")
        last = r.i64(field_name + " to sequence number")
        count = r.count(field_name + " change count", item_size=_MIN_CHANGE)
        changes = []
        for _ in range(count):
            key_group = r.i32(field_name + " change key group")
            length = r.count(field_name + " change length")
            changes.append(StateChange(key_group, r.raw(length, field_name + " change bytes")))
        handle_id = None if old else read_utf(r, field_name + " state handle id")
        return InMemoryChangelogHandle(key_groups, first, last, changes, handle_id, offset=at)

    def _changelog_stream_body(self, code: int, at: int, field_name: str) -> ChangelogStreamHandle:
        r = self.r
        old = code == HandleType.CHANGELOG_FILE_INCREMENT and self.dialect.changelog_layout == ChangelogLayout.FLINK_1_14
        if code == HandleType.CHANGELOG_FILE_INCREMENT:
            self.seen_changelog_v1_codes = True
        key_groups = self.key_group_range(field_name + " key groups")
        count = r.count(field_name + " handle count", item_size=_MIN_OFFSET_HANDLE)
        handles = []
        for _ in range(count):
            position = r.i64(field_name + " change set offset")
            handles.append(OffsetHandle(position, self._nested(self.stream_handle, field_name + " handle")))
        state_size = r.i64(field_name + " state size")
        checkpointed_size = None if old else r.i64(field_name + " checkpointed size")
        handle_id = None if old else read_utf(r, field_name + " state handle id")
        storage = read_utf(r, field_name + " storage identifier") if code == HandleType.CHANGELOG_FILE_INCREMENT_V2 else None
        return ChangelogStreamHandle(code, key_groups, handles, state_size, checkpointed_size, handle_id, storage, offset=at)

    # operator handles
    def operator_handle(self, field_name: str) -> OperatorStateHandle | None:
        """``deserializeOperatorStateHandle``: codes 0, 4, 17."""
        r = self.r
        at = r.offset
        code = r.u8(field_name + " type")
        if code == HandleType.NULL:
            return None
        if code not in (HandleType.OPERATOR_STATE, HandleType.SEGMENT_OPERATOR_STATE):
            raise FormatError(field_name + " type", at, f"an operator state handle type {_OPERATOR_CODES}", code)
        count = r.count(field_name + " state count", item_size=_MIN_OPERATOR_ENTRY)
        states = []
        for _ in range(count):
            name = read_utf(r, field_name + " state name")
            mode_at = r.offset
            mode = r.u8(field_name + " distribution mode")
            if mode >= len(OPERATOR_STATE_MODES):
                raise FormatError(field_name + " distribution mode", mode_at, "0, 1 or 2 (SPLIT_DISTRIBUTE, UNION, BROADCAST)", mode)
            offsets_count = r.count(field_name + " partition offset count", item_size=8)
            states.append(OperatorStateEntry(name, mode, self.longs(offsets_count, field_name + " partition offsets")))
        handle = OperatorStateHandle(code, states, None, offset=at)
        if code == HandleType.SEGMENT_OPERATOR_STATE:
            handle.task_owned_dir = read_utf(r, field_name + " task-owned directory")
            handle.shared_dir = read_utf(r, field_name + " shared directory")
            handle.is_empty = r.bool(field_name + " is empty")
        delegate_at = r.offset
        handle.delegate = self._nested(self.stream_handle, field_name + " delegate")
        if code == HandleType.SEGMENT_OPERATOR_STATE and not isinstance(handle.delegate, (SegmentFileHandle, EmptySegmentFileHandle)):
            raise FormatError(field_name + " delegate", delegate_at, "a segment file handle (15 or 16)", type(handle.delegate).__name__)
        return handle

    # channel state
    def channel_handles(self, kind: str, field_name: str) -> list[AnyChannelHandle]:
        """A counted list of input-channel (``kind`` "input") or result-subpartition ("output") handles."""
        r = self.r
        if self.dialect.channel_codec == 2:
            minimum = 1 + 4 + 8 + _MIN_STREAM_HANDLE + 4
        else:
            minimum = (4 if self.dialect.channel_subtask_index else 0) + 8 + 4 + 8 + _MIN_STREAM_HANDLE
        count = r.count(field_name + " count", item_size=minimum)
        if count:
            self.seen_channel_state = True
        return [self._channel_handle(kind, field_name) for _ in range(count)]

    def _channel_handle(self, kind: str, field_name: str) -> AnyChannelHandle:
        r = self.r
        at = r.offset
        if self.dialect.channel_codec == 2:
            # ChannelStateHandleSerializerV2: 1/2 plain input/output, 3/4 merged input/output.
            plain, merged = (1, 3) if kind == "input" else (2, 4)
            code = r.u8(field_name + " type")
            if code == merged:
                subtask = r.i32(field_name + " subtask index")
                size = r.i64(field_name + " state size")
                delegate = self._nested(self.stream_handle, field_name + " delegate")
                length = r.count(field_name + " serialized offsets length")
                return MergedChannelStateHandle(kind, subtask, size, delegate, r.raw(length, field_name + " serialized offsets"), offset=at)
            if code != plain:
                raise FormatError(field_name + " type", at, f"{plain} or {merged} ({kind} channel state)", code)
            with_index = True
        else:
            with_index = self.dialect.channel_subtask_index
        subtask = r.i32(field_name + " subtask index") if with_index else None
        index_a = r.i32(field_name + (" gate index" if kind == "input" else " partition index"))
        index_b = r.i32(field_name + (" channel index" if kind == "input" else " subpartition index"))
        count = r.count(field_name + " offset count", item_size=8)
        offsets = self.longs(count, field_name + " offsets")
        size = r.i64(field_name + " state size")
        delegate = self._nested(self.stream_handle, field_name + " delegate")
        return ChannelStateHandle(kind, subtask, index_a, index_b, offsets, size, delegate, offset=at)


# -- encoding ----------------------------------------------------------------------------------------


class HandleEncoder:
    """Writes handles in the layout of ``dialect``; the inverse of :class:`HandleDecoder`."""

    def __init__(self, writer: ByteWriter, dialect: HandleDialect):
        self.w = writer
        self.dialect = dialect

    def key_group_range(self, key_groups: KeyGroupRange) -> None:
        self.w.i32(key_groups.start)
        self.w.i32(key_groups.count)

    def stream_handle(self, handle: StreamHandle | None) -> None:
        w = self.w
        if handle is None:
            w.u8(HandleType.NULL)
        elif isinstance(handle, ByteStreamHandle):
            w.u8(HandleType.BYTE_STREAM)
            w.utf(handle.name)
            w.i32(len(handle.data))
            w.raw(handle.data)
        elif isinstance(handle, FileHandle):
            w.u8(HandleType.FILE)
            w.i64(handle.size)
            w.utf(handle.path)
        elif isinstance(handle, RelativeFileHandle):
            w.u8(HandleType.RELATIVE_FILE)
            w.utf(handle.relative_path)
            w.i64(handle.size)
        elif isinstance(handle, KeyGroupsHandle):
            self._key_groups(handle)
        elif isinstance(handle, SegmentFileHandle):
            w.u8(HandleType.SEGMENT_FILE)
            w.i64(handle.start)
            w.i64(handle.size)
            w.i32(handle.scope)
            w.utf(handle.physical_path)
            w.utf(handle.logical_file_id)
        elif isinstance(handle, EmptySegmentFileHandle):
            w.u8(HandleType.EMPTY_SEGMENT_FILE)
        else:
            raise TypeError(f"not a stream state handle: {type(handle).__name__}")

    def _key_groups(self, handle: KeyGroupsHandle) -> None:
        w = self.w
        if len(handle.offsets) != handle.key_groups.count:
            raise ValueError("a KeyGroupsHandle needs one offset per key group")
        w.u8(handle.type_code)
        self.key_group_range(handle.key_groups)
        for value in handle.offsets:
            w.i64(value)
        self.stream_handle(handle.delegate)
        if handle.type_code == HandleType.KEY_GROUPS_V2:
            w.utf(handle.state_handle_id or "")

    def local_files(self, files: list[LocalFile]) -> None:
        self.w.i32(len(files))
        for entry in files:
            self.w.utf(entry.local_path)
            self.stream_handle(entry.handle)

    def keyed_handle(self, handle: KeyedHandle | None) -> None:
        w = self.w
        if handle is None:
            w.u8(HandleType.NULL)
        elif isinstance(handle, KeyGroupsHandle):
            self._key_groups(handle)
        elif isinstance(handle, IncrementalKeyedHandle):
            v2 = handle.type_code == HandleType.INCREMENTAL_KEY_GROUPS_V2
            w.u8(handle.type_code)
            w.i64(handle.checkpoint_id)
            w.utf(handle.backend_id)
            self.key_group_range(handle.key_groups)
            if v2:
                w.i64(handle.checkpointed_size if handle.checkpointed_size is not None else -1)
            self.stream_handle(handle.meta)
            self.local_files(handle.shared)
            self.local_files(handle.private)
            if v2:
                w.utf(handle.state_handle_id or "")
        elif isinstance(handle, ChangelogBackendHandle):
            old = handle.type_code == HandleType.CHANGELOG and self.dialect.changelog_layout == ChangelogLayout.FLINK_1_14
            w.u8(handle.type_code)
            self.key_group_range(handle.key_groups)
            if not old:
                w.i64(_required(handle.checkpointed_size, "checkpointed_size"))
            for part in (handle.materialized, handle.non_materialized):
                w.i32(len(part))
                for nested in part:
                    self.keyed_handle(nested)
            if not old:
                w.i64(_required(handle.materialization_id, "materialization_id"))
            if handle.type_code == HandleType.CHANGELOG_V2:
                w.i64(_required(handle.checkpoint_id, "checkpoint_id"))
            if not old:
                w.utf(handle.state_handle_id or "")
        elif isinstance(handle, InMemoryChangelogHandle):
            w.u8(HandleType.CHANGELOG_BYTE_INCREMENT)
            self.key_group_range(handle.key_groups)
            w.i64(handle.from_sequence)
            w.i64(handle.to_sequence)
            w.i32(len(handle.changes))
            for change in handle.changes:
                w.i32(change.key_group)
                w.i32(len(change.data))
                w.raw(change.data)
            if self.dialect.changelog_layout != ChangelogLayout.FLINK_1_14:
                w.utf(handle.state_handle_id or "")
        elif isinstance(handle, ChangelogStreamHandle):
            old = handle.type_code == HandleType.CHANGELOG_FILE_INCREMENT and self.dialect.changelog_layout == ChangelogLayout.FLINK_1_14
            w.u8(handle.type_code)
            self.key_group_range(handle.key_groups)
            w.i32(len(handle.handles))
            for item in handle.handles:
                w.i64(item.position)
                self.stream_handle(item.handle)
            w.i64(handle.state_size)
            if not old:
                w.i64(_required(handle.checkpointed_size, "checkpointed_size"))
                w.utf(handle.state_handle_id or "")
            if handle.type_code == HandleType.CHANGELOG_FILE_INCREMENT_V2:
                w.utf(handle.storage_identifier or "")
        else:
            raise TypeError(f"not a keyed state handle: {type(handle).__name__}")

    def operator_handle(self, handle: OperatorStateHandle | None) -> None:
        w = self.w
        if handle is None:
            w.u8(HandleType.NULL)
            return
        w.u8(handle.type_code)
        w.i32(len(handle.states))
        for entry in handle.states:
            w.utf(entry.name)
            w.u8(entry.mode)
            w.i32(len(entry.offsets))
            for value in entry.offsets:
                w.i64(value)
        if handle.type_code == HandleType.SEGMENT_OPERATOR_STATE:
            w.utf(handle.task_owned_dir or "")
            w.utf(handle.shared_dir or "")
            w.bool(bool(handle.is_empty))
        self.stream_handle(handle.delegate)

    def channel_handles(self, handles: list[AnyChannelHandle]) -> None:
        w = self.w
        w.i32(len(handles))
        for handle in handles:
            if isinstance(handle, MergedChannelStateHandle):
                if self.dialect.channel_codec != 2:
                    raise ValueError("merged channel state handles need metadata version 6")
                w.u8(3 if handle.kind == "input" else 4)
                w.i32(handle.subtask_index)
                w.i64(handle.state_size)
                self.stream_handle(handle.delegate)
                w.i32(len(handle.serialized_offsets))
                w.raw(handle.serialized_offsets)
                continue
            if self.dialect.channel_codec == 2:
                w.u8(1 if handle.kind == "input" else 2)
            if self.dialect.channel_codec == 2 or self.dialect.channel_subtask_index:
                w.i32(_required(handle.subtask_index, "subtask_index"))
            w.i32(handle.index_a)
            w.i32(handle.index_b)
            w.i32(len(handle.offsets))
            for value in handle.offsets:
                w.i64(value)
            w.i64(handle.state_size)
            self.stream_handle(handle.delegate)


def _required(value, name: str):
    if value is None:
        raise ValueError(f"{name} is required by this handle layout")
    return value


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
