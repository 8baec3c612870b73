"""Read the timers a subtask's raw keyed state holds (the RocksDB backend with timers on the heap).

The raw keyed state of a keyed subtask is a ``KeyGroupsStateHandle``: a stream and the offset of each
key group in it. When the job runs RocksDB with ``state.backend.rocksdb.timer-service.factory: HEAP``,
every checkpoint writes the operator's timers there (:mod:`repair.formats.flink.full_snapshot.raw_timers`); otherwise
the stream is the operator's own bytes, or absent. The first key group's identifier tells the two apart
(:func:`timers_or_reason`).

The interface is the one of :mod:`repair.readers.rocksdb`: one :class:`StateStream` per timer state
(``_timer_state/event_<service>``, ``_timer_state/processing_<service>``), in name order, with rows in
the shape of :mod:`repair.formats.flink.in_rocksdb.keyed_rows`, the rows RocksDB timers and heap snapshots give.
The services come from the first key group (Flink writes every registered service into every key
group); a key group naming another service is an error, never a silent loss. One key group's bytes
are in memory at a time.
"""

from __future__ import annotations

import copy
from typing import Any, Collection, Iterator

from repair.errors import FormatError, RepairError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.random_access import BytesSource, RandomAccess, read_exactly
from repair.formats.flink.backend_meta import StateMetaInfo, set_meta_kryo_generation
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder
from repair.formats.flink.full_snapshot.raw_timers import (
    TIMER_KINDS,
    VERSIONED_IDENTIFIER,
    ServiceTimers,
    TimerService,
    looks_like_timers,
    read_timer_key_group,
    timer_states,
)
from repair.formats.flink.handles import KeyGroupRange, KeyGroupsHandle
from repair.formats.flink.metadata import generation_of_metadata_version
from repair.io import storage as st
from repair.io.resolved import read_resolved
from repair.io.snapshot import LoadedSnapshot
from repair.readers.full_snapshot import delegate_name, resolve_delegate, streams_of_delegate
from repair.readers.rocksdb import StateStream

#: ``KeyGroupRangeOffsets``' offset of a key group the stream never started (custom raw state only).
NO_OFFSET = -1


def raw_key_group_blocks(key_groups: KeyGroupRange, offsets: list[int], size: int) -> list[tuple[int, int, int]]:
    """``(key group, start, end)`` of every key group a raw keyed state stream of ``size`` bytes started,
    in the order of the range. Unlike a full snapshot's, the first key group starts at offset 0; a
    block ends where the next one (by offset) starts, the last at the end of the stream."""
    if len(offsets) != key_groups.count:
        raise FormatError("raw keyed state offsets", 0, f"one per key group ({key_groups.count})", len(offsets))
    for i, offset in enumerate(offsets):
        if offset != NO_OFFSET and not 0 <= offset <= size:  # == size: a key group started with nothing after it
            raise FormatError(f"offset of key group {key_groups.start + i}", offset, f"a position in the stream (0..{size})", offset)
    starts = sorted({o for o in offsets if o != NO_OFFSET})
    ends = dict(zip(starts, starts[1:] + [size]))
    return [(key_groups.start + i, o, ends[o]) for i, o in enumerate(offsets) if o != NO_OFFSET]


def timers_or_reason(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle) -> str | None:
    """None when ``handle`` (a raw keyed state) holds timers, else why it is not exported."""
    resolved = resolve_delegate(snapshot, handle)
    try:
        blocks = raw_key_group_blocks(handle.key_groups, handle.offsets, resolved.size)
        if not blocks:
            return "raw keyed state without key groups"
        first = min(start for _, start, _ in blocks)
        head = read_resolved(storage, resolved, length=first + 4)[first:]
    except RepairError as error:
        raise error.in_source(delegate_name(snapshot, resolved)) from None
    return None if looks_like_timers(head) else "raw keyed state the operator wrote itself (opaque bytes, not timers)"


def read_raw_timer_services(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle) -> list[TimerService]:
    """The timer services of a raw keyed state of timers (those of its first key group)."""
    resolved = resolve_delegate(snapshot, handle)
    try:
        blocks = raw_key_group_blocks(handle.key_groups, handle.offsets, resolved.size)
        first_end = min(blocks, key=lambda block: block[1])[2] if blocks else 0
        services = first_key_group_services(BytesSource(read_resolved(storage, resolved, length=first_end)), blocks)
    except RepairError as error:
        raise error.in_source(delegate_name(snapshot, resolved)) from None
    if services is None:
        raise FormatError("raw keyed state", 0, "timers (they start with " + VERSIONED_IDENTIFIER.hex() + ")", "other bytes").in_source(
            delegate_name(snapshot, resolved))
    return services


def first_key_group_services(source: RandomAccess, blocks: list[tuple[int, int, int]]) -> list[TimerService] | None:
    """The timer services of the first key group (by offset) of ``blocks`` in ``source``; None when
    the stream does not hold timers (its first key group lacks their identifier) or no key group."""
    if not blocks:
        return None
    key_group, start, end = min(blocks, key=lambda block: block[1])
    data = bytes(read_exactly(source, start, end - start, f"key group {key_group}"))
    if not looks_like_timers(data):
        return None
    return [section.service for section in read_timer_key_group(data, key_group, base=start)]


def raw_timer_states(services: list[TimerService]) -> list[StateMetaInfo]:
    """The timer states of ``services``, in name order."""
    return [state for state, _, _ in _timer_states(services)]


def _timer_states(services: list[TimerService]) -> list[tuple[StateMetaInfo, str, str]]:
    """``(state, service name, timer kind)`` of every timer state of ``services``, in state-name order."""
    found = [(state, service.name, kind) for service in services for state, kind in zip(timer_states(service), TIMER_KINDS)]
    return sorted(found, key=lambda item: item[0].name)


def iter_raw_timers(source: RandomAccess, key_groups: KeyGroupRange, offsets: list[int], services: list[TimerService],
                    *, states: Collection[str] | None = None, kryo_generation: int | None = None) -> Iterator[StateStream]:
    """One :class:`StateStream` per timer state of ``services`` (read from the first key group) in the
    raw keyed state stream ``source``; ``states`` limits it to those names. ``kryo_generation``: the one
    Kryo keys are read in (None: both are tried)."""
    blocks = raw_key_group_blocks(key_groups, offsets, source.size)
    by_name = {service.name: service for service in services}
    for state, service, kind in _timer_states(services):
        if states is None or state.name in states:
            if kryo_generation is not None:  # a copy: the services stay comparable with each key group's
                state = copy.deepcopy(state)
                set_meta_kryo_generation([state], kryo_generation)
            yield StateStream(state.name, state.kind, state, _rows(source, blocks, by_name, state, service, kind))


def _rows(source: RandomAccess, blocks: list[tuple[int, int, int]], services: dict[str, TimerService],
          state: StateMetaInfo, service: str, kind: str) -> Iterator[dict[str, Any]]:
    """The rows of one service's timers of one kind, key group after key group (each block parsed whole)."""
    decoder = HeapStateDecoder(state, None)
    for key_group, start, end in blocks:
        data = bytes(read_exactly(source, start, end - start, f"key group {key_group}"))
        for section in read_timer_key_group(data, key_group, base=start):
            _check_service(section, services, key_group, start)
            if section.service.name == service:
                for element in section.timers[kind]:
                    yield from decoder.rows(ByteReader(element), key_group)


def _check_service(section: ServiceTimers, services: dict[str, TimerService], key_group: int, offset: int) -> None:
    planned = services.get(section.service.name)
    if planned != section.service:  # another name, or the same name with other serializers
        raise FormatError(f"key group {key_group} timer service", offset,
                          f"the services of the first key group ({', '.join(sorted(services))}) with the same serializers",
                          repr(section.service.name))


def iter_raw_timers_handle(snapshot: LoadedSnapshot, storage: st.Storage, handle: KeyGroupsHandle,
                           *, states: Collection[str] | None = None) -> Iterator[StateStream]:
    """The timer state streams of one subtask's raw keyed state (the file stays open until the
    iteration ends or the generator is closed; errors name the file)."""
    services = read_raw_timer_services(snapshot, storage, handle)
    generation = generation_of_metadata_version(snapshot.metadata.version)
    yield from streams_of_delegate(snapshot, storage, handle, lambda source: iter_raw_timers(
        source, handle.key_groups, handle.offsets, services, states=states, kryo_generation=generation))
