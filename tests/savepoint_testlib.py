"""Savepoint helpers: a fixture's canonical savepoint, its state read in full, and Snappy-framed or damaged streams."""

from __future__ import annotations

from pathlib import Path

import cramjam
import crc32c
from hypothesis import strategies as hst

from fixtures import state_model
from repair.formats.flink.full_snapshot.canonical import SNAPPY_STREAM_IDENTIFIER
from repair.formats.flink.in_rocksdb.keyed_rows import ROW_FIELDS
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.readers.full_snapshot import iter_key_groups_handle, read_key_groups_meta
from tests.conftest import FIXTURES
from tests.state_testlib import add_row

KEYED_UIDS = tuple(state_model.KEYED_OPERATORS)


def canonical_dir(name: str) -> Path:
    storage = st.default_storage()
    found = []
    for entry in sorted((FIXTURES / name / "savepoints").iterdir()):
        layout = discover(str(entry), storage)
        if load_snapshot(layout.snapshots[0], layout.root, storage).savepoint_format == "canonical":
            found.append(entry)
    assert len(found) == 1, found
    return found[0]


def full_snapshot_state(snapshot, storage) -> tuple[dict[str, dict], list[int], set[str]]:
    """Every keyed operator's state read from a snapshot of full-snapshot handles, in expected.json's
    shape; every row checked on the way. Returns (state by uid, TTL timestamps, state kinds seen)."""
    keyed, ttl_timestamps, kinds = {}, [], set()
    for uid in KEYED_UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        per_key: dict[str, dict] = {}
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            meta = read_key_groups_meta(snapshot, storage, handle)
            names = []
            for stream in iter_key_groups_handle(snapshot, storage, handle, op.max_parallelism):  # rows before the next stream
                names.append(stream.name)
                kinds.add(stream.kind)
                assert stream.kind == meta.state(stream.name).kind and stream.meta == meta.state(stream.name)
                for row in stream.rows:
                    assert set(row) == set(ROW_FIELDS) and row["error"] is None
                    assert row["state"] == stream.name and row["key_group"] in handle.key_groups
                    assert row["key_raw"] and (row["namespace_raw"] is not None or stream.kind == "priority-queue")
                    add_row(per_key.setdefault(str(row["key"]), {}), row)
                    if row["ttl_timestamp"] is not None:
                        ttl_timestamps.append(row["ttl_timestamp"])
                assert stream.outside_key_groups == 0 and stream.stats is None
            assert names == sorted(s.name for s in meta.states)
        for entry in per_key.values():
            state_model.sort_timers(entry)
        keyed[uid] = dict(sorted(per_key.items()))
    return keyed, ttl_timestamps, kinds


def masked_crc(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def snappy_framed(payload: bytes, chunk: int) -> bytes:
    """The Snappy framing format as xerial's SnappyFramedOutputStream writes it: the stream identifier,
    then per ``chunk`` bytes a compressed chunk (type 0) or, when that does not pay, an uncompressed one."""
    out = bytearray(SNAPPY_STREAM_IDENTIFIER)
    for i in range(0, len(payload), chunk):
        piece = payload[i : i + chunk]
        packed = bytes(cramjam.snappy.compress_raw(piece))
        kind, body = (0x00, packed) if len(packed) < len(piece) * 0.85 else (0x01, piece)
        out += bytes((kind,)) + (len(body) + 4).to_bytes(3, "little") + masked_crc(piece).to_bytes(4, "little") + body
    return bytes(out)


def damaged_after(data, raw: bytes, start: int) -> bytes:
    """``raw`` with, somewhere in ``[start, len(raw))`` drawn from hypothesis ``data``, a bit flipped or
    everything from there on cut."""
    damaged = bytearray(raw)
    pos = data.draw(hst.integers(start, len(raw) - 1))
    if data.draw(hst.booleans()):
        damaged[pos] ^= 1 << data.draw(hst.integers(0, 7))
    else:
        del damaged[pos:]
    return bytes(damaged)

