"""RocksDB itself resolving the LSM tree of a checkpoint's keyed instances (repair.readers.rocksdb_instance).

The reference is the Python merge (rocksdb_lsm.iter_column_family over the handle's SSTs, as
state_reader reads them), itself checked against real Flink's state elsewhere: on every keyed instance
of every fixture (retained checkpoints and native savepoints), RocksDB must serve exactly its live
entries, in the same order, in the batches asked for. Damaged copies (tests/damage.py, edits of real
Flink files) must raise typed errors, never serve a short column family; inputs stay byte-identical and
the scratch directory goes away.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import random
import re
import tempfile
import weakref
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pytest

from fixtures import state_model
from repair.errors import FormatError, StorageError
from repair.formats.flink.handles import ByteStreamHandle, IncrementalKeyedHandle, LocalFile
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.rocksdb.lsm import LsmStats, iter_column_family, tables_by_column_family
from repair.formats.rocksdb.table.block import ValueType
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import open_resolved, read_resolved
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.readers import rocksdb_instance
from repair.readers.rocksdb import _open_tables
from repair.readers.rocksdb_instance import InstanceUnavailable, RocksDbInstance, open_rocksdb_instance
from tests import damage
from tests.conftest import FIXTURES, ROCKSDB_FIXTURE_NAMES

STORAGE = st.default_storage()
#: Every file external (SSTs, MANIFEST, CURRENT, OPTIONS), with list-state merge operands in chk-5.
EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"


# -- helpers -------------------------------------------------------------------------------------


def _snapshots(fixture: Path) -> list[LoadedSnapshot]:
    """Every retained checkpoint and every savepoint of a fixture (or of a copy of one)."""
    paths = [damage.checkpoint_root(fixture)]
    if (fixture / "savepoints").is_dir():
        paths += sorted((fixture / "savepoints").iterdir())
    snapshots = []
    for path in paths:
        layout = discover(str(path), STORAGE)
        snapshots += [load_snapshot(ref, layout.root, STORAGE) for ref in layout.snapshots]
    return snapshots


def _keyed(snapshot: LoadedSnapshot, uid: str | None = None) -> list[IncrementalKeyedHandle]:
    return [sub.managed_keyed_state for op in snapshot.metadata.operators for sub in op.subtasks
            if isinstance(sub.managed_keyed_state, IncrementalKeyedHandle) and (uid is None or op.operator_id == operator_id_for_uid(uid))]


def _newest(fixture: Path) -> LoadedSnapshot:
    layout = discover(str(damage.checkpoint_root(fixture)), STORAGE)
    return load_snapshot(layout.snapshots[-1], layout.root, STORAGE)


def _python_merge(snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle) -> dict[str, list[tuple[bytes, bytes]]]:
    """The live entries per column family as the Python merge resolves them (state_reader's path)."""
    with ExitStack() as opened:
        sources = []
        for entry in handle.sst_files:
            source = open_resolved(STORAGE, snapshot.resolver.resolve(entry.handle))
            opened.callback(getattr(source, "close", lambda: None))
            sources.append((entry.local_path, source))
        tables = tables_by_column_family(_open_tables(sources))
        return {name: [(bytes(k), bytes(v)) for k, v in iter_column_family(name, family, LsmStats())] for name, family in tables.items()}


def _families_with_merge_operands(snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle) -> set[str]:
    found = set()
    for entry in handle.sst_files:
        with ExitStack() as opened:
            source = open_resolved(STORAGE, snapshot.resolver.resolve(entry.handle))
            opened.callback(getattr(source, "close", lambda: None))
            (name, table), = _open_tables([(entry.local_path, source)])
            if any(e.value_type == ValueType.MERGE for e in table.entries()):
                found.add(table.properties.column_family_name)
    return found


def _entries(batches) -> list[tuple[bytes, bytes]]:
    return [pair for keys, values in batches for pair in zip(keys.to_pylist(), values.to_pylist())]


def _size(key: bytes, value: bytes) -> int:
    return len(key) + len(value)


def _check_batches(batches, max_rows: int, max_bytes: int) -> None:
    """At most ``max_rows`` entries; a batch ends with the entry that brings it to ``max_bytes`` (no
    earlier, no later), or with the row limit, or at the end."""
    for index, (key_array, value_array) in enumerate(batches):
        assert key_array.type == value_array.type == pa.binary() and not key_array.null_count and not value_array.null_count
        keys, values = key_array.to_pylist(), value_array.to_pylist()
        assert 0 < len(keys) == len(values) <= max_rows
        total = sum(map(_size, keys, values))
        assert total - _size(keys[-1], values[-1]) < max_bytes, "a batch went on after reaching max_bytes"
        if index < len(batches) - 1:
            assert len(keys) == max_rows or total >= max_bytes, "a batch ended before its limits"


def _scratch_in(tmp_path: Path, monkeypatch) -> Path:
    """Make tempfile create the scratch directories in a fresh directory of the test's own."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


@lru_cache(maxsize=None)
def _options_bytes(fixture: str) -> bytes:
    """The OPTIONS file of the first per-user instance of a fixture's newest checkpoint."""
    snapshot = _newest(FIXTURES / fixture)
    handle = _keyed(snapshot, "per-user")[0]
    entry = next(e for e in handle.private if e.local_path.startswith("OPTIONS-"))
    return read_resolved(STORAGE, snapshot.resolver.resolve(entry.handle))


def _with_private(handle: IncrementalKeyedHandle, name: str, data: bytes | None) -> IncrementalKeyedHandle:
    """``handle`` with its private file ``name`` replaced by inline ``data`` (None: left out)."""
    private = [e for e in handle.private if e.local_path != name]
    if data is not None:
        private.append(LocalFile(name, ByteStreamHandle(name, data)))
    return dataclasses.replace(handle, private=private)


# -- every instance of every fixture ---------------------------------------------------------------


@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES)
def test_rocksdb_serves_exactly_the_python_merge(name, read_only_guard):
    read_only_guard(FIXTURES / name)
    instances = 0
    for snapshot in _snapshots(FIXTURES / name):
        for handle in _keyed(snapshot):
            expected = _python_merge(snapshot, handle)
            with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
                directory = instance.directory
                assert os.path.isdir(directory) and Path(directory).name.startswith("repair-rocksdb-")
                assert instance.column_families == sorted(instance.column_families)
                assert "default" in instance.column_families and set(expected) <= set(instance.column_families)
                for family in instance.column_families:
                    for max_rows, max_bytes in ((7, 1 << 40), (1 << 30, 200)):
                        batches = list(instance.entry_batches(family, max_rows=max_rows, max_bytes=max_bytes))
                        _check_batches(batches, max_rows, max_bytes)
                        assert _entries(batches) == expected.get(family, []), (snapshot.ref.metadata_uri, family)
            assert not os.path.exists(directory)
            instances += 1
    assert instances >= 15  # flink-1.20-rescaled retains two checkpoints: 5 instances at parallelism 1, 10 at 2


@pytest.mark.parametrize("name", [EXTERNAL, "flink-1.20-file-merging", "flink-1.20-default"])
def test_whole_local_ssts_are_linked_everything_else_copied_byte_for_byte(name, read_only_guard):
    read_only_guard(FIXTURES / name)
    snapshot = _newest(FIXTURES / name)
    kinds = set()
    for handle in _keyed(snapshot):
        with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
            for entry in [*handle.shared, *handle.private]:
                resolved = snapshot.resolver.resolve(entry.handle)
                placed = Path(instance.directory) / entry.local_path
                whole = resolved.inline is None and resolved.start == 0 and os.path.getsize(resolved.uri) == resolved.size
                if whole and entry.local_path.endswith(".sst"):
                    assert placed.is_symlink() and placed.resolve() == Path(resolved.uri).resolve()
                    kinds.add("linked")
                else:
                    assert not placed.is_symlink() and placed.read_bytes() == read_resolved(STORAGE, resolved, max_size=1 << 30)
                    kinds.add("inline" if resolved.inline is not None else "copied" if whole else "segment")
    expected = {EXTERNAL: {"linked", "copied"}, "flink-1.20-file-merging": {"segment"}, "flink-1.20-default": {"inline", "copied"}}[name]
    assert expected <= kinds


def test_an_instance_on_s3_is_copied_and_served_the_same(s3, s3_storage):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    bucket = s3.new_bucket({f"ckpt/{root.name}/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()})
    layout = discover(f"s3://{bucket}/ckpt/{root.name}", s3_storage)
    remote = load_snapshot(layout.snapshots[-1], layout.root, s3_storage)
    local = _newest(FIXTURES / EXTERNAL)
    for remote_handle, local_handle in zip(_keyed(remote), _keyed(local), strict=True):
        expected = _python_merge(local, local_handle)
        with open_rocksdb_instance(remote, s3_storage, remote_handle) as instance:
            assert not any(p.is_symlink() for p in Path(instance.directory).iterdir())
            for family in instance.column_families:
                assert _entries(instance.entry_batches(family, max_rows=50, max_bytes=1 << 20)) == expected.get(family, [])


# -- damage: typed errors, never a short column family ------------------------------------------------


@pytest.mark.parametrize("fixture, kind", [(EXTERNAL, "sst_flipped_byte"), ("flink-2.1-p3-external-xxh3-zstd", "sst_flipped_byte"),
                                           ("flink-1.20-default", "inline_sst_flipped_byte")])
def test_a_corrupt_data_block_raises_naming_the_sst(fixture, kind, tmp_path, read_only_guard):
    harm = damage.damaged_copy(fixture, tmp_path, kind)
    read_only_guard(tmp_path / fixture)
    snapshot = _newest(tmp_path / fixture)
    errors = []
    for handle in _keyed(snapshot):
        with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
            for family in instance.column_families:
                try:
                    for _ in instance.entry_batches(family, max_rows=100, max_bytes=1 << 20):
                        pass
                except FormatError as error:
                    errors.append(str(error))
    assert len(errors) == 1, errors  # the one damaged SST, read once
    message = errors[0]
    assert "checksum mismatch" in message and "stopped after" in message
    assert harm.file.name in message  # the damaged input (the shared file, or the _metadata holding it inline)
    assert re.search(r"\b\d{6}\.sst\b", message)  # and the SST, by its name in the instance


def test_a_missing_manifest_makes_the_instance_unavailable(tmp_path, monkeypatch, read_only_guard):
    harm = damage.damaged_copy(EXTERNAL, tmp_path, "missing_manifest")
    read_only_guard(tmp_path / EXTERNAL)
    scratch = _scratch_in(tmp_path, monkeypatch)
    snapshot = _newest(tmp_path / EXTERNAL)
    refused = 0
    for handle in _keyed(snapshot):
        manifests = [snapshot.resolver.resolve(e.handle).uri for e in handle.private if e.local_path.startswith("MANIFEST-")]
        if Path(manifests[0]) != harm.file:
            continue
        with pytest.raises(InstanceUnavailable, match="MANIFEST-") as info:
            with open_rocksdb_instance(snapshot, STORAGE, handle):
                pass
        assert "MANIFEST-" in info.value.reason and "not found" in info.value.reason
        refused += 1
    assert refused == 1
    assert list(scratch.iterdir()) == []


def _without_merge_operator(fixture_copy: Path) -> int:
    """Edit the OPTIONS files of the copy's newest checkpoint: ``merge_operator=nullptr``, padded with
    blanks to the recorded size (RocksDB trims values). Returns how many files were edited."""
    root = damage.checkpoint_root(fixture_copy)
    edited = 0
    for file in damage.referenced_files(root, damage.checkpoint_ids(root)[-1], lambda p: p.read_bytes().startswith(b"# This is a RocksDB option file")):
        data = file.read_bytes()
        changed = re.sub(rb"merge_operator=[^\n]*", lambda m: b"merge_operator=nullptr".ljust(len(m[0])), data)
        assert len(changed) == len(data) and changed != data
        file.write_bytes(changed)
        edited += 1
    return edited


def test_options_without_flinks_merge_operator_make_the_instance_unavailable(tmp_path, read_only_guard):
    assert _without_merge_operator(damage.copy_fixture(EXTERNAL, tmp_path))
    read_only_guard(tmp_path / EXTERNAL)
    snapshot = _newest(tmp_path / EXTERNAL)
    for handle in _keyed(snapshot):
        with pytest.raises(InstanceUnavailable, match="merge operator 'nullptr'"):
            with open_rocksdb_instance(snapshot, STORAGE, handle):
                pass


def test_without_a_merge_operator_the_iteration_raises_instead_of_ending_short(tmp_path, monkeypatch, read_only_guard):
    """The status check behind the OPTIONS check: RocksDB's iterator stops at the first key it cannot
    merge and only its status tells; chk-5 of the fixture has unmerged list-state operands."""
    expected = {}
    snapshot = _newest(FIXTURES / EXTERNAL)
    for handle in _keyed(snapshot):
        expected[handle.backend_id] = (_python_merge(snapshot, handle), _families_with_merge_operands(snapshot, handle))
    assert any(merging for _, merging in expected.values()), "the fixture has no merge operands any more"
    assert _without_merge_operator(damage.copy_fixture(EXTERNAL, tmp_path))
    read_only_guard(tmp_path / EXTERNAL)
    monkeypatch.setattr(rocksdb_instance, "_check_options", lambda name, data: None)
    snapshot = _newest(tmp_path / EXTERNAL)
    raised = []
    for handle in _keyed(snapshot):
        live, merging = expected[handle.backend_id]
        with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
            for family in instance.column_families:
                served = []
                try:
                    for keys, values in instance.entry_batches(family, max_rows=3, max_bytes=1 << 20):
                        served += zip(keys.to_pylist(), values.to_pylist())
                except FormatError as error:
                    assert "merge_operator" in str(error) and repr(family) in str(error)
                    assert family in merging and served == live[family][: len(served)] and len(served) < len(live[family])
                    raised.append(family)
                else:
                    assert served == live.get(family, [])
    list_states = {name for op in state_model.KEYED_OPERATORS.values() for name, kind in op["states"].items() if kind == "list"}
    assert raised and set(raised) <= list_states


class _EndsEarly:
    """A column family whose items() stops after ``keep`` entries without an error, as rocksdict's does
    on one (its iterator's status is the only sign); everything else is the real column family's."""

    def __init__(self, family, keep: int):
        self._family, self._keep = family, keep

    def items(self, **kwargs):
        return iter(list(self._family.items(**kwargs))[: self._keep])

    def __getattr__(self, name):
        return getattr(self._family, name)


@pytest.mark.parametrize("keep", [0, 1, 5])
def test_an_iteration_that_ends_early_without_an_error_status_raises(keep, monkeypatch, read_only_guard):
    """The end check behind items(): entries RocksDB's iterator still has after the last one served
    raise, instead of a short column family; the complete iteration of the same family does not."""
    read_only_guard(FIXTURES / EXTERNAL)
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _keyed(snapshot, "per-user")[0]
    with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
        everything = _entries(instance.entry_batches("count", max_rows=3, max_bytes=1 << 20))
        assert len(everything) > keep
        db = instance._db
        monkeypatch.setattr(instance, "_db", type("Db", (), {"get_column_family": lambda self, name: _EndsEarly(db.get_column_family(name), keep)})())
        served = []
        with pytest.raises(FormatError, match=f"more entries after the {keep} read"):
            for keys, values in instance.entry_batches("count", max_rows=3, max_bytes=1 << 20):
                served += zip(keys.to_pylist(), values.to_pylist())
        assert served == everything[: len(served)]
        monkeypatch.setattr(instance, "_db", db)  # closed by the context as usual


class _Family:
    """A column family holding ``entries`` (keys in order): items() and the iterator of the end check."""

    def __init__(self, entries: list[tuple[bytes, bytes]]):
        self._entries = entries

    def items(self, **kwargs):
        return iter(self._entries)

    def iter(self, options):
        return _Iterator([key for key, _ in self._entries])


class _Iterator:
    def __init__(self, keys: list[bytes]):
        self._keys, self._at = keys, len(keys)

    def seek_to_first(self):
        self._at = 0

    def seek(self, key: bytes):
        self._at = bisect.bisect_left(self._keys, key)

    def valid(self) -> bool:
        return self._at < len(self._keys)

    def key(self) -> bytes:
        return self._keys[self._at]

    def next(self):
        self._at += 1

    def status(self):
        pass


@pytest.mark.parametrize(("max_rows", "max_bytes"), [
    (1, 1 << 40), (700, 1 << 40), (1024, 1 << 40), (5000, 1 << 40),
    (1 << 30, 1), (1 << 30, 2500), (1 << 30, 300_000), (900, 100_000), (3000, 1_000_000),
])
def test_batches_end_where_a_check_per_entry_would_end_them(max_rows, max_bytes):
    """Entries of very different sizes, read in chunks: every batch ends at the entry that brings it to
    ``max_bytes`` or at ``max_rows`` entries, also where that falls inside a chunk or a batch spans
    several, and every entry is served once, in order."""
    rng = random.Random(max_rows ^ max_bytes)
    entries = [(b"%08d" % i + bytes(rng.randrange(40)), bytes(rng.choice((0, 1, 30, 300, 2000)))) for i in range(6000)]
    instance = RocksDbInstance.__new__(RocksDbInstance)  # no database: the column family is _Family's
    instance.directory, instance._sources, instance._batches_open = "(none)", {}, weakref.WeakSet()
    instance.column_families = ["state"]
    instance._db = type("Db", (), {"get_column_family": lambda self, name: _Family(entries)})()
    batches = list(instance.entry_batches("state", max_rows=max_rows, max_bytes=max_bytes))
    _check_batches(batches, max_rows, max_bytes)
    assert _entries(batches) == entries



def test_a_batch_whose_offsets_outgrow_int32_is_a_format_error_not_a_wrapped_array():
    """A batch's binary array has int32 offsets: lengths summing past 2 GiB are refused by name (the
    lengths stand in for entries that large), where a running sum that wrapped would cut wrong rows."""
    parts = rocksdb_instance._BinaryParts()
    parts.add([b"k1", b"k2", b"k3"], [2, 2, 2], 0, 3)
    assert parts.array("state").to_pylist() == [b"k1", b"k2", b"k3"]
    parts.add([b"a", b"b"], [1 << 30, 1 << 30], 0, 2)
    with pytest.raises(FormatError, match="column family 'state'.*2 GiB"):
        parts.array("state")

def test_a_batch_buffer_smaller_than_its_entries_grows_and_keeps_them():
    """The batch's buffer is allocated for its byte budget; entries beyond it (a last entry larger than
    the rest of the budget) move to a larger buffer, every byte kept."""
    parts = rocksdb_instance._BinaryParts(4)
    parts.add([b"ab", b"c"], [2, 1], 0, 2)
    parts.add([b"x", b"defgh", b"ijklmnop"], [1, 5, 8], 1, 3)
    assert parts.array("state").to_pylist() == [b"ab", b"c", b"defgh", b"ijklmnop"]
    assert rocksdb_instance._BinaryParts(8).array("state").to_pylist() == []


# -- the checkpoint's description must be the instance's --------------------------------------------


def test_ssts_must_be_the_ones_the_manifest_lists(monkeypatch, tmp_path):
    scratch = _scratch_in(tmp_path, monkeypatch)
    snapshot = _newest(FIXTURES / EXTERNAL)
    first, second = _keyed(snapshot, "per-user")[:2]
    foreign = next(e for e in second.shared if e.local_path.endswith(".sst"))
    extra = dataclasses.replace(first, shared=[*first.shared, LocalFile("999999.sst", foreign.handle)])
    with pytest.raises(InstanceUnavailable, match="does not list SSTs that _metadata references: 999999.sst"):
        with open_rocksdb_instance(snapshot, STORAGE, extra):
            pass
    dropped = first.shared[0].local_path
    fewer = dataclasses.replace(first, shared=first.shared[1:])
    with pytest.raises(InstanceUnavailable, match=re.escape(dropped.removesuffix(".sst"))):
        with open_rocksdb_instance(snapshot, STORAGE, fewer):
            pass
    assert list(scratch.iterdir()) == []


def _options_sections(data: bytes) -> list[bytes]:
    return re.split(rb"(?m)^(?=\[)", data)


def test_column_families_of_manifest_and_options_must_agree():
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _keyed(snapshot, "per-user")[0]
    name = next(e.local_path for e in handle.private if e.local_path.startswith("OPTIONS-"))
    sections = _options_sections(_options_bytes(EXTERNAL))
    without_tags = b"".join(s for s in sections if b' "tags"]' not in s.split(b"\n", 1)[0])
    assert len(without_tags) < len(_options_bytes(EXTERNAL))
    with pytest.raises(InstanceUnavailable, match="the MANIFEST has column families the OPTIONS file does not describe: tags"):
        with open_rocksdb_instance(snapshot, STORAGE, _with_private(handle, name, without_tags)):
            pass
    extra = b"".join(s.replace(b' "tags"]', b' "extra"]') for s in sections if b' "tags"]' in s.split(b"\n", 1)[0])
    with pytest.raises(InstanceUnavailable, match="describes column families the MANIFEST does not have: extra"):
        with open_rocksdb_instance(snapshot, STORAGE, _with_private(handle, name, _options_bytes(EXTERNAL) + extra)):
            pass


def test_missing_options_current_or_manifest_are_named():
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _keyed(snapshot)[0]
    names = {e.local_path.split("-")[0]: e.local_path for e in handle.private}
    cases = [(names["OPTIONS"], None, "no OPTIONS file"), ("CURRENT", None, "no CURRENT file"),
             (names["MANIFEST"], None, f"CURRENT names {names['MANIFEST']}, which the handle does not hold"),
             ("CURRENT", b"MANIFEST-000", "CURRENT")]
    for name, data, reason in cases:
        with pytest.raises(InstanceUnavailable) as info:
            with open_rocksdb_instance(snapshot, STORAGE, _with_private(handle, name, data)):
                pass
        assert reason in info.value.reason


def test_a_local_path_cannot_leave_the_scratch_directory(tmp_path, monkeypatch):
    scratch = _scratch_in(tmp_path, monkeypatch)
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _keyed(snapshot)[0]
    for bad in ("../x.sst", "/tmp/x.sst", "a/../../x.sst"):
        escaping = dataclasses.replace(handle, shared=[LocalFile(bad, handle.shared[0].handle), *handle.shared[1:]])
        with pytest.raises(StorageError, match="refusing name"):
            with open_rocksdb_instance(snapshot, STORAGE, escaping):
                pass
    assert list(scratch.iterdir()) == [] and not (tmp_path / "x.sst").exists()


# -- lifetime --------------------------------------------------------------------------------------


def test_the_scratch_directory_goes_away_after_an_error_and_open_batches_close(read_only_guard):
    read_only_guard(FIXTURES / EXTERNAL)
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _keyed(snapshot, "per-user")[0]
    with pytest.raises(RuntimeError, match="the caller failed"):
        with open_rocksdb_instance(snapshot, STORAGE, handle) as instance:
            directory = instance.directory
            batches = instance.entry_batches("amount-by-tag", max_rows=2, max_bytes=1 << 20)
            assert len(next(batches)[0]) == 2
            raise RuntimeError("the caller failed")
    assert not os.path.exists(directory)
    assert next(batches, None) is None  # closed with the database, not reading a closed one
    with pytest.raises(ValueError, match="closed"):
        instance.entry_batches("amount-by-tag", max_rows=2, max_bytes=1 << 20)


def test_a_file_named_like_rocksdicts_config_cannot_switch_off_raw_mode():
    snapshot = _newest(FIXTURES / EXTERNAL)
    handle = _with_private(_keyed(snapshot)[0], "rocksdict-config.json", b'{"raw_mode":false,"prefix_extractors":{}}')
    with pytest.raises(InstanceUnavailable, match="RocksDB cannot open the instance"):
        with open_rocksdb_instance(snapshot, STORAGE, handle):
            pass


def test_without_rocksdict_the_instance_is_unavailable(monkeypatch):
    """An executor without rocksdict falls back to the Python merge instead of failing the export."""
    import builtins

    real_import = builtins.__import__

    def no_rocksdict(name, *args, **kwargs):
        if name == "rocksdict":
            raise ImportError("No module named 'rocksdict'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rocksdict)
    snapshot = _newest(FIXTURES / "flink-2.1-default")
    handle = next(iter(_keyed(snapshot)))
    with pytest.raises(InstanceUnavailable, match="rocksdict is not importable"):
        with open_rocksdb_instance(snapshot, STORAGE, handle):
            pass
