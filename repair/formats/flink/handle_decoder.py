"""Decoding of the state handles in a ``_metadata`` file (see :mod:`repair.formats.flink.handles`).

Pure: bytes in through a :class:`~repair.formats.bytes.binary.ByteReader`, the handle model out. Every
count read from the data is bounded by the bytes left before anything is allocated.
"""

from __future__ import annotations

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import read_utf
from repair.formats.flink.handles import (
    MAX_KEY_GROUPS,
    MAX_NESTING,
    OPERATOR_STATE_MODES,
    AnyChannelHandle,
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogLayout,
    ChangelogStreamHandle,
    ChannelStateHandle,
    EmptySegmentFileHandle,
    FileHandle,
    HandleDialect,
    HandleType,
    IncrementalKeyedHandle,
    InMemoryChangelogHandle,
    KeyedHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    LocalFile,
    MergedChannelStateHandle,
    OffsetHandle,
    OperatorStateEntry,
    OperatorStateHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StateChange,
    StreamHandle,
)

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
