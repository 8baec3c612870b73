"""Helpers of the RocksDB format tests: real databases written by RocksDB itself, and the CLI tools.

* :func:`make_rocksdict_db` writes a DB with rocksdict (bundled RocksDB 9.x/10.x: format_version 6
  by default, XXH3) with chosen table options.
* :class:`CApiDB` drives Debian's ``librocksdb`` 7.8 (package ``librocksdb7.8``, pulled in by
  ``rocksdb-tools``) through its C API with ctypes: the only way here to write merge operands and
  format_version 0/1 tables with a real RocksDB. Tests using it skip when the library is absent.
* :func:`sst_dump` / :func:`ldb` run Debian's tools (``rocksdb-tools``), or skip.
"""

from __future__ import annotations

import ctypes
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.checksum import stored_block_checksum
from repair.formats.rocksdb.table.sst import open_table

SST_DUMP = shutil.which("sst_dump")
LDB = shutil.which("ldb")
needs_sst_dump = pytest.mark.skipif(SST_DUMP is None, reason="missing tool: sst_dump (apt-get install rocksdb-tools)")
needs_ldb = pytest.mark.skipif(LDB is None, reason="missing tool: ldb (apt-get install rocksdb-tools)")


class FileSource:
    """A file-backed RandomAccess for tests (the real one belongs to the storage layer)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._file = open(self.path, "rb")
        self.size = os.fstat(self._file.fileno()).st_size
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        self._file.seek(offset)
        return self._file.read(length)

    def close(self) -> None:
        self._file.close()


def sst_files(db: str | Path) -> list[Path]:
    return sorted(Path(db).glob("*.sst"))


def manifest_of(db: str | Path) -> Path:
    return Path(db) / (Path(db) / "CURRENT").read_text().strip()


# -- rocksdict ---------------------------------------------------------------------------------


def make_rocksdict_db(
    path: str | Path,
    *,
    format_version: int | None = None,
    checksum: str | None = None,
    compression: str | None = None,
    block_size: int | None = None,
    partitioned: bool = False,
    index_restart_interval: int | None = None,
    keys: int = 500,
    column_families: tuple[str, ...] = (),
) -> dict[str, dict[bytes, bytes | None]]:
    """Write a DB: puts, deletes every 7th key, a range delete; returns the expected state per CF.

    The expected state maps each user key in the flushed SST to its newest value, ``None`` for deleted
    keys; keys under the range tombstone ``[default-key000100, default-key000120)`` are gone.
    """
    from rocksdict import BlockBasedIndexType, BlockBasedOptions, ChecksumType, DBCompressionType, Options, Rdict

    path = str(path)
    shutil.rmtree(path, ignore_errors=True)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_disable_auto_compactions(True)
    table = BlockBasedOptions()
    if format_version is not None:
        table.set_format_version(format_version)
    if checksum is not None:
        table.set_checksum_type(getattr(ChecksumType, checksum)())
    if block_size is not None:
        table.set_block_size(block_size)
    if index_restart_interval is not None:
        table.set_index_block_restart_interval(index_restart_interval)
    if partitioned:
        table.set_index_type(BlockBasedIndexType.two_level_index_search())
        table.set_metadata_block_size(128)
        table.set_bloom_filter(10, False)
        table.set_partition_filters(True)
    options.set_block_based_table_factory(table)
    if compression is not None:
        options.set_compression_type(getattr(DBCompressionType, compression)())
    db = Rdict(path, options, column_families={name: options for name in column_families} or None)
    expected: dict[str, dict[bytes, bytes | None]] = {}
    for name in ("default", *column_families):
        handle = db if name == "default" else db.get_column_family(name)
        state: dict[bytes, bytes | None] = {}
        for i in range(keys):
            key = b"%s-key%06d" % (name.encode(), i)
            value = (b"value-%d-" % i) * (1 + i % 9)
            handle[key] = value
            state[key] = value
        for i in range(0, keys, 7):
            key = b"%s-key%06d" % (name.encode(), i)
            del handle[key]
            state[key] = None
        expected[name] = state
    db.delete_range(b"default-key000100", b"default-key000120")
    # The flush drops the entries the range tombstone covers (they are older than it).
    for key in [k for k in expected["default"] if b"default-key000100" <= k < b"default-key000120"]:
        del expected["default"][key]
    db.flush()
    for name in column_families:
        db.get_column_family(name).flush()
    db.close()
    return expected


# -- Debian librocksdb through the C API -------------------------------------------------------


def _load_librocksdb():
    for name in ("librocksdb.so.7.8", "librocksdb.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


LIBROCKSDB = _load_librocksdb()
needs_librocksdb = pytest.mark.skipif(LIBROCKSDB is None, reason="missing tool: Debian librocksdb (apt-get install rocksdb-tools)")

_P = ctypes.c_void_p
_ERR = ctypes.POINTER(ctypes.c_char_p)
_SIGNATURES = {
    "rocksdb_options_create": (_P, []),
    "rocksdb_options_set_create_if_missing": (None, [_P, ctypes.c_ubyte]),
    "rocksdb_options_set_compression": (None, [_P, ctypes.c_int]),
    "rocksdb_options_set_disable_auto_compactions": (None, [_P, ctypes.c_int]),
    "rocksdb_options_set_merge_operator": (None, [_P, _P]),
    "rocksdb_options_set_block_based_table_factory": (None, [_P, _P]),
    "rocksdb_block_based_options_create": (_P, []),
    "rocksdb_block_based_options_set_format_version": (None, [_P, ctypes.c_int]),
    "rocksdb_block_based_options_set_checksum": (None, [_P, ctypes.c_char]),
    "rocksdb_block_based_options_set_block_size": (None, [_P, ctypes.c_size_t]),
    "rocksdb_mergeoperator_create": (_P, [_P, _P, _P, _P, _P, _P]),
    "rocksdb_open": (_P, [_P, ctypes.c_char_p, _ERR]),
    "rocksdb_close": (None, [_P]),
    "rocksdb_writeoptions_create": (_P, []),
    "rocksdb_put": (None, [_P, _P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _ERR]),
    "rocksdb_merge": (None, [_P, _P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _ERR]),
    "rocksdb_delete": (None, [_P, _P, ctypes.c_char_p, ctypes.c_size_t, _ERR]),
    "rocksdb_singledelete": (None, [_P, _P, ctypes.c_char_p, ctypes.c_size_t, _ERR]),
    "rocksdb_flushoptions_create": (_P, []),
    "rocksdb_flush": (None, [_P, _P, _ERR]),
}
_NAME_FN = ctypes.CFUNCTYPE(_P, _P)
_FULL_MERGE_FN = ctypes.CFUNCTYPE(_P, _P, _P, ctypes.c_size_t, _P, ctypes.c_size_t, _P, _P, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_size_t))
_PARTIAL_MERGE_FN = ctypes.CFUNCTYPE(_P, _P, _P, ctypes.c_size_t, _P, _P, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_size_t))
#: RocksDB compression codes of the C API (``rocksdb_*_compression``).
CAPI_COMPRESSION = {"none": 0, "snappy": 1, "zlib": 2, "bz2": 3, "lz4": 4, "lz4hc": 5, "zstd": 7}


def _merge_refuses(*args):
    # Report "merge failed" so that flushes keep every operand as its own entry, as Flink's
    # list state does until a compaction with the real operator merges them.
    args[-2][0] = 0
    args[-1][0] = 0
    return None


class CApiDB:
    """A DB written by Debian's RocksDB 7.8 with a merge operator named like Flink's."""

    _keepalive: list = []

    def __init__(self, path: str | Path, *, format_version: int = 5, checksum: int = 1, compression: str = "snappy", block_size: int = 4096):
        lib = LIBROCKSDB
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.lib = lib
        options = lib.rocksdb_options_create()
        lib.rocksdb_options_set_create_if_missing(options, 1)
        lib.rocksdb_options_set_disable_auto_compactions(options, 1)
        lib.rocksdb_options_set_compression(options, CAPI_COMPRESSION[compression])
        table = lib.rocksdb_block_based_options_create()
        lib.rocksdb_block_based_options_set_format_version(table, format_version)
        lib.rocksdb_block_based_options_set_checksum(table, bytes((checksum,)))
        lib.rocksdb_block_based_options_set_block_size(table, block_size)
        lib.rocksdb_options_set_block_based_table_factory(options, table)
        name = ctypes.create_string_buffer(b"StringAppendTESTOperator")
        callbacks = (_FULL_MERGE_FN(_merge_refuses), _PARTIAL_MERGE_FN(_merge_refuses), _NAME_FN(lambda _: ctypes.addressof(name)))
        merge_operator = lib.rocksdb_mergeoperator_create(None, None, callbacks[0], callbacks[1], None, callbacks[2])
        lib.rocksdb_options_set_merge_operator(options, merge_operator)
        CApiDB._keepalive += [name, callbacks]  # the library keeps pointers to them
        self.err = ctypes.c_char_p()
        self.db = lib.rocksdb_open(options, str(path).encode(), ctypes.byref(self.err))
        self._check()
        self.write_options = lib.rocksdb_writeoptions_create()

    def _check(self) -> None:
        if self.err.value:
            message = self.err.value.decode()
            self.err = ctypes.c_char_p()
            raise RuntimeError(message)

    def put(self, key: bytes, value: bytes) -> None:
        self.lib.rocksdb_put(self.db, self.write_options, key, len(key), value, len(value), ctypes.byref(self.err))
        self._check()

    def merge(self, key: bytes, value: bytes) -> None:
        self.lib.rocksdb_merge(self.db, self.write_options, key, len(key), value, len(value), ctypes.byref(self.err))
        self._check()

    def delete(self, key: bytes) -> None:
        self.lib.rocksdb_delete(self.db, self.write_options, key, len(key), ctypes.byref(self.err))
        self._check()

    def single_delete(self, key: bytes) -> None:
        self.lib.rocksdb_singledelete(self.db, self.write_options, key, len(key), ctypes.byref(self.err))
        self._check()

    def flush(self) -> None:
        self.lib.rocksdb_flush(self.db, self.lib.rocksdb_flushoptions_create(), ctypes.byref(self.err))
        self._check()

    def close(self) -> None:
        self.lib.rocksdb_close(self.db)


# -- Debian tools ------------------------------------------------------------------------------


def sst_dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SST_DUMP, *args], capture_output=True, text=True, errors="replace", timeout=120)


def ldb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LDB, *args], capture_output=True, text=True, errors="replace", timeout=120)


def sst_dump_properties(path: Path, *, must_open: bool = True) -> dict[str, str] | None:
    """``sst_dump --show_properties`` as ``{label: value}``; with ``must_open=False``, None for a file
    sst_dump cannot open (Debian's RocksDB lacks some checksum types and formats)."""
    out = sst_dump(f"--file={path}", "--show_properties")
    if not must_open and (out.returncode != 0 or "Table Properties:" not in out.stdout):
        return None
    assert out.returncode == 0, out.stderr
    props = {}
    for line in out.stdout.split("Table Properties:")[1].splitlines():
        label, sep, value = line.strip().partition(": ")
        if sep:
            props[label] = value
    return props


def ldb_live_files(manifest: Path) -> set[tuple[str, int, int, int, int, int]]:
    """``ldb manifest_dump`` live files as ``{(cf, level, number, size, smallest seqno, largest seqno)}``."""
    out = ldb("manifest_dump", f"--path={manifest}")
    assert out.returncode == 0, out.stderr
    files = set()
    cf = level = None
    for line in out.stdout.splitlines():
        if m := re.match(r'-+ Column family "(.*)"\s+\(ID (\d+)\)', line):
            cf = m.group(1)
        elif m := re.match(r"--- level (\d+) ---", line):
            level = int(m.group(1))
        elif m := re.match(r"\s*(\d+):(\d+)\[(\d+) \.\. (\d+)\]", line):
            files.add((cf, level, *map(int, m.groups())))
    return files


_ADD_FILE = re.compile(r"AddFile: (\d+) (\d+) (\d+) '([0-9A-F]*)' seq:(\d+), type:(\d+) \.\. '([0-9A-F]*)' seq:(\d+), type:(\d+)")
_EDIT_FIELDS = {"Comparator": "comparator", "LogNumber": "log_number", "PrevLogNumber": "prev_log_number",
                "NextFileNumber": "next_file_number", "LastSeq": "last_sequence", "MaxColumnFamily": "max_column_family",
                "MinLogNumberToKeep": "min_log_number_to_keep", "ColumnFamily": "column_family",
                "ColumnFamilyAdd": "column_family_add"}
_VERSION_FILE = re.compile(r"\s*(\d+):(\d+)\[(\d+) \.\. (\d+)\]\['([0-9A-F]*)' seq:(\d+), type:(\d+) \.\. '([0-9A-F]*)' seq:(\d+), type:(\d+)\]")


def ldb_manifest_dump(manifest: Path) -> tuple[list[dict], dict]:
    """``ldb manifest_dump --verbose --hex``, parsed: every VersionEdit as ldb decoded it, and the version it built.

    Each edit is a dict of the fields ldb prints (names as :class:`repair.formats.rocksdb.manifest.VersionEdit`'s;
    numbers as ints) with ``new_files`` as ``(level, number, size, smallest, largest)``, keys as
    ``(user key hex, seqno, type)``; ``deleted_files`` as ``(level, number)``. The version:
    ``{"column_families": {id: {"name", "log_number", "comparator", "files": {number: (level, size,
    smallest_seqno, largest_seqno, smallest, largest)}}}, "next_file_number", "last_sequence", ...}``
    (``next_file_number`` as recorded: ldb prints one more, see ``VersionSet::Recover``).
    """
    out = ldb("manifest_dump", f"--path={manifest}", "--verbose", "--hex")
    assert out.returncode == 0, out.stderr + out.stdout
    edits: list[dict] = []
    version: dict = {"column_families": {}}
    edit = cf = level = None
    for line in out.stdout.splitlines():
        stripped = line.strip()
        if stripped == "VersionEdit {":
            edit = {"new_files": [], "deleted_files": []}
        elif stripped == "}" and edit is not None:
            edits.append(edit)
            edit = None
        elif edit is not None:
            key, _, value = stripped.partition(": ")
            if key == "AddFile":
                m = _ADD_FILE.match(stripped)
                g = m.groups()
                edit["new_files"].append((int(g[0]), int(g[1]), int(g[2]), (g[3], int(g[4]), int(g[5])), (g[6], int(g[7]), int(g[8]))))
            elif key == "DeleteFile":
                lv, number = value.split()
                edit["deleted_files"].append((int(lv), int(number)))
            elif key in _EDIT_FIELDS:
                edit[_EDIT_FIELDS[key]] = value if key in ("Comparator", "ColumnFamilyAdd") else int(value)
            elif stripped:
                edit.setdefault("other", []).append(stripped)
        elif m := re.match(r'-+ Column family "(.*)"\s+\(ID (\d+)\)', line):
            cf = version["column_families"][int(m.group(2))] = {"name": m.group(1), "files": {}}
        elif m := re.match(r"--- level (\d+) ---", line):
            level = int(m.group(1))
        elif m := re.match(r"log number: (\d+)", line):
            cf["log_number"] = int(m.group(1))
        elif m := re.match(r"comparator: (.*)", line):
            cf["comparator"] = m.group(1).strip()
        elif m := _VERSION_FILE.match(line):
            g = m.groups()
            cf["files"][int(g[0])] = (level, int(g[1]), int(g[2]), int(g[3]), (g[4], int(g[5]), int(g[6])), (g[7], int(g[8]), int(g[9])))
        elif m := re.match(r"next_file_number (\d+) last_sequence (\d+)\s+prev_log_number (\d+) max_column_family (\d+)", line):
            version.update(next_file_number=int(m.group(1)) - 1, last_sequence=int(m.group(2)),
                           prev_log_number=int(m.group(3)), max_column_family=int(m.group(4)))
    return edits, version


def random_damage(rng: random.Random, data: bytes) -> bytes:
    """One random kind of damage: flipped bits, a block rewritten with a valid checksum, garbage ..."""
    d = bytearray(data)
    roll = rng.random()
    if roll < 0.45:
        # Change a block and re-seal it with a valid checksum: decompression has to find it.
        table = open_table(BytesSource(data))
        blocks = list(table.iter_block_handles())
        offset, size = rng.choice(blocks).handle
        if size:
            what = rng.random()
            if what < 0.4:
                d[offset + rng.randrange(min(size, 4))] = rng.randrange(256)  # size header / prefix
            elif what < 0.7:
                d[offset + rng.randrange(size)] ^= 1 << rng.randrange(8)
            else:
                d[offset + size] = rng.choice([0, 1, 1, 2, 4, 7, 0x40, 9])  # another compression type
            stored = stored_block_checksum(
                table.footer.checksum_type, bytes(d[offset : offset + size]), d[offset + size],
                table.footer.base_context_checksum, offset,
            )
            d[offset + size + 1 : offset + size + 5] = stored.to_bytes(4, "little")
            return bytes(d)
    if roll < 0.65:
        for _ in range(rng.choice([1, 1, 3])):
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
    elif roll < 0.8:
        d[len(d) - 1 - rng.randrange(min(len(d), 400))] = rng.randrange(256)  # index, metaindex, footer
    elif roll < 0.9:
        start = rng.randrange(len(d))
        d[start : start + 16] = bytes(rng.randrange(256) for _ in range(len(d[start : start + 16])))
    else:
        d = d[: rng.randrange(len(d))]
    return bytes(d)

