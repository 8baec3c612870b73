"""Operator (non-keyed) state files: the bytes behind an operator state handle, decoded into rows.

Layout (``DefaultOperatorStateBackendSnapshotStrategy`` writes, ``OperatorStateRestoreOperation`` reads;
the same from 1.11 to 2.x)::

    OperatorBackendSerializationProxy   (flink_backend_meta: version, compression flag from 1.18,
                                         operator-state and broadcast-state meta infos)
    then every state, operator states first, broadcast states second:
      list state   (PartitionableListState.write): the elements, each by the VALUE_SERIALIZER;
                   the handle's offsets[i] is where element i starts
      broadcast    (HeapBroadcastState.write): int n, then n x (key by KEY_SERIALIZER, value by
                   VALUE_SERIALIZER); one offset

The distribution mode (SPLIT_DISTRIBUTE, UNION, BROADCAST) and the offsets of each state are in the
handle (``_metadata``), the state names and serializers in the file. A state's elements are contiguous
and its data ends where the next state's begins (or at the end of the file), so elements are decoded
one after the other from the state's first offset and must fill its data exactly; each offset is checked
against where its element really starts.

With snapshot compression (proxy flag set, 1.18+) everything after the proxy is Snappy framed
(``SnappyStreamCompressionDecorator``): 1.18 writes one stream per state, 1.19+ one for all. An offset is
then the raw offset of the chunk holding the element's first byte: 1.20+ flushes before each element, so
each element starts a chunk; 1.18.1 did not, so several elements may name the same chunk (decoding them
in sequence still gives every element).

Rows have the keys of :data:`~repair.formats.flink.in_rocksdb.keyed_rows.ROW_FIELDS`; ``key_group``, ``key`` and
``namespace`` are None. List and union list states give one row per element (``value``, ``value_raw``,
``list_index`` = position in the subtask's list); broadcast states one row per entry (``user_key``,
``user_key_raw``, ``value``, ``value_raw``). A serializer this toolkit cannot decode gives raw bytes and
``error`` (elements are then told apart by their offsets); corrupt bytes raise :class:`FormatError`.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any, Iterator, Mapping, Sequence

from repair.errors import FormatError, RepairError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.backend_meta import (
    OPERATOR_STATE_DISTRIBUTION_MODE,
    OperatorBackendMeta,
    StateMetaInfo,
    decode_operator_backend_meta,
)
from repair.formats.flink.full_snapshot.canonical import SNAPPY_STREAM_IDENTIFIER, encode_snappy_framed_chunks, iter_snappy_chunks
from repair.formats.flink.handles import OperatorStateEntry
from repair.formats.flink.in_rocksdb.keyed_rows import ROW_FIELDS
from repair.formats.flink.values import decoder_for
from repair.formats.records import record

#: ``StateMetaInfoSnapshot.BackendStateType`` ordinals of operator and broadcast states.
_OPERATOR, _BROADCAST = 1, 2


@record
class OperatorStateInfo:
    """One state of an operator state handle: its meta info from the file, and from the handle its
    distribution mode (``SPLIT_DISTRIBUTE``, ``UNION`` or ``BROADCAST``) and partition offsets."""

    name: str
    mode: str
    meta: StateMetaInfo
    offsets: tuple[int, ...]

    @property
    def kind(self) -> str:
        """``operator-list``, ``union-list`` or ``broadcast``."""
        return self.meta.kind


def operator_row(state: OperatorStateInfo, **fields: Any) -> dict[str, Any]:
    """A row of ``state`` with ``fields`` set and every other key of ROW_FIELDS None."""
    row = dict.fromkeys(ROW_FIELDS)
    row.update(state=state.name, kind=state.kind, **fields)
    return row


class _Stream:
    """The bytes of one state's data: ``data[start:end]``, or those chunks decompressed.

    For compressed data ``chunk_starts`` / ``chunk_offsets`` map positions in ``payload`` to the raw
    offset of the chunk holding them. :meth:`reader` reports file
    offsets for uncompressed data, positions in ``payload`` otherwise (see :meth:`in_context`).
    """

    def __init__(self, data: bytes, start: int, end: int, compressed: bool):
        self.compressed = compressed
        self.start = start
        self.base = 0 if compressed else start
        if not compressed:
            self.payload, self.chunk_starts, self.chunk_offsets = data[start:end], [], []
            return
        parts, self.chunk_starts, self.chunk_offsets = [], [], []
        size = 0
        for at, payload in iter_snappy_chunks(data, start, end):
            if payload:
                self.chunk_starts.append(size)
                self.chunk_offsets.append(at)
                parts.append(payload)
                size += len(payload)
        self.payload = b"".join(parts)

    def reader(self) -> ByteReader:
        return ByteReader(self.payload, base=self.base)

    def raw_offset(self, pos: int) -> int:
        """The raw offset of ``pos`` (uncompressed), or of the chunk holding it (the start of the data when
        it has no chunk)."""
        if not self.compressed:
            return self.start + pos
        i = bisect.bisect_right(self.chunk_starts, pos) - 1
        return self.chunk_offsets[i] if i >= 0 else self.start

    def position(self, offset: int) -> int | None:
        """Where the element at raw ``offset`` starts in ``payload``; None if no chunk starts there."""
        if not self.compressed:
            return offset - self.start
        i = bisect.bisect_left(self.chunk_offsets, offset)
        return self.chunk_starts[i] if i < len(self.chunk_offsets) and self.chunk_offsets[i] == offset else None

    def in_context(self, error: RepairError, state: str) -> RepairError:
        if self.compressed and isinstance(error, FormatError):
            error.message = (f"state {state!r}, Snappy-compressed: {error.message} (uncompressed offset; in the chunk at "
                             f"offset {self.raw_offset(error.offset)})")
            error.offset = self.raw_offset(error.offset)
        else:
            error.message = f"state {state!r}: {error.message}"
        return error


class OperatorStateFile:
    """The decoded head of one operator state file and where each state's data is; rows on demand.

    ``data`` is the whole file (the handle's delegate), ``entries`` the handle's states. Raises
    :class:`FormatError` when the handle and the file disagree (a state the meta data does not have, a
    mode other than the meta data's, an offset outside the data).
    """

    def __init__(self, data: bytes, entries: Sequence[OperatorStateEntry]):
        self.data = data
        self.meta: OperatorBackendMeta = decode_operator_backend_meta(data)
        self.compressed = bool(self.meta.compression)
        known = {info.name: info for info in self.meta.operator_states + self.meta.broadcast_states}
        self.states: list[OperatorStateInfo] = []
        for entry in entries:
            meta = known.get(entry.name) or self._missing(entry)
            state = OperatorStateInfo(entry.name, entry.mode_name, meta, tuple(entry.offsets))
            self._check(state)
            self.states.append(state)
        self.states.sort(key=lambda s: s.name)
        self._starts = sorted({o for s in self.states for o in s.offsets[:1]} | {len(data)})

    def state(self, name: str) -> OperatorStateInfo | None:
        for state in self.states:
            if state.name == name:
                return state
        return None

    def _missing(self, entry: OperatorStateEntry) -> StateMetaInfo:
        if self.meta.end_offset is not None:
            raise FormatError("operator state meta data", 0, f"a meta info of state {entry.name!r} (named by the handle)", "none")
        # The meta data could not be read to its end: keep the state, its rows get raw bytes.
        backend = _BROADCAST if entry.mode_name == "BROADCAST" else _OPERATOR
        return StateMetaInfo(entry.name, backend, [(OPERATOR_STATE_DISTRIBUTION_MODE, entry.mode_name)],
                             problem="not in the readable part of the meta data: " + "; ".join(self.meta.problems))

    def _check(self, state: OperatorStateInfo) -> None:
        declared = state.meta.option(OPERATOR_STATE_DISTRIBUTION_MODE)
        if declared is not None and declared != state.mode:
            raise FormatError(f"distribution mode of state {state.name!r}", state.meta.offset, declared, f"{state.mode} (in the handle)")
        first = self.meta.end_offset or 0
        for i, offset in enumerate(state.offsets):
            if not first <= offset < len(self.data):
                raise FormatError(f"offset {i} of state {state.name!r}", offset, f"a position in {first}..{len(self.data) - 1}", offset)
        if state.mode == "BROADCAST" and len(state.offsets) != 1:
            raise FormatError(f"offsets of broadcast state {state.name!r}", 0, "one offset", len(state.offsets))

    def rows(self, name: str) -> Iterator[dict[str, Any]]:
        """The rows of state ``name``, in list order (broadcast states: in the order written)."""
        state = self.state(name)
        if state is None:
            raise KeyError(name)
        if not state.offsets:
            return
        start = state.offsets[0]
        end = self._starts[bisect.bisect_right(self._starts, start)]
        try:
            stream = _Stream(self.data, start, end, self.compressed)
        except FormatError as error:  # a damaged Snappy chunk: its offset is a file offset already
            error.message = f"state {name!r}: {error.message}"
            raise
        try:
            if state.mode == "BROADCAST":
                yield from _broadcast_rows(state, stream)
            else:
                yield from _list_rows(state, stream)
        except FormatError as error:
            raise stream.in_context(error, name) from None


def _list_rows(state: OperatorStateInfo, stream: _Stream) -> Iterator[dict[str, Any]]:
    element = decoder_for(state.meta.serializer("VALUE_SERIALIZER"))
    payload = stream.payload
    r = stream.reader()
    for i, offset in enumerate(state.offsets):
        start = r.pos
        if stream.raw_offset(start) != offset:
            raise FormatError(f"offset {i}", r.offset, f"{stream.raw_offset(start)} (where element {i} starts)", offset)
        try:
            value = element.read(r)
        except UnsupportedSerializerError as error:
            yield from _raw_elements(state, stream, i, str(error))
            return
        yield operator_row(state, value=value, value_raw=payload[start : r.pos], list_index=i)
    if not r.at_end():
        raise FormatError(f"end of the {len(state.offsets)} elements", r.offset, "the end of the state's data", f"{r.remaining} more bytes")


def _raw_elements(state: OperatorStateInfo, stream: _Stream, first: int, error: str) -> Iterator[dict[str, Any]]:
    """Rows with raw bytes only for elements ``first``.. of a state whose serializer is unknown, split at
    their offsets; when the offsets cannot split them (equal chunk offsets), one row holds them all."""
    bounds = [stream.position(o) for o in state.offsets[first:]] + [len(stream.payload)]
    if any(b is None for b in bounds) or any(a >= b for a, b in zip(bounds, bounds[1:])):
        yield operator_row(state, value_raw=stream.payload[bounds[0] or 0 :], list_index=first,
                           error=f"value: {error}; elements {first}..{len(state.offsets) - 1} cannot be told apart")
        return
    for i, (a, b) in enumerate(zip(bounds, bounds[1:]), first):
        yield operator_row(state, value_raw=stream.payload[a:b], list_index=i, error=f"value: {error}")


def _broadcast_rows(state: OperatorStateInfo, stream: _Stream) -> Iterator[dict[str, Any]]:
    key = decoder_for(state.meta.serializer("KEY_SERIALIZER"))
    value = decoder_for(state.meta.serializer("VALUE_SERIALIZER"))
    payload = stream.payload
    r = stream.reader()
    count = r.count("broadcast state entry count")
    rows = []
    try:
        for _ in range(count):
            key_at = r.pos
            user_key = key.read(r)
            value_at = r.pos
            decoded = value.read(r)
            rows.append(operator_row(state, user_key=user_key, user_key_raw=payload[key_at:value_at], value=decoded,
                                     value_raw=payload[value_at : r.pos]))
    except UnsupportedSerializerError as error:
        yield operator_row(state, value_raw=payload, error=f"value: {error}; the {count} entries cannot be told apart")
        return
    if not r.at_end():
        raise FormatError(f"end of the {count} entries", r.offset, "the end of the state's data", f"{r.remaining} more bytes")
    yield from rows


def replace_states(data: bytes, entries: Sequence[OperatorStateEntry],
                   elements: Mapping[str, Sequence[bytes]]) -> tuple[bytes, list[OperatorStateEntry]]:
    """An operator state file whose states named in ``elements`` hold those elements instead, and the
    handle's entries with their new offsets. A list state's elements are its values' bytes (one offset
    each); a broadcast state's are its entries' bytes (key then value), written after their count, as
    ``BackendWritableBroadcastState.write`` does (one offset).

    The head (meta data) and every other state's bytes are kept byte for byte (moved, their offsets
    shifted); each state's data stays where it was in the order of the file.

    A Snappy-compressed file (1.19+: one framed stream after the head, every element starting a chunk)
    keeps its stream identifier and every other state's chunks; the new elements are written as chunks
    of their own (:func:`encode_snappy_framed_chunks`), each offset the raw offset of its first chunk, as
    Flink's restore seeks there. Flink 1.18's layout (a stream per state, elements sharing chunks) is
    refused.
    """
    file = OperatorStateFile(data, entries)
    by_name = {entry.name: entry for entry in entries}
    for name in elements:
        if name not in by_name:
            raise FormatError("operator state", 0, "a state the handle names", repr(name))
    starts = sorted({entry.offsets[0] for entry in entries if entry.offsets} | {len(data)})
    pack = _check_one_snappy_stream(data, entries, starts[0]) if file.compressed and elements else (lambda payload: payload)
    out = bytearray(data[: starts[0]])
    offsets: dict[str, list[int]] = {}
    for entry in sorted(entries, key=lambda e: e.offsets[0] if e.offsets else len(data)):
        if entry.name in elements and entry.mode_name == "BROADCAST":
            offsets[entry.name] = [len(out)]
            out += pack(len(elements[entry.name]).to_bytes(4, "big", signed=True) + b"".join(elements[entry.name]))
        elif entry.name in elements:
            offsets[entry.name] = []
            for element in elements[entry.name]:
                offsets[entry.name].append(len(out))
                out += pack(element)
        elif entry.offsets:
            start = entry.offsets[0]
            end = starts[bisect.bisect_right(starts, start)]
            offsets[entry.name] = [offset - start + len(out) for offset in entry.offsets]
            out += data[start:end]
        else:
            offsets[entry.name] = []
    return bytes(out), [replace(entry, offsets=offsets[entry.name]) for entry in entries]


def _check_one_snappy_stream(data: bytes, entries: Sequence[OperatorStateEntry], first: int):
    """The chunk writer for a compressed file whose states are one Snappy stream (its identifier right
    before the first state's data, every element's offset its own); a :class:`FormatError` otherwise."""
    identifier_at = first - len(SNAPPY_STREAM_IDENTIFIER)
    if identifier_at < 0 or data[identifier_at:first] != SNAPPY_STREAM_IDENTIFIER:
        raise FormatError("Snappy stream identifier", max(identifier_at, 0), SNAPPY_STREAM_IDENTIFIER.hex(),
                          data[max(identifier_at, 0):first].hex(), detail="one compressed stream before the first state (Flink 1.19+)")
    for entry in entries:
        if len(set(entry.offsets)) != len(entry.offsets):
            raise FormatError(f"offsets of state {entry.name!r}", entry.offsets[0], "one chunk per element (Flink 1.19+)",
                              "elements sharing a chunk (Flink 1.18's layout, not rewritten)")
    return encode_snappy_framed_chunks
