"""Flink checkpoint and savepoint ``_metadata``: decoder and byte-exact encoder.

Layout (``org.apache.flink.runtime.checkpoint.Checkpoints`` and ``...checkpoint.metadata.MetadataV*Serializer``)::

    int magic 0x4960672D, int version
    long checkpointId
    int n, n x master state    (int 0xC96B1696, int len, [int version, UTF name, int len, bytes])
    int n, n x operator state
    V4+: a Java-serialized CheckpointProperties object (the "trailer")

Versions written by released Flink: 2 (<= 1.10), 3 (1.11-1.15), 4 (1.16-1.20, adds the trailer),
5 (2.0, adds operator name and uid), 6 (2.1+, channel-state codec V2). Version 3 is ambiguous in two
places the header does not tell: channel state handles have an ``int subtaskIndex`` from 1.12 on (not in
1.11), and the changelog handle codes 8/9/10 changed layout between 1.14 and 1.15. The decoder reads the
modern layout first and tries the other only when the file contains such handles and the modern read
fails or leaves bytes over (:attr:`CheckpointMetadata.dialect` says which was used).

:func:`decode_metadata` is pure (bytes in, dataclasses out) and raises :class:`~repair.errors.FormatError`
naming field and offset. :func:`encode_metadata` writes the model back; for any file Flink wrote,
``encode_metadata(decode_metadata(b)) == b``.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Iterator

from repair.errors import FormatError, RepairError
from repair.findings import Problem
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import ByteWriter, read_utf
from repair.formats.bytes.java_serialization import CheckpointProperties, decode_checkpoint_properties
from repair.formats.flink.handle_decoder import HandleDecoder
from repair.formats.flink.handle_encoder import HandleEncoder
from repair.formats.flink.handles import (
    AnyChannelHandle,
    ByteStreamHandle,
    ChangelogLayout,
    HandleDialect,
    KeyedHandle,
    OperatorStateHandle,
    StreamHandle,
    iter_stream_handles,
    map_stream_handles,
)
from repair.formats.records import record

#: ``Checkpoints.HEADER_MAGIC_NUMBER``.
METADATA_MAGIC = 0x4960672D
#: ``MetadataV2V3SerializerBase.MASTER_STATE_MAGIC_NUMBER`` (0xC96B1696 as a signed int).
MASTER_STATE_MAGIC = -915728746
#: Metadata format versions this decoder reads.
SUPPORTED_VERSIONS = (2, 3, 4, 5, 6)

_MIN_MASTER_STATE = 4 + 4
_MIN_SUBTASK = 4


def generation_of_metadata_version(version: int) -> int:
    """The Kryo generation (``repair.formats.flink.kryo``) of a checkpoint whose ``_metadata`` has
    ``version``: Flink 1.x writes versions up to 4 and uses Kryo 2.24; Flink 2.x writes 5 and later and
    uses Kryo 5."""
    return 2 if version <= 4 else 5


@record(frozen=True)
class MetadataDialect:
    """How a particular writer encoded the dialect-dependent parts (see module docstring)."""

    handles: HandleDialect = HandleDialect()

    @property
    def description(self) -> str:
        h = self.handles
        if h.channel_codec == 2:
            return "channel codec V2"
        parts = ["channel subtask index" if h.channel_subtask_index else "no channel subtask index (Flink 1.11)"]
        parts.append(f"changelog layout {h.changelog_layout}")
        return ", ".join(parts)


@record
class MasterState:
    """State of a master hook (``MasterState``): name, version and opaque payload."""

    name: str
    version: int
    payload: bytes
    offset: int = field(default=-1, compare=False, repr=False)


@record
class SubtaskState:
    """One subtask of an operator (``OperatorSubtaskState``), or a finished-subtask marker.

    A finished subtask (1.14+, written as index ``-index-1``) has ``finished`` set and no handles.
    ``managed_operator_state`` ... ``raw_keyed_state`` are the four singleton slots; channel lists are
    empty for metadata version 2. ``legacy_header`` keeps version 2's ``(long, int)`` per-subtask prefix.
    """

    index: int
    finished: bool = False
    managed_operator_state: OperatorStateHandle | None = None
    raw_operator_state: OperatorStateHandle | None = None
    managed_keyed_state: KeyedHandle | None = None
    raw_keyed_state: KeyedHandle | None = None
    input_channel_state: list[AnyChannelHandle] = field(default_factory=list)
    result_subpartition_state: list[AnyChannelHandle] = field(default_factory=list)
    legacy_header: tuple[int, int] | None = None
    offset: int = field(default=-1, compare=False, repr=False)

    def handles(self) -> Iterator[tuple[str, object]]:
        """The non-empty handles of this subtask, with their slot names."""
        for name in ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state"):
            value = getattr(self, name)
            if value is not None:
                yield name, value
        for i, handle in enumerate(self.input_channel_state):
            yield f"input_channel_state[{i}]", handle
        for i, handle in enumerate(self.result_subpartition_state):
            yield f"result_subpartition_state[{i}]", handle


@record
class OperatorState:
    """One operator (``OperatorState``).

    ``operator_id`` is 32 lowercase hex characters exactly as ``OperatorID.toHexString()`` prints it (the 16
    bytes as stored: lower part then upper part, big-endian). ``name`` and ``uid`` (version 5+) are the
    exact strings written, ``""`` meaning absent; they are None for older versions. A fully finished
    operator (1.14+, subtask count -1) has ``fully_finished`` set and no subtasks; ``finished_marker``
    keeps the negative count as written.
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    coordinator_state: ByteStreamHandle | None
    subtasks: list[SubtaskState]
    name: str | None = None
    uid: str | None = None
    fully_finished: bool = False
    finished_marker: int = -1
    legacy_chain_length: int | None = None
    offset: int = field(default=-1, compare=False, repr=False)

    @property
    def operator_name(self) -> str | None:
        """The operator name, None when absent."""
        return self.name or None

    @property
    def operator_uid(self) -> str | None:
        """The user-given uid, None when absent."""
        return self.uid or None

    @property
    def label(self) -> str:
        """How findings, exports and messages name the operator: its uid, else its name, else its id."""
        return self.operator_uid or self.operator_name or self.operator_id


@record
class CheckpointMetadata:
    """A decoded ``_metadata`` file.

    ``trailer`` holds the raw bytes after the last operator: the Java-serialized CheckpointProperties for
    version 4+, normally nothing for versions 2 and 3; ``trailer_offset`` is where it starts in the file.
    ``properties`` is the decoded trailer, or None with ``properties_error`` saying why it could not be
    decoded. An undecodable trailer does not fail decoding (the operators are still readable), but Flink
    cannot load such a file: ``ObjectInputStream`` fails in ``MetadataV4Serializer`` (``verify`` reports it).
    """

    version: int
    checkpoint_id: int
    master_states: list[MasterState]
    operators: list[OperatorState]
    trailer: bytes = b""
    properties: CheckpointProperties | None = None
    properties_error: str | None = None
    dialect: MetadataDialect = MetadataDialect()
    trailer_offset: int | None = None

    @property
    def is_savepoint(self) -> bool | None:
        """True/False from the V4+ trailer; None when unknown (versions 2-3 or undecodable trailer)."""
        return None if self.properties is None else self.properties.is_savepoint

    def trailer_problem(self) -> Problem | None:
        """The error of a V4+ file whose CheckpointProperties trailer does not decode, else None: Flink reads
        it with an ``ObjectInputStream`` (``MetadataV4Serializer``) and refuses the whole file when it does not
        decode (``EOFException``, ``StreamCorruptedException``, ``InvalidClassException``, ...), although every
        operator before it is readable. The one rule verify and inspect both apply."""
        if self.version < 4 or self.properties is not None:
            return None
        return Problem(
            "metadata_trailer_undecodable",
            f"the CheckpointProperties trailer ({len(self.trailer)} bytes at offset {self.trailer_offset}) does not decode: "
            f"{self.properties_error}; Flink cannot load this _metadata (MetadataV4Serializer reads it with an ObjectInputStream)",
            offset=self.trailer_offset, expected="a Java-serialized org.apache.flink.runtime.checkpoint.CheckpointProperties",
            found=f"{len(self.trailer)} bytes that do not decode",
        )

    def operator(self, operator_id: str) -> OperatorState | None:
        for op in self.operators:
            if op.operator_id == operator_id:
                return op
        return None

    def map_stream_handles(self, fn) -> None:
        """Replace every stream handle ``s`` in the file by ``fn(s)``, in place (see ``flink_handles.map_stream_handles``)."""
        for op in self.operators:
            op.coordinator_state = map_stream_handles(op.coordinator_state, fn)
            for sub in op.subtasks:
                for slot in ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state"):
                    setattr(sub, slot, map_stream_handles(getattr(sub, slot), fn))
                sub.input_channel_state = [map_stream_handles(h, fn) for h in sub.input_channel_state]
                sub.result_subpartition_state = [map_stream_handles(h, fn) for h in sub.result_subpartition_state]

    def iter_stream_handles(self) -> Iterator[tuple[str, StreamHandle]]:
        """Every stream handle in the file, with a readable path such as ``op/<id>/subtask/0/managed_keyed_state/shared/000012.sst``."""
        for op in self.operators:
            base = f"op/{op.operator_id}"
            yield from iter_stream_handles(op.coordinator_state, base + "/coordinator_state")
            for sub in op.subtasks:
                for slot, handle in sub.handles():
                    yield from iter_stream_handles(handle, f"{base}/subtask/{sub.index}/{slot}")


# -- decoding ----------------------------------------------------------------------------------------


def decode_metadata(data: bytes) -> CheckpointMetadata:
    """Decode the bytes of a ``_metadata`` file (any version Flink 1.x/2.x writes, see module docstring)."""
    reader = ByteReader(data)
    reader.expect_i32(METADATA_MAGIC, "metadata magic number")
    at = reader.offset
    version = reader.i32("metadata format version")
    if version not in SUPPORTED_VERSIONS:
        raise FormatError("metadata format version", at, f"one of {SUPPORTED_VERSIONS}", version)
    body = reader.pos
    if version != 3:
        # Only version 3 was written by releases that differ in handle layouts (1.11 .. 1.15).
        codec = 2 if version >= 6 else 1
        return _MetadataDecoder(data, body, version, MetadataDialect(HandleDialect(channel_codec=codec))).run()
    primary = _MetadataDecoder(data, body, version, MetadataDialect())
    try:
        result = primary.run()
    except FormatError as error:
        result, failure = None, error
    else:
        failure = None
        if not result.trailer:
            return _prefer_channel_consistent(result, data, body)
    # Failed or left bytes over: retry the other writers' layouts if the file has such handles.
    for dialect in _alternative_dialects(primary.handles):
        try:
            candidate = _MetadataDecoder(data, body, version, dialect).run()
        except FormatError:
            continue
        if not candidate.trailer:
            return candidate
    if failure is not None:
        raise failure
    return result


def _alternative_dialects(seen: HandleDecoder) -> list[MetadataDialect]:
    out = []
    if seen.seen_changelog_v1_codes:
        out.append(MetadataDialect(HandleDialect(changelog_layout=ChangelogLayout.FLINK_1_14)))
    if seen.seen_channel_state:
        out.append(MetadataDialect(HandleDialect(channel_subtask_index=False)))
    return out


def _prefer_channel_consistent(result: CheckpointMetadata, data: bytes, body: int) -> CheckpointMetadata:
    """A V3 file whose channel handles parse with a subtask index that is not the owning subtask's index
    may be a 1.11 file that happens to parse both ways; prefer the 1.11 reading if it is clean."""
    mismatched = any(
        getattr(handle, "subtask_index", sub.index) != sub.index
        for op in result.operators
        for sub in op.subtasks
        for handle in sub.input_channel_state + sub.result_subpartition_state
    )
    if not mismatched:
        return result
    try:
        other = _MetadataDecoder(data, body, 3, MetadataDialect(HandleDialect(channel_subtask_index=False))).run()
    except FormatError:
        return result
    return other if not other.trailer else result


class _MetadataDecoder:
    """One decoding attempt of the body after magic and version, under one dialect."""

    def __init__(self, data: bytes, body: int, version: int, dialect: MetadataDialect):
        self.r = ByteReader(data, body)
        self.version = version
        self.dialect = dialect
        self.handles = HandleDecoder(self.r, dialect.handles)

    def run(self) -> CheckpointMetadata:
        r = self.r
        at = r.offset
        checkpoint_id = r.i64("checkpoint id")
        if checkpoint_id < 0:
            raise FormatError("checkpoint id", at, "a checkpoint id >= 0", checkpoint_id)
        count = r.count("master state count", item_size=_MIN_MASTER_STATE)
        masters = [self.master_state() for _ in range(count)]
        min_operator = (4 if self.version >= 5 else 0) + 8 + 8 + 4 + 4 + (4 if self.version == 2 else 1) + 4
        count = r.count("operator state count", item_size=min_operator)
        operators = [self.operator_state(i) for i in range(count)]
        trailer = r.raw(r.remaining, "trailer")
        trailer_offset = r.base + r.end - len(trailer)
        metadata = CheckpointMetadata(self.version, checkpoint_id, masters, operators, trailer, dialect=self.dialect,
                                      trailer_offset=trailer_offset)
        if self.version >= 4:
            try:
                metadata.properties = decode_checkpoint_properties(trailer, base=trailer_offset)
            except RepairError as error:
                metadata.properties_error = str(error)
        return metadata

    def master_state(self) -> MasterState:
        """``deserializeMasterState``: magic, length, then version, name and payload filling the length."""
        r = self.r
        at = r.offset
        r.expect_i32(MASTER_STATE_MAGIC, "master state magic number")
        length_at = r.offset
        length = r.i32("master state length")
        if length <= 0 or length > r.remaining:
            raise FormatError("master state length", length_at, f"1..{r.remaining}", length)
        inner = ByteReader(r.data, r.pos, r.pos + length, base=r.base)
        r.skip(length, "master state")
        version = inner.i32("master state version")
        name = read_utf(inner, "master state name")
        payload = inner.raw(inner.count("master state payload length"), "master state payload")
        if not inner.at_end():
            raise FormatError("master state", inner.offset, "no bytes after the payload", f"{inner.remaining} trailing bytes")
        return MasterState(name, version, payload, offset=at)

    def operator_state(self, index: int) -> OperatorState:
        """``MetadataV3Serializer``/``MetadataV5Serializer.deserializeOperatorState`` (and V2's)."""
        r = self.r
        at = r.offset
        name = uid = None
        if self.version >= 5:
            name = read_utf(r, "operator name")
            uid = read_utf(r, "operator uid")
        operator_id = r.raw(16, "operator id").hex()
        parallelism_at = r.offset
        parallelism = r.i32("operator parallelism")
        max_at = r.offset
        max_parallelism = r.i32("operator max parallelism")
        if max_parallelism < 0 or max_parallelism > 1 << 15:
            raise FormatError("operator max parallelism", max_at, "0..32768", max_parallelism)
        if not 0 <= parallelism <= max_parallelism:
            # OperatorState's constructor: "Parallelism %s is not smaller or equal to max parallelism %s."
            raise FormatError("operator parallelism", parallelism_at, f"0..{max_parallelism} (the max parallelism)", parallelism)
        op = OperatorState(operator_id, parallelism, max_parallelism, None, [], name=name, uid=uid, offset=at)
        if self.version == 2:
            op.legacy_chain_length = r.i32("operator chain length")
            count = r.count("subtask count", item_size=_MIN_SUBTASK + 12)
            op.subtasks = [self.subtask_v2(parallelism) for _ in range(count)]
            return op
        coordinator_at = r.offset
        coordinator = self.handles.stream_handle("coordinator state")
        if coordinator is not None and not isinstance(coordinator, ByteStreamHandle):
            raise FormatError("coordinator state", coordinator_at, "a null or byte stream handle (0 or 1)", coordinator.type_code)
        op.coordinator_state = coordinator
        count_at = r.offset
        count = r.i32("subtask count")
        if count < 0:
            # Fully finished operator (1.14+): Flink writes -1 and accepts any negative value.
            if coordinator is not None:
                raise FormatError("coordinator state", coordinator_at, "none for a fully finished operator", "a handle")
            op.fully_finished, op.finished_marker = True, count
            return op
        if count > r.remaining // _MIN_SUBTASK:
            raise FormatError("subtask count", count_at, f"a count <= {r.remaining // _MIN_SUBTASK}", count)
        op.subtasks = [self.subtask(parallelism) for _ in range(count)]
        return op

    def _check_index(self, index: int, at: int, parallelism: int) -> None:
        # OperatorState.putState throws IndexOutOfBoundsException outside [0, parallelism).
        if not 0 <= index < parallelism:
            raise FormatError("subtask index", at, f"0..{parallelism - 1} (parallelism {parallelism})", index)

    def subtask(self, parallelism: int) -> SubtaskState:
        r = self.r
        at = r.offset
        index = r.i32("subtask index")
        if index < 0:
            # A finished subtask (1.14+) is written as -index - 1.
            self._check_index(-index - 1, at, parallelism)
            return SubtaskState(-index - 1, finished=True, offset=at)
        self._check_index(index, at, parallelism)
        sub = SubtaskState(index, offset=at)
        self.subtask_body(sub)
        sub.input_channel_state = self.handles.channel_handles("input", "input channel state")
        sub.result_subpartition_state = self.handles.channel_handles("output", "result subpartition state")
        return sub

    def subtask_v2(self, parallelism: int) -> SubtaskState:
        """Version 2: ``int index, long (ignored), int legacyStateCount (must be 0)`` then the four slots."""
        r = self.r
        at = r.offset
        index = r.i32("subtask index")
        self._check_index(index, at, parallelism)
        ignored = r.i64("legacy subtask header")
        legacy_at = r.offset
        legacy = r.i32("legacy state count")
        if legacy > 0:
            raise FormatError("legacy state count", legacy_at, "0 (Flink <= 1.1 'Checkpointed' state is unsupported)", legacy)
        sub = SubtaskState(index, legacy_header=(ignored, legacy), offset=at)
        self.subtask_body(sub)
        return sub

    def subtask_body(self, sub: SubtaskState) -> None:
        """``MetadataV2V3SerializerBase.deserializeSubtaskState``: the four singleton slots."""
        sub.managed_operator_state = self._optional_operator_handle("managed operator state")
        sub.raw_operator_state = self._optional_operator_handle("raw operator state")
        sub.managed_keyed_state = self.handles.keyed_handle("managed keyed state")
        sub.raw_keyed_state = self.handles.keyed_handle("raw keyed state")

    def _optional_operator_handle(self, field_name: str) -> OperatorStateHandle | None:
        # serializeSingleton writes int 1 + handle, or int 0.
        r = self.r
        at = r.offset
        flag = r.i32(field_name + " present")
        if flag not in (0, 1):
            raise FormatError(field_name + " present", at, "0 or 1", flag)
        return self.handles.operator_handle(field_name) if flag else None


# -- encoding ----------------------------------------------------------------------------------------


def encode_metadata(metadata: CheckpointMetadata) -> bytes:
    """Write ``metadata`` as Flink's serializer of ``metadata.version`` would (the trailer is copied raw)."""
    w = ByteWriter()
    # The channel-state codec follows from the version (ChannelStateHandleSerializerV2 from version 6 on).
    dialect = replace(metadata.dialect.handles, channel_codec=2 if metadata.version >= 6 else 1)
    handles = HandleEncoder(w, dialect)
    w.i32(METADATA_MAGIC)
    w.i32(metadata.version)
    w.i64(metadata.checkpoint_id)
    w.i32(len(metadata.master_states))
    for master in metadata.master_states:
        inner = ByteWriter()
        inner.i32(master.version)
        inner.utf(master.name)
        inner.i32(len(master.payload))
        inner.raw(master.payload)
        w.i32(MASTER_STATE_MAGIC)
        w.i32(len(inner))
        w.raw(inner.getvalue())
    w.i32(len(metadata.operators))
    for op in metadata.operators:
        _encode_operator(w, handles, op, metadata.version)
    w.raw(metadata.trailer)
    return w.getvalue()


def _encode_operator(w: ByteWriter, handles: HandleEncoder, op: OperatorState, version: int) -> None:
    if version >= 5:
        w.utf(op.name or "")
        w.utf(op.uid or "")
    w.raw(bytes.fromhex(op.operator_id))
    w.i32(op.parallelism)
    w.i32(op.max_parallelism)
    if version == 2:
        w.i32(op.legacy_chain_length if op.legacy_chain_length is not None else 1)
        w.i32(len(op.subtasks))
        for sub in op.subtasks:
            w.i32(sub.index)
            ignored, legacy = sub.legacy_header or (-1, 0)
            w.i64(ignored)
            w.i32(legacy)
            _encode_subtask_body(w, handles, sub)
        return
    handles.stream_handle(op.coordinator_state)
    if op.fully_finished:
        w.i32(op.finished_marker)
        return
    w.i32(len(op.subtasks))
    for sub in op.subtasks:
        if sub.finished:
            w.i32(-sub.index - 1)
            continue
        w.i32(sub.index)
        _encode_subtask_body(w, handles, sub)
        handles.channel_handles(sub.input_channel_state)
        handles.channel_handles(sub.result_subpartition_state)


def _encode_subtask_body(w: ByteWriter, handles: HandleEncoder, sub: SubtaskState) -> None:
    for handle in (sub.managed_operator_state, sub.raw_operator_state):
        if handle is None:
            w.i32(0)
        else:
            w.i32(1)
            handles.operator_handle(handle)
    handles.keyed_handle(sub.managed_keyed_state)
    handles.keyed_handle(sub.raw_keyed_state)
