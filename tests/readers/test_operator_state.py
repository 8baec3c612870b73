"""Operator (non-keyed) state: list, union list and broadcast states, decoded into rows.

Evidence: the operator state of every real fixture (checkpoints and savepoints) against expected.json,
with the distribution mode the fixture job declares (fixture.json); and operator state files written by
Flink 1.18.1's and 2.1.1's own DefaultOperatorStateBackend, plain and Snappy-compressed, with split,
union and broadcast states (tests/data/operator_state, GenerateOperatorStateSamples.java writes them and
the values it put in). Corner cases are damaged copies of those real bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from functools import lru_cache
from pathlib import Path

import pytest

from repair.errors import FormatError, RepairError, TruncatedError
from repair.formats.flink.handles import OPERATOR_STATE_MODES, OperatorStateEntry
from repair.formats.flink.in_rocksdb.keyed_rows import ROW_FIELDS
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.operator_state import OperatorStateFile
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.readers.operator_state import OperatorStateStream, iter_operator_handle, read_operator_states
from tests.conftest import DATA, FIXTURE_NAMES, FIXTURES, fixture_info

SAMPLES = DATA / "operator_state"
SAMPLE_NAMES = ("flink-1.18.1", "flink-1.18.1-snappy", "flink-2.1.1", "flink-2.1.1-snappy")
#: fixture.json's operator state kinds (the job's ListState / union ListState / BroadcastState) as
#: OperatorStateHandle.Mode names.
JOB_MODES = {"list": "SPLIT_DISTRIBUTE", "union": "UNION", "broadcast": "BROADCAST"}


def _snapshot_dirs(name: str) -> list[Path]:
    root = FIXTURES / name / "checkpoints"
    dirs = [root / next(iter(os.listdir(root)))]
    savepoints = FIXTURES / name / "savepoints"
    return dirs + (sorted(savepoints.iterdir()) if savepoints.exists() else [])


@lru_cache(maxsize=None)
def _fixture_operator_state(directory: Path) -> dict[str, dict[str, tuple[set[str], list]]]:
    """Per operator id and state: the modes seen and the values of every subtask, in subtask order."""
    storage = st.default_storage()
    layout = discover(str(directory), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    found: dict[str, dict[str, tuple[set[str], list]]] = {}
    for op in snapshot.metadata.operators:
        for sub in sorted(op.subtasks, key=lambda s: s.index):
            if sub.managed_operator_state is None:
                continue
            for stream in iter_operator_handle(snapshot, storage, sub.managed_operator_state):
                assert isinstance(stream, OperatorStateStream)
                modes, values = found.setdefault(op.operator_id, {}).setdefault(stream.name, (set(), []))
                modes.add(stream.mode)
                rows = list(stream.rows)
                assert len(rows) == len(stream.offsets)
                for index, row in enumerate(rows):
                    assert set(row) == set(ROW_FIELDS) and row["error"] is None
                    assert (row["state"], row["kind"], row["list_index"]) == (stream.name, stream.kind, index)
                    assert row["key_group"] is None and row["key"] is None and row["namespace"] is None
                    values.append(row["value"])
    return found


@pytest.mark.parametrize("directory", [d for n in FIXTURE_NAMES for d in _snapshot_dirs(n)], ids=lambda d: f"{d.parent.parent.name}/{d.name}")
def test_fixture_operator_state_matches_expected_json(directory):
    fixture = directory.parent.parent
    expected = json.loads((fixture / "expected.json").read_text())["operator"]
    declared = fixture_info(fixture)["operator_states"]
    found = _fixture_operator_state(directory)
    assert set(expected) == set(declared)
    for uid, states in expected.items():
        by_state = found[operator_id_for_uid(uid)]
        assert set(by_state) == set(states)
        for name, values in states.items():
            modes, decoded = by_state[name]
            assert decoded == values, (uid, name)
            assert modes == {JOB_MODES[declared[uid][name]]}


def test_source_reader_state_is_the_byte_arrays_of_its_splits():
    """The source's SourceReaderState (List<byte[]>): every element is SimpleVersionedSerialization's
    ``int version, int length, bytes``, so the decoded arrays must frame themselves exactly."""
    for name in FIXTURE_NAMES:
        states = [s for op in _fixture_operator_state(_snapshot_dirs(name)[0]).values() for n, s in op.items() if n == "SourceReaderState"]
        assert states, name
        for modes, values in states:
            assert modes == {"SPLIT_DISTRIBUTE"}
            for value in values:
                version, length = struct.unpack_from(">ii", value)
                assert version >= 1 and length == len(value) - 8


# -- operator state files written by Flink's own backend ---------------------------------------------------


def _sample(name: str) -> tuple[bytes, list[OperatorStateEntry], dict]:
    data = (SAMPLES / f"{name}.bin").read_bytes()
    entries = []
    for line in (SAMPLES / f"{name}.handle").read_text().splitlines():
        state, mode, *offsets = line.split("\t")
        entries.append(OperatorStateEntry(state, OPERATOR_STATE_MODES.index(mode), [int(o) for o in offsets]))
    return data, entries, json.loads((SAMPLES / f"{name}.expected.json").read_text())


def _logical(file: OperatorStateFile) -> dict:
    """Each state's values as the generator wrote them down (byte arrays as size and SHA-256)."""
    out = {}
    for state in file.states:
        rows = list(file.rows(state.name))
        assert all(row["error"] is None for row in rows)
        if state.mode == "BROADCAST":
            assert all(row["list_index"] is None and row["user_key_raw"] for row in rows)
            out[state.name] = {row["user_key"]: row["value"] for row in rows}
        else:
            assert [row["list_index"] for row in rows] == list(range(len(state.offsets)))
            out[state.name] = [
                {"size": len(v), "sha256": hashlib.sha256(v).hexdigest()} if isinstance(v, bytes) else v
                for v in (row["value"] for row in rows)
            ]
    return out


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_flink_written_list_union_and_broadcast_states(name):
    data, entries, expected = _sample(name)
    file = OperatorStateFile(data, entries)
    assert file.compressed == name.endswith("-snappy")
    assert _logical(file) == expected
    kinds = {s.name: (s.mode, s.kind) for s in file.states}
    assert kinds == {
        "offsets": ("SPLIT_DISTRIBUTE", "operator-list"), "blobs": ("SPLIT_DISTRIBUTE", "operator-list"),
        "nothing-yet": ("SPLIT_DISTRIBUTE", "operator-list"), "everyone": ("UNION", "union-list"),
        "rules": ("BROADCAST", "broadcast"), "no-rules": ("BROADCAST", "broadcast"),
    }
    # raw bytes are the serializer's bytes: a Long is 8 big-endian bytes, a broadcast key a StringValue
    (first, *_) = file.rows("offsets")
    assert first["value_raw"] == struct.pack(">q", first["value"])
    rule = next(r for r in file.rows("rules") if r["user_key"] == "x")
    assert rule["user_key_raw"] == b"\x02x" and rule["value_raw"] == struct.pack(">q", 1)


def test_flink_1_18_compressed_offsets_name_the_chunk_not_the_element():
    """Flink 1.18.1 did not flush before recording an offset: the three Long elements of 'offsets' all
    name the chunk that holds them; decoded in sequence they are still the three values written."""
    data, entries, expected = _sample("flink-1.18.1-snappy")
    offsets = next(e for e in entries if e.name == "offsets").offsets
    assert len(set(offsets)) == 1 and len(offsets) == 3
    assert [r["value"] for r in OperatorStateFile(data, entries).rows("offsets")] == expected["offsets"]


def _replace_all(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and old in data
    return data.replace(old, new)


@pytest.mark.parametrize("name", ["flink-2.1.1", "flink-2.1.1-snappy", "flink-1.18.1-snappy"])
def test_unknown_serializer_keeps_raw_elements_split_at_their_offsets(name):
    data, entries, expected = _sample(name)
    # A snapshot class nobody knows: the Long states lose their decoders, not their bytes.
    odd = _replace_all(data, b"LongSerializer$LongSerializerSnapshot", b"LongSerializer$OddXSerializerSnapshot")
    file = OperatorStateFile(odd, entries)
    rows = list(file.rows("offsets"))
    assert all(r["value"] is None and "cannot decode" in r["error"] for r in rows)
    raw = b"".join(struct.pack(">q", v) for v in expected["offsets"])
    if len(set(next(e for e in entries if e.name == "offsets").offsets)) == 3:
        assert [(r["list_index"], r["value_raw"]) for r in rows] == [(i, raw[8 * i : 8 * i + 8]) for i in range(3)]
    else:  # 1.18.1's equal offsets cannot split them: one row holds all three
        assert [(r["list_index"], r["value_raw"]) for r in rows] == [(0, raw)] and "told apart" in rows[0]["error"]
    # the other states are untouched
    assert [r["value"] for r in file.rows("everyone")] == expected["everyone"]


# -- damaged copies ------------------------------------------------------------------------------------------


def _with(entries: list[OperatorStateEntry], name: str, **changes) -> list[OperatorStateEntry]:
    return [OperatorStateEntry(e.name, changes.get("mode", e.mode), changes.get("offsets", e.offsets)) if e.name == name else e
            for e in entries]


def _error(data: bytes, entries: list[OperatorStateEntry], state: str | None = None) -> FormatError:
    with pytest.raises(FormatError) as info:
        file = OperatorStateFile(data, entries)
        for s in file.states if state is None else [file.state(state)]:
            list(file.rows(s.name))
    return info.value


def test_truncated_file_names_the_field_and_offset():
    data, entries, _ = _sample("flink-2.1.1")
    offsets = {e.name: e.offsets for e in entries}
    # The last state written (broadcast 'no-rules') loses half of its entry count.
    error = _error(data[:-2], entries)
    assert isinstance(error, TruncatedError)
    assert (error.field, error.offset) == ("broadcast state entry count", offsets["no-rules"][0])
    assert "state 'no-rules'" in str(error)
    # Cut inside the last element of 'everyone' (a String): its length says more than is left.
    last = offsets["everyone"][-1]
    error = _error(data[: last + 5], [e for e in entries if e.name not in ("rules", "no-rules")], "everyone")
    assert (error.field, error.offset) == ("string length", last)
    # Cut before a state's data: its offset is outside the file.
    error = _error(data[: offsets["rules"][0]], entries)
    assert error.field == "offset 0 of state 'rules'" and error.offset == offsets["rules"][0]


def test_offset_beyond_the_file_and_wrong_offsets():
    data, entries, _ = _sample("flink-2.1.1")
    first, second, third = next(e for e in entries if e.name == "offsets").offsets
    assert second - first == third - second == 8  # three Longs
    error = _error(data, _with(entries, "offsets", offsets=[first, second, len(data) + 100]))
    assert (error.field, error.offset) == ("offset 2 of state 'offsets'", len(data) + 100)
    error = _error(data, _with(entries, "offsets", offsets=[first, second + 1, third]), "offsets")
    assert error.field == "offset 1" and error.offset == second and error.found == second + 1
    assert "state 'offsets'" in str(error)


def test_mode_or_name_the_file_does_not_have():
    data, entries, _ = _sample("flink-2.1.1")
    error = _error(data, _with(entries, "offsets", mode=OPERATOR_STATE_MODES.index("UNION")))
    assert error.field == "distribution mode of state 'offsets'" and error.expected == "SPLIT_DISTRIBUTE"
    error = _error(data, entries + [OperatorStateEntry("ghost", 0, [])])
    assert error.field == "operator state meta data" and "ghost" in error.expected


def test_trailing_bytes_after_the_last_element():
    data, entries, _ = _sample("flink-2.1.1")
    error = _error(data + b"\x00\x01", entries, "no-rules")
    assert error.field == "end of the 0 entries" and error.offset == len(data)


def test_corrupt_snappy_chunk_names_the_chunk():
    data, entries, _ = _sample("flink-2.1.1-snappy")
    offset = next(e for e in entries if e.name == "everyone").offsets[1]
    bad = bytearray(data)
    bad[offset + 9] ^= 0x01  # in the payload: the chunk's CRC no longer matches
    error = _error(bytes(bad), entries, "everyone")
    assert (error.field, error.offset) == ("snappy chunk checksum", offset + 4)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_damaged_files_raise_only_repair_errors(name):
    """Bit flips and cuts after the meta data of real files: rows or a RepairError, never a traceback."""
    data, entries, _ = _sample(name)
    start = OperatorStateFile(data, entries).meta.end_offset
    step = 3 if name.endswith("-snappy") else 53
    for pos in range(start, len(data), step):
        bad = bytearray(data)
        bad[pos] ^= 1 << (pos % 8)
        for damaged in (bytes(bad), data[:pos]):
            try:
                file = OperatorStateFile(damaged, entries)
                for state in file.states:
                    list(file.rows(state.name))
            except RepairError:
                pass


def test_empty_handles_have_no_states():
    """File-merging checkpoints give keyed operators an operator state handle without states or bytes."""
    storage = st.default_storage()
    layout = discover(str(_snapshot_dirs("flink-1.20-file-merging")[0]), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    op = snapshot.metadata.operator(operator_id_for_uid("per-user"))
    handle = op.subtasks[0].managed_operator_state
    assert handle is not None and handle.states == []
    assert list(iter_operator_handle(snapshot, storage, handle)) == [] and read_operator_states(snapshot, storage, handle) == []


# -- list states replaced (write-savepoint) ---------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in SAMPLE_NAMES if n != "flink-1.18.1-snappy"])
def test_replaced_states_hold_the_new_elements_and_every_other_state_its_bytes(name):
    from repair.formats.flink.operator_state import replace_states

    data, entries, expected = _sample(name)
    before = OperatorStateFile(data, entries)
    rule = b"\x02y" + struct.pack(">q", 5)  # StringValue "y" -> Long 5
    new_data, new_entries = replace_states(data, entries, {"offsets": [struct.pack(">q", 7), struct.pack(">q", -8)],
                                                           "nothing-yet": [struct.pack(">q", 1)], "rules": [rule]})
    after = OperatorStateFile(new_data, new_entries)
    assert _logical(after) == {**expected, "offsets": [7, -8], "nothing-yet": [1], "rules": {"y": 5}}
    for state in ("blobs", "everyone", "no-rules"):  # moved, not changed: the same raw bytes
        assert [(r["list_index"], r["user_key_raw"], r["value_raw"]) for r in after.rows(state)] == \
            [(r["list_index"], r["user_key_raw"], r["value_raw"]) for r in before.rows(state)]
    assert new_data[: min(o for e in entries for o in e.offsets[:1])] == data[: min(o for e in entries for o in e.offsets[:1])]
    assert [e.name for e in new_entries] == [e.name for e in entries]
    unchanged, same_entries = replace_states(data, entries, {})
    assert (unchanged, same_entries) == (data, entries)
    with pytest.raises(FormatError, match="a state the handle names"):
        replace_states(data, entries, {"nope": []})


def test_a_compressed_file_keeps_its_stream_and_every_new_element_starts_a_chunk():
    """Snappy (Flink 2.1.1): the new elements are chunks of their own, each offset its first chunk (where
    Flink's restore seeks), an element larger than a chunk and a broadcast state included; the head and
    the stream identifier are kept; Flink 1.18's layout (elements sharing chunks) is refused."""
    from repair.formats.flink.full_snapshot.canonical import iter_snappy_chunks
    from repair.formats.flink.operator_state import replace_states

    data, entries, expected = _sample("flink-2.1.1-snappy")
    blobs = [row["value_raw"] for row in OperatorStateFile(data, entries).rows("blobs")]
    assert len(blobs[0]) > 65536  # two chunks
    rule = b"\x02y" + struct.pack(">q", 5)
    new_data, new_entries = replace_states(data, entries, {"offsets": [struct.pack(">q", 7), struct.pack(">q", 123456789)],
                                                           "blobs": blobs[::-1], "rules": [rule]})
    after = _logical(OperatorStateFile(new_data, new_entries))
    assert after == {**expected, "offsets": [7, 123456789], "blobs": expected["blobs"][::-1], "rules": {"y": 5}}
    first = min(e.offsets[0] for e in entries if e.offsets)
    assert new_data[:first] == data[:first]
    chunks = {at for at, _ in iter_snappy_chunks(new_data, first, len(new_data))}
    assert all(offset in chunks for e in new_entries for offset in e.offsets)
    old_data, old_entries, _ = _sample("flink-1.18.1-snappy")
    with pytest.raises(FormatError, match="1.18"):
        replace_states(old_data, old_entries, {"offsets": []})
