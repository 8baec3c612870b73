"""Streaming reads of canonical full-snapshot key-group data (canonical savepoints) from a
:class:`~repair.formats.bytes.random_access.RandomAccess` source, for files too large to hold in memory.

The layout is the one :mod:`repair.formats.flink.full_snapshot.canonical` describes: per non-empty key group a block
(a Snappy framed stream when the proxy's compression flag is set) of runs, one run per state:
``u16 kvStateId``, then ``int len, key, int len, value`` entries; bit 0x80 of the first key byte marks a
run's last entry, followed by the next kvStateId or 0xFFFF (end of the key group). Keys are full RocksDB
keys and values RocksDB values (list state: elements joined by ``,``; map state: one entry per user key;
timers: empty values), so :class:`~repair.formats.flink.in_rocksdb.keyed_rows.KeyedStateDecoder` decodes them.

The states of a key group are interleaved, while a reader wants one state after the other, so reading
takes two passes:

1. :func:`index_key_groups` reads every block once and checks its framing: lengths against the block,
   state ids against the meta data, one run per state and key group, end marks, nothing after the end
   mark, and each key's key-group prefix against its block. It records where each state's runs start
   and end (:class:`StateRun`); values are skipped, not copied.
2. :func:`iter_state_entries` reads the runs of one state only.

Memory is bounded by one read (:data:`READ_SIZE`) or one Snappy chunk (64 KiB) plus the entry being read,
never by the file. A position in a compressed block is the raw offset of a chunk plus an offset into its
uncompressed payload (each chunk is compressed on its own). Errors are :class:`FormatError` with the
offset of the field in the file (in a compressed block: the offset of the chunk holding it).
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from repair.errors import FormatError, TruncatedError
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.formats.flink.full_snapshot.canonical import (
    END_OF_KEY_GROUP_MARK,
    META_DATA_FOLLOWS_FLAG,
    SNAPPY_STREAM_IDENTIFIER,
    decode_snappy_chunk,
)
from repair.formats.flink.handles import KeyGroupRange

#: Bytes read at a time from uncompressed key-group data.
READ_SIZE = 1 << 20
#: Upper bound of Snappy's expansion (uncompressed bytes per raw byte, chunk headers included; Snappy
#: itself stays below 22): a length in a compressed block beyond this many times the raw bytes left
#: cannot be real.
MAX_SNAPPY_EXPANSION = 32

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


@dataclass(frozen=True)
class StateRun:
    """The entries of one state in one key group.

    ``start`` is the raw offset of the first entry (uncompressed) or of the chunk holding it
    (compressed, ``skip`` bytes into its payload); ``end`` is the raw offset after the run
    (uncompressed) or after the chunk holding its last byte (compressed).
    """

    key_group: int
    start: int
    skip: int
    end: int
    entries: int


@dataclass
class KeyGroupIndex:
    """Where the runs of each state are, by kvStateId (the index into the proxy's state list)."""

    compressed: bool
    runs: dict[int, list[StateRun]] = field(default_factory=dict)

    def entries(self, state_id: int) -> int:
        """The number of key/value entries of a state."""
        return sum(run.entries for run in self.runs.get(state_id, ()))


# -- sequential reads over pieces of bytes ------------------------------------------------------------------


def plain_pieces(source: RandomAccess, start: int, end: int) -> Iterator[tuple[int, int, bytes]]:
    """``(offset, end, bytes)`` of ``[start, end)`` in reads of at most :data:`READ_SIZE`."""
    pos = start
    while pos < end:
        size = min(READ_SIZE, end - pos)
        yield pos, pos + size, bytes(read_exactly(source, pos, size, "key-group data"))
        pos += size


def snappy_pieces(source: RandomAccess, start: int, end: int) -> Iterator[tuple[int, int, bytes]]:
    """``(chunk offset, chunk end, payload)`` of the Snappy data chunks in ``[start, end)``."""
    pos = start
    while pos < end:
        if end - pos < 4:
            raise TruncatedError("snappy chunk header", pos, 4, end - pos)
        header = bytes(read_exactly(source, pos, 4, "snappy chunk header"))
        length = int.from_bytes(header[1:], "little")
        if length > end - pos - 4:
            raise TruncatedError("snappy chunk", pos + 4, length, end - pos - 4)
        payload = decode_snappy_chunk(header[0], bytes(read_exactly(source, pos + 4, length, "snappy chunk")), pos)
        if payload:
            yield pos, pos + 4 + length, payload
        pos += 4 + length


class _StreamReader:
    """Big-endian reads across consecutive pieces of bytes (raw reads, or decompressed chunks).

    ``offset`` is the position for error messages; :meth:`position` the place to start reading again.
    Lengths are checked against what the rest of the range can hold before anything is read.
    """

    __slots__ = ("_pieces", "_plain", "_end", "piece", "at", "piece_end", "i")

    def __init__(self, source: RandomAccess, start: int, end: int, *, compressed: bool, skip: int = 0):
        self._pieces = (snappy_pieces if compressed else plain_pieces)(source, start, end)
        self._plain = not compressed
        self._end = end
        self.piece, self.at, self.piece_end, self.i = b"", start, start, 0
        if skip:
            self.skip(skip, "position in the snappy chunk")

    @property
    def offset(self) -> int:
        return self.at + self.i if self._plain else self.at

    def position(self) -> tuple[int, int]:
        """``(raw offset, bytes to skip there)`` of the next byte to read."""
        return (self.at + self.i, 0) if self._plain else (self.at, self.i)

    def _next(self) -> bool:
        """Move to the next piece; False (and an empty piece at the end of the range) when there is none."""
        for self.at, self.piece_end, self.piece in self._pieces:
            self.i = 0
            return True
        self.at, self.piece, self.i = self.piece_end, b"", 0
        return False

    def at_end(self) -> bool:
        return self.i >= len(self.piece) and not self._next()

    def _check(self, n: int, field: str) -> None:
        buffered = len(self.piece) - self.i
        room = self._end - self.piece_end
        limit = buffered + (room if self._plain else room * MAX_SNAPPY_EXPANSION)
        if n > limit:
            raise TruncatedError(field, self.offset, n, limit)

    def raw(self, n: int, field: str) -> bytes:
        i = self.i
        if i + n <= len(self.piece):
            self.i = i + n
            return self.piece[i : i + n]
        self._check(n, field)
        return self._gather(n, field, keep=True)

    def skip(self, n: int, field: str) -> None:
        if self.i + n <= len(self.piece):
            self.i += n
            return
        self._check(n, field)
        self._gather(n, field, keep=False)

    def _gather(self, n: int, field: str, *, keep: bool) -> bytes:
        start, parts, need = self.offset, [], n
        while True:
            take = min(need, len(self.piece) - self.i)
            if keep and take:
                parts.append(self.piece[self.i : self.i + take])
            self.i += take
            need -= take
            if not need:
                return b"".join(parts)
            if not self._next():
                raise TruncatedError(field, start, n, n - need)

    def u16(self, field: str) -> int:
        return _U16.unpack(self.raw(2, field))[0]

    def count(self, field: str) -> int:
        at = self.offset
        value = _I32.unpack(self.raw(4, field))[0]
        if value < 0:
            raise FormatError(field, at, "a length >= 0", value)
        return value


# -- entries ---------------------------------------------------------------------------------------------------


def _read_entry(r: _StreamReader, label: str, *, keep_value: bool) -> tuple[bytes, bytes | None, bool]:
    """One ``int len, key, int len, value`` entry: the key with the "meta data follows" bit cleared, the
    value (None when skipped), and whether the bit was set."""
    key_at = r.offset
    key = r.raw(r.count(label + " key length"), label + " key")
    if not key:
        raise FormatError(label + " key", key_at, "a key of at least one byte (the key-group prefix)", "an empty key")
    length = r.count(label + " value length")
    value = r.raw(length, label + " value") if keep_value else r.skip(length, label + " value")
    last = bool(key[0] & META_DATA_FOLLOWS_FLAG)
    if last:
        key = bytes((key[0] & ~META_DATA_FOLLOWS_FLAG,)) + key[1:]
    return key, value, last


def _checked_state_id(value: int, at: int, field: str, state_count: int, seen: set[int]) -> int:
    """``value`` (read at ``at``) as the kvStateId of the next run of a key group."""
    if value >= state_count:
        raise FormatError(field, at, f"0..{state_count - 1}" + (" or 0xFFFF" if seen else ""), value)
    if value in seen:
        raise FormatError(field, at, "a state not yet written in this key group", value)
    seen.add(value)
    return value


def index_key_groups(
    source: RandomAccess,
    key_groups: KeyGroupRange,
    offsets: Sequence[int],
    *,
    compressed: bool,
    state_count: int,
    prefix_bytes: int,
) -> KeyGroupIndex:
    """Check the framing of every key-group block of ``source`` (a whole full-snapshot delegate, the
    proxy included) and index the runs of each state.

    ``offsets`` are the handle's offsets (one per key group of ``key_groups``, 0 = empty),
    ``compressed`` the proxy's key-group compression flag, ``state_count`` its number of states and
    ``prefix_bytes`` the key-group prefix length (1 or 2, from the max parallelism).
    """
    index = KeyGroupIndex(compressed)
    for key_group, offset, end in key_group_blocks(source, key_groups, offsets):
        _index_block(source, key_group, offset, end, index, state_count, prefix_bytes)
    return index


def key_group_blocks(source: RandomAccess, key_groups: KeyGroupRange, offsets: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(key group, start, end)`` of every key group with data (offset > 0), in the order of the range;
    a block ends where the next one (by offset) starts, the last at the end of ``source``. Offsets
    outside the data are a :class:`FormatError`."""
    if len(offsets) != key_groups.count:
        raise ValueError("one offset per key group is needed")
    size = source.size
    for i, offset in enumerate(offsets):
        if offset and not 0 < offset < size:
            raise FormatError(f"offset of key group {key_groups.start + i}", offset, f"a position inside the data (1..{size - 1})", offset)
    starts = sorted({o for o in offsets if o})
    blocks = []
    for i, offset in enumerate(offsets):
        if offset:
            after = bisect.bisect_right(starts, offset)
            blocks.append((key_groups.start + i, offset, starts[after] if after < len(starts) else size))
    return blocks


def _index_block(source: RandomAccess, key_group: int, offset: int, end: int, index: KeyGroupIndex,
                 state_count: int, prefix_bytes: int) -> None:
    label = f"key group {key_group}"
    start = offset
    if index.compressed:
        found = bytes(read_exactly(source, offset, min(len(SNAPPY_STREAM_IDENTIFIER), end - offset), "snappy stream identifier"))
        if found != SNAPPY_STREAM_IDENTIFIER:
            raise FormatError("snappy stream identifier", offset, SNAPPY_STREAM_IDENTIFIER.hex(), found.hex())
        start += len(SNAPPY_STREAM_IDENTIFIER)
    r = _StreamReader(source, start, end, compressed=index.compressed)
    seen: set[int] = set()
    at = r.offset
    state_id = _checked_state_id(r.u16(label + " kv state id"), at, label + " kv state id", state_count, seen)
    while True:
        run_at, skip = r.position()
        entries = 0
        while True:
            key_at = r.offset
            key, _, last = _read_entry(r, label, keep_value=False)
            entries += 1
            if len(key) < prefix_bytes or int.from_bytes(key[:prefix_bytes], "big") != key_group:
                raise FormatError(label + " key-group prefix", key_at, f"key group {key_group}", key[:prefix_bytes].hex())
            if last:
                break
        run_end = r.offset if not index.compressed else r.piece_end
        index.runs.setdefault(state_id, []).append(StateRun(key_group, run_at, skip, run_end, entries))
        at = r.offset
        next_id = r.u16(label + " next kv state id")
        if next_id == END_OF_KEY_GROUP_MARK:
            break
        state_id = _checked_state_id(next_id, at, label + " next kv state id", state_count, seen)
    if not r.at_end():
        raise FormatError(label + " end", r.offset, "the next key group or the end of the file", "more bytes after the end mark")


def iter_state_entries(
    source: RandomAccess, index: KeyGroupIndex, state_id: int
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, key, value)`` of every entry of one state, in key-group order (keys with the "meta
    data follows" bit cleared), reading only that state's runs of an ``index`` of ``source``."""
    for run in index.runs.get(state_id, ()):
        label = f"key group {run.key_group}"
        r = _StreamReader(source, run.start, run.end, compressed=index.compressed, skip=run.skip)
        for i in range(run.entries):
            key_at = r.offset
            key, value, last = _read_entry(r, label, keep_value=True)
            if last != (i == run.entries - 1):
                raise FormatError(label + " key", key_at, f"the meta data flag {'set' if i == run.entries - 1 else 'clear'}",
                                  "the other", detail="the data changed since it was indexed")
            yield run.key_group, key, value
