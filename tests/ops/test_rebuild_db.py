"""``repair rebuild-manifest DB_DIR --out NEW_DB``: a damaged bare RocksDB directory becomes one that opens.

Inputs: TaskManager-like directories materialized from real Flink checkpoints (FRocksDB 6.20 and
8.10: SSTs, MANIFEST, CURRENT, OPTIONS), a DB written by rocksdict with several column families,
and a "crashed" rocksdict DB whose newest writes are only in its WAL. Each is read by ``ldb``
(RocksDB 7.8) and by rocksdict (RocksDB 9.x) *before* it is damaged (MANIFEST deleted or corrupt,
CURRENT deleted, OPTIONS deleted too); the rebuilt directory must give exactly the same contents,
column family by column family, through the same tools. Inputs are hashed before and after.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.errors import UsageError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.files import decode_current, parse_options
from repair.formats.rocksdb.manifest import ColumnFamilyVersion, read_manifest, replay
from repair.formats.rocksdb.table.sst import open_table
from repair.formats.rocksdb.wal import summarize_wal
from repair.io.layout import ROCKSDB_DIR, classify
from repair.ops.rebuild.db import rebuild_db
from repair.ops.rebuild.db_evidence import OldManifest, assign_column_family_ids

# rocksdict on a copy, with the DB's own OPTIONS file: every column family in full, each key also read
# back by a point lookup (serves any DB with an OPTIONS file, not only Flink's)
from tests.flink_instances import flink_instances, flink_rocksdict_contents
from tests.rocksdb_testlib import ldb, make_rocksdict_db, needs_ldb

pytestmark = needs_ldb

FLINK = {"flink-1.20-p3-external-xxhash-lz4": "frocksdb6", "flink-2.1-p3-external-xxh3-zstd": "frocksdb8"}


# -- damage ------------------------------------------------------------------------------------


def _unlink(db: Path, pattern: str) -> None:
    paths = list(db.glob(pattern))
    assert paths, pattern
    for path in paths:
        path.unlink()


def _corrupt_manifest(db: Path) -> None:
    """Flip a byte two thirds into the MANIFEST: the records before it still read."""
    path = next(db.glob("MANIFEST-*"))
    data = bytearray(path.read_bytes())
    data[len(data) * 2 // 3] ^= 0x5A
    path.write_bytes(bytes(data))


DAMAGES = {
    "manifest_deleted": lambda db: _unlink(db, "MANIFEST-*"),
    "manifest_corrupt": _corrupt_manifest,
    "current_deleted": lambda db: _unlink(db, "CURRENT"),
    "manifest_and_options_deleted": lambda db: (_unlink(db, "MANIFEST-*"), _unlink(db, "OPTIONS-*")),
    "all_but_ssts_deleted": lambda db: (_unlink(db, "MANIFEST-*"), _unlink(db, "OPTIONS-*"), _unlink(db, "CURRENT")),
}
#: Damages after which column families without SSTs cannot be known (no MANIFEST and no OPTIONS).
NAMES_LOST = {"manifest_and_options_deleted", "all_but_ssts_deleted"}


def _damaged(db: Path, tmp_path: Path, damage: str) -> Path:
    copy = tmp_path / f"damaged-{damage}"
    shutil.copytree(db, copy)
    DAMAGES[damage](copy)
    return copy


# -- reading a DB with the real tools ----------------------------------------------------------


def _work_copy(db: Path) -> Path:
    """RocksDB writes into a DB it opens (even read-only, in places): tools only ever open copies."""
    work = db.parent / (db.name + "-work")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(db, work)
    return work


def _ldb_contents(db: Path, column_families) -> dict[str, str]:
    """``ldb scan --hex`` of every column family (OPTIONS loaded when there is one)."""
    out = {}
    for cf in column_families:
        work = _work_copy(db)
        result = ldb(f"--db={work}", f"--column_family={cf}", "--ignore_unknown_options", "scan", "--hex")
        shutil.rmtree(work)
        assert result.returncode == 0, (cf, result.stdout + result.stderr)
        out[cf] = result.stdout
    return out


def _live(db: Path):
    return replay(read_manifest(BytesSource((db / decode_current((db / "CURRENT").read_bytes())).read_bytes())))


def _merge_operands(db: Path) -> int:
    return sum(open_table(BytesSource(p.read_bytes())).properties.num_merge_operands or 0 for p in db.glob("*.sst"))


# -- Flink TaskManager directories -------------------------------------------------------------


@pytest.fixture(scope="module")
def flink_dbs(tmp_path_factory):
    """Per fixture: a materialized instance (the one with most merge operands, then SSTs) and its contents."""
    out = {}
    for fixture in FLINK:
        instances = flink_instances(fixture, tmp_path_factory.mktemp(fixture))
        db = max(instances, key=lambda d: (_merge_operands(d), len(list(d.glob("*.sst")))))
        names = list(parse_options(next(db.glob("OPTIONS-*")).read_bytes()).cf_options)
        out[fixture] = (db, names, _ldb_contents(db, names), flink_rocksdict_contents(db))
    return out


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("fixture", sorted(FLINK))
def test_flink_db_rebuilt_opens_with_the_same_contents(flink_dbs, tmp_path, read_only_guard, fixture, damage):
    db, names, ldb_before, rocksdict_before = flink_dbs[fixture]
    original = _live(db)
    broken = read_only_guard(_damaged(db, tmp_path, damage))
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.ok and result.status == "rebuilt", result.to_json()
    assert result.format == FLINK[fixture]
    assert result.output_verified
    new = tmp_path / "new"
    assert (new / "CURRENT").exists() and (new / result.manifest_name).exists()

    rebuilt = _live(new)
    with_files = {cf.name for cf in original.column_families.values() if cf.files}
    expected_names = set(names) if damage not in NAMES_LOST else with_files | {"default"}
    assert {cf.name for cf in rebuilt.column_families.values()} == expected_names
    # column family ids as RocksDB gave them (also those inferred from the OPTIONS order)
    ids = {cf.name: cf.id for cf in original.column_families.values()}
    assert {cf.name: cf.id for cf in rebuilt.column_families.values()} == {n: ids[n] for n in expected_names}
    # the same live files with the same sizes
    assert {(cf.name, f.number, f.file_size) for cf, f in rebuilt.live_files()} == {
        (cf.name, f.number, f.file_size) for cf, f in original.live_files()}

    assert _ldb_contents(new, expected_names) == {cf: ldb_before[cf] for cf in expected_names}
    assert flink_rocksdict_contents(new) == {cf: rocksdict_before[cf] for cf in expected_names}
    if damage in NAMES_LOST:
        assert result.options.action == "written"
        assert all(not ldb_before[cf].strip() for cf in set(names) - expected_names)  # only empty ones are unknown
        assert any("column families without SSTs" in w for w in result.warnings)
    else:
        assert result.options.action == "kept"
        assert result.options.removed_wal_dir is None or "wal_dir" not in (new / result.options.name).read_text()
    assert (result.old_manifest.state == "intact") == (damage == "current_deleted")
    if damage == "manifest_corrupt":
        assert result.old_manifest.state == "damaged" and result.old_manifest.edits_used > 0


# -- rocksdict databases -----------------------------------------------------------------------

CFS = ("window-contents", "value-state", "empty-state")


@pytest.fixture(scope="module")
def rocksdict_db(tmp_path_factory):
    from rocksdict import Options, Rdict

    db = tmp_path_factory.mktemp("rocksdict") / "db"
    make_rocksdict_db(db, format_version=5, checksum="crc32c", column_families=CFS[:2], keys=300)
    options = Options(raw_mode=True)
    options.create_missing_column_families(True)
    Rdict(str(db), options, column_families={n: options for n in CFS}).close()  # adds "empty-state", without data
    return db, _ldb_contents(db, ("default", *CFS)), flink_rocksdict_contents(db)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_rocksdict_db_rebuilt_opens_with_the_same_contents(rocksdict_db, tmp_path, read_only_guard, damage):
    db, ldb_before, rocksdict_before = rocksdict_db
    assert rocksdict_before["default"] and rocksdict_before["empty-state"] == []
    broken = read_only_guard(_damaged(db, tmp_path, damage))
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.ok, result.to_json()
    assert result.format == "frocksdb8"  # rocksdict's RocksDB 9.x
    names = {"default", *CFS} - ({"empty-state"} if damage in NAMES_LOST else set())
    after = flink_rocksdict_contents(tmp_path / "new")
    assert after == {n: rocksdict_before[n] for n in names}
    assert _ldb_contents(tmp_path / "new", names) == {n: ldb_before[n] for n in names}
    assert [w.name for w in result.wals if w.included] == []  # everything was flushed
    assert any(s.name == "rocksdict-config.json" for s in result.skipped)


# -- a crashed DB whose newest writes are only in its WAL --------------------------------------

_CRASHED_WRITER = r'''
import os, sys
from rocksdict import BlockBasedOptions, ChecksumType, Options, Rdict, WriteBatch
options = Options(raw_mode=True)
options.create_if_missing(True)
options.create_missing_column_families(True)
table = BlockBasedOptions()
table.set_format_version(5)
table.set_checksum_type(ChecksumType.crc32c())
options.set_block_based_table_factory(table)
db = Rdict(sys.argv[1], options, column_families={n: options for n in ("window", "values", "wal-only", "empty")})
window, values, wal_only = (db.get_column_family(n) for n in ("window", "values", "wal-only"))
for i in range(200):
    db[b"d%04d" % i] = b"flushed-%d" % i
    window[b"w%04d" % i] = b"flushed-%d" % i
    values[b"v%04d" % i] = b"flushed-%d" % i
db.flush()
window.flush()
values.flush()
for i in range(0, 200, 3):
    window[b"w%04d" % i] = b"in-wal-%d" % i   # newer than the SSTs, only in the WAL
    wal_only[b"x%04d" % i] = b"only-in-wal-%d" % i
for i in range(0, 200, 7):
    del values[b"v%04d" % i]
values.delete_range(b"v0100", b"v0120")
db[b"d9999"] = b"in-wal"
batch = WriteBatch(raw_mode=True)  # one WAL record, entries in three column families
for i in range(5):
    batch.put(b"x-batch-%d" % i, b"batched", db.get_column_family_handle("wal-only"))
    batch.delete(b"w%04d" % (i * 3 + 1), db.get_column_family_handle("window"))
batch.put(b"d-batch", b"batched")
db.write(batch)
os._exit(0)   # a crash: nothing is flushed, the WAL keeps the last writes
'''


@pytest.fixture(scope="module")
def crashed_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("crashed") / "db"
    subprocess.run([sys.executable, "-c", _CRASHED_WRITER, str(db)], check=True, timeout=120)
    names = ("default", "window", "values", "wal-only", "empty")
    return db, _ldb_contents(db, names), flink_rocksdict_contents(db)


def test_wal_data_is_replayed_from_the_rebuilt_db(crashed_db, tmp_path, read_only_guard):
    db, ldb_before, rocksdict_before = crashed_db
    assert rocksdict_before["wal-only"] and any(v.startswith(b"in-wal") for _, v in rocksdict_before["window"])
    assert not list(db.glob("*.sst")) or all(b"only-in-wal" not in p.read_bytes() for p in db.glob("*.sst"))
    broken = read_only_guard(_damaged(db, tmp_path, "manifest_deleted"))
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.ok, result.to_json()
    (wal,) = [w for w in result.wals if w.included]
    assert wal.summary.entries > 0 and (tmp_path / "new" / wal.name).read_bytes() == (db / wal.name).read_bytes()
    assert result.log_number == int(wal.name.split(".")[0])
    by_name = {c.name: c for c in result.column_families}
    # "wal-only" has no SST: its id comes from the OPTIONS order, and must be the id its WAL entries carry
    assert by_name["wal-only"].id_source == "OPTIONS order" and by_name["wal-only"].wal_entries > 0
    assert by_name["wal-only"].id == _live(db).column_family("wal-only").id
    assert flink_rocksdict_contents(tmp_path / "new") == rocksdict_before
    assert _ldb_contents(tmp_path / "new", rocksdict_before) == ldb_before


def test_wal_summary_agrees_with_ldb_dump_wal(crashed_db):
    """Batches, sequence numbers and entries per column family id, as RocksDB's own WAL dump reads them."""
    db = crashed_db[0]
    (wal,) = db.glob("*.log")
    out = ldb("dump_wal", f"--walfile={wal}", "--header")
    assert out.returncode == 0, out.stderr
    batches, per_cf, first, last = 0, {}, None, None
    for line in out.stdout.splitlines()[1:]:
        seq, count, _size, _offset, ops = line.split(",", 4)
        batches += 1
        first = int(seq) if first is None else first
        last = int(seq) + int(count) - 1
        for cf in re.findall(r"[A-Z_]+\((\d+)\)", ops):
            per_cf[int(cf)] = per_cf.get(int(cf), 0) + 1
    data = wal.read_bytes()
    summary = summarize_wal(BytesSource(data), int(wal.stem))
    assert summary.problem is None and not summary.compressed
    assert (summary.batches, summary.first_sequence, summary.last_sequence) == (batches, first, last)
    assert summary.entries_by_column_family == per_cf and summary.entries == sum(per_cf.values())
    assert batches < summary.entries  # the WriteBatch of eleven entries is one record

    # a torn last record (a crash in the middle of a write): what reads before it is kept, and it is reported
    summary = summarize_wal(BytesSource(data[:-5]), int(wal.stem))
    assert summary.batches == batches - 1 and summary.problem_offset is not None


def test_wal_entries_of_an_unknown_column_family_are_never_dropped_silently(crashed_db, tmp_path, read_only_guard):
    db, _, rocksdict_before = crashed_db
    broken = read_only_guard(_damaged(db, tmp_path, "all_but_ssts_deleted"))
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.status == "not_rebuilt" and not (tmp_path / "new").exists()
    assert any("whose name is not known" in line and "[--drop-missing" in line for line in result.unrepairable)
    assert result.hint

    result = rebuild_db(str(broken), str(tmp_path / "new"), drop_missing=True)
    assert result.status == "rebuilt_with_losses" and not result.ok
    (lost,) = result.lost
    assert lost.reason == "unknown_column_family" and lost.name.endswith(".log")
    after = flink_rocksdict_contents(tmp_path / "new")
    assert after == {n: rocksdict_before[n] for n in ("default", "window", "values")}


# -- damaged SSTs, stale SSTs, options ---------------------------------------------------------


def _flip_sst_byte(db: Path) -> str:
    path = max(db.glob("*.sst"), key=lambda p: p.stat().st_size)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # inside the first data block
    path.write_bytes(bytes(data))
    return path.name


def test_corrupt_sst_refuses_unless_drop_missing(flink_dbs, tmp_path, read_only_guard, capsys):
    db = flink_dbs["flink-1.20-p3-external-xxhash-lz4"][0]
    broken = _damaged(db, tmp_path, "manifest_deleted")
    name = _flip_sst_byte(broken)
    read_only_guard(broken)
    code = main(["rebuild-manifest", str(broken), "--out", str(tmp_path / "new"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["status"] == "not_rebuilt" and doc["new_db"] is None
    assert any(line.startswith(f"{name}: corrupt") for line in doc["unrepairable"])
    assert not (tmp_path / "new").exists()

    code = main(["rebuild-manifest", str(broken), "--out", str(tmp_path / "new"), "--drop-missing", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["status"] == "rebuilt_with_losses" and doc["output_verified"]
    assert [(item["name"], item["reason"]) for item in doc["lost"]] == [(name, "corrupt")]
    assert not (tmp_path / "new" / name).exists()
    names = list(parse_options(next((tmp_path / "new").glob("OPTIONS-*")).read_bytes()).cf_options)
    assert _ldb_contents(tmp_path / "new", names)  # opens, every column family scans


def test_intact_manifest_decides_live_missing_and_stale_files(flink_dbs, tmp_path, read_only_guard):
    db = flink_dbs["flink-2.1-p3-external-xxh3-zstd"][0]
    original = _live(db)
    broken = _damaged(db, tmp_path, "current_deleted")
    # a stale copy of a live SST under an unused number: RocksDB ignores it, so must the rebuild
    live = sorted(broken.glob("*.sst"))
    stale = broken / "000999.sst"
    shutil.copy(live[-1], stale)
    gone = live[0]
    gone.unlink()
    read_only_guard(broken)
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.status == "not_rebuilt"
    assert any(line.startswith(f"{gone.name}: missing") for line in result.unrepairable)
    result = rebuild_db(str(broken), str(tmp_path / "new"), drop_missing=True)
    assert result.status == "rebuilt_with_losses"
    (lost,) = result.lost
    cf, meta = next((cf.name, m) for cf, m in original.live_files() if m.file_name == gone.name)
    assert (lost.name, lost.reason, lost.column_family, lost.level, lost.seqnos) == (
        gone.name, "missing", cf, meta.level, (meta.smallest_seqno, meta.largest_seqno))
    assert [s.name for s in result.skipped if s.name.endswith(".sst")] == ["000999.sst"]
    assert not (tmp_path / "new" / "000999.sst").exists()
    assert {f.number for _, f in _live(tmp_path / "new").live_files()} == {f.number for _, f in original.live_files()} - {meta.number}


def test_format_override_and_output_inside_input(flink_dbs, tmp_path):
    db, names, ldb_before, _ = flink_dbs["flink-1.20-p3-external-xxhash-lz4"]
    broken = _damaged(db, tmp_path, "manifest_deleted")
    result = rebuild_db(str(broken), str(tmp_path / "new"), format="frocksdb8")
    assert result.ok and result.format == "frocksdb8"
    assert result.format_evidence[0] == "--format frocksdb8 (given)"
    assert any("does not agree" in w for w in result.warnings)
    assert all(f.epoch_number is not None for _, f in _live(tmp_path / "new").live_files())
    assert _ldb_contents(tmp_path / "new", names) == ldb_before
    with pytest.raises(UsageError):
        rebuild_db(str(broken), str(broken / "new"))
    with pytest.raises(UsageError):
        rebuild_db(str(broken), str(tmp_path / "other"), format="rocksdb9")
    assert not (broken / "new").exists()


def test_cli_dispatches_a_rocksdb_dir_and_renders(flink_dbs, tmp_path, capsys):
    db = flink_dbs["flink-2.1-p3-external-xxh3-zstd"][0]
    broken = _damaged(db, tmp_path, "manifest_and_options_deleted")
    assert classify(str(broken)).kind == ROCKSDB_DIR and classify(str(tmp_path)).kind != ROCKSDB_DIR
    code = main(["rebuild-manifest", str(broken), "--out", str(tmp_path / "new")])
    text = capsys.readouterr().out
    assert code == 0
    assert "rebuilt" in text and "frocksdb8" in text and "OPTIONS" in text
    code = main(["rebuild-manifest", str(broken), "--out", str(tmp_path / "new2"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] and doc["kind"] == "rocksdb-dir" and doc["options"]["action"] == "written"
    assert set(os.listdir(tmp_path / "new2")) == set(os.listdir(tmp_path / "new"))
    assert main(["rebuild-manifest", str(broken), "--out", str(broken / "x")]) == 2
    assert main(["rebuild-manifest", str(broken), "--out", str(tmp_path / "new3"), "--copy"]) == 2


def test_column_family_ids_follow_the_options_order_only_where_it_fits():
    absent = OldManifest(None, "absent")
    ids = assign_column_family_ids([(2, "b"), (5, "e")], absent, ["default", "a", "b", "c", "d", "e", "f"])
    assert ids.ids == {0: ("default", "RocksDB (always 0)"), 1: ("a", "OPTIONS order"), 2: ("b", "SST properties"),
                       3: ("c", "OPTIONS order"), 4: ("d", "OPTIONS order"), 5: ("e", "SST properties"),
                       6: ("f", "OPTIONS order")}
    # no room between b=2 and c=3 (a column family was dropped and re-created?): x gets a new id, flagged as such
    ids = assign_column_family_ids([(2, "b"), (3, "c")], absent, ["default", "b", "x", "c"])
    assert ids.ids[4] == ("x", "new id") and ids.ordered_names() == ["default", "b", "c", "x"]
    # the SST properties win over a MANIFEST that disagrees, and say so
    damaged = OldManifest("MANIFEST-000009", "damaged", version=replay([]))
    damaged.version.column_families[7] = ColumnFamilyVersion(7, "b")
    ids = assign_column_family_ids([(2, "b")], damaged, [])
    assert ids.ids[2] == ("b", "SST properties") and 7 not in ids.ids and ids.warnings


def test_a_db_on_s3_rebuilds_to_s3_like_on_disk(flink_dbs, tmp_path, s3, s3_storage):
    db = flink_dbs["flink-2.1-p3-external-xxh3-zstd"][0]
    broken = _damaged(db, tmp_path, "manifest_and_options_deleted")
    bucket = s3.new_bucket({f"tm/db/{p.name}": p.read_bytes() for p in broken.iterdir()})
    remote = rebuild_db(f"s3://{bucket}/tm/db", f"s3://{bucket}/rebuilt", storage=s3_storage)
    local = rebuild_db(str(broken), str(tmp_path / "new"))
    assert remote.ok and local.ok
    client = s3.client()
    keys = {k.removeprefix("rebuilt/") for k in s3.keys(bucket) if k.startswith("rebuilt/")}
    assert keys == set(os.listdir(tmp_path / "new"))
    for key in keys:  # byte for byte: SST copies, the OPTIONS written, MANIFEST and CURRENT
        assert client.get_object(Bucket=bucket, Key=f"rebuilt/{key}")["Body"].read() == (tmp_path / "new" / key).read_bytes(), key


def test_duplicate_ssts_without_a_manifest_are_refused(flink_dbs, tmp_path):
    """Without a MANIFEST every SST is taken; two holding the same keys at the same seqnos cannot be ordered."""
    db = flink_dbs["flink-1.20-p3-external-xxhash-lz4"][0]
    broken = _damaged(db, tmp_path, "manifest_deleted")
    largest = max(broken.glob("*.sst"), key=lambda p: p.stat().st_size)
    shutil.copy(largest, broken / "000999.sst")  # a compaction input RocksDB had not deleted yet looks like this
    (broken / "OPTIONS-000001").write_text("[Version]\n  rocksdb_version=6.20.3\n")  # an older OPTIONS file
    result = rebuild_db(str(broken), str(tmp_path / "new"))
    assert result.status == "not_rebuilt" and not (tmp_path / "new").exists()
    assert any("cannot be put on levels" in line and "cannot be told" in line for line in result.unrepairable), result.unrepairable
    assert any(s.name == "OPTIONS-000001" and "older" in s.why for s in result.skipped)
