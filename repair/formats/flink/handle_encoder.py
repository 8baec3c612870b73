"""Encoding of the state handles of a ``_metadata`` file, byte for byte as Flink writes them (see
:mod:`repair.formats.flink.handles`): what ``repair relocate`` and ``rebuild-manifest`` write.
"""

from __future__ import annotations

from repair.formats.bytes.java_io import ByteWriter
from repair.formats.flink.handles import (
    AnyChannelHandle,
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogLayout,
    ChangelogStreamHandle,
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
    OperatorStateHandle,
    RelativeFileHandle,
    SegmentFileHandle,
    StreamHandle,
)

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
