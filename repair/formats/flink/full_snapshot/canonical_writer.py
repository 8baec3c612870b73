"""Write full-snapshot key-group streams as a canonical savepoint holds them: the inverse of
:mod:`repair.formats.flink.full_snapshot.canonical`.

A subtask's stream (``FullSnapshotAsyncWriter.writeSnapshotToOutputStream``) is the keyed backend meta
data (``KeyedBackendSerializationProxy``, its key-group compression flag off: blocks are written
uncompressed) followed by one block per non-empty key group, in key-group order::

    u16 kvStateId
    repeat: int len, key bytes, int len, value bytes
            the last entry of a state in the key group has bit 0x80 of key[0] set, then
            u16 next kvStateId, or 0xFFFF = end of the key group

Entries come by key group; Flink's RocksDB writer (``RocksStatesPerKeyGroupMergeIterator``) orders them
further by state id (the index of the state in the meta data) and key bytes (RocksDB's bytewise order),
the heap backend's writer by its own maps' order. Restores accept any order within a key group. A key is
the full RocksDB key (``SerializedCompositeKeyBuilder``): the key-group prefix, the key, the namespace,
and a map entry's user key; :func:`composite_key` builds it from the parts an export keeps.

The handle's offsets (``KeyGroupRangeOffsets``) are the position of each key group's block in the
stream, 0 for an empty key group. Everything here is bytes in, bytes out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Collection, Iterable, Iterator

from repair.errors import FormatError
from repair.formats.bytes.java_io import ByteWriter
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.full_snapshot.canonical import END_OF_KEY_GROUP_MARK, META_DATA_FOLLOWS_FLAG
from repair.formats.flink.handles import KeyGroupRange
from repair.formats.flink.in_rocksdb.keyed_rows import LIST_DELIMITER

#: Offset of the key-group compression flag in a keyed proxy (after ``int version``).
_COMPRESSION_FLAG_AT = 4


@dataclass(frozen=True, order=True)
class Entry:
    """One key/value pair of a full snapshot: its key group, the state's index in the meta data, and
    the full RocksDB key (key-group prefix included) and value."""

    key_group: int
    state_id: int
    key: bytes
    value: bytes


def uncompressed_meta(meta: bytes) -> bytes:
    """Keyed backend meta data (a ``KeyedBackendSerializationProxy``) with its key-group compression flag
    off, every other byte kept; it must decode completely."""
    decoded = decode_keyed_backend_meta(meta)
    if not decoded.complete or decoded.end_offset != len(meta):
        raise FormatError("keyed backend meta data", decoded.end_offset or 0, "complete meta data filling its bytes",
                          "; ".join(decoded.problems) or f"{len(meta) - (decoded.end_offset or 0)} bytes left over")
    return meta[:_COMPRESSION_FLAG_AT] + b"\x00" + meta[_COMPRESSION_FLAG_AT + 1:]


def meta_without_states(meta: bytes, names: Collection[str]) -> bytes:
    """Keyed backend meta data without the states named ``names``: the head (version, flag, key
    serializer snapshot) and every other state's meta info kept byte for byte, the count written anew."""
    decoded = decode_keyed_backend_meta(meta)
    if not decoded.complete or decoded.end_offset != len(meta):
        raise FormatError("keyed backend meta data", decoded.end_offset or 0, "complete meta data filling its bytes",
                          "; ".join(decoded.problems) or "bytes left over")
    if not decoded.states or not names:
        return meta
    starts = [state.offset for state in decoded.states] + [len(meta)]
    kept = [meta[starts[i] : starts[i + 1]] for i, state in enumerate(decoded.states) if state.name not in names]
    return meta[: starts[0] - 2] + struct.pack(">h", len(kept)) + b"".join(kept)


def meta_with_states(meta: bytes, infos: Collection[bytes]) -> bytes:
    """Keyed backend meta data with the state meta infos ``infos`` (their bytes) appended after its
    states, as a canonical savepoint lists heap timers after the key/value states; every other byte kept."""
    decoded = decode_keyed_backend_meta(meta)
    if not decoded.complete or decoded.end_offset != len(meta):
        raise FormatError("keyed backend meta data", decoded.end_offset or 0, "complete meta data filling its bytes",
                          "; ".join(decoded.problems) or "bytes left over")
    if not infos:
        return meta
    if not decoded.states:
        raise FormatError("keyed backend meta data", len(meta), "at least one state to append after", "no state")
    count_at = decoded.states[0].offset - 2
    return meta[:count_at] + struct.pack(">h", len(decoded.states) + len(infos)) + meta[count_at + 2:] + b"".join(infos)


#: ``KeyedBackendSerializationProxy.VERSION`` (Flink 1.11 to 2.3); ``TypeSerializerSnapshotSerializationProxy``'s.
KEYED_PROXY_VERSION = 6
_SNAPSHOT_PROXY_VERSION = 2


def keyed_meta(key_serializer: bytes, infos: Collection[bytes]) -> bytes:
    """Keyed backend meta data (``KeyedBackendSerializationProxy``, key-group compression off) of a key
    serializer snapshot (``key_serializer``: its bytes as ``writeVersionedSnapshot`` writes them) and
    state meta infos (their bytes): for a snapshot whose states no meta data records yet (a changelog
    checkpoint taken before the first materialization)."""
    w = ByteWriter()
    w.i32(KEYED_PROXY_VERSION)
    w.raw(b"\x00")
    w.i32(_SNAPSHOT_PROXY_VERSION)
    w.raw(key_serializer)
    w.raw(struct.pack(">h", len(infos)))
    for info in infos:
        w.raw(info)
    meta = w.getvalue()
    decoded = decode_keyed_backend_meta(meta)
    if not decoded.complete or decoded.end_offset != len(meta):
        raise FormatError("keyed backend meta data", decoded.end_offset or 0, "complete meta data filling its bytes",
                          "; ".join(decoded.problems) or "bytes left over")
    return meta


def key_group_prefix(key_group: int, prefix_bytes: int) -> bytes:
    """The key-group prefix of a RocksDB key (``CompositeKeySerializationUtils.writeKeyGroup``)."""
    return key_group.to_bytes(prefix_bytes, "big")


def _length_suffix(length: int) -> bytes:
    """``writeVariableIntBytes``: the length, lowest byte first, as many bytes as it needs (at least one)."""
    out = bytearray()
    while True:
        out.append(length & 0xFF)
        length >>= 8
        if not length:
            return bytes(out)


def composite_key(prefix: bytes, key: bytes, namespace: bytes, user_key: bytes | None, *, suffixes: bool) -> bytes:
    """A keyed state's RocksDB key from its parts; ``suffixes`` when the key and namespace serializers
    are both of variable length (each part is then followed by its length)."""
    parts = [prefix, key]
    if suffixes:
        parts.append(_length_suffix(len(key)))
    parts.append(namespace)
    if suffixes:
        parts.append(_length_suffix(len(namespace)))
    if user_key is not None:
        parts.append(user_key)
    return b"".join(parts)


def list_value(elements: Iterable[bytes]) -> bytes:
    """A list state's RocksDB value: its elements' bytes joined by ``,`` (``ListDelimitedSerializer``)."""
    return bytes((LIST_DELIMITER,)).join(elements)


def encode_key_group_stream(meta: bytes, key_groups: KeyGroupRange, entries: Iterable[Entry]) -> tuple[bytes, list[int]]:
    """The bytes of one subtask's full snapshot and its key-group offsets (see :func:`iter_key_group_stream`)."""
    offsets: list[int] = []
    data = b"".join(iter_key_group_stream(meta, key_groups, entries, offsets))
    return data, offsets


#: Bytes per chunk :func:`iter_key_group_stream` yields.
CHUNK_BYTES = 1 << 20


def iter_key_group_stream(meta: bytes, key_groups: KeyGroupRange, entries: Iterable[Entry], offsets: list[int]) -> Iterator[bytes]:
    """The bytes of one subtask's full snapshot, in chunks of about :data:`CHUNK_BYTES`; ``offsets`` (an
    empty list) receives the key-group offsets (one per key group of ``key_groups``) once the chunks are
    consumed. ``meta`` is written as given (see :func:`uncompressed_meta`); ``entries`` must lie in
    ``key_groups``, sorted by key group. Flink's RocksDB writer also sorts them by state id and key
    within a key group (and so does write-savepoint); its heap writer does not, and restores accept either."""
    offsets[:] = [0] * key_groups.count
    w = ByteWriter()
    w.raw(meta)
    written = 0  # bytes yielded before w's
    previous: Entry | None = None
    for entry in entries:
        if entry.key_group not in key_groups:
            raise ValueError(f"key group {entry.key_group} is outside {key_groups}")
        if not entry.key:
            raise ValueError("an entry needs a key (the key-group prefix at least)")
        if previous is not None and entry.key_group < previous.key_group:
            raise ValueError("entries must be sorted by key group")
        new_group = previous is None or entry.key_group != previous.key_group
        if previous is not None:
            last = new_group or entry.state_id != previous.state_id
            _pair(w, previous, last)
            if new_group:
                w.u16(END_OF_KEY_GROUP_MARK)
            elif last:
                w.u16(entry.state_id)
        if len(w) >= CHUNK_BYTES:
            chunk = w.getvalue()
            written += len(chunk)
            yield chunk
            w = ByteWriter()
        if new_group:
            offsets[entry.key_group - key_groups.start] = written + len(w)
            w.u16(entry.state_id)
        previous = entry
    if previous is not None:
        _pair(w, previous, True)
        w.u16(END_OF_KEY_GROUP_MARK)
    yield w.getvalue()


def _pair(w: ByteWriter, entry: Entry, meta_data_follows: bool) -> None:
    key = entry.key
    if meta_data_follows:
        key = bytes((key[0] | META_DATA_FOLLOWS_FLAG,)) + key[1:]
    w.i32(len(key))
    w.raw(key)
    w.i32(len(entry.value))
    w.raw(entry.value)
