"""repair.formats.rocksdb.options_writer: an OPTIONS file written from the SSTs opens the DB as Flink's own does.

Ground truth is the OPTIONS file real Flink (FRocksDB 6.20 and 8.10) wrote next to the fixtures' SSTs:
the written file must agree with it on every setting that decides how the data is read, our parser
must read it back, and ``ldb --try_load_options`` (RocksDB 7.8) and rocksdict (RocksDB 9.x) must open
the DB with it and read every column family exactly as with Flink's file. Also the checkpoint path:
an instance whose OPTIONS file is gone gets a written one, and real Flink restores it (slow).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.restore import restore_state
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.handles import ByteStreamHandle, IncrementalKeyedHandle
from repair.formats.flink.metadata import decode_metadata
from repair.formats.rocksdb.files import parse_options
from repair.formats.rocksdb.options_writer import (
    ROCKSDB_VERSION_FOR_FORMAT,
    TableFacts,
    derive_column_family_options,
    options_for_column_families,
    render_options,
    without_db_option,
)
from repair.formats.rocksdb.table.checksum import ChecksumType
from repair.formats.rocksdb.table.sst import open_table
from repair.ops.rebuild import rebuild_manifest
from repair.ops.rebuild.db_evidence import OldManifest, choose_format, rocksdb7_markers
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, fixture_info
from tests.flink_instances import flink_instances, flink_rocksdict_contents, ldb_scan
from tests.rocksdb_testlib import make_rocksdict_db, needs_ldb

#: Keys that decide how data is read (and written back compatibly); they must agree with Flink's file.
RELEVANT_CF = ("comparator", "merge_operator", "compression", "prefix_extractor", "num_levels", "table_factory")
RELEVANT_TABLE = ("format_version", "checksum", "index_type", "whole_key_filtering", "block_size", "filter_policy")
FIXTURE_FORMATS = {
    "flink-1.15-default": "frocksdb6", "flink-1.20-default": "frocksdb6", "flink-1.20-p3-external-xxhash-lz4": "frocksdb6",
    "flink-2.0-p3-mp300": "frocksdb8", "flink-2.1-default": "frocksdb8", "flink-2.1-p3-external-xxh3-zstd": "frocksdb8",
}


def _merge_operator_id(value: str) -> str:
    """``{id=StringAppendTESTOperator;delimiter=,;}`` (FRocksDB 8.10) -> its id; a plain name as it is.

    SSTs record only the name, so the name is written; that RocksDB's default delimiter for it is
    Flink's "," is proven by the ldb scans of list state (merge operands) below.
    """
    if value.startswith("{"):
        fields = dict(part.split("=", 1) for part in value.strip("{}").split(";") if part)
        return fields["id"]
    return value


def _relevant_cf(options: dict[str, str]) -> dict[str, str]:
    out = {k: options[k] for k in RELEVANT_CF}
    out["merge_operator"] = _merge_operator_id(out["merge_operator"])
    return out


def _facts(db: Path) -> list[TableFacts]:
    return [TableFacts.from_table(open_table(BytesSource(p.read_bytes()))) for p in sorted(db.glob("*.sst"))]


def _markers(db: Path) -> list[tuple[str, list[str]]]:
    return [(p.name, rocksdb7_markers(open_table(BytesSource(p.read_bytes())))) for p in sorted(db.glob("*.sst"))]


def _written_for(db: Path) -> tuple[bytes, str]:
    """OPTIONS text from ``db``'s SSTs alone (column families named as Flink's file names them), and the format."""
    theirs = parse_options(next(db.glob("OPTIONS-*")).read_bytes())
    fmt, _, _ = choose_format(None, None, None, OldManifest(None, "absent"), _markers(db))
    return render_options(ROCKSDB_VERSION_FOR_FORMAT[fmt], options_for_column_families(_facts(db), list(theirs.cf_options))), fmt


@pytest.mark.parametrize("fixture", sorted(FIXTURE_FORMATS))
def test_written_options_agree_with_flinks_own(fixture, tmp_path):
    instances = flink_instances(fixture, tmp_path)
    assert instances
    for db in instances:
        theirs = parse_options(next(db.glob("OPTIONS-*")).read_bytes())
        text, fmt = _written_for(db)
        assert fmt == FIXTURE_FORMATS[fixture]
        ours = parse_options(text)  # our own parser reads it back
        assert ours.rocksdb_version == theirs.rocksdb_version  # the format evidence picked Flink's RocksDB
        assert list(ours.cf_options) == list(theirs.cf_options)
        assert list(ours.table_options) == list(theirs.table_options)
        for cf, options in theirs.cf_options.items():
            assert _relevant_cf(ours.cf_options[cf]) == _relevant_cf(options), (db, cf)
            factory, table = theirs.table_options[cf]
            assert ours.table_options[cf][0] == factory == "BlockBasedTable"
            for key in RELEVANT_TABLE:
                assert ours.table_options[cf][1][key] == table[key], (db, cf, key)


def _merge_operands(db: Path) -> int:
    return sum(open_table(BytesSource(p.read_bytes())).properties.num_merge_operands or 0 for p in db.glob("*.sst"))


#: Fixtures whose second-newest checkpoint holds merge operands in its SSTs.
MERGE_OPERAND_FIXTURES = ("flink-1.15-default", "flink-1.20-p3-external-xxhash-lz4")


@needs_ldb
@pytest.mark.parametrize("fixture", [*MERGE_OPERAND_FIXTURES, "flink-2.1-p3-external-xxh3-zstd"])
def test_ldb_and_rocksdict_open_the_db_with_the_written_file(fixture, tmp_path):
    # the instance with the most merge operands (Flink's list state before a compaction merges them)
    db = max(flink_instances(fixture, tmp_path / "orig"), key=_merge_operands)
    if fixture in MERGE_OPERAND_FIXTURES:
        assert _merge_operands(db) > 0
    copy = tmp_path / "copy"
    shutil.copytree(db, copy)
    for path in copy.glob("OPTIONS-*"):
        path.unlink()
    text, _ = _written_for(db)
    (copy / "OPTIONS-000099").write_bytes(text)
    names = list(parse_options(next(db.glob("OPTIONS-*")).read_bytes()).cf_options)
    scanned = 0
    for cf in names:
        expected = ldb_scan(db, cf, "--ignore_unknown_options")
        # no --ignore_unknown_options: every key we write is known to RocksDB 7.8. With merge operands in
        # the SSTs, the scans agree only if ldb loaded the merge operator (and its delimiter) from our file.
        assert ldb_scan(copy, cf, "--try_load_options") == expected, cf
        scanned += bool(expected.strip())
    assert scanned >= 5
    from rocksdict import Options

    _, cf_options = Options.load_latest(str(copy), ignore_unknown_options=False)
    assert sorted(cf_options) == sorted(names)
    assert flink_rocksdict_contents(copy) == flink_rocksdict_contents(db)


def test_rocksdict_db_with_filters_and_partitioned_index(tmp_path):
    """A DB unlike Flink's: partitioned index, bloom filters, ZSTD, several column families."""
    from rocksdict import AccessType, Options, Rdict

    expected = make_rocksdict_db(tmp_path / "db", partitioned=True, compression="zstd", column_families=("a", "b"), keys=300)
    db = tmp_path / "db"
    facts = _facts(db)
    derived = options_for_column_families(facts, ["default", "a", "b"])
    for cf in derived:
        assert cf.table_options["index_type"] == "kTwoLevelIndexSearch"
        assert cf.cf_options["compression"] == "kZSTD" and cf.cf_options["merge_operator"] == "nullptr"
        assert cf.notes and "filter" in cf.notes[0]
    for path in db.glob("OPTIONS-*"):
        path.unlink()
    (db / "OPTIONS-000099").write_bytes(render_options("8.10.0", derived))
    work = tmp_path / "work"
    shutil.copytree(db, work)
    _, cf_options = Options.load_latest(str(work), ignore_unknown_options=False)
    opened = Rdict(str(work), Options(raw_mode=True), column_families={n: Options(raw_mode=True) for n in ("a", "b")},
                   access_type=AccessType.read_only(False))
    try:
        for name, state in expected.items():
            cf = opened if name == "default" else opened.get_column_family(name)
            for key, value in state.items():
                assert cf.get(key) == value
    finally:
        opened.close()
    assert sorted(cf_options) == ["a", "b", "default"]


def test_disagreeing_files_and_column_families_without_files():
    def facts(compression, checksum=ChecksumType.CRC32C, cf="state"):
        return TableFacts(cf, "leveldb.BytewiseComparator", "StringAppendTESTOperator", "nullptr", compression, 5, checksum, 0, "1", None)

    derived = derive_column_family_options("state", [facts("LZ4"), facts("LZ4"), facts("NoCompression")])
    assert derived.cf_options["compression"] == "kLZ4Compression"
    assert derived.conflicts == ["state: compression differs between files (kLZ4Compression x2, kNoCompression x1); wrote kLZ4Compression"]
    out = options_for_column_families([facts("Snappy", cf="a"), facts("Snappy", cf="b")], ["default", "a", "b", "empty"])
    by_name = {o.name: o for o in out}
    # without files: what every sibling agrees on, then RocksDB's defaults
    assert by_name["empty"].cf_options["merge_operator"] == "StringAppendTESTOperator"
    assert by_name["empty"].sources["merge_operator"].startswith("the column families with SSTs")
    assert by_name["empty"].table_options["block_size"] == "4096"
    assert by_name["empty"].sources["block_size"].startswith("RocksDB default")
    mixed = options_for_column_families([facts("Snappy", cf="a"), facts("LZ4", cf="b")], ["default"])
    assert "compression" not in mixed[0].cf_options  # siblings disagree: nothing is made up


def test_escaped_column_family_names_round_trip_with_rocksdb(tmp_path):
    from rocksdict import Options, Rdict

    name = "a:b#c\\d"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    db = Rdict(str(tmp_path / "db"), options, column_families={name: options})
    cf = db.get_column_family(name)
    cf[b"k"] = b"v"
    cf.flush()
    del cf
    db.close()
    theirs = parse_options(next((tmp_path / "db").glob("OPTIONS-*")).read_bytes())
    assert list(theirs.cf_options) == ["default", name]  # RocksDB escapes, our parser unescapes
    text = render_options("8.10.0", options_for_column_families(_facts(tmp_path / "db"), ["default", name]))
    assert list(parse_options(text).cf_options) == ["default", name]
    for path in (tmp_path / "db").glob("OPTIONS-*"):
        path.unlink()
    (tmp_path / "db" / "OPTIONS-000099").write_bytes(text)
    _, cf_options = Options.load_latest(str(tmp_path / "db"))
    assert sorted(cf_options) == sorted(["default", name])


def test_without_db_option_keeps_everything_else():
    text = "[Version]\n  rocksdb_version=6.20.3\n[DBOptions]\n  wal_dir=/tm/db\n  max_open_files=-1\n[CFOptions \"default\"]\n  wal_dir=x\n"
    out, removed = without_db_option(text, "wal_dir")
    assert removed == "/tm/db"
    assert out == text.replace("  wal_dir=/tm/db\n", "")
    assert without_db_option(out, "wal_dir") == (out, None)


# -- the checkpoint path -----------------------------------------------------------------------


def _options_files(root: Path, newest: int) -> dict[Path, str]:
    """External OPTIONS files of ``chk-<newest>``: path -> text."""
    files = damage.referenced_files(root, newest, lambda p: p.read_bytes().startswith(b"# This is a RocksDB option file"))
    return {p: p.read_text() for p in files}


def _instance_with(metadata: Path, file_name: str):
    for op in decode_metadata(metadata.read_bytes()).operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            if isinstance(handle, IncrementalKeyedHandle) and any(
                    getattr(e.handle, "path", "").endswith(file_name)
                    or getattr(e.handle, "name", "").startswith("repair-rebuild-manifest/") and e.local_path == file_name
                    for e in handle.private):
                return handle
    raise LookupError(file_name)


def _damage_manifest_and_options(name: str, tmp_path: Path):
    """A copy of fixture ``name`` whose newest checkpoint lost one instance's MANIFEST and OPTIONS files."""
    dmg = damage.damaged_copy(name, tmp_path, "missing_manifest")
    newest = max(dmg.checkpoints)
    handle = _instance_with(dmg.root / f"chk-{newest}" / "_metadata", dmg.file.name)
    options = next(e for e in handle.private if e.local_path.startswith("OPTIONS-"))
    path = dmg.root / "shared" / options.handle.path.rsplit("/", 1)[1]
    flink_options = parse_options(path.read_bytes())
    path.unlink()
    return dmg, newest, options.local_path, flink_options


@pytest.mark.parametrize("name", ["flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"])
def test_checkpoint_instance_without_options_gets_a_written_one(tmp_path, read_only_guard, name):
    dmg, newest, old_name, flink_options = _damage_manifest_and_options(name, tmp_path)
    read_only_guard(dmg.root)
    result = rebuild_manifest(str(dmg.root / f"chk-{newest}"), str(tmp_path / "out"))
    assert result.ok, result.to_json()
    (instance,) = result.rebuilt
    assert instance.options_written and instance.options_written != old_name
    assert instance.to_json()["options_written"] == instance.options_written
    assert any(old_name in reason for reason in instance.reasons)
    handle = _instance_with(tmp_path / "out" / f"chk-{newest}" / "_metadata", instance.manifest_name)
    private = {e.local_path: e.handle for e in handle.private}
    assert old_name not in private and isinstance(private[instance.options_written], ByteStreamHandle)
    ours = parse_options(private[instance.options_written].data)
    # every state (column family) of the instance, with Flink's settings
    assert sorted(ours.cf_options) == sorted(flink_options.cf_options)
    for cf, options in flink_options.cf_options.items():
        assert _relevant_cf(ours.cf_options[cf]) == _relevant_cf(options)
    manifest = next(e for e in handle.private if e.local_path.startswith("MANIFEST-"))
    assert int(instance.options_written.split("-")[1]) < int(manifest.local_path.split("-")[1])
    assert verify(str(tmp_path / "out" / f"chk-{newest}")).ok


@pytest.mark.slow
def test_real_flink_restores_a_checkpoint_whose_options_and_manifest_were_lost(tmp_path):
    name = "flink-1.20-p3-external-xxhash-lz4"
    dmg, newest, _, _ = _damage_manifest_and_options(name, tmp_path)
    result = rebuild_manifest(str(dmg.root / f"chk-{newest}"), str(tmp_path / "out"))
    assert result.ok and result.rebuilt[0].options_written
    info = fixture_info(FIXTURES / name)
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    restored = restore_state(info["flink_version"], tmp_path / "out" / f"chk-{newest}", records,
                             parallelism=info["parallelism"], max_parallelism=info["spec"]["max_parallelism"])
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert {part: restored[part] for part in ("keyed", "operator")} == {part: expected[part] for part in ("keyed", "operator")}
