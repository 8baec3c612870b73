"""Streaming reads of the key groups of heap-backend full snapshots (``HeapSnapshotStrategy``).

Checkpoints (and native savepoints) of the heap state backend are ``KeyGroupsStateHandle`` files like
canonical savepoints, with the same keyed backend meta data at the head
(:mod:`repair.formats.flink.backend_meta`), but their key groups have a layout of their own. At the
handle's offset of every key group of its range (empty ones included)::

    int keyGroup
    per state, when the meta data's compression flag is set inside a Snappy framed stream of its own:
        short kvStateId
        int count
        count records   (serializer bytes only, see repair.formats.flink.full_snapshot.heap_rows)

Records carry no lengths, and a reader wants one state after the other, so reading takes two passes,
as for canonical snapshots (:mod:`repair.formats.flink.full_snapshot.canonical_stream`):

1. :func:`index_heap_key_groups` checks the framing of every key group and records where each state's
   block is (:class:`HeapRun`). Uncompressed, the next block starts where the last record ends, so it
   decodes every record; compressed, the Snappy stream identifiers tell where each block starts, and only
   the head of each block is read. A record of a serializer no decoder here reads (Kryo, a custom one)
   ends the index of its key group there (:attr:`HeapIndex.stopped`): the blocks before it stay readable.
2. :func:`iter_heap_state_rows` decodes the blocks of one state into rows, and checks that each block's
   records end exactly where the block does.

Memory is bounded by a window of a block's bytes (read :data:`~repair.formats.flink.full_snapshot.canonical_stream.READ_SIZE`
or one Snappy chunk at a time) that grows only as far as one record needs (bytes that do not decode
make it grow to the end of their block before the error is raised). Errors are
:class:`~repair.errors.FormatError` with the offset in the file (in a compressed block: of the chunk).
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, TypeVar

from repair.errors import FormatError, TruncatedError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.formats.flink.full_snapshot.canonical import SNAPPY_STREAM_IDENTIFIER
from repair.formats.flink.full_snapshot.canonical_stream import (
    MAX_SNAPPY_EXPANSION,
    key_group_blocks,
    plain_pieces,
    snappy_pieces,
)
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder
from repair.formats.flink.handles import KeyGroupRange

_I32 = struct.Struct(">i")
_T = TypeVar("_T")


@dataclass(frozen=True)
class HeapRun:
    """The block of one state in one key group: raw offsets of its start (the kvStateId, or the Snappy
    stream holding it) and end, and its number of records."""

    key_group: int
    start: int
    end: int
    records: int


@dataclass(frozen=True)
class HeapStop:
    """Where the index of a key group stopped: the state whose record no decoder here reads, and why."""

    state_id: int
    error: UnsupportedSerializerError


@dataclass
class HeapIndex:
    """Where the blocks of each state are, by kvStateId (the index into the meta data's state list)."""

    compressed: bool
    runs: dict[int, list[HeapRun]] = field(default_factory=dict)
    #: Key groups whose indexing stopped at a record of a serializer no decoder here reads (uncompressed,
    #: records carry no lengths, so the blocks after it cannot be found), by key group.
    stopped: dict[int, HeapStop] = field(default_factory=dict)

    def records(self, state_id: int) -> int:
        return sum(run.records for run in self.runs.get(state_id, ()))

    def unreadable(self, state_id: int) -> tuple[int, HeapStop] | None:
        """``(key group, stop)`` of the first key group where the block of this state was not found (it
        is, or comes after, a record that cannot be read); None when every block was found."""
        if not self.stopped:
            return None
        found = {run.key_group for run in self.runs.get(state_id, ())}
        return next(((group, stop) for group, stop in sorted(self.stopped.items()) if group not in found), None)


# -- the layout ----------------------------------------------------------------------------------------


def detect_heap_layout(source: RandomAccess, key_groups: KeyGroupRange, offsets: Sequence[int], *, compressed: bool) -> bool | None:
    """Whether the key groups of a full snapshot are in the heap backend's layout (True) or the
    canonical one (False); None when the bytes fit both (only key group 0 holds data, uncompressed).

    A heap block starts with ``int keyGroup``, then (compressed) a Snappy stream identifier; a canonical
    block starts with a ``short kvStateId`` and an ``int`` key length below 65536 (compressed: with the
    stream identifier). Key group 0 alone starts with four zero bytes either way. The first
    :data:`_DETECT_BLOCKS` blocks vote, so one damaged block does not change the verdict (its error
    then names it).
    """
    blocks = [(key_groups.start + i, offset) for i, offset in enumerate(offsets) if 0 < offset < source.size]
    telling = [(g, o) for g, o in blocks if compressed or g > 0][:_DETECT_BLOCKS]
    if not telling:
        return None if blocks else False
    votes = 0
    for key_group, offset in telling:
        head = bytes(read_exactly(source, offset, min(4 + len(SNAPPY_STREAM_IDENTIFIER), source.size - offset), "key group head"))
        if compressed:
            votes += head[4:] == SNAPPY_STREAM_IDENTIFIER
        else:
            votes += len(head) >= 4 and _I32.unpack_from(head)[0] == key_group
    return 2 * votes > len(telling)


#: Key-group blocks whose first bytes decide the layout.
_DETECT_BLOCKS = 16


# -- a window over a block's bytes -------------------------------------------------------------------------


class _Window:
    """The bytes of one block, taken from its pieces (raw reads or decompressed Snappy chunks) into a
    window that keeps what is not yet consumed and grows when a record needs more."""

    __slots__ = ("_pieces", "plain", "label", "buf", "pos", "_marks")

    def __init__(self, pieces: Iterator[tuple[int, int, bytes]], *, plain: bool, start: int, label: str):
        self._pieces = pieces
        #: names the block in errors of its pieces (a Snappy chunk)
        self.label = label
        #: raw bytes (True) or decompressed Snappy chunks (False)
        self.plain = plain
        self.buf = b""
        self.pos = 0
        #: ``(window position, raw offset)`` where each piece in the window starts
        self._marks: list[tuple[int, int]] = [(0, start)]

    def offset(self, at: int | None = None) -> int:
        """The raw offset of window position ``at`` (default: the next byte); in a compressed block, the
        offset of the Snappy chunk holding it."""
        at = self.pos if at is None else at
        i = bisect.bisect_right(self._marks, (at, float("inf"))) - 1
        mark_at, raw = self._marks[max(i, 0)]
        return raw + (at - mark_at) if self.plain else raw

    def _pull(self) -> bool:
        """Append the next piece (dropping what was consumed); False at the end of the block."""
        try:
            piece = next(self._pieces, None)
        except FormatError as error:  # a bad Snappy chunk: already at its raw offset
            raise FormatError(f"{self.label} {error.field}", error.offset, error.expected, error.found, detail=error.detail) from None
        if piece is not None:
            raw_at, _, data = piece
            if self.pos:
                keep = bisect.bisect_right(self._marks, (self.pos, float("inf"))) - 1
                self._marks = [(at - self.pos, raw) for at, raw in self._marks[max(keep, 0):]]
                if self._marks[0][0] < 0:  # the piece holding the next byte starts before it
                    at, raw = self._marks[0]
                    self._marks[0] = (0, raw - at if self.plain else raw)
                self.buf, self.pos = self.buf[self.pos :], 0
            self._marks.append((len(self.buf), raw_at))
            self.buf += data
            return True
        return False

    def at_end(self) -> bool:
        while self.pos >= len(self.buf):
            if not self._pull():
                return True
        return False

    def _grow(self) -> bool:
        """At least double the unconsumed part (so a record is retried O(log n) times at most)."""
        want = 2 * (len(self.buf) - self.pos) + 1
        grew = False
        while len(self.buf) - self.pos < want and self._pull():
            grew = True
        return grew

    def read(self, read: Callable[[ByteReader], _T], label: str) -> _T:
        """``read`` applied at the next byte; the window grows while ``read`` fails for want of bytes.
        Errors are relocated to raw offsets and labelled."""
        while True:
            r = ByteReader(self.buf, self.pos)
            try:
                value = read(r)
            except UnsupportedSerializerError as error:
                raise self._relocated(error, label) from None
            except FormatError as error:
                if self._grow():
                    continue
                raise self._relocated(error, label) from None
            self.pos = r.pos
            return value

    def _relocated(self, error: FormatError, label: str) -> FormatError:
        """``error`` (positions in the window) at its raw offset, its field prefixed with ``label``."""
        offset = self.offset(error.offset)
        if isinstance(error, UnsupportedSerializerError):
            return UnsupportedSerializerError(error.class_name, offset, detail=(
                f"{label}: {error.detail}; records of heap snapshots have no lengths, so the rest of the "
                "key group cannot be read without this serializer"))
        return FormatError(f"{label} {error.field}", offset, error.expected, error.found, detail=error.detail)


# -- pass 1: the index -----------------------------------------------------------------------------------------


def index_heap_key_groups(
    source: RandomAccess,
    key_groups: KeyGroupRange,
    offsets: Sequence[int],
    *,
    compressed: bool,
    decoders: Sequence[HeapStateDecoder],
) -> HeapIndex:
    """Check the framing of every key group of a heap snapshot in ``source`` and index the blocks of
    each state. ``decoders`` are the states' decoders by kvStateId (every state of the meta data)."""
    index = HeapIndex(compressed)
    for key_group, start, end in key_group_blocks(source, key_groups, offsets):
        label = f"key group {key_group}"
        head = bytes(read_exactly(source, start, min(4, end - start), label))
        if len(head) < 4:
            raise TruncatedError(label, start, 4, len(head))
        if _I32.unpack(head)[0] != key_group:
            raise FormatError(label, start, f"the key group {key_group} as an int (the heap backend's layout)", _I32.unpack(head)[0])
        seen: set[int] = set()
        if compressed:
            for stream_start, stream_end in _snappy_streams(source, start + 4, end, label):
                window = _Window(snappy_pieces(source, stream_start, stream_end), plain=False, start=stream_start, label=label)
                state_id, count = _checked_head(window, label, decoders, seen, stream_end - stream_start)
                index.runs.setdefault(state_id, []).append(HeapRun(key_group, stream_start, stream_end, count))
            continue
        window = _Window(plain_pieces(source, start + 4, end), plain=True, start=start + 4, label=label)
        state_id = -1
        try:
            while not window.at_end():
                block_start = window.offset()
                state_id, count = _checked_head(window, label, decoders, seen, end - block_start)
                skip = decoders[state_id].skip
                record_label = f"{label}, state {decoders[state_id].state.name!r} record"
                for _ in range(count):
                    window.read(skip, record_label)
                index.runs.setdefault(state_id, []).append(HeapRun(key_group, block_start, window.offset(), count))
        except UnsupportedSerializerError as error:  # the blocks before it stay readable
            index.stopped[key_group] = HeapStop(state_id, error)
    return index


def _head(window: _Window, label: str) -> tuple[int, int, int]:
    """``(raw offset, kvStateId, count)``: the ``short kvStateId, int count`` at the start of a state's block."""

    def head(r: ByteReader) -> tuple[int, int, int]:
        at = r.pos
        return at, r.u16("kv state id"), r.i32("record count")

    at, state_id, count = window.read(head, label)
    return window.offset(at), state_id, count


def _checked_head(window: _Window, label: str, decoders: Sequence[HeapStateDecoder], seen: set[int], raw_left: int) -> tuple[int, int]:
    """``(kvStateId, count)`` of the block starting here, checked: a known state, not seen before in this
    key group, a count the ``raw_left`` bytes of the block can hold."""
    at, state_id, count = _head(window, label)
    if state_id >= len(decoders):
        raise FormatError(f"{label} kv state id", at, f"0..{len(decoders) - 1}", state_id)
    if state_id in seen:
        raise FormatError(f"{label} kv state id", at, "a state not yet written in this key group", state_id)
    seen.add(state_id)
    decoder = decoders[state_id]
    limit = raw_left * (1 if window.plain else MAX_SNAPPY_EXPANSION) // decoder.min_record_size
    if not 0 <= count <= limit:
        raise FormatError(f"{label} record count of state {decoder.state.name!r}", at + 2, f"0..{limit} (what the bytes left can hold)", count)
    return state_id, count


def _snappy_streams(source: RandomAccess, start: int, end: int, label: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each Snappy framed stream in ``[start, end)``: a stream starts with its
    identifier chunk and ends where the next one starts. Only chunk headers are read."""
    streams: list[list[int]] = []
    pos = start
    while pos < end:
        if end - pos < 4:
            raise TruncatedError(f"{label} snappy chunk header", pos, 4, end - pos)
        header = bytes(read_exactly(source, pos, 4, "snappy chunk header"))
        length = int.from_bytes(header[1:], "little")
        if length > end - pos - 4:
            raise TruncatedError(f"{label} snappy chunk", pos + 4, length, end - pos - 4)
        if header[0] == SNAPPY_STREAM_IDENTIFIER[0]:
            # Flink reads a key group as one stream (HeapRestoreOperation: one SnappyFramedInputStream per
            # key group, over the streams the writer started per state): the identifier that opens it must
            # be exact, a later one only 6 bytes long (xerial skips its text).
            found = header + bytes(read_exactly(source, pos + 4, min(length, 6), "snappy stream identifier"))
            if found != SNAPPY_STREAM_IDENTIFIER and (not streams or length != 6):
                raise FormatError(f"{label} snappy stream identifier", pos, SNAPPY_STREAM_IDENTIFIER.hex(), found.hex())
            if streams:
                streams[-1][1] = pos
            streams.append([pos, end])
        elif not streams:
            raise FormatError(f"{label} snappy stream identifier", pos, SNAPPY_STREAM_IDENTIFIER.hex(), header.hex())
        pos += 4 + length
    return [(s, e) for s, e in streams]


# -- pass 2: the rows of one state ------------------------------------------------------------------------------


def iter_heap_state_rows(source: RandomAccess, index: HeapIndex, state_id: int, decoder: HeapStateDecoder) -> Iterator[dict[str, Any]]:
    """The rows of every record of one state (``decoder`` is its decoder), key group after key group,
    reading only that state's blocks of an ``index`` of ``source``.

    Raises :class:`~repair.formats.flink.values.UnsupportedSerializerError` before the first row when a
    block of the state could not be indexed (see :attr:`HeapIndex.stopped`)."""
    unreadable = index.unreadable(state_id)
    if unreadable is not None:
        key_group, stop = unreadable
        if stop.state_id == state_id:  # its own serializer
            raise stop.error
        raise UnsupportedSerializerError(stop.error.class_name, stop.error.offset, detail=(
            f"state {decoder.state.name!r}: its block in key group {key_group} comes after a record that "
            f"cannot be read ({stop.error.detail})"))
    for run in index.runs.get(state_id, ()):
        label = f"key group {run.key_group}, state {decoder.state.name!r}"
        pieces = (snappy_pieces if index.compressed else plain_pieces)(source, run.start, run.end)
        window = _Window(pieces, plain=not index.compressed, start=run.start, label=label)
        at, found_id, count = _head(window, label)
        if (found_id, count) != (state_id, run.records):
            raise FormatError(f"{label} block head", at, f"state {state_id} with {run.records} records",
                              f"state {found_id} with {count}", detail="the data changed since it was indexed")
        key_group, rows = run.key_group, decoder.rows
        for _ in range(count):
            yield from window.read(lambda r: rows(r, key_group), label + " record")
        if not window.at_end():
            raise FormatError(label, window.offset(), f"the end of its block after {count} records", "more bytes")
