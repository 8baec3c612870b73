"""Key-group data of full snapshots (canonical savepoints, full checkpoints): the delegate of handle codes
3, 7 and 12.

The stream starts with a ``KeyedBackendSerializationProxy`` (see ``flink_backend_meta``); the handle's
``offsets[i]`` is where key group ``start + i`` begins (0 = the key group is empty). Each key-group block
(``FullSnapshotAsyncWriter.writeKVStateData``, read back by
``FullSnapshotRestoreOperation$KeyGroupEntriesIterator``) is, inside an optional Snappy *framed* stream
(``SnappyStreamCompressionDecorator``, when the proxy's compression flag is set)::

    u16 kvStateId                          (index into the proxy's state list)
    repeat: int len, key bytes, int len, value bytes
            if key[0] has bit 0x80 set ("meta data follows"; the bit is not part of the key):
                u16 next kvStateId, or 0xFFFF = end of the key group

Keys are full RocksDB keys, key-group prefix included. Everything is bounded: offsets are checked against
the data, lengths against what is left, and a Snappy chunk may not declare more than 64 KiB. This module
works on bytes in memory; :mod:`repair.formats.flink.full_snapshot.canonical_stream` reads the same layout from a file,
one state at a time.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Sequence

import cramjam

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.handles import KeyGroupRange
from repair.formats.records import record
from repair.formats.rocksdb.table.checksum import crc32c, mask_crc

#: ``FullSnapshotUtil.END_OF_KEY_GROUP_MARK`` and ``FIRST_BIT_IN_BYTE_MASK``.
END_OF_KEY_GROUP_MARK = 0xFFFF
META_DATA_FOLLOWS_FLAG = 0x80

SNAPPY_STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
#: Largest uncompressed chunk of the Snappy framing format.
SNAPPY_MAX_CHUNK = 65536


@record
class KeyGroupEntry:
    """One key/value pair of a full snapshot. ``key`` has the "meta data follows" bit cleared."""

    key_group: int
    kv_state_id: int
    key: bytes
    value: bytes


def iter_key_group_entries(
    data: bytes,
    key_groups: KeyGroupRange,
    offsets: Sequence[int],
    *,
    compressed: bool,
    state_count: int | None = None,
) -> Iterator[KeyGroupEntry]:
    """Yield the entries of every non-empty key group of a full-snapshot stream, in key-group order.

    ``data`` is the whole delegate (the proxy included), ``offsets`` the handle's offsets, ``compressed``
    the proxy's key-group compression flag; ``state_count`` (the proxy's number of states) bounds the
    kvStateIds when given.
    """
    if len(offsets) != key_groups.count:
        raise ValueError("one offset per key group is needed")
    starts = sorted({o for o in offsets if o})
    for i, offset in enumerate(offsets):
        if offset == 0:
            continue
        key_group = key_groups.start + i
        if not 0 < offset < len(data):
            raise FormatError(f"offset of key group {key_group}", offset, f"a position inside the data (1..{len(data) - 1})", offset)
        after = bisect.bisect_right(starts, offset)
        # A block ends where the next one starts; a next offset past the data (reported when its
        # key group is reached) ends it at the end of the data.
        end = min(starts[after], len(data)) if after < len(starts) else len(data)
        if compressed:
            block = decompress_snappy_framed(data, offset, end)
            reader = ByteReader(block)
        else:
            reader = ByteReader(data, offset, end)
        yield from _entries(reader, key_group, state_count)


def _entries(r: ByteReader, key_group: int, state_count: int | None) -> Iterator[KeyGroupEntry]:
    label = f"key group {key_group}"
    state_id = _state_id(r, label, state_count)
    while True:
        key_at = r.offset
        key = r.raw(r.count(label + " key length"), label + " key")
        if not key:
            raise FormatError(label + " key", key_at, "a key of at least one byte (the key-group prefix)", "an empty key")
        value = r.raw(r.count(label + " value length"), label + " value")
        if key[0] & META_DATA_FOLLOWS_FLAG:
            yield KeyGroupEntry(key_group, state_id, bytes((key[0] & ~META_DATA_FOLLOWS_FLAG,)) + key[1:], value)
            at = r.offset
            next_id = r.u16(label + " next kv state id")
            if next_id == END_OF_KEY_GROUP_MARK:
                return
            if state_count is not None and next_id >= state_count:
                raise FormatError(label + " next kv state id", at, f"0..{state_count - 1} or 0xFFFF", next_id)
            state_id = next_id
        else:
            yield KeyGroupEntry(key_group, state_id, key, value)


def _state_id(r: ByteReader, label: str, state_count: int | None) -> int:
    at = r.offset
    value = r.u16(label + " kv state id")
    if state_count is not None and value >= state_count:
        raise FormatError(label + " kv state id", at, f"0..{state_count - 1}", value)
    return value


def decompress_snappy_framed(data: bytes, start: int, end: int) -> bytes:
    """Decompress the Snappy framing-format stream in ``data[start:end]`` (as xerial's
    ``SnappyFramedOutputStream`` writes it), checking each chunk's masked CRC-32C."""
    r = ByteReader(data, start, end)
    at = r.offset
    if r.raw(min(len(SNAPPY_STREAM_IDENTIFIER), r.remaining), "snappy stream identifier") != SNAPPY_STREAM_IDENTIFIER:
        raise FormatError("snappy stream identifier", at, SNAPPY_STREAM_IDENTIFIER.hex(), data[at : at + 10].hex())
    return b"".join(payload for _, payload in iter_snappy_chunks(data, r.pos, end))


def iter_snappy_chunks(data: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, uncompressed payload)`` of each data chunk of the Snappy framing format in
    ``data[start:end]`` (chunk by chunk, no stream identifier needed first; identifiers are skipped)."""
    r = ByteReader(data, start, end)
    while not r.at_end():
        chunk_at = r.offset
        chunk_type = r.u8("snappy chunk type")
        length = int.from_bytes(r.raw(3, "snappy chunk length"), "little")
        payload = decode_snappy_chunk(chunk_type, r.raw(length, "snappy chunk"), chunk_at)
        if payload is not None:
            yield chunk_at, payload


def decode_snappy_chunk(chunk_type: int, body: bytes, chunk_at: int) -> bytes | None:
    """The uncompressed payload of one chunk of the Snappy framing format (``chunk_type``, then ``body``:
    the bytes after the 4-byte chunk header at ``chunk_at``), its masked CRC-32C checked; None for the
    stream identifier and skippable chunks."""
    length = len(body)
    if chunk_type in (0x00, 0x01):
        if length < 4:
            raise FormatError("snappy chunk length", chunk_at + 1, ">= 4", length)
        expected_crc = int.from_bytes(body[:4], "little")
        payload = body[4:]
        if chunk_type == 0x00:
            payload = _snappy_raw(payload, chunk_at)
        elif len(payload) > SNAPPY_MAX_CHUNK:
            raise FormatError("snappy chunk length", chunk_at + 1, f"<= {SNAPPY_MAX_CHUNK + 4}", length)
        if _masked_crc32c(payload) != expected_crc:
            raise FormatError("snappy chunk checksum", chunk_at + 4, f"0x{_masked_crc32c(payload):08x}", f"0x{expected_crc:08x}")
        return payload
    if chunk_type == 0xFF:
        # A stream identifier inside a stream: xerial's SnappyFramedInputStream, which Flink reads each key
        # group with, checks only its length and skips its text (the first one, which opens the stream, it
        # compares byte for byte: the callers check that one). A flipped byte in a later identifier's text
        # restores exact state in real Flink 2.1 (damage matrix: flink-2.1-heap-p3-snappy/key-groups/flipped).
        if length != len(SNAPPY_STREAM_IDENTIFIER) - 4:
            raise FormatError("snappy stream identifier length", chunk_at + 1, len(SNAPPY_STREAM_IDENTIFIER) - 4, length)
        return None
    if chunk_type < 0x80:
        raise FormatError("snappy chunk type", chunk_at, "0x00, 0x01, 0xFF or skippable 0x80..0xFE", f"0x{chunk_type:02x}")
    return None


def _snappy_raw(payload: bytes, chunk_at: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(payload)
    except Exception as exc:  # cramjam raises its own error types
        raise FormatError("snappy chunk", chunk_at, "a Snappy-compressed chunk", payload[:16].hex(), detail=str(exc)) from None
    if declared > SNAPPY_MAX_CHUNK:
        raise FormatError("snappy chunk uncompressed length", chunk_at + 8, f"<= {SNAPPY_MAX_CHUNK}", declared)
    try:
        return bytes(cramjam.snappy.decompress_raw(payload))
    except Exception as exc:
        raise FormatError("snappy chunk", chunk_at, "a Snappy-compressed chunk", payload[:16].hex(), detail=str(exc)) from None


#: xerial's ``SnappyFramedOutputStream`` keeps a chunk compressed when it shrinks to this share or less.
SNAPPY_MIN_COMPRESSION_RATIO = 0.85


def encode_snappy_framed_chunks(payload: bytes) -> bytes:
    """``payload`` as data chunks of the Snappy framing format (no stream identifier), at most
    :data:`SNAPPY_MAX_CHUNK` bytes each: compressed where that saves enough, as xerial's writer (Flink's
    ``SnappyStreamCompressionDecorator``) does, uncompressed otherwise. Nothing for an empty payload."""
    out = bytearray()
    for start in range(0, len(payload), SNAPPY_MAX_CHUNK):
        piece = payload[start : start + SNAPPY_MAX_CHUNK]
        compressed = bytes(cramjam.snappy.compress_raw(piece))
        chunk_type, body = (0x00, compressed) if len(compressed) <= len(piece) * SNAPPY_MIN_COMPRESSION_RATIO else (0x01, piece)
        out += bytes((chunk_type,)) + (len(body) + 4).to_bytes(3, "little") + _masked_crc32c(piece).to_bytes(4, "little") + body
    return bytes(out)


def _masked_crc32c(data: bytes) -> int:
    """The Snappy framing format masks its CRC-32C as RocksDB does."""
    return mask_crc(crc32c(data))
