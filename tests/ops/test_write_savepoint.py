"""``repair write-savepoint``: an export written back as a canonical savepoint.

The judges are real Flink: its own canonical savepoints of the fixtures (the key-group streams written
here are byte for byte the ones Flink wrote for the same state), its key groups (every exported row's
``key_group`` was computed by Flink and must equal the one computed here from the key), and, in the
slow tests, real Flink restoring the written savepoints with exactly ``expected.json``, also after the
max parallelism and the parallelism changed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from repair.cli.app import main
from repair.errors import FormatError, RepairError, UsageError
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.full_snapshot.canonical import iter_key_group_entries
from repair.formats.flink.full_snapshot.canonical_writer import Entry, encode_key_group_stream, uncompressed_meta
from repair.formats.flink.handles import ByteStreamHandle, HandleType
from repair.formats.flink.key_hash import key_group_of
from repair.formats.flink.keygroups import java_long_hash, operator_id_for_uid
from repair.formats.flink.metadata import decode_metadata
from repair.formats.flink.savepoint_properties import CANONICAL_SAVEPOINT_PROPERTIES
from repair.ops.export.job import export
from repair.ops.verify.engine import verify
from repair.ops.write_savepoint import write_savepoint
from tests import damage
from tests.conftest import FIXTURE_NAMES, FIXTURES, fixture_info
from tests.writeback_testlib import export_rows

DEFAULT = "flink-1.20-default"
CANONICAL = sorted(p for p in FIXTURES.glob("*/savepoints/*/_metadata")
                   if decode_metadata(p.read_bytes()).properties.savepoint_format == "CANONICAL")
#: Fixtures whose keyed state write-savepoint writes back: every one.
WRITABLE = FIXTURE_NAMES


def _root(name: str) -> Path:
    return damage.checkpoint_root(FIXTURES / name)


def _canonical_of(name: str) -> Path:
    return next(p.parent for p in CANONICAL if p.parent.parent.parent.name == name)


def _stream_bytes(savepoint: Path, handle) -> bytes:
    delegate = handle.delegate
    return delegate.data if isinstance(delegate, ByteStreamHandle) else (savepoint / delegate.relative_path).read_bytes()




@pytest.fixture(scope="module")
def default_export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "export"
    export(str(_root(DEFAULT)), str(out))
    return out


# -- formats ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("metadata", CANONICAL, ids=lambda p: p.parent.parent.parent.name)
def test_the_writer_writes_flinks_canonical_streams_byte_for_byte(metadata):
    """Every key-group stream of every canonical savepoint Flink wrote, decoded and encoded again."""
    savepoint = decode_metadata(metadata.read_bytes())
    assert savepoint.trailer == CANONICAL_SAVEPOINT_PROPERTIES
    streams = 0
    for op in savepoint.operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            if handle is None:
                continue
            data = _stream_bytes(metadata.parent, handle)
            meta = decode_keyed_backend_meta(data)
            entries = [Entry(e.key_group, e.kv_state_id, e.key, e.value) for e in iter_key_group_entries(
                data, handle.key_groups, handle.offsets, compressed=meta.key_group_compression)]
            written, offsets = encode_key_group_stream(uncompressed_meta(data[: meta.end_offset]), handle.key_groups, entries)
            assert (written, offsets) == (data, handle.offsets)
            streams += 1
    assert streams


def test_the_stream_in_small_chunks_is_the_same_stream(monkeypatch):
    from repair.formats.flink.full_snapshot import canonical_writer

    metadata = _canonical_of(DEFAULT) / "_metadata"
    handle = next(s.managed_keyed_state for op in decode_metadata(metadata.read_bytes()).operators for s in op.subtasks
                  if s.managed_keyed_state is not None)
    data = _stream_bytes(metadata.parent, handle)
    meta = decode_keyed_backend_meta(data)
    entries = [Entry(e.key_group, e.kv_state_id, e.key, e.value)
               for e in iter_key_group_entries(data, handle.key_groups, handle.offsets, compressed=False)]
    monkeypatch.setattr(canonical_writer, "CHUNK_BYTES", 64)
    offsets: list[int] = []
    chunks = list(canonical_writer.iter_key_group_stream(data[: meta.end_offset], handle.key_groups, entries, offsets))
    assert len(chunks) > 10 and b"".join(chunks) == data and offsets == handle.offsets


def test_the_writer_refuses_entries_out_of_order_or_range():
    meta = b""
    with pytest.raises(ValueError, match="sorted"):
        encode_key_group_stream(meta, _range(0, 4), [Entry(1, 0, b"\x01a", b""), Entry(0, 0, b"\x00a", b"")])
    with pytest.raises(ValueError, match="outside"):
        encode_key_group_stream(meta, _range(0, 4), [Entry(4, 0, b"\x04a", b"")])


def _range(start: int, count: int):
    from repair.formats.flink.handles import KeyGroupRange

    return KeyGroupRange(start, count)


# -- the operation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", ["both", "decoded", "raw"])
def test_write_savepoint_of_an_unchanged_export_is_flinks_canonical_savepoint(columns, default_export, tmp_path, read_only_guard):
    """Whatever ``--columns`` kept: from ``decoded`` every raw cell that was left out (all but the
    void namespaces) is encoded from its decoded column, and the streams are still Flink's bytes."""
    read_only_guard(_root(DEFAULT))
    if columns != "both":
        default_export = tmp_path / "export"
        export(str(_root(DEFAULT)), str(default_export), columns=columns)
    read_only_guard(default_export)
    out = tmp_path / "savepoint"
    result = write_savepoint(str(default_export), str(out))
    assert result.ok and (out / "_metadata").is_file()
    encoded = Counter(name for op in result.operators for state in op.states for name, count in state.encoded.items() if count)
    if columns == "decoded":
        assert encoded["key_raw"] and encoded["value_raw"]  # the bytes came from the decoded columns
    else:
        assert not encoded
    written = decode_metadata((out / "_metadata").read_bytes())
    flink_dir = _canonical_of(DEFAULT)
    flink = decode_metadata((flink_dir / "_metadata").read_bytes())
    assert written.version == flink.version and written.trailer == flink.trailer
    assert [op.operator_id for op in written.operators] == [op.operator_id for op in decode_metadata(
        (_root(DEFAULT) / "chk-5" / "_metadata").read_bytes()).operators]
    compared = 0
    for op in written.operators:
        theirs = flink.operator(op.operator_id)
        assert (op.parallelism, op.max_parallelism) == (theirs.parallelism, theirs.max_parallelism)
        for sub in op.subtasks:
            mine = sub.managed_keyed_state
            if mine is None:
                assert sub.managed_operator_state is not None  # copied from the checkpoint
                continue
            flinks = theirs.subtasks[sub.index].managed_keyed_state
            assert mine.type_code == HandleType.SAVEPOINT_KEY_GROUPS and mine.key_groups == flinks.key_groups
            assert mine.offsets == flinks.offsets
            assert _stream_bytes(out, mine) == _stream_bytes(flink_dir, flinks)
            compared += 1
    assert compared == 10


@pytest.mark.parametrize("name", WRITABLE)
def test_export_of_the_written_savepoint_equals_the_export(name, tmp_path, read_only_guard):
    """Written from the export (both columns), the savepoint passes verify and exports the same rows; and
    written from ``export --columns decoded``, which keeps raw bytes only where it must, write-savepoint
    encodes the rest from the decoded columns and the savepoint still exports as the checkpoint does.
    (One test for both: the export of the checkpoint they compare with is made once.)"""
    root = read_only_guard(_root(name))
    first = tmp_path / "first"
    export(str(root), str(first))
    write_savepoint(str(read_only_guard(first)), str(tmp_path / "savepoint"))
    report = verify(str(tmp_path / "savepoint"), workers=1)  # the toolkit's own checks of every byte
    assert report.ok and not report.findings, [f.to_json() for f in report.findings]
    export(str(tmp_path / "savepoint"), str(tmp_path / "second"))
    assert export_rows(tmp_path / "second") == export_rows(first)

    export(str(root), str(tmp_path / "decoded"), columns="decoded")
    result = write_savepoint(str(read_only_guard(tmp_path / "decoded")), str(tmp_path / "from-decoded"))
    assert any(state.encoded for op in result.operators for state in op.states)
    export(str(tmp_path / "from-decoded"), str(tmp_path / "again"))
    assert export_rows(tmp_path / "again") == export_rows(first)


HEAP_TIMERS = "flink-1.20-rocksdb-heap-timers"


def test_heap_timers_are_written_as_keyed_state_as_in_flinks_canonical_savepoint(tmp_path):
    """RocksDB with timers on the heap: the checkpoint holds them in raw keyed state, Flink's canonical
    savepoint of the same state as keyed state. Written from the checkpoint's export, every keyed stream
    has Flink's meta data byte for byte (the timer states' meta info built from the raw keyed state's
    serializer snapshots), its key-group offsets and its entries (the heap queue's order within a key
    group aside), and no raw keyed state is left."""
    from repair.formats.flink.backend_meta import decode_keyed_backend_meta as meta_of

    export(str(_root(HEAP_TIMERS)), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "sp"))
    written = decode_metadata((tmp_path / "sp" / "_metadata").read_bytes())
    flink_dir = _canonical_of(HEAP_TIMERS)
    flink = decode_metadata((flink_dir / "_metadata").read_bytes())
    timer_states = 0
    for op in written.operators:
        for sub in op.subtasks:
            assert sub.raw_keyed_state is None
            if sub.managed_keyed_state is None:
                continue
            mine, theirs = sub.managed_keyed_state, flink.operator(op.operator_id).subtasks[sub.index].managed_keyed_state
            data, flinks = _stream_bytes(tmp_path / "sp", mine), _stream_bytes(flink_dir, theirs)
            meta = meta_of(data)
            assert data[: meta.end_offset] == flinks[: meta_of(flinks).end_offset]
            assert mine.offsets == theirs.offsets and len(data) == len(flinks)
            entries = [sorted((e.key_group, e.kv_state_id, e.key, e.value) for e in iter_key_group_entries(
                stream, handle.key_groups, handle.offsets, compressed=False)) for stream, handle in ((data, mine), (flinks, theirs))]
            assert entries[0] == entries[1]
            timer_states += sum(s.is_timer_state for s in meta.states)
    assert timer_states == 20  # 5 keyed operators, 2 subtasks, processing and event queues


def test_heap_timers_rescaled_up_and_down_come_back_as_they_were(tmp_path):
    """128 -> 256 -> 300 -> 128 at parallelism 3, 2, 2: every row, timers included, where Flink put it."""
    first = tmp_path / "first"
    export(str(_root(HEAP_TIMERS)), str(first))
    last = _rescale_chain(first, tmp_path, CHAIN)
    assert decode_metadata((last / "_metadata").read_bytes()).operator(PER_USER).max_parallelism == 128
    assert export_rows(tmp_path / f"export-{len(CHAIN) - 1}") == export_rows(first)
    assert any(state.startswith("_timer_state/") for _, state in export_rows(first))


def test_rescaled_savepoint_exports_the_same_rows_in_the_key_groups_flink_computes(default_export, tmp_path):
    """128 -> 300 key groups at parallelism 3: the same rows, each in the key group of its key (checked
    again when the rescaled export is written back at 300, which compares every row's key group with
    the key's)."""
    write_savepoint(str(default_export), str(tmp_path / "sp"), max_parallelism=300, parallelism=3)
    written = decode_metadata((tmp_path / "sp" / "_metadata").read_bytes())
    keyed = [op for op in written.operators if any(s.managed_keyed_state for s in op.subtasks)]
    assert keyed and all((op.max_parallelism, op.parallelism, len(op.subtasks)) == (300, 3, 3) for op in keyed)
    assert [s.managed_keyed_state.key_groups for s in keyed[0].subtasks] == [_range(0, 100), _range(100, 100), _range(200, 100)]
    assert not verify(str(tmp_path / "sp"), workers=1).findings
    export(str(tmp_path / "sp"), str(tmp_path / "rescaled"))
    assert export_rows(tmp_path / "rescaled", drop=("key_group",)) == export_rows(default_export, drop=("key_group",))
    assert export_rows(tmp_path / "rescaled") != export_rows(default_export)
    write_savepoint(str(tmp_path / "rescaled"), str(tmp_path / "again"))


def _rescale_chain(default_export: Path, tmp_path: Path, steps) -> Path:
    """write-savepoint and export in turn through ``steps`` (max parallelism, parallelism); the last savepoint."""
    source = default_export
    for number, (max_parallelism, parallelism) in enumerate(steps):
        savepoint = tmp_path / f"sp-{number}"
        write_savepoint(str(source), str(savepoint), max_parallelism=max_parallelism, parallelism=parallelism)
        source = tmp_path / f"export-{number}"
        export(str(savepoint), str(source))
    return savepoint


CHAIN = [(256, 3), (300, 2), (128, 2)]


def test_rescaled_up_and_down_the_rows_come_back_with_flinks_key_groups(default_export, tmp_path):
    """128 -> 256 -> 300 -> 128: back at 128, every row is where Flink put it (key groups included)."""
    _rescale_chain(default_export, tmp_path, CHAIN)
    assert export_rows(tmp_path / f"export-{len(CHAIN) - 1}") == export_rows(default_export)


def test_rescale_is_export_and_write_savepoint_in_one(default_export, tmp_path, read_only_guard):
    from repair.ops.write_savepoint import rescale

    result = rescale(str(read_only_guard(_root(DEFAULT))), str(tmp_path / "sp"), max_parallelism=256, parallelism=3)
    assert result.export is None and result.to_json()["export"] is None
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    assert export_rows(tmp_path / "again", drop=("key_group",)) == export_rows(default_export, drop=("key_group",))
    assert decode_metadata((tmp_path / "sp" / "_metadata").read_bytes()).operators[0].max_parallelism == 256
    with pytest.raises(UsageError, match="needs a new max parallelism"):
        rescale(str(_root(DEFAULT)), str(tmp_path / "other"))


def test_rescale_with_scratch_writes_the_same_savepoint_and_leaves_the_scratch_directory_empty(tmp_path, read_only_guard):
    """``--scratch DIR``: the intermediate export below DIR (on a Spark cluster, storage every executor
    reads), deleted afterwards; the savepoint is the one written with local scratch space."""
    from repair.ops.write_savepoint import rescale

    root = str(read_only_guard(_root(DEFAULT)))
    rescale(root, str(tmp_path / "local"), max_parallelism=256, parallelism=3)
    (tmp_path / "scratch").mkdir()
    rescale(root, str(tmp_path / "shared"), max_parallelism=256, parallelism=3, scratch=str(tmp_path / "scratch"))
    assert _files(tmp_path / "shared") == _files(tmp_path / "local")
    assert list((tmp_path / "scratch").iterdir()) == []
    with pytest.raises(UsageError, match="needs --scratch DIR"):  # before any Spark starts
        rescale(root, str(tmp_path / "cluster"), max_parallelism=256, master="spark://127.0.0.1:1")
    assert not (tmp_path / "cluster").exists()


def test_rescale_with_scratch_on_s3_leaves_nothing_there(s3, s3_storage, tmp_path):
    from repair.ops.write_savepoint import rescale

    bucket = s3.new_bucket({"keep/readme": b"the user's"})
    rescale(str(_root(DEFAULT)), str(tmp_path / "sp"), max_parallelism=256, scratch=f"s3://{bucket}/tmp", storage=s3_storage)
    assert decode_metadata((tmp_path / "sp" / "_metadata").read_bytes()).operators[0].max_parallelism == 256
    assert [k for k in s3.keys(bucket) if not k.endswith("/")] == ["keep/readme"]


def test_from_and_to_s3_the_same_savepoint(s3, s3_storage, default_export, tmp_path):
    """The export and the source checkpoint on S3, the savepoint written to S3: the same files as locally."""
    root = _root(DEFAULT)
    files = {f"ckpt/{root.name}/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    manifest = json.loads((default_export / "_export.json").read_text())
    bucket = s3.new_bucket(files)
    manifest["source"] = f"s3://{bucket}/ckpt/{root.name}"
    files = {f"export/{p.relative_to(default_export)}": p.read_bytes() for p in default_export.rglob("*.parquet")}
    files["export/_export.json"] = json.dumps(manifest).encode()
    client = s3.client()
    for key, data in files.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    remote = write_savepoint(f"s3://{bucket}/export", f"s3://{bucket}/savepoint", storage=s3_storage)
    local = write_savepoint(str(default_export), str(tmp_path / "sp"))
    assert remote.to_json()["entries"] == local.to_json()["entries"]
    keys = sorted(k.removeprefix("savepoint/") for k in s3.keys(bucket) if k.startswith("savepoint/") and not k.endswith("/"))
    assert keys == sorted(str(p.relative_to(tmp_path / "sp")) for p in (tmp_path / "sp").rglob("*") if p.is_file())
    for key in keys:
        assert client.get_object(Bucket=bucket, Key=f"savepoint/{key}")["Body"].read() == (tmp_path / "sp" / key).read_bytes(), key


def test_the_cli_writes_and_prints_the_json(default_export, tmp_path, capsys):
    assert main(["write-savepoint", str(default_export), "--out", str(tmp_path / "sp"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] and document["savepoint_format"] == "canonical" and document["entries"] > 1000
    assert main(["write-savepoint", str(default_export), "--out", str(tmp_path / "sp")]) == 2  # exists


# -- tasks: in-process, in a process pool, on Spark -----------------------------------------------------------


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _same_savepoint_wherever_tasks_run(export_dir: Path, tmp_path: Path, **where) -> None:
    """The savepoint written with ``where`` (workers, master) is the in-process one, file by file and
    byte for byte, unchanged and rescaled; no spilled file is left in it."""
    for options in ({}, {"max_parallelism": 256, "parallelism": 3}):
        label = "-".join(map(str, options.values())) or "same"
        write_savepoint(str(export_dir), str(tmp_path / f"one-{label}"), workers=1, **options)
        write_savepoint(str(export_dir), str(tmp_path / f"tasks-{label}"), **where, **options)
        mine, theirs = _files(tmp_path / f"one-{label}"), _files(tmp_path / f"tasks-{label}")
        assert list(mine) == list(theirs) and mine == theirs
        assert sorted(p.name for p in (tmp_path / f"tasks-{label}").iterdir() if p.is_dir()) == []


def test_the_savepoint_is_the_same_written_in_a_process_pool(default_export, tmp_path):
    _same_savepoint_wherever_tasks_run(default_export, tmp_path, workers=2)


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_the_savepoint_is_the_same_written_by_spark_tasks(default_export, tmp_path):
    _same_savepoint_wherever_tasks_run(default_export, tmp_path, master="local[2]")
    assert main(["write-savepoint", str(default_export), "--out", str(tmp_path / "cli"), "--master", "local[2]",
                 "--parallelism", "3", "--max-parallelism", "256"]) == 0
    assert _files(tmp_path / "cli") == _files(tmp_path / "one-256-3")


def test_memory_holds_one_key_groups_entries_not_a_subtasks(default_export, tmp_path, monkeypatch):
    """The stream task sorts bucket by bucket: each batch of entries it holds is one key group's (at
    most 256 key groups per subtask: one bucket each), and with fewer buckets a few key groups' (the
    stream the same)."""
    from repair.ops.write_savepoint import keyed_tasks

    batches: list[list] = []

    def recorded(pieces, states):
        entries = original(pieces, states)
        batches.append(entries)
        return entries

    original = keyed_tasks.subtask_entries
    monkeypatch.setattr(keyed_tasks, "subtask_entries", recorded)
    write_savepoint(str(default_export), str(tmp_path / "per-group"), workers=1)
    assert batches and all(len({e.key_group for e in batch}) == 1 for batch in batches)
    per_operator_subtask = sum(len(b) for b in batches) / (5 * 2)  # five keyed operators, two subtasks
    assert max(len(b) for b in batches) < per_operator_subtask
    batches.clear()
    monkeypatch.setattr(keyed_tasks, "MAX_BUCKETS", 4)
    write_savepoint(str(default_export), str(tmp_path / "four-buckets"), workers=1)
    groups = [{e.key_group for e in batch} for batch in batches]  # 64 key groups per subtask: 16 per bucket
    assert max(map(len, groups)) > 1 and all(max(g) - min(g) < 16 and min(g) // 16 == max(g) // 16 for g in groups)
    assert _files(tmp_path / "four-buckets") == _files(tmp_path / "per-group")


def test_a_failed_task_leaves_no_output_and_no_spilled_files(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    _rewrite_part(_part(copy, "balance"), lambda t: pa.concat_tables([t, t.slice(2, 1)]))
    _fails(copy, tmp_path, "duplicate", workers=2)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("savepoint")]


# -- values changed in the Parquet --------------------------------------------------------------------------

PER_USER, PER_ACCOUNT, PER_TYPE = (operator_id_for_uid(uid) for uid in ("per-user", "per-account", "per-type"))


def edit_value(export_dir: Path, operator: str, state: str, change) -> None:
    """``change(rows)`` on the rows (dicts) of every part of a state; the parts keep their schema."""
    for part in sorted((export_dir / f"operator={operator}" / f"state={quote(state, safe='')}").glob("*.parquet")):
        table = pq.read_table(part)
        rows = table.to_pylist()
        rows = change(rows, int(part.stem.rpartition("-")[2])) or rows
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)


def _changed_export(default_export: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the export with values changed the way a user would with pyarrow or pandas (decoded
    columns changed, their raw bytes left stale or set to null, a list element added), and
    ``expected.json`` changed the same way."""
    copy = _copy_export(default_export, tmp_path)
    expected = json.loads((FIXTURES / DEFAULT / "expected.json").read_text())
    keyed = expected["keyed"]

    def balance(rows, subtask):  # Long value: the raw bytes stale in subtask 0, null in subtask 1
        for row in rows:
            row["value"] += 1000
            if subtask == 1:
                row["value_raw"] = None

    def last_tag(rows, subtask):  # String value, raw null
        for row in rows:
            row["value"], row["value_raw"] = f"changed-{row['key']}-ü😀", None

    def recent_tag(rows, subtask):  # TTL String value: the TTL timestamp kept, the value changed
        for row in rows:
            row["value"] = row["value"] + "!"

    def amount_by_tag(rows, subtask):  # map values (Long), raw stale
        for row in rows:
            row["value"] = -row["value"]

    def positive(rows, subtask):  # Boolean, raw stale
        for row in rows:
            row["value"] = not row["value"]

    def tags(rows, subtask):  # a list element added to user "a" (raw columns null)
        mine = [row for row in rows if row["key"] == "a"]
        if mine:
            last = max(mine, key=lambda row: row["list_index"])
            rows.append({**last, "list_index": last["list_index"] + 1, "value": "added", "value_raw": None,
                         "key_raw": None, "namespace_raw": None, "key_group": None})

    for operator, state, change in [(PER_ACCOUNT, "balance", balance), (PER_USER, "last-tag", last_tag),
                                    (PER_USER, "recent-tag", recent_tag), (PER_USER, "amount-by-tag", amount_by_tag),
                                    (PER_TYPE, "positive", positive), (PER_USER, "tags", tags)]:
        edit_value(copy, operator, state, change)
    for account in keyed["per-account"].values():
        if "balance" in account:
            account["balance"] += 1000
    for user, states in keyed["per-user"].items():
        if "last-tag" in states:
            states["last-tag"] = f"changed-{user}-ü😀"
        if "recent-tag" in states:
            states["recent-tag"] += "!"
        if "amount-by-tag" in states:
            states["amount-by-tag"] = {tag: -amount for tag, amount in states["amount-by-tag"].items()}
    keyed["per-user"]["a"]["tags"].append("added")
    for states in keyed["per-type"].values():
        if "positive" in states:
            states["positive"] = not states["positive"]
    return copy, expected


def test_changed_values_are_encoded_and_export_back_as_changed(default_export, tmp_path, read_only_guard):
    changed, expected = _changed_export(default_export, tmp_path)
    read_only_guard(changed)
    result = write_savepoint(str(changed), str(tmp_path / "sp"))
    encoded = {(op.operator_id, s.state): s.encoded for op in result.operators for s in op.states if s.encoded}
    assert encoded[(PER_ACCOUNT, "balance")] == {"value_raw": 16}
    assert encoded[(PER_USER, "tags")] == {"key_raw": 1, "namespace_raw": 1, "value_raw": 1}
    assert set(encoded) == {(PER_ACCOUNT, "balance"), (PER_USER, "last-tag"), (PER_USER, "recent-tag"),
                            (PER_USER, "amount-by-tag"), (PER_TYPE, "positive"), (PER_USER, "tags")}
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    again = {row["key"]: row["value"] for row in pq.read_table(
        tmp_path / "again" / f"operator={PER_ACCOUNT}" / "state=balance").to_pylist()}
    assert again == {int(key): states["balance"] for key, states in expected["keyed"]["per-account"].items() if "balance" in states}
    tags = sorted((row["list_index"], row["value"]) for row in pq.read_table(
        tmp_path / "again" / f"operator={PER_USER}" / "state=tags").to_pylist() if row["key"] == "a")
    assert [value for _, value in tags] == expected["keyed"]["per-user"]["a"]["tags"]
    # and unchanged states keep their bytes: the changed savepoint's export differs only where edited
    assert {k for k, v in export_rows(tmp_path / "again").items() if v != export_rows(default_export)[k]} == set(encoded)


def test_a_changed_value_of_a_serializer_without_encoder_is_refused_not_dropped(default_export, tmp_path):
    """A POJO (no encoder here) edited in its decoded column: the change cannot be written, and keeping
    the old raw bytes would lose it silently. The error names the part, the row and the column."""
    copy = _copy_export(default_export, tmp_path)

    def rename_owner(rows, subtask):
        if subtask == 0:
            rows[0]["value"] = {**rows[0]["value"], "owner": "someone else"}

    edit_value(copy, PER_ACCOUNT, "profile", rename_owner)
    with pytest.raises(FormatError) as refused:
        write_savepoint(str(copy), str(tmp_path / "sp"))
    assert "state=profile/part-00000.parquet, row 0" in str(refused.value) and "no encoder" in str(refused.value)
    assert not (tmp_path / "sp").exists()


def test_a_new_key_goes_to_the_key_group_of_its_key(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)

    def add(rows, subtask):
        if subtask == 0:
            rows.append({**rows[0], "key": 123456789, "value": 5, "key_raw": None, "value_raw": None, "key_group": None})

    edit_value(copy, PER_ACCOUNT, "balance", add)
    write_savepoint(str(copy), str(tmp_path / "sp"), max_parallelism=256, parallelism=3)
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    rows = pq.read_table(tmp_path / "again" / f"operator={PER_ACCOUNT}" / "state=balance").to_pylist()
    new = [row for row in rows if row["key"] == 123456789]
    assert [(row["value"], row["key_group"]) for row in new] == [(5, key_group_of(java_long_hash, 123456789, 256))]


def test_a_value_the_serializer_cannot_write_names_file_and_row(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)

    def too_big(rows, subtask):
        if subtask == 1:
            rows[3]["value"], rows[3]["value_raw"] = None, None

    edit_value(copy, PER_ACCOUNT, "balance", too_big)
    error = _fails(copy, tmp_path, "remove the row")
    assert f"{_part(copy, 'balance')}, row 3" in str(error)


# -- bad input: a clear error naming file and row, and no output ----------------------------------------


def _copy_export(default_export: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "export"
    shutil.copytree(default_export, copy)
    return copy


def _rewrite_part(part: Path, change) -> None:
    table = pq.read_table(part)
    pq.write_table(change(table), part)


def _part(export_dir: Path, state: str, operator: str = "f40a3056fb7c04a9bff8fb0177a847cf", subtask: int = 1) -> Path:
    return export_dir / f"operator={operator}" / f"state={state}" / f"part-{subtask:05d}.parquet"


def _fails(export_dir: Path, tmp_path: Path, match: str, **options):
    out = tmp_path / "savepoint"
    with pytest.raises(RepairError, match=match) as caught:
        write_savepoint(str(export_dir), str(out), **options)
    assert not out.exists() and not list(tmp_path.glob("savepoint*"))
    return caught.value


def test_a_duplicate_key_of_a_value_state_names_file_and_row(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    part = _part(copy, "balance")
    _rewrite_part(part, lambda t: pa.concat_tables([t, t.slice(2, 1)]))
    error = _fails(copy, tmp_path, "duplicate")
    assert str(part) in str(error) and f"row {len(pq.read_table(part)) - 1}" in str(error) and "row 2" in str(error)


def test_a_key_in_the_wrong_key_group_names_file_and_row(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    part = _part(copy, "balance")
    groups = pq.read_table(part).column("key_group").to_pylist()
    _rewrite_part(part, lambda t: t.set_column(0, "key_group", pa.array([groups[0] ^ 1, *groups[1:]], pa.int32())))
    error = _fails(copy, tmp_path, "key_group")
    assert f"{part}, row 0" in str(error) and isinstance(error, FormatError)


def test_a_part_with_another_schema_is_named(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    part = _part(copy, "amounts")
    _rewrite_part(part, lambda t: t.drop_columns(["list_index"]))
    assert str(part) in str(_fails(copy, tmp_path, "list_index"))
    _rewrite_part(part, lambda t: t.append_column("list_index", pa.array(["x"] * len(t), pa.string())))
    assert str(part) in str(_fails(copy, tmp_path, "list_index"))


def test_a_key_type_without_a_known_hash_cannot_change_max_parallelism(monkeypatch, default_export, tmp_path):
    from repair.ops.write_savepoint import rows as module

    monkeypatch.setattr(module, "key_hasher", lambda serializer: None)
    error = _fails(default_export, tmp_path, "hashCode", max_parallelism=256)
    assert isinstance(error, UsageError) and "StringSerializer" in str(error)


def test_a_dropped_keyed_state_is_gone_with_its_meta_data(default_export, tmp_path):
    result = write_savepoint(str(default_export), str(tmp_path / "sp"), drop_states=["per-user/recent-tag"])
    assert next(op for op in result.operators if op.operator_id == PER_USER).dropped == ["recent-tag"]
    written = decode_metadata((tmp_path / "sp" / "_metadata").read_bytes())
    handle = written.operator(PER_USER).subtasks[0].managed_keyed_state
    data = (tmp_path / "sp" / handle.delegate.relative_path).read_bytes()
    names = [s.name for s in decode_keyed_backend_meta(data).states]
    assert "recent-tag" not in names and len(names) == 7
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    before, after = export_rows(default_export), export_rows(tmp_path / "again")
    assert after == {k: v for k, v in before.items() if k != (PER_USER, "recent-tag")}
    for value, match in [("per-user/nope", "no keyed state named 'nope'"), ("records-seen/records-seen", "no keyed state"),
                         ("nope/x", "no operator"), ("x", "OPERATOR/STATE")]:
        with pytest.raises(UsageError, match=match):
            write_savepoint(str(default_export), str(tmp_path / "other"), drop_states=[value])
    assert not (tmp_path / "other").exists()


def test_meta_without_states_keeps_every_other_byte():
    from repair.formats.flink.full_snapshot.canonical_writer import meta_without_states

    flink = _canonical_of(DEFAULT)
    handle = next(s.managed_keyed_state for op in decode_metadata((flink / "_metadata").read_bytes()).operators
                  for s in op.subtasks if s.managed_keyed_state is not None)
    data = _stream_bytes(flink, handle)
    meta = data[: decode_keyed_backend_meta(data).end_offset]
    decoded = decode_keyed_backend_meta(meta)
    assert meta_without_states(meta, []) == meta
    names = [s.name for s in decoded.states]
    smaller = decode_keyed_backend_meta(meta_without_states(meta, names[1:2]))
    assert [s.name for s in smaller.states] == names[:1] + names[2:] and smaller.complete
    assert smaller.states == decoded.states[:1] + decoded.states[2:] and smaller.key_serializer == decoded.key_serializer


def test_a_moved_source_is_named_and_can_be_given(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    manifest = json.loads((copy / "_export.json").read_text())
    manifest["source"] = str(tmp_path / "moved-away")
    (copy / "_export.json").write_text(json.dumps(manifest))
    _fails(copy, tmp_path, "cannot be read where _export.json says")
    assert write_savepoint(str(copy), str(tmp_path / "sp"), source=str(_root(DEFAULT))).ok


def test_parallelism_larger_than_max_parallelism_is_refused(default_export, tmp_path):
    _fails(default_export, tmp_path, "smaller than its parallelism", max_parallelism=4, parallelism=5)


def test_the_output_may_not_be_inside_an_input(default_export, tmp_path):
    with pytest.raises(UsageError):
        write_savepoint(str(default_export), str(default_export / "savepoint"))


def test_a_changed_operator_list_state_is_written_and_other_changes_refused(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    seen = operator_id_for_uid("records-seen")

    def change(rows, subtask):
        rows[0]["value"] = 999  # value_raw left stale
        rows.append({**rows[0], "list_index": 1, "value": 5, "value_raw": None})

    edit_value(copy, seen, "records-seen", change)
    result = write_savepoint(str(copy), str(tmp_path / "sp"))
    assert next(op for op in result.operators if op.operator_id == seen).rewritten == ["0/managed_operator_state"]
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    rows = pq.read_table(tmp_path / "again" / f"operator={seen}" / "state=records-seen").to_pylist()
    assert sorted((row["list_index"], row["value"]) for row in rows) == [(0, 999), (1, 5)]
    source = operator_id_for_uid("records")  # the source's split state: unchanged, copied
    assert export_rows(tmp_path / "again")[(source, "SourceReaderState")] == export_rows(default_export)[(source, "SourceReaderState")]
    (copy / f"operator={seen}" / "state=records-seen" / "part-00000.parquet").unlink()
    _fails(copy, tmp_path, "may not be added or removed")


def test_a_state_the_source_does_not_register_is_refused(default_export, tmp_path):
    copy = _copy_export(default_export, tmp_path)
    manifest = json.loads((copy / "_export.json").read_text())
    operator = next(op for op in manifest["operators"] if op["operator_id"] == PER_ACCOUNT)
    operator["states"].append({**operator["states"][0], "state": "invented"})
    (copy / "_export.json").write_text(json.dumps(manifest))
    _fails(copy, tmp_path, "'invented' is in the export but not in the keyed meta data")


# -- real Flink -------------------------------------------------------------------------------------------


def _restore(savepoint: Path, name: str, parallelism: int, max_parallelism: int | None = None) -> None:
    """Real Flink (the fixture's version and state backend) restores ``savepoint`` with ``expected.json``.
    ForSt (Flink 2.1.1) restores no canonical savepoint ("Not support restoring yet for
    ForStStateBackend"): its savepoints are restored with RocksDB, as users have to."""
    from fixtures import state_model
    from fixtures.restore import restore_state

    info = fixture_info(FIXTURES / name)
    restored = restore_state(info["flink_version"], savepoint, state_model.read_records(FIXTURES / name / "records.tsv"),
                             parallelism=parallelism, max_parallelism=max_parallelism,
                             state_backend="rocksdb" if info["spec"]["state_backend"] == "forst" else info["spec"]["state_backend"],
                             extra_conf=info["spec"]["extra"])
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


@pytest.mark.slow
def test_real_flink_restores_a_dropped_keyed_state_as_empty(default_export, tmp_path):
    write_savepoint(str(default_export), str(tmp_path / "sp"), drop_states=["per-user/recent-tag"])
    from fixtures import state_model
    from fixtures.restore import restore_state

    restored = restore_state("1.20.3", tmp_path / "sp", state_model.read_records(FIXTURES / DEFAULT / "records.tsv"))
    expected = json.loads((FIXTURES / DEFAULT / "expected.json").read_text())
    for states in expected["keyed"]["per-user"].values():
        states.pop("recent-tag", None)
    assert restored["keyed"] == expected["keyed"] and restored["operator"] == expected["operator"]


@pytest.mark.slow
def test_real_flink_restores_after_rescaling_up_and_down(default_export, tmp_path):
    _restore(_rescale_chain(default_export, tmp_path, CHAIN), DEFAULT, 2, 128)


@pytest.mark.slow
def test_real_flink_restores_a_rescaled_checkpoint(tmp_path):
    from repair.ops.write_savepoint import rescale

    rescale(str(_root("flink-2.1-default")), str(tmp_path / "sp"), max_parallelism=200, parallelism=3)
    _restore(tmp_path / "sp", "flink-2.1-default", 3, 200)


@pytest.mark.slow
def test_real_flink_restores_values_changed_in_the_parquet(default_export, tmp_path):
    changed, expected = _changed_export(default_export, tmp_path)

    def seen(rows, subtask):  # operator list state too
        rows[0]["value"] = 12345

    edit_value(changed, operator_id_for_uid("records-seen"), "records-seen", seen)
    expected["operator"]["records-seen"]["records-seen"] = [12345]
    write_savepoint(str(changed), str(tmp_path / "sp"), max_parallelism=256, parallelism=3)
    from fixtures import state_model
    from fixtures.restore import restore_state

    restored = restore_state("1.20.3", tmp_path / "sp", state_model.read_records(FIXTURES / DEFAULT / "records.tsv"),
                             parallelism=3, max_parallelism=256)
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


CHANGELOG = "flink-1.20-changelog"


def _changelog_only_checkpoint() -> Path:
    """flink-1.20-changelog's chk-2 (real Flink 1.20): per-user has nothing materialized in either
    subtask, every one of its states is registered only in the changelog."""
    return _root(CHANGELOG) / "chk-2"


def test_states_only_in_the_changelog_are_written_with_the_changelogs_meta_info(tmp_path):
    """The meta data of an operator whose states only the changelog registers is built from the
    METADATA changes: the head (key serializer from a timer state's serializer) and every logged state's
    meta info byte for byte those Flink materializes later (chk-5) for the same job. Exported again, the rows
    are the checkpoint's (rescaled 128 -> 256 at parallelism 3)."""
    from repair.formats.flink.backend_meta import decode_keyed_backend_meta as meta_of
    from repair.formats.flink.handles import ChangelogBackendHandle
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.resolved import read_resolved
    from repair.io.snapshot import load_snapshot

    source = _changelog_only_checkpoint()
    storage = st.default_storage()
    chk2 = decode_metadata((source / "_metadata").read_bytes())
    assert all(isinstance(sub.managed_keyed_state, ChangelogBackendHandle) and not any(sub.managed_keyed_state.materialized)
               for sub in chk2.operator(PER_USER).subtasks)
    export(str(source), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "sp"), max_parallelism=256, parallelism=3)
    written = decode_metadata((tmp_path / "sp" / "_metadata").read_bytes()).operator(PER_USER)
    data = _stream_bytes(tmp_path / "sp", written.subtasks[0].managed_keyed_state)
    mine = meta_of(data)
    layout = discover(str(_root(CHANGELOG)), storage)
    later = load_snapshot(layout.snapshots[-1], layout.root, storage)
    materialized = later.metadata.operator(PER_USER).subtasks[0].managed_keyed_state.materialized[0]
    flinks_bytes = read_resolved(storage, later.resolver.resolve(materialized.meta))
    flinks = meta_of(flinks_bytes)

    def infos(meta, raw):
        ends = [s.offset for s in meta.states[1:]] + [meta.end_offset]
        return {s.name: raw[s.offset : end] for s, end in zip(meta.states, ends)}

    assert data[: mine.states[0].offset - 2] == flinks_bytes[: flinks.states[0].offset - 2]  # version, flag, key serializer
    ours, theirs = infos(mine, data), infos(flinks, flinks_bytes)
    assert ours == {name: theirs[name] for name in ours} and len(ours) == 7
    # the processing-time queue, never used, is never logged (Flink registers it anew on restore)
    assert set(theirs) - set(ours) == {"_timer_state/processing_user-timers"}
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    assert export_rows(tmp_path / "again", drop=("key_group",)) == export_rows(tmp_path / "export", drop=("key_group",))


def test_an_operator_whose_key_serializer_nothing_records_is_refused_with_the_exports_reason(tmp_path):
    """Flink 2.1's chk-1: the count window has nothing materialized and no timers, so no key serializer
    is recorded anywhere; export skips its states and write-savepoint says why."""
    export(str(_root("flink-2.1-heap-changelog") / "chk-1"), str(tmp_path / "export"))
    error = _fails(tmp_path / "export", tmp_path, "per-user-count-window")
    assert "no key serializer recorded" in str(error)


SNAPPY = "flink-2.1-heap-p3-snappy"


def _snappy_seen_changed(tmp_path: Path) -> Path:
    """The Snappy fixture's export with the operator list state ``records-seen`` changed to [12345, 7]."""
    export(str(_root(SNAPPY)), str(tmp_path / "export"))

    def seen(rows, subtask):
        rows[0]["value"] = 12345  # value_raw left stale
        rows.append({**rows[0], "list_index": 1, "value": 7, "value_raw": None})

    edit_value(tmp_path / "export", "records-seen", "records-seen", seen)  # metadata v5+: directories named by uid
    return tmp_path / "export"


def test_a_changed_list_state_of_a_snappy_compressed_file_is_written_compressed(tmp_path):
    from repair.formats.flink.operator_state import OperatorStateFile

    write_savepoint(str(_snappy_seen_changed(tmp_path)), str(tmp_path / "sp"))
    written = decode_metadata((tmp_path / "sp" / "_metadata").read_bytes())
    handle = written.operator(operator_id_for_uid("records-seen")).subtasks[0].managed_operator_state
    assert OperatorStateFile(_stream_bytes(tmp_path / "sp", handle), handle.states).compressed
    export(str(tmp_path / "sp"), str(tmp_path / "again"))
    rows = pq.read_table(tmp_path / "again" / "operator=records-seen" / "state=records-seen").to_pylist()
    assert sorted((row["list_index"], row["value"]) for row in rows) == [(0, 12345), (1, 7)]


@pytest.mark.slow
def test_real_flink_restores_states_registered_only_in_the_changelog(tmp_path):
    """Real Flink 1.20 (RocksDB) restores the savepoint of chk-2 of flink-1.20-changelog rescaled 128 ->
    256 at parallelism 3 with exactly the state of the records it covers (the job's semantics in Python),
    per-user's states included, registered only in the changelog."""
    from fixtures import state_model
    from fixtures.restore import restore_state

    export(str(_changelog_only_checkpoint()), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "sp"), max_parallelism=256, parallelism=3)
    info = fixture_info(FIXTURES / CHANGELOG)
    records = state_model.read_records(FIXTURES / CHANGELOG / "records.tsv")[: info["records_per_checkpoint"]["2"]]
    restored = restore_state(info["flink_version"], tmp_path / "sp", records, parallelism=3, max_parallelism=256)
    expected = state_model.expected_state(records)
    assert restored["keyed"]["per-user"] and restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


@pytest.mark.slow
def test_real_flink_restores_a_changed_snappy_compressed_operator_state(tmp_path):
    """Flink 2.1, heap backend, snapshot compression: the rewritten compressed list state restores, at a
    new max parallelism and parallelism."""
    write_savepoint(str(_snappy_seen_changed(tmp_path)), str(tmp_path / "sp"), max_parallelism=256, parallelism=2)
    from fixtures import state_model
    from fixtures.restore import restore_state

    info = fixture_info(FIXTURES / SNAPPY)
    restored = restore_state(info["flink_version"], tmp_path / "sp", state_model.read_records(FIXTURES / SNAPPY / "records.tsv"),
                             parallelism=2, max_parallelism=256, state_backend=info["spec"]["state_backend"],
                             extra_conf=info["spec"]["extra"])
    expected = json.loads((FIXTURES / SNAPPY / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == {"records-seen": {"records-seen": [12345, 7]}}


@pytest.mark.slow
@pytest.mark.parametrize("max_parallelism, parallelism", [(None, None), (256, 3), (300, 3), (128, 1)])
def test_real_flink_restores_the_written_savepoint(default_export, tmp_path, max_parallelism, parallelism):
    """Unchanged, 128 -> 256 and 128 -> 300 at parallelism 3, and 300 -> 128 at parallelism 1 (from the
    export of the savepoint written at 300)."""
    source = default_export
    if max_parallelism == 128:
        write_savepoint(str(default_export), str(tmp_path / "at-300"), max_parallelism=300, parallelism=3)
        export(str(tmp_path / "at-300"), str(tmp_path / "export-300"))
        source = tmp_path / "export-300"
    write_savepoint(str(source), str(tmp_path / "sp"), max_parallelism=max_parallelism, parallelism=parallelism)
    _restore(tmp_path / "sp", DEFAULT, parallelism or 2, max_parallelism)


@pytest.mark.slow
@pytest.mark.parametrize("name, max_parallelism, parallelism", [
    ("flink-2.3-default", 300, 3),  # RocksDB, the newest release, rescaled
    ("flink-2.0-p3-mp300", 128, 2),  # max parallelism 300 -> 128
    ("flink-2.1-heap-p3-snappy", 256, 2),  # the heap backend (compressed snapshots) restoring the canonical savepoint
    ("flink-1.20-rocksdb-heap-timers", 256, 3),  # timers in raw keyed state, re-assigned (restored timers fire)
    ("flink-1.20-changelog", 256, 3),  # the changelog state backend: materialized state with the changes applied
    ("flink-2.3-heap-changelog", None, None),
    ("flink-1.15-default", 256, 3),  # metadata version 3 (no trailer)
    ("flink-2.1-forst", 200, 3),  # a ForSt checkpoint, its savepoint restored by RocksDB
    ("flink-2.1-default", None, None),
    ("flink-1.20-heap", 256, 3),
    ("flink-1.20-p3-external-xxhash-lz4", 128, 2),  # max parallelism 256 -> 128, parallelism 3 -> 2
    ("flink-2.1-p3-external-xxh3-zstd", 300, 2),
    ("flink-1.20-file-merging", 256, 3),  # segments of merged files
    ("flink-1.20-bloom-filter", None, None),
    ("flink-1.20-rocksdb-full-snappy", 200, 3),  # full (native) RocksDB checkpoints
    ("flink-2.1-heap-changelog", 256, 3),
])
def test_real_flink_restores_the_written_savepoint_of_other_fixtures(name, max_parallelism, parallelism, tmp_path):
    export(str(_root(name)), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "sp"), max_parallelism=max_parallelism, parallelism=parallelism)
    _restore(tmp_path / "sp", name, parallelism or fixture_info(FIXTURES / name)["parallelism"], max_parallelism)


@pytest.mark.slow
def test_real_flink_2_restores_rocksdb_rescaled_up_and_down_at_another_parallelism(tmp_path):
    """Flink 2.3, RocksDB: 128 -> 256 (p3) -> 300 (p1) -> 128 (p3), each step exported and written back,
    restored at parallelism 3 (the checkpoint's is 2) with exactly expected.json."""
    name = "flink-2.3-default"
    export(str(_root(name)), str(tmp_path / "first"))
    last = _rescale_chain(tmp_path / "first", tmp_path, [(256, 3), (300, 1), (128, 3)])
    _restore(last, name, 3, 128)


def _late_tags(records) -> dict[str, str]:
    """per-user's late-tag (``fixture.late-state``) in Python: the tag of each user's latest add from the
    third wave on (PerUserFunction.LATE_WAVE), cleared by a clear of those waves."""
    late: dict[str, str] = {}
    for r in records:
        if r.wave < 2:
            continue
        if r.op == "clear":
            late.pop(r.user, None)
        elif r.op != "untag":
            late[r.user] = r.tag
    return late


def _assert_written_back_and_restored(flink_version: str, export_dir: Path, out_base: Path, records, expected: dict) -> None:
    """The export written back unchanged and rescaled 128 -> 256 at parallelism 3; real Flink (the job
    with ``fixture.late-state``) restores each with exactly ``expected``."""
    from fixtures.restore import restore_state

    for max_parallelism, parallelism in ((None, None), (256, 3)):
        out = out_base / f"sp-{max_parallelism}"
        write_savepoint(str(export_dir), str(out), max_parallelism=max_parallelism, parallelism=parallelism)
        restored = restore_state(flink_version, out, records, parallelism=parallelism or 2, max_parallelism=max_parallelism,
                                 extra_conf={"fixture.late-state": "true"})
        assert restored["keyed"] == expected["keyed"]
        assert restored["operator"] == expected["operator"]


def _registered_states(checkpoint: Path, operator: str) -> list[set[str]]:
    """The names of the states each subtask of ``operator`` registers in its keyed backend meta data
    (an incremental or full snapshot; not a changelog)."""
    from repair.formats.flink.handles import IncrementalKeyedHandle
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.resolved import read_resolved
    from repair.io.snapshot import load_snapshot
    from repair.readers.full_snapshot import read_key_groups_meta_bytes

    storage = st.default_storage()
    snapshot = load_snapshot(discover(str(checkpoint), storage).snapshots[-1], checkpoint, storage)
    found = []
    for sub in snapshot.metadata.operator(operator_id_for_uid(operator)).subtasks:
        handle = sub.managed_keyed_state
        data = (read_resolved(storage, snapshot.resolver.resolve(handle.meta)) if isinstance(handle, IncrementalKeyedHandle)
                else read_key_groups_meta_bytes(snapshot, storage, handle))
        found.append({s.name for s in decode_keyed_backend_meta(data).states})
    return found


@pytest.mark.slow
@pytest.mark.parametrize("flink_version, backend", [("1.20.3", "rocksdb"), ("2.1.1", "hashmap")])
def test_real_flink_restores_a_state_that_only_some_subtasks_registered(flink_version, backend, tmp_path):
    """A state registered lazily, on the subtasks that needed it: per-user's late-tag is written only
    for the users of subtask 0 (``fixture.late-users``), so subtask 1 never registers it and the
    checkpoint's subtasks register different states. A fresh real Flink run; its newest checkpoint is
    exported, written back unchanged and rescaled 128 -> 256 at parallelism 3, and real Flink restores
    both with exactly the state computed in Python from the input (late-tag for subtask 0's users)."""
    from fixtures import state_model
    from fixtures.generate import FixtureSpec, generate
    from repair.formats.flink.keygroups import assign_key_group, java_string_hash, operator_index_for_key_group

    records = state_model.make_records(waves=4)
    users = sorted({r.user for r in records
                    if operator_index_for_key_group(128, 2, assign_key_group(java_string_hash(r.user), 128)) == 0})
    spec = FixtureSpec(f"lazy-state-{backend}", flink_version, "a state only some subtasks register", state_backend=backend,
                       extra={"fixture.late-state": "true", "fixture.late-users": ",".join(users)})
    fixture = generate(spec, tmp_path / "run", staging=tmp_path / "staging")
    info = json.loads((fixture / "fixture.json").read_text())
    newest = info["retained_checkpoints"][-1]
    checkpoint = next((fixture / "checkpoints").iterdir()) / f"chk-{newest}"
    registered = _registered_states(checkpoint, "per-user")
    assert ["late-tag" in names for names in registered] == [True, False]
    assert registered[0] - {"late-tag"} == registered[1]

    records = state_model.read_records(fixture / "records.tsv")[: info["records_per_checkpoint"][str(newest)]]
    expected = state_model.expected_state(records)
    tags = {user: tag for user, tag in _late_tags(records).items() if user in users}
    assert tags
    for user, tag in tags.items():
        expected["keyed"]["per-user"][user]["late-tag"] = tag
    export(str(checkpoint), str(tmp_path / "export"))
    _assert_written_back_and_restored(flink_version, tmp_path / "export", tmp_path, records, expected)


def _registered_after_materialization(checkpoint: Path, operator: str, state: str) -> bool:
    """Whether every subtask of ``operator`` in the changelog checkpoint has materialized state, and some
    subtask's materialized meta data lacks ``state``, which only its changelog (a METADATA change) registers."""
    from repair.formats.flink.handles import ChangelogBackendHandle, IncrementalKeyedHandle
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.resolved import read_resolved
    from repair.io.snapshot import load_snapshot
    from repair.readers.changelog import metadata_changes
    from repair.readers.full_snapshot import read_key_groups_meta_bytes

    storage = st.default_storage()
    layout = discover(str(checkpoint), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    found = []
    for sub in snapshot.metadata.operator(operator_id_for_uid(operator)).subtasks:
        handle = sub.managed_keyed_state
        assert isinstance(handle, ChangelogBackendHandle)
        materialized = next((h for h in handle.materialized if h is not None), None)
        if materialized is None:
            return False
        data = (read_resolved(storage, snapshot.resolver.resolve(materialized.meta)) if isinstance(materialized, IncrementalKeyedHandle)
                else read_key_groups_meta_bytes(snapshot, storage, materialized))
        in_meta = state in {s.name for s in decode_keyed_backend_meta(data).states}
        logged = state in {change.state.name for change in metadata_changes(snapshot, storage, handle)}
        found.append(logged and not in_meta)
    return any(found)


@pytest.mark.slow
@pytest.mark.parametrize("flink_version, backend", [("1.20.3", "rocksdb"), ("2.1.1", "hashmap")])
def test_real_flink_restores_a_state_registered_after_the_last_materialization(flink_version, backend, tmp_path):
    """The changelog state backend: per-user's late-tag (``fixture.late-state``) is first registered in
    the third wave, after a materialization, so a checkpoint taken before the next one has it in its
    changelog only (materialized meta data without it, a METADATA change registering it). The source
    pauses before that wave for more than two materialization intervals (4 s here), so the earlier waves
    are materialized first and the checkpoints right after the wave come before the next materialization
    (a run where they do not is run again). A fresh real Flink run; the first such checkpoint is exported
    (late-tag's rows the tags computed from the input) and written back unchanged and rescaled 128 -> 256
    at parallelism 3; real Flink restores both with exactly the state computed in Python from the records
    the checkpoint covers, late-tag included."""
    from fixtures import state_model
    from fixtures.generate import FixtureSpec, generate

    spec = FixtureSpec(f"late-state-{backend}-changelog", flink_version, "a state registered after a materialization",
                       state_backend=backend, changelog=True,
                       extra={"fixture.late-state": "true", "state.changelog.periodic-materialize.interval": "4s",
                              "fixture.late-wave-pause-ms": "9000"})
    for attempt in range(3):  # when materializations and checkpoints fall otherwise, run again
        fixture = generate(spec, tmp_path / f"run-{attempt}", staging=tmp_path / f"staging-{attempt}")
        job = next((fixture / "checkpoints").iterdir())
        info = json.loads((fixture / "fixture.json").read_text())
        late = [job / f"chk-{n}" for n in info["retained_checkpoints"]
                if _registered_after_materialization(job / f"chk-{n}", "per-user", "late-tag")]
        if late:
            break
    else:
        pytest.fail("no retained checkpoint of three runs has late-tag registered only after a materialization")
    checkpoint = late[0]
    records = state_model.read_records(fixture / "records.tsv")[: info["records_per_checkpoint"][checkpoint.name[4:]]]
    expected = state_model.expected_state(records)
    tags = _late_tags(records)
    assert tags
    for user, tag in tags.items():
        expected["keyed"]["per-user"][user]["late-tag"] = tag
    export(str(checkpoint), str(tmp_path / "export"))
    manifest = json.loads((tmp_path / "export" / "_export.json").read_text())
    path = next(state["path"] for op in manifest["operators"] if op["operator_id"] == PER_USER
                for state in op["states"] if state["state"] == "late-tag")
    rows = pq.read_table(tmp_path / "export" / path).to_pylist()
    assert {row["key"]: row["value"] for row in rows} == tags and len(rows) == len(tags)
    _assert_written_back_and_restored(flink_version, tmp_path / "export", tmp_path, records, expected)
