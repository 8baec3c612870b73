"""State backend meta data: ``KeyedBackendSerializationProxy`` and ``OperatorBackendSerializationProxy``.

The keyed proxy is the content of an incremental handle's meta data handle and the header of every
full-snapshot key-group file (canonical savepoints; checkpoints and native savepoints of the heap backend)::

    int   proxyVersion              (6 in every release 1.11 .. 2.x; 5 still in the 1.8-era format)
    bool  usingKeyGroupCompression  (Snappy-framed key-group blocks in full snapshots)
    SNAP  keySerializerSnapshot     (see flink_serializers)
    short numStates, then per state (StateMetaInfoSnapshotReadersWriters$CurrentWriterImpl):
        UTF name, int backendStateType ordinal, int n + n x (UTF key, UTF value) options,
        int n + n x (UTF key, SNAP snapshot) serializers

The operator proxy (head of an operator state file) is ``int version``, ``bool compression`` (written by
1.18+ only, although the version stays 6), then ``short n`` operator-state meta infos and ``short n``
broadcast-state meta infos in the same per-state format.

Serializer snapshots are not length-framed. When one of an unknown class is met, the state keeps the
serializers decoded so far and a ``problem``; the decoder then looks for the next state header (a very
specific byte signature: name, backend type 0..4, known option and serializer keys, ``int 2``) and goes
on from there, so one exotic serializer does not hide the other states. ``resynchronized`` says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import read_utf
from repair.formats.flink.serializers import (
    SerializerSnapshot,
    SnapshotReader,
    UnknownSerializerSnapshotError,
    describe,
    opaque_snapshot,
    set_kryo_generation,
)
from repair.formats.records import record

#: ``StateMetaInfoSnapshot.BackendStateType`` by ordinal (KEY_VALUE_V2 exists from 2.0).
BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")
#: ``StateMetaInfoSnapshot.CommonOptionsKeys``.
KEYED_STATE_TYPE = "KEYED_STATE_TYPE"
OPERATOR_STATE_DISTRIBUTION_MODE = "OPERATOR_STATE_DISTRIBUTION_MODE"
KNOWN_OPTION_KEYS = (KEYED_STATE_TYPE, OPERATOR_STATE_DISTRIBUTION_MODE)
#: ``StateMetaInfoSnapshot.CommonSerializerKeys``.
KNOWN_SERIALIZER_KEYS = ("KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER", "USER_KEY_SERIALIZER")
#: Keyed proxy versions whose meta infos use the current layout (``getReader`` of version >= 5).
KEYED_PROXY_VERSIONS = (5, 6)
OPERATOR_PROXY_VERSIONS = (5, 6)

#: Prefix of timer-service column families (``InternalTimeServiceManagerImpl``).
TIMER_STATE_PREFIX = "_timer_state/"

_KEYED_KINDS = {
    "VALUE": "value",
    "LIST": "list",
    "MAP": "map",
    "REDUCING": "reducing",
    "AGGREGATING": "aggregating",
    "FOLDING": "folding",
    "UNKNOWN": "unknown",
}
_OPERATOR_KINDS = {"SPLIT_DISTRIBUTE": "operator-list", "UNION": "union-list", "BROADCAST": "broadcast"}


@record
class StateMetaInfo:
    """One registered state (``StateMetaInfoSnapshot``).

    ``options`` and ``serializers`` keep the order of the file. ``problem`` is set when a serializer
    snapshot could not be decoded; ``serializers`` then holds those decoded before it.
    """

    name: str
    backend_state_type: int
    options: list[tuple[str, str]] = field(default_factory=list)
    serializers: list[tuple[str, SerializerSnapshot]] = field(default_factory=list)
    problem: str | None = None
    unknown_snapshot_class: str | None = None
    offset: int = field(default=-1, compare=False, repr=False)

    @property
    def backend_type_name(self) -> str:
        return BACKEND_STATE_TYPES[self.backend_state_type]

    def option(self, key: str) -> str | None:
        for k, v in self.options:
            if k == key:
                return v
        return None

    def serializer(self, key: str) -> SerializerSnapshot | None:
        for k, v in self.serializers:
            if k == key:
                return v
        return None

    @property
    def keyed_state_type(self) -> str | None:
        """``StateDescriptor.Type`` name (VALUE, LIST, MAP, REDUCING, AGGREGATING, ...) of keyed states."""
        return self.option(KEYED_STATE_TYPE)

    @property
    def is_timer_state(self) -> bool:
        return self.backend_type_name == "PRIORITY_QUEUE" and self.name.startswith(TIMER_STATE_PREFIX)

    @property
    def kind(self) -> str:
        """What a user would call the state: value, list, map, reducing, aggregating, priority-queue,
        operator-list, union-list or broadcast ("unknown" if the file does not say)."""
        backend = self.backend_type_name
        if backend == "PRIORITY_QUEUE":
            return "priority-queue"
        if backend == "BROADCAST":
            return "broadcast"
        if backend == "OPERATOR":
            return _OPERATOR_KINDS.get(self.option(OPERATOR_STATE_DISTRIBUTION_MODE) or "", "operator-list")
        return _KEYED_KINDS.get(self.keyed_state_type or "UNKNOWN", "unknown")

    @property
    def has_ttl(self) -> bool:
        """True when the value serializer (or a list/map's element/value) is the TTL serializer."""
        value = self.serializer("VALUE_SERIALIZER")
        stack = [value] if value else []
        while stack:
            snap = stack.pop()
            if "TtlSerializerSnapshot" in snap.class_name:
                return True
            if snap.class_name.endswith(("ListSerializerSnapshot", "MapSerializerSnapshot")):
                stack.extend(snap.nested)
        return False

    def describe_value(self) -> str:
        """The value type as text, e.g. ``Long`` or ``Map<String, Long>``."""
        return describe(self.serializer("VALUE_SERIALIZER"))


@record
class KeyedBackendMeta:
    """A decoded ``KeyedBackendSerializationProxy``.

    ``declared_state_count`` is the count written; ``states`` may hold fewer when decoding had to stop
    (``problems`` says why). ``end_offset`` is where the proxy ended (the start of the key-group data in a
    full snapshot); None when decoding stopped early.
    """

    proxy_version: int
    key_group_compression: bool
    key_serializer: SerializerSnapshot | None
    declared_state_count: int
    states: list[StateMetaInfo]
    problems: list[str] = field(default_factory=list)
    resynchronized: bool = False
    end_offset: int | None = None

    @property
    def complete(self) -> bool:
        """Every declared state was found. Serializer snapshots of unknown classes do not count against
        it: they are opaque snapshots (their states' rows keep raw bytes), listed in ``problems``."""
        return len(self.states) == self.declared_state_count

    def state(self, name: str) -> StateMetaInfo | None:
        for s in self.states:
            if s.name == name:
                return s
        return None

    def state_info_bytes(self, data: bytes, name: str) -> bytes:
        """The bytes of state ``name``'s meta info in ``data`` (the bytes this meta data was decoded
        from): from its offset to the next state's, or to the proxy's end for the last state."""
        if not self.complete or self.end_offset is None:
            raise FormatError("keyed backend meta data", self.end_offset or 0, "complete meta data",
                              "; ".join(self.problems) or "decoding stopped early")
        for index, info in enumerate(self.states):
            if info.name == name:
                end = self.states[index + 1].offset if index + 1 < len(self.states) else self.end_offset
                return data[info.offset:end]
        raise KeyError(name)


@record
class OperatorBackendMeta:
    """A decoded ``OperatorBackendSerializationProxy``; ``compression`` is None for writers before 1.18."""

    proxy_version: int
    compression: bool | None
    operator_states: list[StateMetaInfo]
    broadcast_states: list[StateMetaInfo]
    problems: list[str] = field(default_factory=list)
    end_offset: int | None = None


class _MetaReader:
    def __init__(self, reader: ByteReader, *, ends_at_data_end: bool = False):
        self.r = reader
        self.snapshots = SnapshotReader(reader)
        #: True when the proxy is all of the data (an incremental handle's meta data file): the last
        #: serializer of the last state then ends at the end of the data.
        self.ends_at_data_end = ends_at_data_end
        self.skipped_to_end = False
        self.lost = False

    def state(self, last: bool = False) -> StateMetaInfo:
        """``CurrentReaderImpl.readStateMetaInfoSnapshot``. A serializer snapshot of an unknown class is
        kept as an opaque snapshot (:func:`opaque_snapshot`) and sets ``problem``; the reader then skips
        its payload to the next serializer key of the state (``KEY``, ``int 2``), or, for the state's
        last serializer of the proxy's ``last`` state, to the end of the data. Where no such anchor is
        found, ``self.lost`` is set and the reader is left inside the payload (the caller resyncs)."""
        r = self.r
        at = r.offset
        name = read_utf(r, "state name")
        type_at = r.offset
        backend_type = r.i32("backend state type")
        if not 0 <= backend_type < len(BACKEND_STATE_TYPES):
            raise FormatError("backend state type", type_at, f"0..{len(BACKEND_STATE_TYPES) - 1}", backend_type)
        info = StateMetaInfo(name, backend_type, offset=at)
        count = r.count("state option count", item_size=4)
        for _ in range(count):
            key = read_utf(r, "state option key")
            info.options.append((key, read_utf(r, "state option value")))
        count = r.count("state serializer count", item_size=2 + 4 + 6)
        for index in range(count):
            key = read_utf(r, "state serializer key")
            try:
                info.serializers.append((key, self.snapshots.top_level(f"{key} of state {name!r}")))
            except UnknownSerializerSnapshotError as error:
                problem = f"{key}: {error}"
                info.problem = problem if info.problem is None else f"{info.problem}; {problem}"
                info.unknown_snapshot_class = info.unknown_snapshot_class or error.class_name
                info.serializers.append((key, opaque_snapshot(error)))
                more = index + 1 < count
                if not (self.skip_to_serializer_key() if more else last and self.skip_to_end()):
                    self.lost = True
                    return info
        return info

    def skip_to_serializer_key(self) -> bool:
        """Move the reader to the next ``UTF serializer key, int 2`` (a state's next serializer)."""
        r = self.r
        for pos in range(r.pos, r.end - 8):
            probe = ByteReader(r.data, pos, r.end, base=r.base)
            try:
                if read_utf(probe, "probe") in KNOWN_SERIALIZER_KEYS and probe.i32("probe") == 2:
                    r.pos = pos
                    return True
            except FormatError:
                continue
        return False

    def skip_to_end(self) -> bool:
        """The proxy's last serializer ends where the data ends (only where the caller says so)."""
        if not self.ends_at_data_end:
            return False
        self.r.pos = self.r.end
        self.skipped_to_end = True
        return True

    def states(self, count: int, problems: list[str]) -> tuple[list[StateMetaInfo], bool, bool]:
        """Read ``count`` states, skipping the payloads of unknown snapshot classes (see :meth:`state`)
        and resynchronizing on the next state header where that is not possible.

        Returns the states, whether all were read to their end, and whether a resync happened.
        """
        states: list[StateMetaInfo] = []
        resynced = False
        while len(states) < count:
            self.lost = False
            info = self.state(last=len(states) + 1 == count)
            states.append(info)
            if info.problem is None:
                continue
            problems.append(f"state {info.name!r}: {info.problem}")
            if not self.lost:
                continue
            if len(states) == count or not self.resync():
                return states, False, resynced
            resynced = True
        return states, True, resynced

    def resync(self) -> bool:
        """Move the reader to the next position that carries a state header signature, if any."""
        r = self.r
        for pos in range(r.pos, r.end - 16):
            if _looks_like_state_header(r, pos):
                r.pos = pos
                return True
        return False


def read_state_meta_info(reader: ByteReader) -> StateMetaInfo:
    """One ``StateMetaInfoSnapshot`` (the current layout, versions 5 onwards) at ``reader``'s position;
    an unknown serializer snapshot class sets ``problem`` and leaves the reader inside its payload."""
    return _MetaReader(reader).state()


def _looks_like_state_header(r: ByteReader, pos: int) -> bool:
    probe = ByteReader(r.data, pos, r.end, base=r.base)
    try:
        length = probe.u16("probe")
        if not 1 <= length <= 4096:
            return False
        probe.pos = pos
        read_utf(probe, "probe")
        if not 0 <= probe.i32("probe") < len(BACKEND_STATE_TYPES):
            return False
        options = probe.i32("probe")
        if not 0 <= options <= 16:
            return False
        for _ in range(options):
            if read_utf(probe, "probe") not in KNOWN_OPTION_KEYS:
                return False
            read_utf(probe, "probe")
        serializers = probe.i32("probe")
        if not 1 <= serializers <= 8:
            return False
        return read_utf(probe, "probe") in KNOWN_SERIALIZER_KEYS and probe.i32("probe") == 2
    except FormatError:
        return False


def decode_keyed_backend_meta(data: bytes, offset: int = 0, *, ends_at_data_end: bool = False) -> KeyedBackendMeta:
    """Decode a ``KeyedBackendSerializationProxy`` starting at ``offset`` of ``data``.

    Structural corruption raises :class:`FormatError`; an unknown serializer snapshot class does not (see
    module docstring): it becomes an opaque snapshot, so only the columns it serializes stay raw.
    ``ends_at_data_end``: the proxy is all of ``data`` (an incremental handle's meta data file, or a full
    snapshot's head cut at its first key group), so an unknown last serializer ends there.
    """
    r = ByteReader(data, offset)
    at = r.offset
    version = r.i32("keyed backend proxy version")
    if version not in KEYED_PROXY_VERSIONS:
        raise FormatError("keyed backend proxy version", at, f"one of {KEYED_PROXY_VERSIONS}", version)
    compression = r.bool("key-group compression flag")
    reader = _MetaReader(r, ends_at_data_end=ends_at_data_end)
    problems: list[str] = []
    try:
        key_serializer = reader.snapshots.top_level("key serializer")
    except UnknownSerializerSnapshotError as error:
        problems.append(f"key serializer: {error}")
        key_serializer = opaque_snapshot(error)
        if not reader.resync() or r.pos - 2 < offset:
            return KeyedBackendMeta(version, compression, key_serializer, -1, [], problems)
        # The state count is the short right before the first state header.
        count = ByteReader(data, r.pos - 2).i16("state count")
        if count < 1:
            return KeyedBackendMeta(version, compression, key_serializer, -1, [], problems)
        states, _, _ = reader.states(count, problems)
        return KeyedBackendMeta(version, compression, key_serializer, count, states, problems, resynchronized=True)
    count_at = r.offset
    count = r.i16("state count")
    if count < 0:
        raise FormatError("state count", count_at, "a count >= 0", count)
    states, finished, resynced = reader.states(count, problems)
    exact_end = finished and not resynced and not reader.skipped_to_end
    return KeyedBackendMeta(version, compression, key_serializer, count, states, problems, resynced, r.pos if exact_end else None)


def decode_operator_backend_meta(data: bytes, offset: int = 0) -> OperatorBackendMeta:
    """Decode an ``OperatorBackendSerializationProxy`` starting at ``offset``.

    Flink 1.18 added a compression flag without changing the version (6), so the layout with the flag is
    tried first and the one without it second.
    """
    r = ByteReader(data, offset)
    at = r.offset
    version = r.i32("operator backend proxy version")
    if version not in OPERATOR_PROXY_VERSIONS:
        raise FormatError("operator backend proxy version", at, f"one of {OPERATOR_PROXY_VERSIONS}", version)
    try:
        return _operator_meta_body(data, r.pos, r.base, version, with_flag=True)
    except FormatError as first:
        try:
            return _operator_meta_body(data, r.pos, r.base, version, with_flag=False)
        except FormatError:
            raise first from None


def _operator_meta_body(data: bytes, pos: int, base: int, version: int, *, with_flag: bool) -> OperatorBackendMeta:
    r = ByteReader(data, pos, base=base)
    compression = r.bool("operator state compression flag") if with_flag else None
    reader = _MetaReader(r)
    problems: list[str] = []
    lists = []
    for label in ("operator state count", "broadcast state count"):
        count_at = r.offset
        count = r.i16(label)
        if count < 0:
            raise FormatError(label, count_at, "a count >= 0", count)
        states, finished, _ = reader.states(count, problems)
        lists.append(states)
        if not finished:
            return OperatorBackendMeta(version, compression, lists[0], lists[1] if len(lists) > 1 else [], problems)
        for info in states:
            expected = ("OPERATOR",) if label.startswith("operator") else ("BROADCAST",)
            if info.backend_type_name not in expected:
                raise FormatError("backend state type", info.offset, " or ".join(expected), info.backend_type_name)
    return OperatorBackendMeta(version, compression, lists[0], lists[1], problems, r.pos)


#: The keyed proxy is what "backend meta data" means for an incremental handle's meta handle and a
#: full snapshot's header; other modules use this name.
decode_backend_meta = decode_keyed_backend_meta


def set_meta_kryo_generation(meta: KeyedBackendMeta | OperatorBackendMeta | Iterable[StateMetaInfo], generation: int) -> None:
    """Mark the Kryo serializer snapshots of ``meta`` (a backend's meta data, or states) as written by
    Kryo ``generation`` (:func:`repair.formats.flink.serializers.set_kryo_generation`)."""
    if isinstance(meta, KeyedBackendMeta):
        snapshots, states = [meta.key_serializer], list(meta.states)
    elif isinstance(meta, OperatorBackendMeta):
        snapshots, states = [], meta.operator_states + meta.broadcast_states
    else:
        snapshots, states = [], list(meta)
    set_kryo_generation(snapshots + [snapshot for state in states for _, snapshot in state.serializers], generation)
