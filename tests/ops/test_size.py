"""``repair size``: every byte of every committed real-Flink fixture counted once, per state.

The expected bytes are the checkpoint's files as the file system and ``repair inspect`` (another module)
see them; the expected entries come from RocksDB's own ``sst_dump --show_properties``; the bytes read
are counted by a storage that wraps every file the operation opens.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.formats.flink.handles import FileHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import decode_metadata, encode_metadata
from repair.io.storage import Storage
from repair.ops.inspect import inspect
from repair.ops.size import GROUPINGS, METADATA, UNKNOWN, size
from tests import damage
from tests.conftest import FIXTURES, fixture_info
from tests.rocksdb_testlib import needs_sst_dump, sst_dump_properties
from tests.size_testlib import expected_bytes

EXTERNAL = "flink-2.1-p3-external-xxh3-zstd"  # inline threshold 0: every SST is a file


def snapshots() -> list[Path]:
    """Every checkpoint root and savepoint of every committed fixture."""
    found = []
    for fixture in sorted(p.parent for p in FIXTURES.glob("*/fixture.json")):
        found.append(damage.checkpoint_root(fixture))
        found.extend(sorted(p for p in (fixture / "savepoints").glob("*") if (p / "_metadata").is_file()))
    return found




@pytest.mark.parametrize("snapshot", snapshots(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}"[:60])
def test_the_bytes_per_state_add_up_to_the_checkpoints_file_bytes(snapshot, read_only_guard):
    result = size(str(read_only_guard(snapshot)))
    assert result.ok, [f.message for f in result.findings]
    assert result.checkpoints
    for checkpoint in result.checkpoints:
        number = checkpoint.checkpoint_id if snapshot.name != "_metadata" and snapshot.parent.name == "checkpoints" else None
        expected = expected_bytes(snapshot, number)
        document = checkpoint.to_json("state", None)
        assert sum(group["bytes"] for group in document["groups"]) == expected
        assert document["totals"]["bytes"] == expected
        totals = document["totals"]
        assert totals["shared_bytes"] + totals["private_bytes"] + totals["metadata_bytes"] == expected
        for by in GROUPINGS:  # every grouping is a partition of the same bytes
            assert sum(group["bytes"] for group in checkpoint.to_json(by, None)["groups"]) == expected, by
        assert all(p.state != UNKNOWN for p in checkpoint.pieces)


def _sst_dump_facts(path: str, scratch: Path) -> dict[str, str] | None:
    """``sst_dump --show_properties`` of ``path`` (it wants an ``.sst`` name); None when it cannot open it."""
    link = scratch / "table.sst"
    link.unlink(missing_ok=True)
    link.symlink_to(path)
    return sst_dump_properties(link, must_open=False)


@needs_sst_dump
def test_entries_per_state_are_what_rocksdb_counts(tmp_path):
    """Per operator and state, the entries and deletions of the newest checkpoint of every fixture are
    RocksDB's own counts (``sst_dump``) over the same SSTs, grouped by the column family it names."""
    compared = 0
    for fixture in sorted(p.parent for p in FIXTURES.glob("*/fixture.json")):
        root = damage.checkpoint_root(fixture)
        result = size(str(root), checkpoint=damage.checkpoint_ids(root)[-1])
        ours: dict[tuple, list[int]] = {}
        theirs: dict[tuple, list[int]] = {}
        for piece in result.checkpoints[0].pieces:
            if piece.kind != "sst" or piece.file is None:
                continue
            facts = _sst_dump_facts(piece.file, tmp_path)
            if facts is None:
                continue
            compared += 1
            ours.setdefault((piece.operator, piece.state), [0, 0])
            mine = ours[(piece.operator, piece.state)]
            mine[0] += piece.entries
            mine[1] += piece.deletions
            rocks = theirs.setdefault((piece.operator, facts["column family name"]), [0, 0])
            rocks[0] += int(facts["# entries"])
            rocks[1] += int(facts["# deletions"])
        assert ours == theirs, fixture.name
    assert compared > 100  # sst_dump opened most of them (Debian's RocksDB lacks some checksum types)


class CountingStorage(Storage):
    """Counts the bytes read through every file it opens."""

    read = 0

    def open_input(self, uri: str, **options):
        return _Counted(super().open_input(uri, **options), self)


class _Counted:
    def __init__(self, file, storage: CountingStorage):
        self._file, self._storage = file, storage

    @property
    def size(self) -> int:
        return self._file.size

    def read(self, offset: int, length: int):
        data = self._file.read(offset, length)
        self._storage.read += len(data)
        return data

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _with_large_sst(tmp_path: Path) -> tuple[Path, int, int]:
    """A copy of a real fixture whose newest checkpoint holds one large SST written by RocksDB
    (rocksdict) in place of one of its own, ``_metadata`` re-encoded with its size. Returns the root,
    the checkpoint and the number of entries of the large SST."""
    rocksdict = pytest.importorskip("rocksdict")
    root = damage.checkpoint_root(damage.copy_fixture(EXTERNAL, tmp_path))
    newest = damage.checkpoint_ids(root)[-1]
    for older in damage.checkpoint_ids(root)[:-1]:
        shutil.rmtree(root / f"chk-{older}")
    target, _ = damage._pick(root, newest, damage.is_sst, "SST")
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_compression_type(rocksdict.DBCompressionType.none())
    db_dir = tmp_path / "db"
    db = rocksdict.Rdict(str(db_dir), options, column_families={"large-state": options})
    family = db.get_column_family("large-state")
    entries = 24_000
    for i in range(entries):
        family[b"key-%08d" % i] = os.urandom(1000)
    family.flush()
    db.close()
    written = max(db_dir.glob("*.sst"), key=lambda p: p.stat().st_size)
    shutil.copyfile(written, target)
    metadata_path = root / f"chk-{newest}" / "_metadata"
    metadata = decode_metadata(metadata_path.read_bytes())

    def resized(handle):
        if isinstance(handle, FileHandle) and handle.path.endswith("/" + target.name):
            return replace(handle, size=target.stat().st_size)
        return handle

    metadata.map_stream_handles(resized)
    metadata_path.write_bytes(encode_metadata(metadata))
    return root, newest, entries


def test_the_default_mode_reads_a_small_fraction_of_the_bytes(tmp_path):
    root, newest, entries = _with_large_sst(tmp_path)
    storage = CountingStorage()
    result = size(str(root), storage=storage)
    total = result.checkpoints[0].bytes
    assert total > 20 << 20  # the large SST dominates
    large = [p for p in result.checkpoints[0].pieces if p.state == "large-state"]
    assert len(large) == 1 and large[0].entries == entries
    # every byte read went through the storage: _metadata and the SSTs' footers and properties
    assert storage.read == result.bytes_read
    assert storage.read < 0.02 * total, (storage.read, total)


@pytest.mark.parametrize("damage_kind, finding, status, state", [
    ("missing_sst", "missing_file", "missing", UNKNOWN),
    ("sst_bad_magic", "bad_sst", "damaged", UNKNOWN),
    ("missing_manifest", "missing_file", "missing", "(rocksdb files)"),  # what it was is known from _metadata
])
def test_a_missing_or_damaged_file_is_reported_and_still_counted(damage_kind, finding, status, state, tmp_path, capsys):
    case = damage.damaged_copy(EXTERNAL, tmp_path, damage_kind)
    newest = case.checkpoints[-1]
    result = size(str(case.root), checkpoint=newest)
    assert {f.kind for f in result.findings} == {finding}
    assert result.exit_code == 1
    unknown = [p for p in result.checkpoints[0].pieces if p.status != "ok"]
    assert [(p.file.rsplit("/", 1)[-1], p.state, p.status) for p in unknown] == [(case.file.name, state, status)]
    # the bytes _metadata records for it still count: the total is the checkpoint's
    assert result.checkpoints[0].bytes == expected_bytes(case.root, newest)
    assert main(["size", str(case.root), "--json"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["ok"] is False and finding in {f["kind"] for f in document["findings"]}
    assert "Traceback" not in err
    assert main(["size", str(case.root)]) == 1
    out, err = capsys.readouterr()
    assert finding in out and "Traceback" not in out + err


def test_the_arrow_table_has_a_row_per_piece():
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    result = size(str(root))
    table = result.to_arrow()
    pieces = [p for c in result.checkpoints for p in c.pieces]
    assert table.num_rows == len(pieces)
    assert sum(table.column("bytes").to_pylist()) == sum(c.bytes for c in result.checkpoints)
    assert set(table.column("checkpoint_id").to_pylist()) == set(damage.checkpoint_ids(root))
    assert METADATA in table.column("state").to_pylist()


def test_heap_and_full_snapshots_are_split_by_key_group():
    """A heap checkpoint's key-group offsets give bytes per key group, each inside its subtask's range."""
    root = damage.checkpoint_root(FIXTURES / "flink-1.20-heap")
    result = size(str(root), by="key-group")
    ranges = {(op.id, sub.index): sub.key_group_range for op in inspect(str(root)).operators for sub in op.subtasks}
    pieces = [p for p in result.checkpoints[-1].pieces if p.kind == "key-group"]
    for piece in pieces:
        start, end = ranges[(piece.operator_id, piece.subtask)]
        assert piece.key_group_start == piece.key_group_end and start <= piece.key_group_start <= end
    per_user = {p.key_group_start for p in pieces if p.operator_id == operator_id_for_uid("per-user")}
    assert len(per_user) > fixture_info(FIXTURES / "flink-1.20-heap")["max_parallelism"] // 4


def test_usage_errors(tmp_path):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    assert main(["size", str(root), "--by", "colour"]) == 2
    assert main(["size", str(root), "-c", "999"]) == 2
    assert main(["size", str(tmp_path / "nothing-here")]) == 2


def test_a_file_that_stays_unreadable_is_unknown_not_damage():
    """A storage fault that outlasts the retries: the SST's state is unknown, the verdict too (exit 2)."""
    from repair.errors import StorageError

    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    newest = damage.checkpoint_ids(root)[-1]
    target, _ = damage._pick(root, newest, damage.is_sst, "SST")

    class Throttled(Storage):
        def open_input(self, uri: str, **options):
            if uri.endswith(target.name):
                raise StorageError("503 Slow Down (retries ran out)", source=uri, transient=True)
            return super().open_input(uri, **options)

    result = size(str(root), checkpoint=newest, storage=Throttled())
    assert [(f.kind, f.severity.value) for f in result.findings] == [("unreadable", "unknown")]
    assert result.exit_code == 2
    assert [p.status for p in result.checkpoints[0].pieces if p.file and p.file.endswith(target.name)] == ["unreadable"]
