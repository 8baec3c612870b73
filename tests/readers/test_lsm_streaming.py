"""Streaming LSM resolution (rocksdb_lsm.iter_column_family): a k-way merge over SSTs, checked against a
plain model of RocksDB's semantics on random histories, plus order errors and laziness."""

from __future__ import annotations

import random

import pytest

from repair.errors import FormatError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.lsm import LsmStats, RangeDeletions, iter_column_family
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.sst import RangeTombstone, open_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table

KEYS = [bytes([a, b]) for a in range(1, 4) for b in range(1, 6)]


def _table(entries, tombstones=(), block_size=4096) -> bytes:
    """An SST (via the writer) from ``(key, seqno, type, value)`` entries, sorted here by internal key."""
    ordered = sorted(entries, key=lambda e: (e[0], -e[1]))
    return build_table(
        [(InternalKey(k, s, t), v) for k, s, t, v in ordered],
        TableOptions(column_family_name="cf", column_family_id=1, block_size=block_size),
        range_tombstones=[(InternalKey(a, s, ValueType.RANGE_DELETION), b) for a, b, s in tombstones],
    )


def _model(history) -> dict[bytes, bytes]:
    """RocksDB's visible state after applying ``history`` in sequence-number order (Flink's
    ``stringappendtest`` merge operator joins operands with ``,``)."""
    state: dict[bytes, bytes] = {}
    for op in history:
        kind = op[0]
        if kind == "put":
            state[op[1]] = op[2]
        elif kind == "merge":
            state[op[1]] = state[op[1]] + b"," + op[2] if op[1] in state else op[2]
        elif kind in ("delete", "single-delete"):
            state.pop(op[1], None)
        elif kind == "range-delete":
            for key in [k for k in state if op[1] <= k < op[2]]:
                del state[key]
    return dict(sorted(state.items()))


@pytest.mark.parametrize("seed", range(12))
def test_k_way_merge_matches_a_model_of_rocksdb(seed):
    rng = random.Random(seed)
    history = []
    for _ in range(rng.randrange(20, 160)):
        kind = rng.choices(["put", "merge", "delete", "single-delete", "range-delete"], [5, 4, 2, 1, 1])[0]
        if kind == "range-delete":
            a, b = sorted(rng.sample(KEYS, 2))
            history.append((kind, a, b))
        else:
            history.append((kind, rng.choice(KEYS), f"v{len(history)}".encode()))
    tables: list[tuple[list, list]] = [([], []) for _ in range(rng.randrange(1, 5))]
    types = {"put": ValueType.VALUE, "merge": ValueType.MERGE, "delete": ValueType.DELETION, "single-delete": ValueType.SINGLE_DELETION}
    for seqno, op in enumerate(history, start=1):
        entries, tombstones = rng.choice(tables)
        if op[0] == "range-delete":
            tombstones.append((op[1], op[2], seqno))
        else:
            entries.append((op[1], seqno, types[op[0]], op[2] if op[0] in ("put", "merge") else b""))
    opened = [(f"t{i}", open_table(BytesSource(_table(e, t, block_size=rng.choice([64, 4096]))))) for i, (e, t) in enumerate(tables)]
    stats = LsmStats()
    resolved = list(iter_column_family("cf", opened, stats))
    assert dict(resolved) == _model(history)
    assert [k for k, _ in resolved] == sorted(k for k, _ in resolved)
    assert stats.entries == sum(len(e) for e, _ in tables) == stats.accounted()
    assert stats.range_tombstones == sum(len(t) for _, t in tables)


def test_range_deletions_take_the_newest_covering_tombstone():
    deletions = RangeDeletions([RangeTombstone(b"b", b"f", 5), RangeTombstone(b"d", b"h", 9), RangeTombstone(b"x", b"x", 50)])
    assert [deletions.covering_seqno(k) for k in (b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"x")] == [-1, 5, 5, 9, 9, 9, 9, -1, -1]
    assert not RangeDeletions([])


def test_entries_out_of_order_raise_naming_the_file():
    data = build_table(
        [(InternalKey(b"\x02", 2, ValueType.VALUE), b"b"), (InternalKey(b"\x01", 1, ValueType.VALUE), b"a")],
        TableOptions(column_family_name="cf"), allow_unsorted=True,
    )
    with pytest.raises(FormatError, match="ascending order") as info:
        list(iter_column_family("cf", [("broken.sst", open_table(BytesSource(data)))], LsmStats()))
    assert "broken.sst" in str(info.value)


class _CountingSource(BytesSource):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.reads = 0

    def read(self, offset: int, length: int):
        self.reads += 1
        return super().read(offset, length)


def test_resolution_streams_block_by_block():
    entries = [(bytes([1]) + i.to_bytes(4, "big"), i + 1, ValueType.VALUE, b"x" * 40) for i in range(5000)]
    sources = [_CountingSource(_table(entries[i::2], block_size=512)) for i in range(2)]
    tables = [(f"t{i}", open_table(source)) for i, source in enumerate(sources)]
    opened_reads = [s.reads for s in sources]
    items = iter_column_family("cf", tables, LsmStats())
    first = next(items)
    assert first[0] == entries[0][0]
    assert all(s.reads - before <= 3 for s, before in zip(sources, opened_reads))  # range_del and one data block each
    assert sum(1 for _ in items) == 4999
    assert all(s.reads - before > 100 for s, before in zip(sources, opened_reads))


def test_live_keys_of_no_state_raise_even_when_other_states_are_asked_for():
    import struct

    from repair.formats.flink.backend_meta import KEYED_STATE_TYPE, KeyedBackendMeta, StateMetaInfo
    from repair.formats.flink.handles import KeyGroupRange
    from repair.formats.flink.serializers import SerializerSnapshot
    from repair.readers.rocksdb import iter_keyed_instance

    long_ = SerializerSnapshot("org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot", 3)
    void = SerializerSnapshot("org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", 3)
    state = StateMetaInfo("cf", 0, options=[(KEYED_STATE_TYPE, "VALUE")], serializers=[("NAMESPACE_SERIALIZER", void), ("VALUE_SERIALIZER", long_)])
    meta = KeyedBackendMeta(6, False, long_, 1, [state])
    known = _table([(b"\x01" + struct.pack(">q", 1) + b"\x00", 1, ValueType.VALUE, struct.pack(">q", 5))])
    unknown = build_table([(InternalKey(b"\x01zz", 2, ValueType.VALUE), b"x")], TableOptions(column_family_name="ghost", column_family_id=2))
    sources = [("known.sst", BytesSource(known)), ("ghost.sst", BytesSource(unknown))]
    with pytest.raises(FormatError, match="'ghost' with 1 live keys"):
        for stream in iter_keyed_instance(sources, meta, KeyGroupRange(0, 128), 128, states={"cf"}):
            list(stream.rows)
