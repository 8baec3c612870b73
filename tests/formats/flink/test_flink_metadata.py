"""Tests of repair.formats.flink.metadata / flink_handles.

Evidence, strongest first: every real ``_metadata`` under fixtures/ (written by Flink 1.18, 1.20 and 2.1
jobs) checked against the fixture's fixture.json and against the files on disk; small files written by
Flink's own MetadataV3..V6 serializers (tests/data/flink_metadata, see GenerateMetadataSamples.java) for
the handle types the jobs do not produce; hand-built bytes (through the encoder) only for layouts no
available Flink jar writes (1.11 channel state, 1.14 changelog handles, metadata version 2).
"""

from __future__ import annotations

import copy
import random
import re
import struct
from pathlib import Path

import pytest

from repair.errors import FormatError, TruncatedError
from repair.formats.flink.handles import (
    ByteStreamHandle,
    ChangelogBackendHandle,
    ChangelogLayout,
    ChangelogStreamHandle,
    ChannelStateHandle,
    EmptySegmentFileHandle,
    FileHandle,
    HandleDialect,
    IncrementalKeyedHandle,
    InMemoryChangelogHandle,
    KeyGroupRange,
    KeyGroupsHandle,
    MergedChannelStateHandle,
    OperatorStateHandle,
    RelativeFileHandle,
    SegmentFileHandle,
)
from repair.formats.flink.keygroups import key_group_range_for_operator, operator_id_for_uid
from repair.formats.flink.metadata import (
    CheckpointMetadata,
    MetadataDialect,
    OperatorState,
    SubtaskState,
    decode_metadata,
    encode_metadata,
)
from tests._flink_state_files import SAMPLES, all_metadata, fixture_dirs, fixture_info, local_file, metadata_id
from tests.conftest import (
    FIXTURE_NAMES,
    checkpoint_parallelism,
    fixture_spec,
    logs_state_changes,
    materialized,
    timers_in_raw_keyed_state,
)

REAL = all_metadata()
#: Those of the DataStream fixture job, whose fixture.json names uids and states.
REAL_JOB = [item for item in REAL if item[0].name in FIXTURE_NAMES]
# Written by GenerateMetadataSamples.java (Flink 2.1.1 serializers of versions 3..6), described by expected.txt.
SAMPLE_FILES = sorted(SAMPLES / line.split()[0] for line in (SAMPLES / "expected.txt").read_text().splitlines())
# Written by GenerateMetadataV3Flink115.java with Flink 1.15.4's MetadataV3Serializer.
FLINK_115_SAMPLE = SAMPLES / "v3_flink115_changelog_channels.bin"
# Operators of the fixture job that run with parallelism 1 whatever the fixture's parallelism.
SINGLE_PARALLELISM_UIDS = {"records", "records-seen", "sink"}


def expected_version(flink_version: str) -> int:
    major, minor = (int(x) for x in flink_version.split(".")[:2])
    if major == 1:
        return 3 if minor <= 15 else 4
    return 5 if minor == 0 else 6


def test_fixtures_are_present():
    # The real-file tests below are parametrized over this list; an empty list would pass vacuously.
    assert fixture_dirs(), "no fixtures under fixtures/"
    assert len(REAL) >= 5


# -- real fixtures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("item", REAL_JOB, ids=metadata_id)
def test_real_metadata_matches_fixture_json(item):
    fixture_dir, path = item
    info = fixture_info(fixture_dir)
    m = decode_metadata(path.read_bytes())

    assert m.version == expected_version(info["flink_version"])
    is_savepoint = path.parent.name.startswith("savepoint-")
    if not is_savepoint:
        assert m.checkpoint_id == int(path.parent.name.removeprefix("chk-"))
        assert m.checkpoint_id in info["retained_checkpoints"]
    assert m.master_states == []

    by_id = {op.operator_id: op for op in m.operators}
    assert len(by_id) == len(m.operators) == len(info["uids"])
    for uid in info["uids"]:
        op = by_id[operator_id_for_uid(uid)]
        assert re.fullmatch(r"[0-9a-f]{32}", op.operator_id)
        assert op.max_parallelism == info["max_parallelism"]
        parallelism = checkpoint_parallelism(info, None if is_savepoint else m.checkpoint_id)
        assert op.parallelism == (1 if uid in SINGLE_PARALLELISM_UIDS else parallelism)
        assert not op.fully_finished
        if m.version >= 5:
            assert op.uid == op.operator_uid == uid
            assert op.operator_name  # "per-user", "Source: records", "Sink: sink" ...
        else:
            assert op.uid is None and op.name is None
        assert op.coordinator_state is None or isinstance(op.coordinator_state, ByteStreamHandle)

    for uid in info["keyed_operators"]:
        op = by_id[operator_id_for_uid(uid)]
        assert [s.index for s in op.subtasks] == list(range(op.parallelism))
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            assert isinstance(handle, ChangelogBackendHandle) == logs_state_changes(fixture_dir)
            start, end = key_group_range_for_operator(op.max_parallelism, op.parallelism, sub.index)
            assert (handle.key_groups.start, handle.key_groups.end) == (start, end)
            # With file merging (1.20+) every operator carries an empty segment operator state (code 17).
            operator_state = sub.managed_operator_state
            assert operator_state is None or (operator_state.type_code == 17 and operator_state.is_empty and not operator_state.states)
            assert sub.input_channel_state == [] and sub.result_subpartition_state == []
            canonical = is_savepoint and _savepoint_format(info, path) == "CANONICAL"
            if timers_in_raw_keyed_state(fixture_dir) and not canonical:  # the timers, one block per key group
                raw = sub.raw_keyed_state
                assert isinstance(raw, KeyGroupsHandle) and raw.key_groups == handle.key_groups
                assert len(raw.offsets) == raw.key_groups.count and raw.offsets[0] == 0 and raw.offsets == sorted(raw.offsets)
            else:
                assert sub.raw_keyed_state is None
            if logs_state_changes(fixture_dir) and not canonical:
                handle = materialized(handle)  # a changelog's materialized part, if any yet
                if handle is None:
                    continue
            rocksdb = fixture_spec(fixture_dir)["state_backend"] in ("rocksdb", "forst")
            if canonical or not rocksdb:
                # key-group streams: canonical savepoints (code 7); the heap backend's checkpoints and native savepoints (12)
                assert isinstance(handle, KeyGroupsHandle) and handle.type_code == (7 if canonical else 12)
                assert len(handle.offsets) == handle.key_groups.count
            else:
                assert isinstance(handle, IncrementalKeyedHandle) and handle.type_code == 11
                assert re.fullmatch(r"[0-9a-f-]{36}", handle.backend_id)
                assert handle.checkpoint_id <= m.checkpoint_id
                assert handle.sst_files and all(f.local_path.endswith(".sst") for f in handle.shared)
                if is_savepoint or fixture_spec(fixture_dir)["incremental"]:
                    assert handle.shared
                else:  # a full checkpoint shares nothing: its SSTs are private
                    assert handle.shared == []
                private = {f.local_path.split("-")[0] for f in handle.private if not f.local_path.endswith(".sst")}
                assert {"CURRENT", "MANIFEST", "OPTIONS"} <= private

    for uid, states in info["operator_states"].items():
        op = by_id[operator_id_for_uid(uid)]
        (sub,) = op.subtasks
        handle = sub.managed_operator_state
        # Code 17 (segments of merged files) when file merging is on (1.20+), else code 4.
        assert isinstance(handle, OperatorStateHandle) and handle.type_code in (4, 17)
        assert {e.name: e.mode_name for e in handle.states} == {name: "SPLIT_DISTRIBUTE" for name in states}

    props = m.properties
    if m.version < 4:
        # No CheckpointProperties trailer before metadata version 4.
        assert m.trailer == b"" and props is None and m.properties_error is None and m.is_savepoint is None
        return
    assert props is not None and m.properties_error is None and props.trailing_bytes == 0
    assert m.is_savepoint == is_savepoint
    if is_savepoint:
        assert props.checkpoint_type == "Savepoint"
        assert props.savepoint_format == _savepoint_format(info, path)
        assert props.post_checkpoint_action == "NONE" and props.forced
    else:
        assert props.checkpoint_type == "Checkpoint"
        assert props.sharing_files_strategy == "FORWARD_BACKWARD"
        assert props.savepoint_format is None and props.forced is False


def _savepoint_format(info: dict, path: Path) -> str:
    (fmt,) = [f for f, rel in info["savepoints"].items() if Path(rel).name == path.parent.name]
    return fmt


@pytest.mark.parametrize("item", REAL, ids=metadata_id)
def test_real_metadata_round_trips_byte_for_byte(item):
    data = item[1].read_bytes()
    assert encode_metadata(decode_metadata(data)) == data


@pytest.mark.parametrize("item", REAL, ids=metadata_id)
def test_real_handle_sizes_equal_bytes_on_disk(item):
    fixture_dir, path = item
    m = decode_metadata(path.read_bytes())
    files = 0
    for where, handle in m.iter_stream_handles():
        if isinstance(handle, (FileHandle, RelativeFileHandle)):
            local = local_file(fixture_dir, path, handle)
            assert local is not None and local.is_file(), f"{where}: {handle} not found"
            # a changelog file's handle counts its change stream, after a compression flag byte (0)
            flag = 1 if "/dstl/" in getattr(handle, "path", "") else 0
            assert local.stat().st_size == handle.size + flag, where
            files += 1
        elif isinstance(handle, SegmentFileHandle):  # file merging: a byte range of a shared file
            local = local_file(fixture_dir, path, handle)
            assert local is not None and local.is_file(), f"{where}: {handle} not found"
            assert handle.start + handle.size <= local.stat().st_size, where
            files += 1
        elif isinstance(handle, EmptySegmentFileHandle):
            continue
        else:
            assert isinstance(handle, ByteStreamHandle), where
            assert handle.size == len(handle.data) > 0
    if fixture_info(fixture_dir)["spec"]["inline_threshold"] == "0b":
        assert files > 0  # with inlining off every state chunk is a file


def test_real_relative_and_absolute_paths_are_kept_exactly():
    fixture_dir, path = next((d, p) for d, p in REAL if fixture_info(d)["spec"]["inline_threshold"] == "0b")
    m = decode_metadata(path.read_bytes())
    paths = [h.path for _, h in m.iter_stream_handles() if isinstance(h, FileHandle)]
    assert paths and all(p.startswith("file:/var/lib/flink/checkpoints/") for p in paths)
    assert any("/shared/" in p for p in paths)


# -- samples written by Flink's own serializers ---------------------------------------------------------


def _expected_samples() -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in (SAMPLES / "expected.txt").read_text().splitlines()}


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_flink_written_samples_decode_and_round_trip(path):
    data = path.read_bytes()
    m = decode_metadata(data)
    expected = _expected_samples()[path.name]
    assert m.version == int(expected[0])
    assert encode_metadata(m) == data

    assert m.checkpoint_id == 42
    assert [(s.name, s.version, s.payload) for s in m.master_states] == [("hook-a", 1, bytes([10, 20, 30])), ("hook-b", 2, b"")]
    main, finished, changelog, savepoint = m.operators
    assert main.operator_id == "01020304050607081112131415161718"
    assert (main.parallelism, main.max_parallelism) == (3, 128)
    assert main.coordinator_state.data == bytes([1, 2, 3, 4]) and main.coordinator_state.name == "coordinator"
    assert finished.fully_finished and finished.subtasks == [] and finished.finished_marker == -1
    assert finished.operator_id == "00000000000000050000000000000006" and finished.max_parallelism == 256
    assert changelog.operator_id == "ffffffffffffffff000000000000002a"
    if m.version >= 5:
        assert (main.name, main.uid) == ("main-op", "main-uid")
        assert (finished.name, finished.operator_uid) == ("finished-op", None)
        assert savepoint.name == "n\u00e4me \u00fcnicode \U0001F600"
    else:
        assert main.name is None and main.uid is None

    sub0, sub1, sub2 = main.subtasks
    assert (sub2.index, sub2.finished) == (2, True)
    for sub in (sub0, sub1):
        op_state = sub.managed_operator_state
        assert [(e.name, e.mode_name, e.offsets) for e in op_state.states] == [
            ("split-state", "SPLIT_DISTRIBUTE", [0, 17]),
            ("union-state", "UNION", [33]),
            ("broadcast-state", "BROADCAST", []),
        ]
        keyed = sub.managed_keyed_state
        assert keyed.type_code == 11 and keyed.backend_id == "3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8"
        assert (keyed.key_groups.start, keyed.key_groups.end) == (sub.index * 64, sub.index * 64 + 63)
        assert keyed.checkpoint_id == 7 and keyed.checkpointed_size == 1234
        assert [f.local_path for f in keyed.shared] == ["000012.sst", "000013.sst"]
        assert [f.local_path for f in keyed.private] == ["CURRENT", "MANIFEST-000004"]
        assert keyed.shared[0].handle == FileHandle(
            "file:/var/lib/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/6f1c0a4e-sst", 4096
        )
        assert keyed.private[0].handle.data == b"MANIFEST-000004\n"
        assert keyed.meta.data == b"meta bytes"
        raw = sub.raw_keyed_state
        assert raw.type_code == 12 and raw.offsets == [100, 0, 102, 103] and raw.state_handle_id
    assert isinstance(sub1.raw_operator_state.delegate, RelativeFileHandle)
    assert sub1.raw_operator_state.delegate == RelativeFileHandle("raw-op-1", 99)

    # Channel state: codec V1 (metadata 3-5) with the subtask index; codec V2 (6) adds merged handles.
    inputs, outputs = sub1.input_channel_state, sub1.result_subpartition_state
    assert [(h.subtask_index, h.index_a, h.index_b, h.offsets, h.state_size) for h in inputs] == [
        (1, 0, 1, [0, 4], 9),
        (1, 1, 0, [0], 10),
    ]
    assert isinstance(inputs[1].delegate, KeyGroupsHandle) and inputs[1].delegate.type_code == 3  # code 3 as a stream handle
    assert (outputs[0].index_a, outputs[0].index_b, outputs[0].offsets) == (0, 2, [0, 100, 200])
    if m.version >= 6:
        assert isinstance(sub0.input_channel_state[1], MergedChannelStateHandle)
        assert isinstance(sub0.result_subpartition_state[0], MergedChannelStateHandle)
        assert sub0.result_subpartition_state[0].serialized_offsets
        seg_op = sub0.raw_operator_state
        assert seg_op.type_code == 17 and seg_op.is_empty is False
        assert seg_op.task_owned_dir.endswith("/taskowned/tm-1") and seg_op.shared_dir.endswith("/shared/job_x_op_y_0_2")
        assert seg_op.delegate == SegmentFileHandle(
            128, 64, 1, "file:/var/lib/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/job_x_op_y_0_2/seg-1", "logical-1"
        )
        assert seg_op.delegate.scope_name == "SHARED"
        assert isinstance(sub0.raw_keyed_state.delegate, EmptySegmentFileHandle)
    else:
        assert all(isinstance(h, ChannelStateHandle) for h in sub0.input_channel_state)

    (cl_sub,) = changelog.subtasks
    cl = cl_sub.managed_keyed_state
    assert isinstance(cl, ChangelogBackendHandle) and cl.type_code == 14
    assert (cl.checkpointed_size, cl.materialization_id, cl.checkpoint_id) == (5555, 3, 7) and cl.state_handle_id
    assert [type(h) for h in cl.materialized] == [IncrementalKeyedHandle]
    in_memory, stream = cl.non_materialized
    assert isinstance(in_memory, InMemoryChangelogHandle)
    assert [(c.key_group, c.data) for c in in_memory.changes] == [(-1, b"\x01\x02"), (5, b"\x09\x08\x07")]
    assert (in_memory.from_sequence, in_memory.to_sequence) == (10, 12)
    assert isinstance(stream, ChangelogStreamHandle) and stream.type_code == 13
    assert [h.position for h in stream.handles] == [0, 350]
    assert (stream.state_size, stream.checkpointed_size, stream.storage_identifier) == (700, 650, "filesystem")

    (sp_sub,) = savepoint.subtasks
    assert sp_sub.index == 1
    sp = sp_sub.managed_keyed_state
    assert sp.type_code == 7 and sp.key_groups == KeyGroupRange(126, 2) and sp.offsets == [0, 41]
    assert sp.delegate == RelativeFileHandle("savepoint-data", 82)

    paths = [where for where, _ in m.iter_stream_handles()]
    assert any(p.endswith("/managed_keyed_state/shared/000012.sst") for p in paths)
    assert any("/materialized[0]/meta" in p for p in paths)


# -- dialects no available jar writes --------------------------------------------------------------


def _sample(name: str) -> CheckpointMetadata:
    return decode_metadata((SAMPLES / name).read_bytes())


def test_flink_1_11_channel_state_without_subtask_index_is_detected():
    modern = _sample("v3_handles.bin")
    old_dialect = MetadataDialect(HandleDialect(channel_subtask_index=False))
    old = copy.deepcopy(modern)
    old.dialect = old_dialect
    for op in old.operators:
        for sub in op.subtasks:
            for h in sub.input_channel_state + sub.result_subpartition_state:
                h.subtask_index = None
    data = encode_metadata(old)
    assert data != (SAMPLES / "v3_handles.bin").read_bytes()
    decoded = decode_metadata(data)
    assert decoded.dialect == old_dialect
    assert decoded.operators == old.operators
    assert encode_metadata(decoded) == data


def test_flink_1_15_written_changelog_codes_and_channel_state():
    data = FLINK_115_SAMPLE.read_bytes()
    m = decode_metadata(data)
    assert m.version == 3 and m.dialect == MetadataDialect() and encode_metadata(m) == data
    op, finished = m.operators
    assert op.operator_id == "000000000000000b000000000000000c" and finished.fully_finished
    sub0, sub1 = op.subtasks
    assert sub1.finished and sub1.index == 1
    cl = sub0.managed_keyed_state
    assert isinstance(cl, ChangelogBackendHandle) and cl.type_code == 8
    assert (cl.checkpointed_size, cl.materialization_id, cl.checkpoint_id) == (1000, 2, None) and cl.state_handle_id
    (inc,) = cl.materialized
    assert inc.type_code == 11 and inc.checkpoint_id == 11 and inc.checkpointed_size == 777
    assert [(f.local_path, f.handle.size) for f in inc.shared + inc.private] == [("000009.sst", 3000), ("CURRENT", 16)]
    in_memory, stream = cl.non_materialized
    assert isinstance(in_memory, InMemoryChangelogHandle) and in_memory.changes[0].key_group == 3 and in_memory.state_handle_id
    assert isinstance(stream, ChangelogStreamHandle) and stream.type_code == 10 and stream.storage_identifier is None
    assert (stream.state_size, stream.checkpointed_size, stream.handles[0].position) == (90, 80, 12)
    (inp,) = sub0.input_channel_state
    (out,) = sub0.result_subpartition_state
    assert (inp.subtask_index, inp.index_a, inp.index_b, inp.offsets, inp.state_size) == (0, 2, 3, [0, 20], 40)
    assert (out.subtask_index, out.index_a, out.index_b, out.offsets, out.state_size) == (0, 4, 5, [0], 30)


def _to_1_14_changelog(m: CheckpointMetadata) -> CheckpointMetadata:
    """The 1.15-written sample as Flink 1.14 would have laid it out (codes 5, 8, 9, 10 without ids)."""
    m = copy.deepcopy(m)
    m.dialect = MetadataDialect(HandleDialect(changelog_layout=ChangelogLayout.FLINK_1_14))
    cl = m.operators[0].subtasks[0].managed_keyed_state
    cl.type_code = 8
    cl.checkpointed_size = cl.materialization_id = cl.checkpoint_id = cl.state_handle_id = None
    in_memory, stream = cl.non_materialized
    in_memory.state_handle_id = None
    stream.type_code = 10
    stream.checkpointed_size = stream.state_handle_id = stream.storage_identifier = None
    for h in cl.materialized:
        h.type_code, h.checkpointed_size, h.state_handle_id = 5, None, None
    return m


def test_flink_1_14_changelog_layout_is_detected():
    old = _to_1_14_changelog(decode_metadata(FLINK_115_SAMPLE.read_bytes()))
    data = encode_metadata(old)
    decoded = decode_metadata(data)
    assert decoded.dialect.handles.changelog_layout == ChangelogLayout.FLINK_1_14
    assert decoded.operators == old.operators
    assert encode_metadata(decoded) == data


def test_flink_1_15_changelog_codes_8_and_10_keep_the_modern_layout():
    m = _sample("v3_handles.bin")
    cl = m.operators[2].subtasks[0].managed_keyed_state
    cl.type_code, cl.checkpoint_id = 8, None
    cl.non_materialized[1].type_code, cl.non_materialized[1].storage_identifier = 10, None
    data = encode_metadata(m)
    decoded = decode_metadata(data)
    assert decoded.dialect == MetadataDialect()
    assert decoded.operators[2] == m.operators[2]


def test_metadata_version_2_hand_built_round_trip():
    handle = IncrementalKeyedHandle(
        5, 3, "d3b07384-d9a0-4c9b-8f3e-5d1f0a0e0c11", KeyGroupRange(0, 128), None,
        ByteStreamHandle("meta", b"m"), [], [], None,
    )
    op = OperatorState("00" * 16, 1, 128, None, [SubtaskState(0, managed_keyed_state=handle, legacy_header=(-1, 0))], legacy_chain_length=1)
    m = CheckpointMetadata(2, 3, [], [op])
    data = encode_metadata(m)
    decoded = decode_metadata(data)
    assert decoded.version == 2 and decoded.operators == [op] and decoded.properties is None and decoded.is_savepoint is None
    assert encode_metadata(decoded) == data
    bad = bytearray(data)
    legacy_at = 4 + 4 + 8 + 4 + 4 + 16 + 4 + 4 + 4 + 4 + 4 + 8
    bad[legacy_at : legacy_at + 4] = struct.pack(">i", 1)
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(bad))
    assert err.value.field == "legacy state count" and err.value.offset == legacy_at


# -- errors ------------------------------------------------------------------------------------------

SMALL_REAL = min((p for _, p in REAL), key=lambda p: p.stat().st_size) if REAL else None


def _real_v6() -> tuple[bytes, CheckpointMetadata]:
    path = next(p for d, p in REAL if expected_version(fixture_info(d)["flink_version"]) >= 5)
    data = path.read_bytes()
    return data, decode_metadata(data)


def test_bad_magic_and_version():
    data = bytearray((SAMPLES / "v4_checkpoint.bin").read_bytes())
    data[0] ^= 0x01
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(data))
    assert (err.value.field, err.value.offset) == ("metadata magic number", 0)
    data[0] ^= 0x01
    data[4:8] = struct.pack(">i", 9)
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(data))
    assert (err.value.field, err.value.offset, err.value.found) == ("metadata format version", 4, 9)


@pytest.mark.parametrize("data", [b"", b"\x89PNG\r\n\x1a\n" + bytes(64), bytes(100), b"PK\x03\x04" + bytes(30)], ids=["empty", "png", "zeros", "zip"])
def test_foreign_inputs_raise_format_error_with_offset(data):
    with pytest.raises(FormatError) as err:
        decode_metadata(data)
    assert err.value.offset == 0


def test_random_bytes_after_a_valid_header_raise_format_error():
    rng = random.Random(7)
    for _ in range(200):
        data = struct.pack(">ii", 0x4960672D, rng.choice([2, 3, 4, 5, 6])) + rng.randbytes(rng.randrange(0, 300))
        try:
            decode_metadata(data)
        except FormatError as error:
            assert 0 <= error.offset <= len(data)


def test_truncation_before_the_trailer_is_an_error_with_the_offset():
    data = SMALL_REAL.read_bytes()
    m = decode_metadata(data)
    trailer_start = len(data) - len(m.trailer)
    for cut in list(range(0, 64)) + list(range(64, trailer_start, max(1, trailer_start // 300))):
        with pytest.raises(FormatError) as err:
            decode_metadata(data[:cut])
        assert isinstance(err.value, TruncatedError) or err.value.offset <= cut
        assert 0 <= err.value.offset <= cut


def test_truncated_trailer_is_reported_not_fatal():
    data = SMALL_REAL.read_bytes()
    m = decode_metadata(data)
    cut = decode_metadata(data[:-10])
    assert cut.operators == m.operators
    assert cut.properties is None and "truncated" in cut.properties_error
    assert encode_metadata(cut) == data[:-10]


def test_foreign_trailer_is_reported_not_fatal():
    data = (SAMPLES / "v4_checkpoint.bin").read_bytes()
    m = decode_metadata(data)
    patched = data.replace(b"org.apache.flink.runtime.checkpoint.CheckpointProperties", b"org.apache.flink.runtime.checkpoint.CheckpointPropertieX")
    assert patched != data
    other = decode_metadata(patched)
    assert other.properties is None and "CheckpointPropertieX" in other.properties_error
    assert other.operators == m.operators and encode_metadata(other) == patched


def test_unknown_handle_type_names_field_and_offset():
    data, m = _real_v6()
    handle = m.operators[0].subtasks[0].managed_keyed_state
    assert handle.offset > 0
    bad = bytearray(data)
    bad[handle.offset] = 99
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(bad))
    assert err.value.field == "managed keyed state type" and err.value.offset == handle.offset and err.value.found == 99


def test_negative_and_oversized_counts():
    data, m = _real_v6()
    count_at = 4 + 4 + 8 + 4  # magic, version, checkpoint id, master state count (0)
    assert struct.unpack_from(">i", data, count_at)[0] == len(m.operators)
    for value, expected in ((-1, "a count >= 0"), (0x7FFFFFFF, "a count <=")):
        bad = bytearray(data)
        bad[count_at : count_at + 4] = struct.pack(">i", value)
        with pytest.raises(FormatError) as err:
            decode_metadata(bytes(bad))
        assert err.value.field == "operator state count" and err.value.offset == count_at
        assert str(err.value.expected).startswith(expected) and err.value.found == value


def test_bad_utf_names_field_and_offset():
    data, m = _real_v6()
    op = m.operators[0]
    bad = bytearray(data)
    bad[op.offset + 2] = 0xFF  # first byte of the operator name
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(bad))
    assert err.value.field == "operator name" and err.value.offset == op.offset + 2


def test_non_canonical_utf_is_rejected():
    # "A" written as the overlong two-byte form C1 81: Java's readUTF accepts it, writeUTF never writes it.
    m = _sample("v5_terminate_savepoint.bin")
    data = encode_metadata(m)
    op = m.operators[0]
    name = op.name.encode()
    bad = bytearray(data)
    at = op.offset
    assert bad[at + 2 : at + 2 + len(name)] == name
    bad[at : at + 2] = struct.pack(">H", len(name) + 1)
    bad[at + 2 : at + 3] = b"\xc1\xad"  # overlong 'm'
    with pytest.raises(FormatError) as err:
        decode_metadata(bytes(bad))
    assert err.value.field == "operator name" and err.value.offset == at + 2


def test_coordinator_state_must_be_inline():
    m = _sample("v4_checkpoint.bin")
    m.operators[0].coordinator_state = FileHandle("file:/x", 1)
    data = encode_metadata(m)
    with pytest.raises(FormatError) as err:
        decode_metadata(data)
    assert err.value.field == "coordinator state" and err.value.offset == m.operators[0].offset + 16 + 8


def test_values_flink_refuses_to_load():
    m = _sample("v4_checkpoint.bin")
    op = m.operators[0]
    op.parallelism = 129  # > max parallelism 128
    with pytest.raises(FormatError) as err:
        decode_metadata(encode_metadata(m))
    assert (err.value.field, err.value.offset, err.value.found) == ("operator parallelism", op.offset + 16, 129)

    m = _sample("v4_checkpoint.bin")
    sub = m.operators[0].subtasks[2]
    sub.index = 3  # finished subtask outside [0, parallelism 3)
    with pytest.raises(FormatError) as err:
        decode_metadata(encode_metadata(m))
    assert (err.value.field, err.value.offset, err.value.found) == ("subtask index", sub.offset, 3)


def test_channel_subtask_index_other_than_the_owner_keeps_the_modern_reading():
    # The 1.11 reading is only preferred when it decodes cleanly; here it cannot, so the index stays.
    m = _sample("v3_handles.bin")
    for h in m.operators[0].subtasks[1].input_channel_state:
        h.subtask_index = 7
    decoded = decode_metadata(encode_metadata(m))
    assert decoded.dialect == MetadataDialect()
    assert [h.subtask_index for h in decoded.operators[0].subtasks[1].input_channel_state] == [7, 7]
