"""Export of changelog checkpoints: materialized rows with the logged changes applied, as Flink restores them.

Ground truth: real Flink restores checkpoints of freshly generated changelog fixtures (over RocksDB on
Flink 1.20, over the heap backend on Flink 2.1; Flink replays the changes itself) and dumps their state; the export of the same checkpoints must hold exactly
that state. The newest checkpoint of the committed fixtures is compared with ``expected.json`` in
``tests/ops/test_export.py``. The corners the fixture job does not reach (merged namespaces, a map cleared
and refilled, lists added whole, timers removed, changes of other subtasks' key groups) are replayed
here from hand-made changes over hand-made materialized rows.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.generate import SPECS, generate
from fixtures.restore import restore_state
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.backend_meta import BACKEND_STATE_TYPES, KEYED_STATE_TYPE, StateMetaInfo
from repair.formats.flink.changelog.dstl import DataChange
from repair.formats.flink.changelog.replay import NotReplayable, StateReplay
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder
from repair.formats.flink.handles import ChangelogBackendHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import SerializerSnapshot
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.export.job import export
from repair.readers.changelog_state import iter_changelog_handle, replay_subtask
from tests.conftest import FIXTURE_NAMES, FIXTURES, fixture_info, logs_state_changes
from tests.export_testlib import KEYED_UIDS, rebuild

NAME = "flink-1.20-changelog"
#: Changelog over RocksDB (Flink 1.20) and over the heap backend (Flink 2.1).
CHANGELOG_FIXTURES = [name for name in FIXTURE_NAMES if logs_state_changes(FIXTURES / name)]

# -- hand-made states and changes ----------------------------------------------------------------

_B = "org.apache.flink.api.common.typeutils.base."
LONG = SerializerSnapshot(_B + "LongSerializer$LongSerializerSnapshot", 3)
INT = SerializerSnapshot(_B + "IntSerializer$IntSerializerSnapshot", 3)
WINDOW = SerializerSnapshot("org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot", 1)
TIMER = SerializerSnapshot("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", 2, nested=[LONG, WINDOW])


def _state(kind: str, value: SerializerSnapshot, name: str = "s") -> StateMetaInfo:
    if kind == "priority-queue":
        return StateMetaInfo(name, BACKEND_STATE_TYPES.index("PRIORITY_QUEUE"), serializers=[("VALUE_SERIALIZER", value)])
    return StateMetaInfo(name, BACKEND_STATE_TYPES.index("KEY_VALUE"), options=[(KEYED_STATE_TYPE, kind.upper())],
                         serializers=[("NAMESPACE_SERIALIZER", WINDOW), ("VALUE_SERIALIZER", value)])


def _long(v: int) -> bytes:
    return struct.pack(">q", v)


def _int(v: int) -> bytes:
    return struct.pack(">i", v)


def _window(start: int) -> bytes:
    return struct.pack(">qq", start, start + 10)


def _change(op: str, key: int, window: int, *body: bytes, key_group: int = 7) -> DataChange:
    return DataChange(op, 0, key_group, _long(key) + _window(window) + b"".join(body), 100)


def export_rows(state: StateMetaInfo, *records: bytes) -> list[dict]:
    """Materialized rows of ``state``, decoded from heap-snapshot records (namespace, key, value)."""
    decoder = HeapStateDecoder(state, LONG)
    return [row for record in records for row in decoder.rows(ByteReader(record), 7)]


def _replayed(state: StateMetaInfo, materialized: list[dict], *changes: DataChange) -> list[tuple]:
    replay = StateReplay(state, LONG)
    for change in changes:
        replay.apply(change)
    rows = list(replay.rows(iter(materialized)))
    return [(r["key"], r["namespace"]["start"] if r["namespace"] else None, r["user_key"], r["value"], r["list_index"], r["timestamp"])
            for r in rows]


LIST = _state("list", SerializerSnapshot(_B + "ListSerializerSnapshot", 1, nested=[INT]))
MAP = _state("map", SerializerSnapshot(_B + "MapSerializerSnapshot", 1, nested=[INT, LONG]))
REDUCING = _state("reducing", LONG)
VALUE = _state("value", LONG)
TIMERS = _state("priority-queue", TIMER, "_timer_state/event_t")


def _list_bytes(*elements: int) -> bytes:
    return _int(len(elements)) + b"".join(map(_int, elements))


def test_list_changes_append_to_the_materialized_list_and_merged_namespaces_follow_the_target():
    materialized = export_rows(LIST, _window(0) + _long(1) + _list_bytes(10, 11), _window(20) + _long(1) + _list_bytes(30),
                         _window(40) + _long(2) + _list_bytes(50))
    rows = _replayed(
        LIST, materialized,
        _change("ADD_ELEMENT", 1, 0, _int(12)),
        _change("ADD", 1, 0, _list_bytes(13, 14)),
        # window 20 merged into window 0 (RocksDBListState: the sources' lists appended to the target's)
        _change("MERGE_NS", 1, 0, _window(0), _int(1), _window(20)),
        _change("SET", 3, 0, _list_bytes(70)),  # a key only the log knows
    )
    assert rows == [
        (2, 40, None, 50, 0, None),  # untouched: passed through first
        (1, 0, None, 10, 0, None), (1, 0, None, 11, 1, None), (1, 0, None, 12, 2, None), (1, 0, None, 13, 3, None),
        (1, 0, None, 14, 4, None), (1, 0, None, 30, 5, None),
        (3, 0, None, 70, 0, None),
    ]


def test_list_cleared_or_set_replaces_the_materialized_list():
    materialized = export_rows(LIST, _window(0) + _long(1) + _list_bytes(10, 11), _window(0) + _long(2) + _list_bytes(20))
    rows = _replayed(LIST, materialized, _change("CLEAR", 1, 0), _change("SET_INTERNAL", 2, 0, _list_bytes(21, 22)))
    assert rows == [(2, 0, None, 21, 0, None), (2, 0, None, 22, 1, None)]


def test_map_changes_put_and_remove_entries_over_the_materialized_map_or_a_cleared_one():
    def entry(user_key: int, value: int | None) -> bytes:
        return _int(user_key) + (b"\x01" if value is None else b"\x00" + _long(value))

    materialized = export_rows(MAP, _window(0) + _long(1) + _int(2) + entry(1, 100) + entry(2, 200),
                         _window(0) + _long(2) + _int(1) + entry(5, 500))
    rows = _replayed(
        MAP, materialized,
        _change("ADD_OR_UPDATE_ELEMENT", 1, 0, _int(2), _long(201)),  # the value without MapSerializer's null flag
        _change("REMOVE_ELEMENT", 1, 0, _int(1)),
        _change("ADD", 1, 0, _int(2) + entry(3, 300) + entry(4, None)),  # putAll: MapSerializer bytes
        _change("CLEAR", 2, 0),
        _change("ADD_ELEMENT", 2, 0, _int(6), _long(600)),
    )
    assert rows == [(1, 0, 2, 201, None, None), (1, 0, 3, 300, None, None), (1, 0, 4, None, None, None), (2, 0, 6, 600, None, None)]


def test_value_changes_set_or_clear_the_value():
    materialized = export_rows(VALUE, _window(0) + _long(1) + _long(10), _window(0) + _long(2) + _long(20), _window(0) + _long(3) + _long(30))
    rows = _replayed(VALUE, materialized, _change("SET", 1, 0, _long(11)), _change("CLEAR", 2, 0), _change("SET", 2, 10, _long(21)))
    assert rows == [(3, 0, None, 30, None, None), (1, 0, None, 11, None, None), (2, 10, None, 21, None, None)]


def test_timers_added_and_removed():
    def timer(timestamp: int, key: int) -> bytes:
        return struct.pack(">Q", (timestamp + 2**63) % 2**64) + _long(key) + _window(0)

    materialized = export_rows(TIMERS, timer(5, 1), timer(6, 2))
    replay = StateReplay(TIMERS, LONG)
    replay.apply(DataChange("ADD_ELEMENT", 0, 7, _int(2) + timer(7, 3) + timer(8, 3), 100))
    replay.apply(DataChange("REMOVE_ELEMENT", 0, 7, timer(5, 1), 100))
    replay.apply(DataChange("REMOVE_ELEMENT", 0, 7, timer(8, 3), 100))
    rows = list(replay.rows(iter(materialized)))
    assert [(r["key"], r["timestamp"]) for r in rows] == [(2, 6), (3, 7)]
    assert rows[-1]["key_raw"] == timer(7, 3)  # a timer's raw key is the whole element, as RocksDB keeps it


def test_merged_namespaces_of_reducing_state_are_not_replayable():
    replay = StateReplay(REDUCING, LONG)
    replay.apply(_change("SET", 1, 0, _long(1)))
    with pytest.raises(NotReplayable, match="MERGE_NS change of reducing state 's'.*job's own function"):
        replay.apply(_change("MERGE_NS", 1, 0, _window(0), _int(1), _window(20)))


def test_a_state_of_an_undecodable_serializer_is_not_replayable():
    kryo = SerializerSnapshot("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", 2, attributes={"type_class": "x.K"})
    replay = StateReplay(_state("value", kryo), LONG)
    with pytest.raises(NotReplayable, match="KryoSerializerSnapshot"):
        replay.apply(_change("SET", 1, 0, b"\x01\x02"))


# -- the committed fixture -----------------------------------------------------------------------


def _fixture_snapshots(root: Path):
    storage = st.default_storage()
    layout = discover(str(root), storage)
    return [load_snapshot(ref, str(root), storage) for ref in layout.snapshots], storage


def test_changes_of_key_groups_outside_the_subtask_are_not_applied(monkeypatch):
    root = FIXTURES / NAME / "checkpoints" / fixture_info(FIXTURES / NAME)["job_id"]
    snapshots, storage = _fixture_snapshots(root)
    snapshot = snapshots[-1]
    op, keyed = next((op, sub.managed_keyed_state) for op in snapshot.metadata.operators for sub in op.subtasks
                     if isinstance(sub.managed_keyed_state, ChangelogBackendHandle) and replay_subtask(snapshot, storage, op, sub.managed_keyed_state).replays)
    whole = replay_subtask(snapshot, storage, op, keyed)
    assert not whole.outside_key_groups and whole.replays
    # the same log, as if the subtask now held only its first key group (Flink skips the others' changes)
    first = keyed.key_groups.start
    monkeypatch.setattr(keyed, "key_groups", type(keyed.key_groups)(first, first))
    narrowed = replay_subtask(snapshot, storage, op, keyed)
    changes = {name: replay.changes for name, replay in whole.replays.items()}
    kept = {name: replay.changes for name, replay in narrowed.replays.items()}
    assert {name: kept.get(name, 0) + narrowed.outside_key_groups.get(name, 0) for name in changes} == changes
    assert sum(narrowed.outside_key_groups.values()) > 0
    streams = {s.name: s for s in iter_changelog_handle(snapshot, storage, op, keyed)}
    assert {name: s.changelog["outside_key_groups"] for name, s in streams.items() if s.changelog["outside_key_groups"]} == narrowed.outside_key_groups


def test_a_checkpoint_without_any_key_serializer_lists_those_states_as_skipped(tmp_path):
    """chk-1 comes before the first materialization: operators without timers record no key serializer,
    so their changes cannot be split into key and namespace. Export says so per state and subtask."""
    root = FIXTURES / NAME / "checkpoints" / fixture_info(FIXTURES / NAME)["job_id"]
    result = export(str(root / "chk-1"), str(tmp_path / "out"), workers=1)
    skipped = {(s.operator_id, s.reason.split("'")[1]) for s in result.skipped if s.what == "keyed-state"}
    assert skipped and all("no key serializer recorded" in s.reason for s in result.skipped)
    exported = {(op.operator_id, s.state) for op in result.operators for s in op.states}
    assert not skipped & exported
    document = json.loads((tmp_path / "out" / "_export.json").read_text())
    assert len(document["skipped"]) == len(result.skipped)


# -- real Flink ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", CHANGELOG_FIXTURES)
def test_export_of_every_retained_checkpoint_equals_what_real_flink_restores(tmp_path, name):
    spec = SPECS[name]
    fresh = generate(spec, tmp_path, staging=tmp_path / "staging")
    info = fixture_info(fresh)
    root = tmp_path / "staging" / "checkpoints" / name / info["job_id"]  # where Flink wrote them: the DSTL paths are there
    records = state_model.read_records(fresh / "records.tsv")
    checkpoints = sorted((p for p in root.iterdir() if p.name.startswith("chk-")), key=lambda p: int(p.name[4:]))
    assert len(checkpoints) >= 3
    compared = keys = applied = 0
    for checkpoint in checkpoints[:-1]:  # the newest is compared with expected.json by tests/ops/test_export.py
        out = tmp_path / f"export-{checkpoint.name}"
        result = export(str(checkpoint), str(out), workers=1)
        restored = restore_state(spec.flink_version, checkpoint, records, parallelism=spec.parallelism,
                                 max_parallelism=spec.max_parallelism, state_backend=spec.state_backend, extra_conf=spec.extra)
        skipped = {s.operator_id for s in result.skipped}
        for uid in KEYED_UIDS:
            if operator_id_for_uid(uid) in skipped:
                continue
            assert rebuild(out, name, uid, all_registered=False) == restored["keyed"][uid], (checkpoint.name, uid)
            compared += 1
            keys += len(restored["keyed"][uid])
        applied += sum(s.changelog["changes"] for op in result.operators for s in op.states if s.changelog)
    print(f"{len(checkpoints) - 1} checkpoints, {compared} operators, {keys} keys, {applied} changes applied")
    assert keys > 0 and applied > 0
    assert compared >= 2 * len(KEYED_UIDS)
    shutil.rmtree(tmp_path / "staging")
