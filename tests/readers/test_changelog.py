"""The changelog state backend: DSTL files decoded, verified change by change, listed by inspect
(its export: tests/ops/test_changelog_export.py).

The fixture ``flink-1.20-changelog`` was written by real Flink 1.20 with ``state.changelog.enabled`` and
a materialization every second, so its retained checkpoints hold a changelog alone (chk-1, before the
first materialization) and materialized RocksDB snapshots plus changes (later ones). The slow test of
``tests/project/test_fixtures.py`` regenerates it and real Flink restores it with exactly ``expected.json``.
"""

from __future__ import annotations

import collections
import json
import shutil
import struct
from pathlib import Path

import cramjam
import pytest

from repair.errors import FormatError
from repair.formats.flink.backend_meta import BACKEND_STATE_TYPES, StateMetaInfo
from repair.formats.flink.changelog.dstl import (
    METADATA,
    DataChange,
    MetadataChange,
    StateChange,
    changelog_stream,
    decode_change,
    iter_change_sets,
    read_change_set,
)
from repair.formats.flink.handles import ChangelogBackendHandle, ChangelogStreamHandle, FileHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.io import storage as st
from repair.io.layout import PathResolver, SnapshotRef, discover
from repair.io.snapshot import load_snapshot
from repair.ops.verify import changelog_check
from repair.ops.verify.changelog_check import check_subtask_changelog
from repair.readers import changelog as changelog_reader
from repair.readers import changelog_state as changelog_state_reader
from repair.readers.changelog import with_states
from tests.conftest import FIXTURES, fixture_info

NAME = "flink-1.20-changelog"
FIXTURE = FIXTURES / NAME
INFO = fixture_info(FIXTURE)
ROOT = FIXTURE / "checkpoints" / INFO["job_id"]
DSTL = ROOT / "dstl"


def _snapshots():
    storage = st.default_storage()
    layout = discover(str(ROOT), storage)
    return [load_snapshot(ref, str(ROOT), storage) for ref in layout.snapshots], storage


def _changelog_handles(snapshot):
    for op in snapshot.metadata.operators:
        for sub in op.subtasks:
            if isinstance(sub.managed_keyed_state, ChangelogBackendHandle):
                yield op, sub, sub.managed_keyed_state


def test_the_fixture_mixes_changelog_only_and_materialized_checkpoints():
    snapshots, _ = _snapshots()
    materialized = {s.metadata.checkpoint_id: [any(h is not None for h in k.materialized) for _, _, k in _changelog_handles(s)] for s in snapshots}
    assert not all(materialized[min(materialized)])  # the first: mostly changes only
    assert all(materialized[max(materialized)])  # the newest: every subtask materialized
    assert all(len(v) == 2 * len(INFO["keyed_operators"]) for v in materialized.values())


def test_every_dstl_file_is_a_sequence_of_change_sets_and_the_checkpoints_point_at_their_starts():
    starts, operations, metadata = {}, collections.Counter(), {}
    for path in sorted(DSTL.iterdir()):
        data = path.read_bytes()
        assert data[0] == 0  # not compressed (dstl.dfs.compression.enabled is off by default)
        stream = changelog_stream(data)
        starts[path.name] = [offset for offset, _ in iter_change_sets(stream)]
        for _, changes in iter_change_sets(stream):
            for change in changes:
                decoded = decode_change(change)
                if isinstance(decoded, MetadataChange):
                    metadata.setdefault(decoded.state.name, decoded)
                    operations["METADATA"] += 1
                else:
                    operations[decoded.operation] += 1
    # What the job's states log: values set and cleared, list appends, map puts and removes, timers.
    assert {"SET", "SET_INTERNAL", "CLEAR", "ADD_ELEMENT", "ADD_OR_UPDATE_ELEMENT", "REMOVE_ELEMENT", "METADATA"} <= set(operations)
    # TTL states carry their Java-serialized StateTtlConfig; others none.
    assert metadata["recent-tag"].ttl_config.class_name == "org.apache.flink.api.common.state.StateTtlConfig"
    assert metadata["count"].ttl_config is None and metadata["count"].default_value is None
    snapshots, _ = _snapshots()
    pieces = 0
    for snapshot in snapshots:
        for _, _, keyed in _changelog_handles(snapshot):
            for handle in keyed.non_materialized:
                assert isinstance(handle, ChangelogStreamHandle)
                for piece in handle.handles:
                    assert isinstance(piece.handle, FileHandle) and "/dstl/" in piece.handle.path
                    assert piece.position in starts[piece.handle.path.rsplit("/", 1)[1]]
                    pieces += 1
    assert pieces > 20


def test_every_change_of_the_newest_checkpoint_decodes_with_its_serializers():
    snapshots, storage = _snapshots()
    newest = max(snapshots, key=lambda s: s.metadata.checkpoint_id)
    names = {operator_id_for_uid(uid): spec for uid, spec in INFO["keyed_operators"].items()}
    total = 0
    for op, sub, keyed in _changelog_handles(newest):
        check = check_subtask_changelog(newest, storage, keyed)
        assert check.replayed and check.error is None and check.unchecked == {}, (op.operator_id, sub.index)
        total += check.changes
        assert op.operator_id in names
    assert total > 0


def test_a_change_cut_short_is_an_error_of_the_replay(monkeypatch):
    snapshots, storage = _snapshots()
    newest = max(snapshots, key=lambda s: s.metadata.checkpoint_id)
    op, sub, keyed = next((o, s, k) for o, s, k in _changelog_handles(newest) if k.non_materialized)
    real = changelog_reader.iter_subtask_changes

    def shortened(*args):
        for change in real(*args):
            if change.data[:1] not in (bytes((METADATA,)), b"\x00"):  # a data change with a payload
                change = StateChange(change.key_group, change.data[:-1], change.offset)
            yield change

    monkeypatch.setattr(changelog_check, "iter_subtask_changes", shortened)
    check = check_subtask_changelog(newest, storage, keyed)
    assert isinstance(check.error, FormatError)


def test_a_data_change_of_a_state_id_nothing_registered_stops_verify_and_export(monkeypatch):
    """Verify's check and export's replay share the walk from state ids to states (``with_states``)."""
    snapshots, storage = _snapshots()
    newest = max(snapshots, key=lambda s: s.metadata.checkpoint_id)
    op, sub, keyed = next((o, s, k) for o, s, k in _changelog_handles(newest) if k.non_materialized)
    real = changelog_reader.iter_subtask_changes

    def without_metadata(*args):
        return (change for change in real(*args) if change.data[:1] != bytes((METADATA,)))

    monkeypatch.setattr(changelog_check, "iter_subtask_changes", without_metadata)
    monkeypatch.setattr(changelog_state_reader, "iter_subtask_changes", without_metadata)
    check = check_subtask_changelog(newest, storage, keyed)
    assert isinstance(check.error, FormatError) and check.error.field == "state id"
    with pytest.raises(FormatError, match="the id of a state a METADATA change registered before"):
        changelog_state_reader.replay_subtask(newest, storage, op, keyed)


def test_a_state_id_registered_again_names_the_newer_state():
    first, second = (StateMetaInfo(name, BACKEND_STATE_TYPES.index("KEY_VALUE")) for name in ("first", "second"))
    changes = [MetadataChange(first, 1, 0), DataChange("SET", 1, 3, b"", 10),
               MetadataChange(second, 1, 0), DataChange("SET", 1, 3, b"", 20)]
    assert [state.name for _, state in with_states(changes)] == ["first", "first", "second", "second"]
    with pytest.raises(FormatError) as error:
        list(with_states([DataChange("CLEAR", 7, 3, b"", 12)]))
    assert (error.value.field, error.value.offset) == ("state id", 10)
    assert "7 (CLEAR in key group 3)" in str(error.value)


# -- hand-made bytes: the corners the fixture does not hit --------------------------------------------------


def _change_set(groups: dict[int, list[bytes]]) -> bytes:
    out = struct.pack(">i", len(groups))
    for key_group, changes in groups.items():
        out += struct.pack(">ii", len(changes), key_group)
        for change in changes:
            out += struct.pack(">i", len(change)) + change
    return out


def test_a_snappy_compressed_file_reads_as_its_stream():
    stream = _change_set({3: [b"\x00\x00\x01" + b"key"]}) + _change_set({5: [b"\x01\x00\x02xyz"]})
    framed = bytes(cramjam.snappy.compress(stream))
    assert changelog_stream(b"\x01" + framed) == stream
    assert [offset for offset, _ in iter_change_sets(stream)] == [0, len(_change_set({3: [b"\x00\x00\x01key"]}))]
    with pytest.raises(FormatError, match="compression flag"):
        changelog_stream(b"\x02" + stream)


def test_framing_errors_name_the_field_and_offset():
    with pytest.raises(FormatError, match="change set key-group count at offset 0"):
        read_change_set(struct.pack(">i", 2**31 - 1) + b"\0" * 16, 0)
    with pytest.raises(FormatError, match="once per change set"):
        read_change_set(struct.pack(">i", 2) + struct.pack(">ii", 0, 4) * 2, 0)
    with pytest.raises(FormatError, match="change set offset"):
        read_change_set(b"\0\0\0\0", 9)
    with pytest.raises(FormatError, match="state change length"):
        read_change_set(struct.pack(">iiii", 1, 1, 7, 1000), 0)


def test_operation_codes_and_key_groups_are_checked():
    assert isinstance(decode_change(StateChange(7, b"\x01\x00\x05rest", 0)), DataChange)
    with pytest.raises(FormatError, match="state change operation"):
        decode_change(StateChange(7, b"\x09\x00\x05", 0))
    with pytest.raises(FormatError, match="key group of a data change"):
        decode_change(StateChange(-1, b"\x01\x00\x05", 0))
    with pytest.raises(FormatError, match="key group of a METADATA change"):
        decode_change(StateChange(3, bytes((METADATA,)) + b"\0\0\0\7", 0))


# -- where changelog files are read from ---------------------------------------------------------------------


def test_dstl_files_are_read_next_to_the_checkpoint_only_when_copied_along(tmp_path):
    job = "0" * 31 + "1"
    root = tmp_path / "copy" / job
    (root / "dstl").mkdir(parents=True)
    (root / "dstl" / "copied").write_bytes(b"\0")
    resolver = PathResolver(SnapshotRef(str(root / "chk-3"), str(root / "chk-3" / "_metadata"), 3), str(root), st.default_storage())
    # written with the checkpoints at /old/<job>: read here when copied along, else where recorded
    assert resolver.locate(f"file:/old/{job}/dstl/copied") == (str(root / "dstl" / "copied"), True)
    assert resolver.locate(f"file:/old/{job}/dstl/elsewhere") == (f"/old/{job}/dstl/elsewhere", False)
    # shared files follow the checkpoint whether or not they are there (the established rule)
    assert resolver.locate(f"file:/old/{job}/shared/x.sst") == (str(root / "shared" / "x.sst"), True)


# -- the commands ----------------------------------------------------------------------------------------------


def test_inspect_verify_and_export_leave_the_checkpoint_untouched(tmp_path, capsys, read_only_guard):
    from repair.cli.app import main

    root = str(read_only_guard(ROOT))
    assert main(["inspect", root, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    subtasks = [sub for op in document["operators"] for sub in op["subtasks"] if sub["handle"] == "changelog"]
    assert len(subtasks) == 2 * len(INFO["keyed_operators"])
    changelog_files = [f for sub in subtasks for f in sub["files"] if f["role"] == "changelog"]
    assert changelog_files and all("/dstl/" in f["path"] and not f["inline"] for f in changelog_files)
    assert main(["verify", root, "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert all(f["severity"] == "warning" and f["kind"] == "not_fully_checked" for f in findings)
    assert main(["export", root, "--out", str(tmp_path / "out"), "--workers", "1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert not document["skipped"]
    sources = {s["source"] for op in document["operators"] for s in op["states"] if s["kind"] not in ("operator-list", "union-list", "broadcast")}
    assert sources == {"changelog-keyed"}


def _copy(tmp_path) -> Path:
    copy = tmp_path / "checkpoints" / INFO["job_id"]
    shutil.copytree(ROOT, copy)
    return copy


def _newest_pieces(copy: Path) -> list[tuple[str, int]]:
    snapshots, _ = _snapshots()
    newest = max(snapshots, key=lambda s: s.metadata.checkpoint_id)
    return [(p.handle.path.rsplit("/", 1)[1], p.position) for _, _, k in _changelog_handles(newest)
            for h in k.non_materialized for p in h.handles]


def _verify(capsys, path: Path) -> tuple[int, list[dict]]:
    from repair.cli.app import main

    code = main(["verify", str(path), "--json"])
    return code, [f for f in json.loads(capsys.readouterr().out)["findings"] if f["severity"] == "error"]


def test_a_missing_changelog_file_breaks_the_checkpoints_that_use_it(tmp_path, capsys):
    copy = _copy(tmp_path)
    name, _ = _newest_pieces(copy)[0]
    recorded = Path(INFO["original_locations"]["checkpoints"].removeprefix("file://")) / INFO["job_id"] / "dstl" / name
    if recorded.exists():
        pytest.skip(f"Flink's own copy of the fixture is still at {recorded} (delete it to run this test)")
    (copy / "dstl" / name).unlink()
    code, errors = _verify(capsys, copy)
    assert code == 1 and errors and {f["kind"] for f in errors} == {"missing_file"}
    assert all(f["path"].endswith(f"/dstl/{name}") for f in errors)
    newest = f"chk-{max(INFO['retained_checkpoints'])}"
    assert newest in {f["snapshot"] for f in errors}


def test_damaged_change_sets_are_found_by_file_and_offset(tmp_path, capsys):
    copy = _copy(tmp_path)
    name, position = _newest_pieces(copy)[0]
    path = copy / "dstl" / name
    data = bytearray(path.read_bytes())
    data[1 + position : 1 + position + 4] = struct.pack(">i", 2**30)  # its key-group count
    path.write_bytes(bytes(data))
    code, errors = _verify(capsys, copy)
    assert code == 1 and {f["kind"] for f in errors} == {"bad_changelog"}
    assert all(f["offset"] == position and "key-group count" in f["message"] for f in errors)
    path.write_bytes(bytes(data[: 1 + position]))  # cut just before that change set
    code, errors = _verify(capsys, copy)
    assert code == 1 and {f["kind"] for f in errors} == {"bad_changelog"}
    assert any(f"offset {position} that _metadata points at" in f["message"] for f in errors)


def test_damage_outside_the_change_sets_a_checkpoint_reads_is_a_warning(tmp_path, capsys):
    """Flink reads only the change sets _metadata points at (real Flink 2.1 and 2.3 restore exact state past
    a DSTL file cut short or with a byte flipped elsewhere: damage matrix, flink-2.1-heap-changelog/changelog/*):
    a damaged change set that no retained checkpoint points at is a warning, exit 0."""
    from repair.cli.app import main

    info = fixture_info(FIXTURES / "flink-2.1-heap-changelog")
    root = FIXTURES / "flink-2.1-heap-changelog" / "checkpoints" / info["job_id"]
    copy = tmp_path / "checkpoints" / info["job_id"]
    shutil.copytree(root, copy)
    storage = st.default_storage()
    read = collections.defaultdict(set)  # by the newest checkpoint
    newest = discover(str(root), storage).snapshots[-1]
    for ref in [newest]:
        for _, _, keyed in _changelog_handles(load_snapshot(ref, str(root), storage)):
            for handle in keyed.non_materialized:
                for piece in getattr(handle, "handles", ()):
                    read[piece.handle.path.rsplit("/", 1)[1]].add(piece.position)
    unread = [(name, offset) for name in sorted(read)
              for offset, _ in iter_change_sets(changelog_stream((root / "dstl" / name).read_bytes())) if offset not in read[name]]
    assert unread, "every change set of the DSTL files the newest checkpoint reads is read by it"
    name, offset = unread[0]
    path = copy / "dstl" / name
    data = bytearray(path.read_bytes())
    data[1 + offset : 1 + offset + 4] = struct.pack(">i", 2**30)  # its key-group count
    path.write_bytes(bytes(data))
    assert main(["verify", str(copy / newest.name), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    damaged = [f for f in findings if f["kind"] == "bad_changelog"]  # one per subtask reading the file
    assert damaged and all(f["severity"] == "warning" and "Flink reads only the change sets _metadata points at" in f["message"]
                           for f in damaged)
    # an older checkpoint that reads that change set is refused
    assert main(["verify", str(copy), "--json"]) == 1
    errors = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["severity"] == "error"]
    assert errors and {f["kind"] for f in errors} == {"bad_changelog"} and newest.name not in {f["snapshot"] for f in errors}


def test_a_changelog_handle_that_lists_no_change_set_is_an_error(tmp_path):
    """Its recorded size says changes were logged; with no change set listed Flink replays none and restores
    the materialized state alone (real Flink 2.1: other state, damage matrix changelog-handle/missing)."""
    from fixtures.damage_matrix import Cell, prepare
    from repair.ops.verify.engine import verify

    prepared = prepare(Cell("flink-2.1-heap-changelog", "changelog-handle", "missing"), tmp_path)
    findings = [f for f in verify(str(prepared.chk_dir)).findings if f.severity == "error"]
    assert [f.kind for f in findings] == ["bad_changelog"]
    assert "points at no change set" in findings[0].message
