"""Timers that Flink wrote into *raw keyed state*: the RocksDB backend with its timers on the heap.

With ``state.backend.rocksdb.timer-service.factory: HEAP`` the RocksDB backend keeps timers in heap
priority queues and does not snapshot them itself. A checkpoint then writes them, per key group, into
the operator's raw keyed state stream (``InternalTimeServiceManagerImpl.snapshotToRawKeyedState``; a
savepoint in the canonical format writes them as keyed state instead, ``_timer_state/...`` like RocksDB
timers). Each key group of the stream (``KeyGroupsStateHandle`` offsets) holds what
``InternalTimerServiceSerializationProxy`` writes::

    bytes  F1 CD 85 9F       PostVersionedIOReadableWritable's identifier
    int    2                 the proxy version (Flink 1.6 onwards)
    int    services
    per timer service (the operator's names: "user-timers", "window-timers", ...):
        UTF    name
        key serializer snapshot, namespace serializer snapshot (writeVersionedSnapshot each)
        int    count, then count event-time timers
        int    count, then count processing-time timers

A timer there is ``key, namespace, long timestamp`` (``LegacyTimerSerializer``): no lengths, so only a
known key and namespace serializer tell where one ends.

Export gives these timers the rows of the state they are everywhere else, ``_timer_state/event_<name>``
and ``_timer_state/processing_<name>`` (:func:`timer_states`): :func:`read_timer_key_group` returns each
timer as the element ``TimerSerializer`` writes (timestamp with its sign bit flipped, key, namespace), the
bytes RocksDB timers and heap snapshots hold, so the same row decoder reads all three.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import ByteWriter, read_utf
from repair.formats.flink.backend_meta import BACKEND_STATE_TYPES, TIMER_STATE_PREFIX, StateMetaInfo
from repair.formats.flink.serializers import TIMER_SNAPSHOT, SerializerSnapshot, SnapshotReader
from repair.formats.flink.values import Decoder, decoder_for

#: ``PostVersionedIOReadableWritable.VERSIONED_IDENTIFIER``: the first bytes of every key group.
VERSIONED_IDENTIFIER = bytes.fromhex("f1cd859f")
#: ``InternalTimerServiceSerializationProxy.VERSION`` (since Flink 1.6; versioned serializer snapshots).
PROXY_VERSION = 2
#: Timer kinds, in the order a service writes them, and the state name prefix of each.
TIMER_KINDS = ("event", "processing")
#: The fewest bytes a timer takes (its timestamp; a key and namespace may be empty).
_MIN_TIMER_SIZE = 8
_I64 = struct.Struct(">q")
_SIGN_BIT = 1 << 63


def looks_like_timers(head: bytes) -> bool:
    """Whether a raw keyed state key group starting with ``head`` is one of timers (its identifier)."""
    return head[: len(VERSIONED_IDENTIFIER)] == VERSIONED_IDENTIFIER


def timer_state_name(kind: str, service: str) -> str:
    """``_timer_state/event_user-timers``: the state name Flink gives a service's timers of ``kind``."""
    return f"{TIMER_STATE_PREFIX}{kind}_{service}"


@dataclass(frozen=True)
class TimerService:
    """One timer service of a key group: its name and the serializers of its keys and namespaces."""

    name: str
    key_serializer: SerializerSnapshot
    namespace_serializer: SerializerSnapshot
    #: Both serializer snapshots as the stream holds them (``writeVersionedSnapshot`` each, key first).
    snapshot_bytes: bytes = field(default=b"", compare=False, repr=False)


@dataclass
class ServiceTimers:
    """The timers of one service in one key group, each as ``TimerSerializer`` element bytes."""

    service: TimerService
    timers: dict[str, list[bytes]] = field(default_factory=dict)


def timer_states(service: TimerService) -> list[StateMetaInfo]:
    """The priority-queue states of ``service``'s event and processing timers, as the keyed backend meta
    data of a RocksDB-timers or heap snapshot would describe them (a ``TimerSerializer`` of its key
    and namespace serializers)."""
    timer = SerializerSnapshot(TIMER_SNAPSHOT, 2, nested=[service.key_serializer, service.namespace_serializer], outer_version=2)
    return [StateMetaInfo(timer_state_name(kind, service.name), BACKEND_STATE_TYPES.index("PRIORITY_QUEUE"),
                          serializers=[("VALUE_SERIALIZER", timer)]) for kind in TIMER_KINDS]


def timer_state_meta_bytes(service: TimerService, kind: str) -> bytes:
    """The keyed backend meta info of ``service``'s timers of ``kind`` as a canonical savepoint of the
    same job holds it (``StateMetaInfoSnapshotReadersWriters``, written by Flink's full snapshot of heap
    timers): its name, ``PRIORITY_QUEUE``, no options, and a ``VALUE_SERIALIZER``, the
    ``TimerSerializerSnapshot`` (a composite snapshot) of the service's key and namespace serializer
    snapshots, their bytes as the raw keyed state holds them."""
    if not service.snapshot_bytes:
        raise ValueError(f"timer service {service.name!r} was read without its serializer snapshots' bytes")
    w = ByteWriter()
    w.utf(timer_state_name(kind, service.name))
    w.i32(BACKEND_STATE_TYPES.index("PRIORITY_QUEUE"))
    w.i32(0)  # options
    w.i32(1)  # serializer snapshots
    w.utf("VALUE_SERIALIZER")
    w.i32(_SNAPSHOT_PROXY_VERSION)
    w.utf(TIMER_SNAPSHOT)
    w.i32(_COMPOSITE_SNAPSHOT_VERSION)
    w.i32(_COMPOSITE_MAGIC)
    w.i32(_TIMER_OUTER_VERSION)
    w.i32(_NESTED_MAGIC)
    w.i32(_NESTED_VERSION)
    w.i32(2)  # key, namespace
    w.raw(service.snapshot_bytes)
    return w.getvalue()


#: Timer kinds in the order Flink registers a service's queues (``InternalTimerServiceImpl``: processing
#: time first), the order a canonical savepoint's meta data lists them in.
REGISTRATION_ORDER = ("processing", "event")
# ``TypeSerializerSnapshotSerializationProxy`` version; ``CompositeTypeSerializerSnapshot``'s version
# and magic number; ``TimerSerializerSnapshot``'s outer version; ``NestedSerializersSnapshotDelegate``'s
# magic number and version.
_SNAPSHOT_PROXY_VERSION = 2
_COMPOSITE_SNAPSHOT_VERSION = 3
_COMPOSITE_MAGIC = 911108
_TIMER_OUTER_VERSION = 2
_NESTED_MAGIC = 1333245
_NESTED_VERSION = 1


def read_timer_key_group(data: bytes, key_group: int, *, base: int = 0) -> list[ServiceTimers]:
    """The timer services of one key group's bytes ``data`` (exactly its block: the timers must end
    where it does) and their timers. ``base`` is the offset of ``data`` in its file, for errors.

    Raises :class:`~repair.formats.flink.values.UnsupportedSerializerError` for a key or namespace
    serializer no decoder here reads (its timers cannot be told apart), :class:`FormatError` otherwise.
    """
    label = f"key group {key_group}"
    r = ByteReader(data, base=base)
    found = bytes(data[: len(VERSIONED_IDENTIFIER)])
    if found != VERSIONED_IDENTIFIER:
        raise FormatError(f"{label} timers identifier", base, VERSIONED_IDENTIFIER.hex(), found.hex(),
                          detail="raw keyed state of timers starts every key group with it")
    r.pos = len(VERSIONED_IDENTIFIER)
    r.expect_i32(PROXY_VERSION, f"{label} timer services version")
    count = r.count(f"{label} timer service count", item_size=2)
    services = []
    for _ in range(count):
        name = read_utf(r, f"{label} timer service name")
        snapshots, at = SnapshotReader(r), r.pos
        key_snapshot, namespace_snapshot = snapshots.versioned(), snapshots.versioned()
        service = TimerService(name, key_snapshot, namespace_snapshot, bytes(r.data[at : r.pos]))
        if any(s.service.name == name for s in services):
            raise FormatError(f"{label} timer service name", r.offset, "one service per name", f"{name!r} twice")
        key, namespace = decoder_for(service.key_serializer), decoder_for(service.namespace_serializer)
        section = ServiceTimers(service)
        for kind in TIMER_KINDS:
            timers = r.count(f"{label} {kind}-time timer count of {name!r}", item_size=_MIN_TIMER_SIZE)
            section.timers[kind] = [_element(r, key, namespace, f"{label} {kind}-time timer of {name!r}") for _ in range(timers)]
        services.append(section)
    if not r.at_end():
        raise FormatError(label, r.offset, f"the end of its timers after {len(services)} timer services", f"{r.remaining} more bytes")
    return services


def _element(r: ByteReader, key: Decoder, namespace: Decoder, label: str) -> bytes:
    """One ``key, namespace, long timestamp`` timer, as ``TimerSerializer`` writes it (timestamp first,
    its sign bit flipped, then the same key and namespace bytes)."""
    start = r.pos
    try:
        key.read(r)
        namespace.read(r)
    except FormatError as error:
        error.message = f"{label}: {error.message}"
        raise
    parts = bytes(r.data[start : r.pos])
    timestamp = r.i64(f"{label} timestamp")
    return _I64.pack(timestamp ^ -_SIGN_BIT) + parts
