"""CURRENT, OPTIONS and RocksDB file names, against files RocksDB wrote."""

from __future__ import annotations

import pytest

from repair.errors import FormatError
from repair.formats.rocksdb.files import (
    FileKind,
    decode_current,
    encode_current,
    file_number,
    parse_file_name,
    parse_options,
    table_file_name,
)
from tests.rocksdb_testlib import make_rocksdict_db


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("files") / "db"
    make_rocksdict_db(path, format_version=5, checksum="crc32c", compression="zstd", block_size=1024, keys=50,
                      column_families=("window-contents",))
    return path


def test_current_names_the_manifest(db):
    name = decode_current((db / "CURRENT").read_bytes())
    assert (db / name).exists() and parse_file_name(name).kind == FileKind.MANIFEST
    assert encode_current(name) == (db / "CURRENT").read_bytes()
    with pytest.raises(FormatError, match="newline"):
        decode_current(name.encode())
    with pytest.raises(FormatError, match="CURRENT file corrupted"):
        decode_current(b"MANIFEST-00x1\n")


def test_options_file_written_by_rocksdb(db):
    (options_path,) = sorted(db.glob("OPTIONS-*"))[-1:]
    options = parse_options(options_path.read_bytes())
    assert options.version["options_file_version"] == "1.1"
    assert options.rocksdb_version.count(".") == 2
    assert list(options.cf_options) == ["default", "window-contents"]
    factory, table = options.table_options["window-contents"]
    assert factory == "BlockBasedTable"
    assert table["format_version"] == "5" and table["checksum"] == "kCRC32c" and table["block_size"] == "1024"
    assert options.cf_options["default"]["compression"] == "kZSTD"
    assert options.db_options["create_if_missing"] == "true"


@pytest.mark.parametrize(
    "text,line",
    [
        ("[Version]\n  a=1\n[DBOptions]\n  no equals sign\n", 4),
        ("# comment\n  a=1\n", 2),
        ("[DBOptions]\n  a=1\n", 1),
        ("[Version]\n[CFOptions]\n", 2),
        ("[Version]\n[DBOptions\n", 2),
    ],
)
def test_options_syntax_errors_name_the_line(text, line):
    with pytest.raises(FormatError) as info:
        parse_options(text)
    assert info.value.field == f"OPTIONS line {line}"
    assert info.value.offset == sum(len(l) + 1 for l in text.split("\n")[: line - 1])


def test_options_comments_and_values_with_equals():
    options = parse_options('[Version]\n  rocksdb_version=6.20.3  # trailing\n[CFOptions "a b"]\n  merge_operator={id=X;delimiter=,;}\n')
    assert options.version == {"rocksdb_version": "6.20.3"}
    assert options.cf_options["a b"] == {"merge_operator": "{id=X;delimiter=,;}"}


def test_file_names():
    assert file_number("000042.sst") == 42 and parse_file_name("000042.sst").kind == FileKind.TABLE
    assert file_number("MANIFEST-000006") == 6
    assert parse_file_name("OPTIONS-000007").kind == FileKind.OPTIONS
    assert parse_file_name("000008.log") == parse_file_name("000008.log") and parse_file_name("000008.log").kind == FileKind.WAL
    assert parse_file_name("CURRENT").number is None
    assert parse_file_name("rocksdict-config.json") is None and parse_file_name("MANIFEST-") is None
    assert parse_file_name("12.sst.bak") is None
    assert table_file_name(42) == "000042.sst" and table_file_name(1234567) == "1234567.sst"
