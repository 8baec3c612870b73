"""Flink's state changelog: the DSTL files of the changelog state backend and the changes in them.

With ``state.changelog.enabled: true`` a keyed subtask's state is its *materialized* part (an ordinary
RocksDB or heap snapshot, taken now and then) plus the state changes logged since then, which the
checkpoint refers to as change sets in DSTL files (``ChangelogStateBackendHandle``'s non-materialized
handles, :class:`~repair.formats.flink.handles.ChangelogStreamHandle`). A DSTL file
(``<dstl.dfs.base-path>/<job-id>/dstl/<uuid>``, ``StateChangeFsUploader``) is::

    byte   1 if the rest is a Snappy framed stream (dstl.dfs.compression.enabled), else 0
    change sets, one after the other (StateChangeFormat), each:
        int  key groups
        per key group (each once, in no fixed order; -1 holds the states' meta data):
            int  changes
            int  key group
            per change: int length, then that many bytes

A handle names each change set by file and *offset*: bytes of the stream after the flag byte
(uncompressed). One file holds the change sets of every subtask of a task manager that were uploaded
together. A change (``AbstractStateChangeLogger``, the operation codes of Flink 1.15 to 2.3)::

    byte   operation: CLEAR 0, SET 1, SET_INTERNAL 2, ADD 3, MERGE_NS 4, ADD_ELEMENT 5,
           ADD_OR_UPDATE_ELEMENT 6, REMOVE_ELEMENT 7, METADATA 8
    METADATA (key group -1):
        int    StateMetaInfoSnapshot version, then the snapshot (name, type, options, serializers)
        key/value states only: bool TTL (then a Java-serialized StateTtlConfig),
                               bool default value (then the value, the state serializer's bytes)
        short  state id (what the data changes refer to), byte backend state type
    any other:
        short  state id
        key/value states: the key, then the namespace (their serializers' bytes)
        the operation's data (see :class:`ChangeReader`)

Changes carry no lengths inside them, so only known serializers tell where a key ends:
:class:`ChangeReader` splits a data change into its parts with the decoders of
:mod:`repair.formats.flink.values`. Errors are :class:`~repair.errors.FormatError` with offsets in the
stream (after the flag byte, uncompressed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_serialization import read_java_object
from repair.formats.flink.backend_meta import BACKEND_STATE_TYPES, StateMetaInfo, read_state_meta_info
from repair.formats.flink.full_snapshot.canonical import decompress_snappy_framed
from repair.formats.flink.values import decoder_for

#: ``StateChangeOperation`` by code (Flink 1.15 to 2.3; read from the 2.3.0 jar with ``javap``).
OPERATIONS = (
    "CLEAR", "SET", "SET_INTERNAL", "ADD", "MERGE_NS", "ADD_ELEMENT", "ADD_OR_UPDATE_ELEMENT", "REMOVE_ELEMENT", "METADATA",
)
METADATA = OPERATIONS.index("METADATA")
#: ``AbstractStateChangeLogger.COMMON_KEY_GROUP``: the key group of meta data changes.
META_KEY_GROUP = -1
#: ``StateMetaInfoSnapshotReadersWriters``: versions read with the current layout.
META_INFO_VERSIONS = range(5, 8)
#: The smallest change set: its key-group count. A key group: change count and key group.
_MIN_CHANGE_SET = 4
_MIN_KEY_GROUP = 8


@dataclass(frozen=True)
class StateChange:
    """One change of a change set: its key group, its bytes and where they start in the stream."""

    key_group: int
    data: bytes
    offset: int


@dataclass
class MetadataChange:
    """A METADATA change: a state registered (again) with the id its data changes use."""

    state: StateMetaInfo
    state_id: int
    backend_state_type: int
    #: The Java-serialized ``StateTtlConfig`` (a :class:`~repair.formats.bytes.java_serialization.JavaObject`), or None.
    ttl_config: Any = None
    #: The default value's bytes (a deprecated ``ValueStateDescriptor`` argument), or None.
    default_value: bytes | None = None
    #: The state meta info snapshot's bytes (after its version), as a keyed backend's meta data holds
    #: them, and where they start in the stream.
    info_bytes: bytes = b""
    info_offset: int = 0


@dataclass(frozen=True)
class DataChange:
    """A change of a state's data: the operation, the state id, and the bytes after the id."""

    operation: str
    state_id: int
    key_group: int
    body: bytes
    #: Where ``body`` starts in the stream.
    offset: int


def changelog_stream(data: bytes) -> bytes:
    """The change sets of a whole DSTL file: the bytes after the flag byte, decompressed if it says so."""
    r = ByteReader(data)
    flag = r.u8("changelog compression flag")
    if flag == 0:
        return data[1:]
    if flag != 1:
        raise FormatError("changelog compression flag", 0, "0 or 1", flag)
    # Offsets of a compressed file count uncompressed bytes, so the stream is decompressed whole.
    return decompress_snappy_framed(data, 1, len(data))


def read_change_set(stream: bytes, offset: int) -> tuple[list[StateChange], int]:
    """The changes of the change set at ``offset`` of ``stream``, and where the change set ends."""
    if not 0 <= offset < len(stream):
        raise FormatError("change set offset", offset, f"0..{len(stream) - 1} (the stream's bytes)", offset)
    r = ByteReader(stream, offset)
    changes: list[StateChange] = []
    seen: set[int] = set()
    for _ in range(r.count("change set key-group count", item_size=_MIN_KEY_GROUP)):
        count = r.count("changes in key group", item_size=4)
        at = r.offset
        key_group = r.i32("change key group")
        if key_group < META_KEY_GROUP or key_group in seen:
            raise FormatError("change key group", at, "-1 or more, once per change set", key_group)
        seen.add(key_group)
        for _ in range(count):
            length = r.count("state change length")
            at = r.offset
            changes.append(StateChange(key_group, r.raw(length, "state change"), at))
    return changes, r.pos


def iter_change_sets(stream: bytes) -> Iterator[tuple[int, list[StateChange]]]:
    """``(offset, changes)`` of every change set of a DSTL stream, first to last; the last ends at the end."""
    offset = 0
    while offset < len(stream):
        if len(stream) - offset < _MIN_CHANGE_SET:
            raise FormatError("change set", offset, "a key-group count (4 bytes)", f"{len(stream) - offset} bytes left")
        changes, end = read_change_set(stream, offset)
        yield offset, changes
        offset = end


def decode_change(change: StateChange) -> MetadataChange | DataChange:
    """What one change is: state meta data, or an operation on a state's data (its body not decoded)."""
    r = ByteReader(change.data, base=change.offset)
    at = r.offset
    code = r.u8("state change operation")
    if code >= len(OPERATIONS):
        raise FormatError("state change operation", at, f"0..{len(OPERATIONS) - 1} ({', '.join(OPERATIONS)})", code)
    if code == METADATA:
        if change.key_group != META_KEY_GROUP:
            raise FormatError("key group of a METADATA change", change.offset, META_KEY_GROUP, change.key_group)
        return _metadata(r)
    if change.key_group == META_KEY_GROUP:
        raise FormatError("key group of a data change", change.offset, "0 or more", f"{META_KEY_GROUP} ({OPERATIONS[code]})")
    state_id = r.i16("state id")
    return DataChange(OPERATIONS[code], state_id, change.key_group, bytes(change.data[r.pos :]), r.offset)


def _metadata(r: ByteReader) -> MetadataChange:
    at = r.offset
    version = r.i32("state meta info version")
    if version not in META_INFO_VERSIONS:
        raise FormatError("state meta info version", at, f"{META_INFO_VERSIONS.start}..{META_INFO_VERSIONS.stop - 1}", version)
    info_at = r.pos
    state = read_state_meta_info(r)
    if state.problem is not None:
        # The unknown snapshot's bytes cannot be skipped, so the id and type after them are unknown.
        raise FormatError(f"serializers of state {state.name!r}", state.offset, "serializer snapshots this toolkit reads", state.problem)
    change = MetadataChange(state, -1, -1, info_bytes=bytes(r.data[info_at : r.pos]), info_offset=r.base + info_at)
    if BACKEND_STATE_TYPES[state.backend_state_type] != "PRIORITY_QUEUE":
        if r.bool("state has a TTL configuration"):
            change.ttl_config, used = read_java_object(bytes(r.data[r.pos : r.end]), base=r.offset)
            r.skip(used, "TTL configuration")
        if r.bool("state has a default value"):
            start = r.pos
            decoder_for(state.serializer("VALUE_SERIALIZER")).read(r)
            change.default_value = bytes(r.data[start : r.pos])
    change.state_id = r.i16("state id")
    at = r.offset
    change.backend_state_type = r.u8("backend state type")
    if change.backend_state_type != state.backend_state_type:
        expected = f"{state.backend_state_type} ({state.backend_type_name}, as the snapshot says)"
        raise FormatError("backend state type", at, expected, change.backend_state_type)
    if not r.at_end():
        raise FormatError("end of METADATA change", r.offset, "the end of the change", f"{r.remaining} more bytes")
    return change


@dataclass
class ScopedChange:
    """A data change split into its parts, each as the bytes its serializer wrote.

    ``parts`` by operation (key/value states; a priority queue has no key or namespace):

    * CLEAR: none;
    * SET, SET_INTERNAL, ADD: the state's whole value (a list or map state: ``ListSerializer`` or
      ``MapSerializer`` bytes, the elements or entries to set or add);
    * ADD_ELEMENT: a list element; a map state's user key and value (``ChangelogMapState``: the value
      serializer's bytes alone, without the ``bool isNull`` of ``MapSerializer``'s entries);
      a priority queue's elements (any number);
    * ADD_OR_UPDATE_ELEMENT: a map state's user key and value (as for ADD_ELEMENT);
    * REMOVE_ELEMENT: a map state's user key; a priority queue's element;
    * MERGE_NS: the target namespace, then the source namespaces.
    """

    operation: str
    key_group: int
    key_raw: bytes | None
    namespace_raw: bytes | None
    parts: list[bytes] = field(default_factory=list)


#: Which operations each kind of state logs (``*StateChangeApplier``).
_ALLOWED = {
    "value": {"CLEAR", "SET", "SET_INTERNAL"},
    "list": {"CLEAR", "SET", "SET_INTERNAL", "ADD", "ADD_ELEMENT", "MERGE_NS"},
    "map": {"CLEAR", "ADD", "ADD_ELEMENT", "ADD_OR_UPDATE_ELEMENT", "REMOVE_ELEMENT"},
    "reducing": {"CLEAR", "SET", "SET_INTERNAL", "MERGE_NS"},
    "aggregating": {"CLEAR", "SET", "SET_INTERNAL", "MERGE_NS"},
    "priority-queue": {"ADD_ELEMENT", "REMOVE_ELEMENT"},
}


class ChangeReader:
    """Splits the data changes of one state into :class:`ScopedChange` parts with its serializers.

    ``key_serializer`` is the keyed backend's (from the materialized part's meta data or a timer
    state's); None reads priority-queue changes only. A serializer this toolkit cannot decode raises
    :class:`~repair.formats.flink.values.UnsupportedSerializerError`.
    """

    def __init__(self, state: StateMetaInfo, key_serializer):
        self.state = state
        self.kind = state.kind
        value = state.serializer("VALUE_SERIALIZER")
        self.value = decoder_for(value)
        nested = value.nested if value is not None else []
        if self.kind == "priority-queue":
            return
        self.key = decoder_for(key_serializer)
        self.namespace = decoder_for(state.serializer("NAMESPACE_SERIALIZER"))
        self.element = decoder_for(nested[0] if self.kind == "list" and len(nested) == 1 else None)
        self.user_key = decoder_for(nested[0] if self.kind == "map" and len(nested) == 2 else None)
        self.user_value = decoder_for(nested[1] if self.kind == "map" and len(nested) == 2 else None)

    def read(self, change: DataChange) -> ScopedChange:
        op = change.operation
        if op not in _ALLOWED.get(self.kind, ()):
            raise FormatError(f"operation on {self.kind} state {self.state.name!r}", change.offset - 3,
                              " or ".join(sorted(_ALLOWED.get(self.kind, ()))) or "none", op)
        r = ByteReader(change.body, base=change.offset)
        if self.kind == "priority-queue":
            scoped = ScopedChange(op, change.key_group, None, None)
            if op == "ADD_ELEMENT":
                scoped.parts = [_raw(self.value, r) for _ in range(r.count("priority queue elements", item_size=1))]
            else:
                scoped.parts = [_raw(self.value, r)]
        else:
            scoped = ScopedChange(op, change.key_group, _raw(self.key, r), _raw(self.namespace, r))
            scoped.parts = self._parts(op, r)
        if not r.at_end():
            raise FormatError(f"end of {op} change of state {self.state.name!r}", r.offset, "the end of the change", f"{r.remaining} more bytes")
        return scoped

    def _parts(self, op: str, r: ByteReader) -> list[bytes]:
        if op == "CLEAR":
            return []
        if op in ("SET", "SET_INTERNAL", "ADD"):
            return [_raw(self.value, r)]
        if op == "MERGE_NS":
            target = _raw(self.namespace, r)
            return [target] + [_raw(self.namespace, r) for _ in range(r.count("merged namespaces"))]
        if self.kind == "list":
            return [_raw(self.element, r)]
        user_key = _raw(self.user_key, r)
        if op == "REMOVE_ELEMENT":
            return [user_key]
        return [user_key, _raw(self.user_value, r)]


def _raw(decoder, r: ByteReader) -> bytes:
    start = r.pos
    decoder.read(r)
    return bytes(r.data[start : r.pos])
