"""One fuzz target per decoder of untrusted bytes: each takes any bytes and may only raise
:class:`repair.errors.RepairError` (anything else, a hang or a large allocation is a crash).

Targets that need more than bytes (the key groups and offsets of a key-group stream) read them from
a small header of the input: see :func:`split_key_group_input`; :mod:`fuzz.corpus` writes seeds in
that layout. The targets are plain functions, so the regression tests and the atheris runner share
them.
"""

from __future__ import annotations

import struct
from typing import Callable

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import decode_keyed_backend_meta, decode_operator_backend_meta
from repair.formats.flink.changelog.dstl import changelog_stream, decode_change, iter_change_sets
from repair.formats.flink.full_snapshot.canonical import iter_key_group_entries
from repair.formats.flink.full_snapshot.canonical_stream import index_key_groups, iter_state_entries
from repair.formats.flink.handles import KeyGroupRange
from repair.formats.flink.metadata import decode_metadata
from repair.formats.flink.serializers import decode_serializer_snapshot
from repair.formats.rocksdb.manifest import iter_version_edits, read_manifest, replay
from repair.formats.rocksdb.table.sst import open_table, verify_table
from repair.formats.rocksdb.wal import summarize_wal

#: Blocks larger than this are refused by the SST targets (the CLI's default is larger; 1 MiB keeps
#: a fuzz run's memory small while still reaching every branch).
MAX_BLOCK = 1 << 20
#: At most this many key groups in a key-group stream input (Flink's limit is 32768).
MAX_KEY_GROUPS = 256
#: Entries read per target run: a valid input with many entries is no crash, only slow.
MAX_ENTRIES = 10_000


def metadata(data: bytes) -> None:
    decode_metadata(data)


def sst(data: bytes) -> None:
    verify_table(BytesSource(data), max_block_size=MAX_BLOCK)
    table = open_table(BytesSource(data), max_block_size=MAX_BLOCK)
    for i, _ in enumerate(table.entries()):
        if i >= MAX_ENTRIES:
            break
    list(table.range_tombstones())
    table.properties  # noqa: B018  (decodes the properties block)


def manifest(data: bytes) -> None:
    findings: list = []
    for _ in iter_version_edits(BytesSource(data), strict=False, findings=findings):
        pass
    replay(read_manifest(BytesSource(data)))


def wal(data: bytes) -> None:
    summarize_wal(BytesSource(data), log_number=None)


def serializer_snapshot(data: bytes) -> None:
    decode_serializer_snapshot(data)


def backend_meta(data: bytes) -> None:
    """Keyed and operator backend serialization proxies (the heads of state files)."""
    for decode in (decode_keyed_backend_meta, decode_operator_backend_meta):
        try:
            decode(data)
        except RepairError:
            pass
    decode_keyed_backend_meta(data, ends_at_data_end=True)


def split_key_group_input(data: bytes) -> tuple[bool, KeyGroupRange, list[int], int, bytes]:
    """``flags (u8: bit 0 compressed), key-group start (u16), count (u16), state count (u8), offsets
    (count x u32)``, then the stream; short inputs get an empty range."""
    if len(data) < 6:
        return False, KeyGroupRange(0, 0), [], 1, data
    compressed, (start, count), states = data[0] & 1, struct.unpack(">HH", data[1:5]), data[5]
    count = min(count, MAX_KEY_GROUPS, (len(data) - 6) // 4)
    offsets = list(struct.unpack(f">{count}I", data[6 : 6 + 4 * count]))
    return bool(compressed), KeyGroupRange(start, count), offsets, max(states, 1), data[6 + 4 * count :]


def join_key_group_input(compressed: bool, key_groups: KeyGroupRange, offsets: list[int], states: int, stream: bytes) -> bytes:
    """The inverse of :func:`split_key_group_input` (for the corpus)."""
    head = struct.pack(">BHHB", int(compressed), key_groups.start, key_groups.count, min(states, 255))
    return head + struct.pack(f">{len(offsets)}I", *offsets) + stream


def key_group_stream(data: bytes) -> None:
    """A full snapshot's key-group stream (canonical savepoints, heap checkpoints), read both ways."""
    compressed, key_groups, offsets, states, stream = split_key_group_input(data)
    for i, _ in enumerate(iter_key_group_entries(stream, key_groups, offsets, compressed=compressed, state_count=states)):
        if i >= MAX_ENTRIES:
            break
    source = BytesSource(stream)
    index = index_key_groups(source, key_groups, offsets, compressed=compressed, state_count=states, prefix_bytes=1 + (key_groups.start + key_groups.count > 128))
    for state_id in range(min(states, 8)):
        for i, _ in enumerate(iter_state_entries(source, index, state_id)):
            if i >= MAX_ENTRIES:
                break


def changelog(data: bytes) -> None:
    """A DSTL changelog file: flag byte, change sets, each change's header."""
    stream = changelog_stream(data)
    for _, changes in iter_change_sets(stream):
        for change in changes:
            decode_change(change)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "metadata": metadata,
    "sst": sst,
    "manifest": manifest,
    "wal": wal,
    "serializer_snapshot": serializer_snapshot,
    "backend_meta": backend_meta,
    "key_group_stream": key_group_stream,
    "changelog": changelog,
}


def run_one(target: str, data: bytes) -> None:
    """Runs ``target`` on ``data``; a :class:`RepairError` is the expected answer to bad bytes."""
    try:
        TARGETS[target](data)
    except RepairError:
        pass
