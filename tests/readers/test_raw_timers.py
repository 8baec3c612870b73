"""Timers in raw keyed state: the RocksDB backend with ``state.backend.rocksdb.timer-service.factory: HEAP``.

Evidence: the fixture ``flink-1.20-rocksdb-heap-timers``, written by real Flink 1.20 with that option.
Its checkpoints hold the timers in each keyed operator's raw keyed state; its canonical savepoint,
taken after the last checkpoint of the same state, holds them as keyed state (``_timer_state/...``,
elements written by Flink's own ``TimerSerializer``). So the rows of the two must be equal, raw bytes
included: that proves the re-assembled elements. Corner cases mutate those real bytes. (That every retained checkpoint's timers equal the state model's
is tested with the rest of its keyed state in tests/readers/test_state_reader.py.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
from functools import lru_cache

import pytest

from repair.errors import FormatError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.full_snapshot.raw_timers import VERSIONED_IDENTIFIER, read_timer_key_group, timer_state_name
from repair.formats.flink.handles import KeyGroupRange, KeyGroupsHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import describe
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.readers.full_snapshot import iter_key_groups_handle
from repair.readers.raw_timers import (
    first_key_group_services,
    iter_raw_timers,
    iter_raw_timers_handle,
    raw_key_group_blocks,
)
from tests.conftest import FIXTURE_NAMES, FIXTURES, fixture_info, timers_in_raw_keyed_state

NAME = "flink-1.20-rocksdb-heap-timers"
FIXTURE = FIXTURES / NAME
INFO = fixture_info(FIXTURE)
NAMESPACES = {"VoidNamespace": "VoidNamespace", "TimeWindow": "TimeWindow", "GlobalWindow": "GlobalWindow"}


def test_the_fixture_is_the_only_one_with_timers_in_raw_keyed_state():
    assert [name for name in FIXTURE_NAMES if timers_in_raw_keyed_state(FIXTURES / name)] == [NAME]


def _snapshot(path):
    storage = st.default_storage()
    layout = discover(str(path), storage)
    return storage, layout


def _checkpoints():
    storage, layout = _snapshot(FIXTURE / "checkpoints" / INFO["job_id"])
    return [(ref, load_snapshot(ref, layout.root, storage)) for ref in layout.snapshots]


@lru_cache(maxsize=None)
def _raw_key_groups() -> list[tuple[str, int, int, bytes, int]]:
    """``(uid, checkpoint, key group, bytes, offset)`` of every key group of every raw keyed state."""
    found = []
    for ref, snapshot in _checkpoints():
        for uid in INFO["keyed_operators"]:
            for sub in snapshot.metadata.operator(operator_id_for_uid(uid)).subtasks:
                raw = sub.raw_keyed_state
                data = snapshot.resolver.resolve(raw.delegate).inline
                assert data is not None  # small: inline in _metadata
                for key_group, start, end in raw_key_group_blocks(raw.key_groups, raw.offsets, len(data)):
                    found.append((uid, ref.number, key_group, data[start:end], start))
    return found


def test_every_key_group_names_the_operators_timer_services_with_their_serializers():
    seen_timers = 0
    for uid, _, key_group, data, offset in _raw_key_groups():
        spec = INFO["keyed_operators"][uid]
        sections = read_timer_key_group(data, key_group, base=offset)
        assert [s.service.name for s in sections] == spec["timer_services"]
        for section in sections:
            assert describe(section.service.key_serializer) == spec["key_type"]
            assert describe(section.service.namespace_serializer) == NAMESPACES[spec["namespace"]]
            assert section.timers["processing"] == []  # the job registers event-time timers only
            seen_timers += len(section.timers["event"])
    assert seen_timers > 100


def _timer_rows(fixture, kind: str) -> dict[str, list[dict]]:
    """Timer rows per operator uid of the newest checkpoint (raw keyed state) or the canonical savepoint."""
    storage, info = st.default_storage(), fixture_info(fixture)
    path = fixture / "checkpoints" / info["job_id"] if kind == "checkpoint" else fixture / info["savepoints"]["CANONICAL"]
    layout = discover(str(path), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    rows: dict[str, list[dict]] = {}
    for uid in info["keyed_operators"]:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            if kind == "checkpoint":
                assert isinstance(sub.raw_keyed_state, KeyGroupsHandle)
                streams = iter_raw_timers_handle(snapshot, storage, sub.raw_keyed_state)
            else:
                assert sub.raw_keyed_state is None
                streams = (s for s in iter_key_groups_handle(snapshot, storage, sub.managed_keyed_state, op.max_parallelism) if s.kind == "priority-queue")
            for stream in streams:
                rows.setdefault(uid, []).extend(stream.rows)
    return rows


def _assert_checkpoint_timers_equal_the_savepoints(fixture) -> None:
    from_checkpoint, from_savepoint = _timer_rows(fixture, "checkpoint"), _timer_rows(fixture, "savepoint")
    assert set(from_checkpoint) == set(from_savepoint) == set(fixture_info(fixture)["keyed_operators"])

    def order(row):
        return row["state"], row["key_group"], row["key_raw"]

    for uid in from_checkpoint:
        assert sorted(from_checkpoint[uid], key=order) == sorted(from_savepoint[uid], key=order), uid
    states = {row["state"] for rows in from_checkpoint.values() for row in rows}
    assert states == {timer_state_name("event", "user-timers"), timer_state_name("event", "window-timers")}
    # as many as expected.json holds (which timers: tests/readers/test_state_reader.py, for the committed fixture)
    expected = json.loads((fixture / "expected.json").read_text())["keyed"]
    for uid, rows in from_checkpoint.items():
        timers = [entry["timers"] for entry in expected[uid].values() if "timers" in entry]
        assert len(rows) == sum(len(t) if isinstance(t, list) else sum(map(len, t.values())) for t in timers), uid


def test_checkpoint_timers_equal_the_canonical_savepoints_raw_bytes_included():
    """The savepoint's timers are Flink's own TimerSerializer bytes: the elements re-assembled from the
    raw keyed state's ``key, namespace, timestamp`` must be exactly those."""
    _assert_checkpoint_timers_equal_the_savepoints(FIXTURE)


@pytest.mark.slow
def test_flink_2_writes_timers_on_the_heap_alike(tmp_path):
    """Flink 2.1 (FRocksDB 8, metadata V6) with timers on the heap: the same, on a fixture generated here."""
    from fixtures.generate import SPECS, generate

    spec = dataclasses.replace(SPECS[NAME], name="flink-2.1-rocksdb-heap-timers", flink_version="2.1.1")
    fresh = generate(spec, tmp_path, staging=tmp_path / "staging")
    _assert_checkpoint_timers_equal_the_savepoints(fresh)


# -- corner cases on real bytes ----------------------------------------------------------------------


def _with_timers() -> tuple[int, bytes]:
    """(key group, bytes) of a per-user key group holding event-time timers."""
    for uid, _, key_group, data, _ in _raw_key_groups():
        if uid == "per-user" and read_timer_key_group(data, key_group)[0].timers["event"]:
            return key_group, data
    raise AssertionError("no key group with timers")


def test_a_truncated_key_group_names_the_timer_and_its_offset():
    key_group, data = _with_timers()
    with pytest.raises(FormatError) as error:
        read_timer_key_group(data[:-6], key_group, base=1000)
    message = str(error.value)
    assert f"key group {key_group}" in message and "event-time timer of 'user-timers'" in message
    assert 1000 < error.value.offset <= 1000 + len(data)


def test_bytes_after_the_last_service_are_an_error():
    key_group, data = _with_timers()
    with pytest.raises(FormatError, match="more bytes"):
        read_timer_key_group(data + b"\0", key_group)


def test_another_identifier_or_version_is_an_error():
    key_group, data = _with_timers()
    with pytest.raises(FormatError, match="timers identifier"):
        read_timer_key_group(b"\0" + data[1:], key_group)
    version_3 = data[:4] + struct.pack(">i", 3) + data[8:]
    with pytest.raises(FormatError, match="timer services version"):
        read_timer_key_group(version_3, key_group)


def test_a_count_larger_than_the_bytes_is_refused_before_allocating():
    key_group, data = _with_timers()
    count_at = data.index(b"\x00\x00\x00\x03", data.index(b"VoidNamespaceSerializerSnapshot")) + 4  # after its version
    huge = data[:count_at] + struct.pack(">i", 2**31 - 1) + data[count_at + 4 :]
    with pytest.raises(FormatError, match="timer count"):
        read_timer_key_group(huge, key_group)


def test_a_key_group_naming_another_timer_service_is_an_error_not_a_loss():
    snapshot = _checkpoints()[-1][1]
    raw = snapshot.metadata.operator(operator_id_for_uid("per-user")).subtasks[0].raw_keyed_state
    data = snapshot.resolver.resolve(raw.delegate).inline
    renamed_at = data.index(b"user-timers", raw.offsets[1])  # in the second key group only
    source = BytesSource(data[:renamed_at] + b"user-timerz" + data[renamed_at + len(b"user-timers"):])
    blocks = raw_key_group_blocks(raw.key_groups, raw.offsets, source.size)
    services = first_key_group_services(source, blocks)
    assert [s.name for s in services] == ["user-timers"]
    stream = next(iter_raw_timers(source, raw.key_groups, raw.offsets, services))
    with pytest.raises(FormatError) as error:
        list(stream.rows)
    assert f"key group {raw.key_groups.start + 1} timer service" in str(error.value) and "'user-timerz'" in str(error.value)
    assert error.value.offset == raw.offsets[1]


def test_raw_key_group_blocks_start_at_zero_and_skip_unstarted_key_groups():
    assert raw_key_group_blocks(KeyGroupRange(4, 3), [0, -1, 10], 25) == [(4, 0, 10), (6, 10, 25)]
    assert raw_key_group_blocks(KeyGroupRange(4, 2), [0, 25], 25) == [(4, 0, 25), (5, 25, 25)]  # the last one empty
    with pytest.raises(FormatError, match="offset of key group 5"):
        raw_key_group_blocks(KeyGroupRange(4, 2), [0, 30], 25)


# -- end to end on damaged copies --------------------------------------------------------------------


def _copy_with(tmp_path, edit) -> str:
    copy = tmp_path / NAME
    shutil.copytree(FIXTURE, copy)
    root = copy / "checkpoints" / INFO["job_id"]
    newest = max(int(name[4:]) for name in os.listdir(root) if name.startswith("chk-"))
    metadata = root / f"chk-{newest}" / "_metadata"
    metadata.write_bytes(edit(metadata.read_bytes()))
    return str(root)


def test_a_damaged_key_group_fails_verify_and_export_names_it(tmp_path, capsys):
    from repair.cli.app import main

    def second_key_group_version_3(data: bytes) -> bytes:
        at = data.index(VERSIONED_IDENTIFIER, data.index(VERSIONED_IDENTIFIER) + 1) + 4
        return data[:at] + struct.pack(">i", 3) + data[at + 4 :]

    root = _copy_with(tmp_path, second_key_group_version_3)
    assert main(["verify", root, "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["kind"] for f in findings if f["severity"] == "error"] == ["bad_raw_timers"]
    assert main(["export", root, "--out", str(tmp_path / "out"), "--workers", "1"]) == 2
    said = capsys.readouterr()
    assert "timer services version" in said.out + said.err and "Traceback" not in said.out + said.err
    assert not (tmp_path / "out").exists()


def test_raw_keyed_state_that_is_not_timers_is_listed_as_skipped(tmp_path, capsys):
    from repair.cli.app import main

    root = _copy_with(tmp_path, lambda data: data.replace(VERSIONED_IDENTIFIER, b"\0" + VERSIONED_IDENTIFIER[1:]))
    assert main(["export", root, "--out", str(tmp_path / "out"), "--workers", "1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    skipped = {(s["what"], s["reason"]) for s in document["skipped"]}
    assert skipped == {("raw-keyed-state", "raw keyed state the operator wrote itself (opaque bytes, not timers)")}
    assert not any(s["kind"] == "priority-queue" for op in document["operators"] for s in op["states"])


def test_inspect_verify_and_export_leave_the_checkpoint_untouched(tmp_path, capsys, read_only_guard):
    """The commands that read raw keyed timers, on the committed fixture itself: exit codes, and not a
    byte of the input changed (the guard hashes the tree before and after)."""
    from repair.cli.app import main

    root = str(read_only_guard(FIXTURE / "checkpoints" / INFO["job_id"]))
    assert main(["inspect", root, "--json"]) == 0
    listed = {s["name"] for op in json.loads(capsys.readouterr().out)["operators"] for sub in op["subtasks"] for s in sub["states"]}
    assert timer_state_name("event", "user-timers") in listed and timer_state_name("event", "window-timers") in listed
    assert main(["verify", root]) == 0
    assert main(["export", root, "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
