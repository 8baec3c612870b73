"""Tests of repair.io.storage on local disks and on a real S3-compatible server (moto, loopback only)."""

from __future__ import annotations

import os
import pickle
import posixpath
import stat as stat_module
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repair.errors import StorageError
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.io.storage import (
    FileInfo,
    Storage,
    StorageOptions,
    basename,
    default_storage,
    join,
    parent,
    parse_location,
    resolve_within,
)
from tests import s3_server
from tests.conftest import FIXTURES

CONTENT = bytes(range(256)) * 40  # 10240 bytes, every offset distinguishable


# -- helpers -------------------------------------------------------------------------------------
def make_tree(root: Path) -> Path:
    """A small checkpoint-like directory: chk-1/_metadata, chk-1/shared/{a.sst,b.sst}, empty/."""
    (root / "chk-1" / "shared").mkdir(parents=True)
    (root / "chk-1" / "_metadata").write_bytes(CONTENT)
    (root / "chk-1" / "shared" / "a.sst").write_bytes(b"A" * 100)
    (root / "chk-1" / "shared" / "b.sst").write_bytes(b"")
    (root / "empty").mkdir()
    return root


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` with its bytes, mode and modification time."""
    result = {}
    for path in sorted(root.rglob("*")):
        info = path.stat()
        data = path.read_bytes() if path.is_file() else None
        result[str(path.relative_to(root))] = (data, info.st_mode, info.st_mtime_ns)
    return result


def leftovers(directory: Path) -> list[str]:
    """Temporary names left in ``directory`` (recursively)."""
    return [str(p) for p in directory.rglob("*") if ".tmp-" in p.name]


@pytest.fixture
def local_storage() -> Storage:
    return Storage(StorageOptions())


# -- paths and URIs ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "base, parts, expected",
    [
        ("/data", ("chk-1", "_metadata"), "/data/chk-1/_metadata"),
        ("/", ("x",), "/x"),
        ("rel/dir/", ("x",), "rel/dir/x"),
        ("s3://bucket", ("a/b",), "s3://bucket/a/b"),
        ("s3a://bucket/", ("/a/", "b"), "s3a://bucket/a/b"),
        ("file:/tmp", ("x",), "file:/tmp/x"),
        ("file:///tmp/", ("x", ""), "file:///tmp/x"),
        ("hdfs://nn:8020/flink", ("chk-1",), "hdfs://nn:8020/flink/chk-1"),
        ("s3://bucket/dir", (), "s3://bucket/dir"),
    ],
)
def test_join(base, parts, expected):
    assert join(base, *parts) == expected


@pytest.mark.parametrize(
    "uri, expected_parent, expected_basename",
    [
        ("s3://bucket/a/b", "s3://bucket/a", "b"),
        ("s3://bucket/a/", "s3://bucket/", "a"),
        ("s3://bucket", "s3://bucket", ""),
        ("/a/b", "/a", "b"),
        ("/a", "/", "a"),
        ("/", "/", ""),
        ("a/b", "a", "b"),
        ("a", ".", "a"),
        ("file:///x/y", "file:///x", "y"),
        ("gs://b/chk-3/_metadata", "gs://b/chk-3", "_metadata"),
    ],
)
def test_parent_and_basename(uri, expected_parent, expected_basename):
    assert parent(uri) == expected_parent
    assert basename(uri) == expected_basename


@pytest.mark.parametrize(
    "uri, kind, fs_path",
    [
        ("/tmp/x", "local", "/tmp/x"),
        ("file:/tmp/x", "local", "/tmp/x"),
        ("file:///tmp/x", "local", "/tmp/x"),
        ("file://localhost/tmp/x", "local", "/tmp/x"),
        ("s3://bucket/key/", "s3", "bucket/key"),
        ("s3a://bucket/a/b", "s3", "bucket/a/b"),
        ("s3p://bucket/a", "s3", "bucket/a"),
        ("S3A://bucket", "s3", "bucket"),
        ("gs://bucket/a", "gcs", "bucket/a"),
        ("hdfs://namenode:8020/flink/chk-1", "hdfs", "/flink/chk-1"),
        ("abfss://container@account.dfs.core.windows.net/flink", "azure", "container/flink"),
    ],
)
def test_parse_location(uri, kind, fs_path):
    location = parse_location(uri)
    assert (location.kind, location.fs_path) == (kind, fs_path)
    assert location.prefix + location.path == uri


@pytest.mark.parametrize(
    "uri, message",
    [
        ("oss://bucket/x", "unsupported URI scheme 'oss'"),
        ("file://otherhost/x", "only local files"),
        ("s3:///key", "no bucket"),
        ("abfs://account.dfs.core.windows.net/x", "container@account"),
        ("", "not a path or URI"),
    ],
)
def test_parse_location_rejects(uri, message):
    with pytest.raises(StorageError, match=message):
        parse_location(uri)


@pytest.mark.parametrize("name", ["000012.sst", "shared/a.sst", "db/x/MANIFEST-000004", "..a", "a..", "~x"])
def test_resolve_within_accepts_relative_names(name):
    assert resolve_within("s3://bucket/out", name) == f"s3://bucket/out/{name}"
    assert resolve_within("/data/out/", name) == f"/data/out/{name}"


@pytest.mark.parametrize(
    "name",
    ["..", "../x", "a/../../x", "a/..", ".", "./a", "/etc/passwd", "//host/x", "C:x", "C:\\x", "c:/x",
     "a\\..\\b", "s3://other/x", "file:/etc", "a//b", "a/", "", "a\x00b", "a\nb"],
)
def test_resolve_within_rejects_escapes(name):
    with pytest.raises(StorageError) as caught:
        resolve_within("/data/out", name)
    assert "/data/out" in str(caught.value) and repr(name) in str(caught.value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab./\\:~ \x00")), max_size=12))
def test_resolve_within_never_escapes(name):
    base = "/data/out"
    try:
        joined = resolve_within(base, name)
    except StorageError:
        return
    assert joined.startswith(base + "/")
    assert posixpath.normpath(joined).startswith(base + "/")
    assert ".." not in joined[len(base) :].split("/")


# -- local reads ---------------------------------------------------------------------------------
def test_open_input_reads_ranges(tmp_path, local_storage):
    path = make_tree(tmp_path) / "chk-1" / "_metadata"
    with local_storage.open_input(str(path)) as file:
        assert isinstance(file, RandomAccess)
        assert file.size == len(CONTENT)
        assert file.read(0, 10) == CONTENT[:10]
        assert file.read(1000, 300) == CONTENT[1000:1300]
        assert file.read(len(CONTENT) - 5, 100) == CONTENT[-5:]  # fewer bytes only at the end
        assert file.read(len(CONTENT), 10) == b""
        assert file.read(len(CONTENT) + 10, 10) == b""
        assert bytes(read_exactly(file, 20, 4, "field")) == CONTENT[20:24]
        with pytest.raises(ValueError):
            file.read(-1, 1)


def test_uri_forms_of_the_same_local_file(tmp_path, local_storage):
    path = make_tree(tmp_path) / "chk-1" / "_metadata"
    for uri in (str(path), f"file:{path}", f"file://{path}", f"file://localhost{path}"):
        assert local_storage.read_bytes(uri) == CONTENT
        assert local_storage.stat(uri) == FileInfo(uri, len(CONTENT), False, path.stat().st_mtime_ns / 1e9)


def test_relative_paths(tmp_path, local_storage, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert local_storage.read_bytes("chk-1/shared/a.sst") == b"A" * 100
    assert [e.path for e in local_storage.list_dir("chk-1")] == ["chk-1/_metadata", "chk-1/shared"]


def test_stat(tmp_path, local_storage):
    root = make_tree(tmp_path)
    info = local_storage.stat(str(root / "chk-1" / "shared" / "a.sst"))
    assert (info.size, info.is_dir) == (100, False)
    assert info.mtime == pytest.approx((root / "chk-1" / "shared" / "a.sst").stat().st_mtime)
    assert local_storage.stat(str(root / "empty")).is_dir
    assert local_storage.stat(str(root / "missing")) is None
    assert local_storage.exists(str(root / "chk-1"))
    assert not local_storage.exists(str(root / "missing"))


def test_list_dir(tmp_path, local_storage):
    root = make_tree(tmp_path)
    base = f"file://{root}"
    assert [(e.path, e.size, e.is_dir) for e in local_storage.list_dir(base)] == [
        (f"{base}/chk-1", 0, True),
        (f"{base}/empty", 0, True),
    ]
    assert [(e.path, e.size, e.is_dir) for e in local_storage.list_dir(base + "/", recursive=True)] == [
        (f"{base}/chk-1", 0, True),
        (f"{base}/chk-1/_metadata", len(CONTENT), False),
        (f"{base}/chk-1/shared", 0, True),
        (f"{base}/chk-1/shared/a.sst", 100, False),
        (f"{base}/chk-1/shared/b.sst", 0, False),
        (f"{base}/empty", 0, True),
    ]
    assert local_storage.list_dir(str(root / "empty")) == []


def test_read_bytes_and_chunks(tmp_path, local_storage):
    path = str(make_tree(tmp_path) / "chk-1" / "_metadata")
    assert local_storage.read_bytes(path, max_size=len(CONTENT)) == CONTENT
    with pytest.raises(StorageError, match=f"{path}: file is 10240 bytes, more than the limit of 10239"):
        local_storage.read_bytes(path, max_size=len(CONTENT) - 1)
    chunks = list(local_storage.iter_chunks(path, chunk_size=4096))
    assert [len(c) for c in chunks] == [4096, 4096, 2048]
    assert b"".join(chunks) == CONTENT
    assert list(local_storage.iter_chunks(str(tmp_path / "chk-1" / "shared" / "b.sst"))) == []


@pytest.mark.parametrize(
    "operation",
    [
        lambda s, uri: s.open_input(uri),
        lambda s, uri: s.read_bytes(uri),
        lambda s, uri: list(s.iter_chunks(uri)),
        lambda s, uri: s.list_dir(uri),
    ],
    ids=["open_input", "read_bytes", "iter_chunks", "list_dir"],
)
def test_missing_file_is_a_storage_error_naming_the_path(tmp_path, local_storage, operation):
    missing = str(tmp_path / "no-such-checkpoint" / "_metadata")
    with pytest.raises(StorageError) as caught:
        operation(local_storage, missing)
    assert str(caught.value).startswith(f"{missing}: cannot ")
    assert str(caught.value).endswith("not found")
    assert "\n" not in str(caught.value)


def test_wrong_kind_of_entry(tmp_path, local_storage):
    root = make_tree(tmp_path)
    with pytest.raises(StorageError, match="not a directory"):
        local_storage.list_dir(str(root / "chk-1" / "_metadata"))
    with pytest.raises(StorageError, match=f"{root / 'chk-1'}: cannot open for reading"):
        local_storage.open_input(str(root / "chk-1"))


#: Reads each path given with Storage.read_bytes and prints its bytes or the StorageError's message.
_READ_EACH = """
import sys
from repair.errors import StorageError
from repair.io.storage import Storage, StorageOptions
for path in sys.argv[1:]:
    try:
        print(Storage(StorageOptions()).read_bytes(path).decode())
    except StorageError as error:
        print(error)
"""


def test_unreadable_file(local_storage):
    """A file the process may not read is a one-line "permission denied" storage error. Root reads any
    file, so as root (CI) the reads run in a child process dropped to ``nobody`` (``setpriv``), beside a
    file it may read, which shows the child reads at all."""
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        folder.chmod(0o755)  # a directory anyone may enter: only the file's own mode refuses the read
        secret, public = folder / "secret", folder / "public"
        secret.write_bytes(b"x")
        secret.chmod(0)
        public.write_bytes(b"readable")
        public.chmod(0o644)
        if os.geteuid() != 0:
            with pytest.raises(StorageError, match="permission denied"):
                local_storage.read_bytes(str(secret))
            assert local_storage.read_bytes(str(public)) == b"readable"
            return
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        done = subprocess.run([*as_nobody, sys.executable, "-c", _READ_EACH, str(public), str(secret)],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(FIXTURES.parent)})
        assert done.returncode == 0, done.stderr
        readable, refused = done.stdout.splitlines()
        assert readable == "readable"
        assert refused.startswith(f"{secret}: cannot ") and "permission denied" in refused, refused


class _FailingFileSystem:
    """Stands in for a pyarrow file system whose calls fail like S3 does when access is denied."""

    def __init__(self, error: Exception):
        self.error = error

    def open_input_file(self, path):
        raise self.error

    def get_file_info(self, path):
        raise self.error


@pytest.mark.parametrize(
    "error, reason",
    [
        (PermissionError(13, "Permission denied"), "permission denied"),
        (OSError("When reading information for key 'x' in bucket 'b': AWS Error ACCESS_DENIED\nsecond line"),
         "When reading information for key 'x' in bucket 'b': AWS Error ACCESS_DENIED"),
        (pa.ArrowInvalid("Expected a local filesystem path"), "Expected a local filesystem path"),
    ],
)
def test_pyarrow_errors_become_one_line_storage_errors(local_storage, monkeypatch, error, reason):
    monkeypatch.setattr(local_storage, "filesystem", lambda location: _FailingFileSystem(error))
    monkeypatch.setattr(local_storage, "_object_store", lambda location: None)  # pyarrow reads the objects too
    for operation, action in [(local_storage.open_input, "open for reading"), (local_storage.stat, "stat")]:
        with pytest.raises(StorageError) as caught:
            operation("s3://b/x")
        assert str(caught.value) == f"s3://b/x: cannot {action}: {reason}"


def test_reading_leaves_the_input_untouched(tmp_path, local_storage):
    root = make_tree(tmp_path / "input")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    before = snapshot(root)
    try:
        uri = f"file://{root}"
        for entry in local_storage.list_dir(uri, recursive=True):
            local_storage.stat(entry.path)
            if not entry.is_dir:
                with local_storage.open_input(entry.path) as file:
                    file.read(0, file.size)
                local_storage.read_bytes(entry.path)
                list(local_storage.iter_chunks(entry.path, chunk_size=1000))
        assert snapshot(root) == before
        assert not leftovers(tmp_path)
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_real_fixture_checkpoints_are_listed_and_read(local_storage):
    metadata_files = sorted(FIXTURES.glob("*/checkpoints/*/chk-*/_metadata"))[:3]
    if not metadata_files:
        pytest.skip("no fixture checkpoints under fixtures/")
    for path in metadata_files:
        entries = local_storage.list_dir(str(path.parent))
        assert f"{path.parent}/_metadata" in [e.path for e in entries]
        assert local_storage.read_bytes(str(path)) == path.read_bytes()


# -- local writes --------------------------------------------------------------------------------
def test_write_atomic(tmp_path, local_storage):
    target = tmp_path / "out" / "report.json"
    assert local_storage.write_atomic(str(target), b"{}") == 2
    assert target.read_bytes() == b"{}"
    with pytest.raises(StorageError, match="already exists"):
        local_storage.write_atomic(str(target), b"[]")
    assert target.read_bytes() == b"{}"
    local_storage.write_atomic(str(target), [b"[", b"1", b"]"], overwrite=True)
    assert target.read_bytes() == b"[1]"
    assert not leftovers(tmp_path)


def _writes_abc_def(stream) -> None:
    stream.write(b"abc")
    stream.write(b"def")


def test_write_atomic_from_a_function_writing_into_a_stream(tmp_path, local_storage):
    target = tmp_path / "out" / "part.parquet"
    assert local_storage.write_atomic(str(target), _writes_abc_def) == 6
    assert target.read_bytes() == b"abcdef" and oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    with pytest.raises(StorageError, match="already exists"):
        local_storage.write_atomic(str(target), _writes_abc_def)

    def fails(stream) -> None:
        stream.write(b"partial")
        raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError):
        local_storage.write_atomic(str(tmp_path / "out" / "other.parquet"), fails)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part.parquet"]  # no temporary file left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_atomic_failure_leaves_nothing(tmp_path, local_storage):
    def chunks():
        yield b"partial"
        raise RuntimeError("producer failed")

    target = tmp_path / "out.bin"
    with pytest.raises(RuntimeError):
        local_storage.write_atomic(str(target), chunks())
    assert list(tmp_path.iterdir()) == []


def test_publish_dir(tmp_path, local_storage):
    source = make_tree(tmp_path / "input") / "chk-1"
    target = str(tmp_path / "out" / "chk-1")
    with local_storage.publish_dir(target) as out:
        assert out.write("shared/a.sst", local_storage.iter_chunks(str(source / "shared" / "a.sst"))) == f"{target}/shared/a.sst"
        out.write("_metadata", b"meta")
        assert not local_storage.exists(target)  # nothing visible before the end
    assert local_storage.read_bytes(f"{target}/_metadata") == b"meta"
    assert local_storage.read_bytes(f"{target}/shared/a.sst") == b"A" * 100
    assert not leftovers(tmp_path)
    with pytest.raises(StorageError, match="already exists; refusing to publish over it"):
        with local_storage.publish_dir(target):
            pass


def test_publish_dir_into_existing_empty_directory(tmp_path, local_storage):
    target = tmp_path / "out"
    target.mkdir()
    with local_storage.publish_dir(str(target)) as out:
        out.write("x", b"1")
    assert (target / "x").read_bytes() == b"1"


def test_publish_dir_failure_leaves_nothing(tmp_path, local_storage):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with local_storage.publish_dir(str(target)) as out:
            out.write("a", b"1")
            out.write("_metadata", b"meta")
            raise RuntimeError("rebuild failed")
    assert list(tmp_path.iterdir()) == []


def test_a_task_writing_after_an_abort_does_not_bring_the_staging_directory_back(tmp_path, local_storage):
    """A Spark job that fails does not wait for its other tasks: one may write its part after the
    driver deleted the staging directory. Its write fails instead of recreating the directory."""
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with local_storage.publish_dir(str(target)) as out:
            staging = out.share()
            local_storage.write_atomic(f"{staging}/state=a/part-00000.parquet", b"first", overwrite=True, inside=staging)
            raise RuntimeError("a task failed the job")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StorageError, match="cannot write: not found"):
        local_storage.write_atomic(f"{staging}/state=b/part-00001.parquet", b"late", overwrite=True, inside=staging)
    assert list(tmp_path.iterdir()) == []


def test_intermediate_files_of_tasks_are_moved_in_and_discarded_before_publishing(tmp_path, local_storage):
    """Tasks move local scratch files below the staging directory (renamed on the same file system) and
    the driver discards them before the commit: only adopted files are published."""
    target = tmp_path / "out"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with local_storage.publish_dir(str(target)) as out:
        staging = out.share()
        for name in ("spilled", "kept"):
            (scratch / name).write_bytes(name.encode())
        assert local_storage.put_local_file(str(scratch / "spilled"), f"{staging}/_spilled-x/a/subtask-0", inside=staging) == 7
        local_storage.put_local_file(str(scratch / "kept"), f"{staging}/keyed-0", inside=staging)
        assert not list(scratch.iterdir())  # moved, not copied
        out.discard("_spilled-x")
        out.discard("_spilled-never-written")
        out.adopt(["keyed-0"])
        out.write("_metadata", b"meta")
    assert sorted(p.name for p in target.iterdir()) == ["_metadata", "keyed-0"]
    (scratch / "late").write_bytes(b"late")
    with pytest.raises(StorageError, match="not found"):  # the staging directory was published: never made again
        local_storage.put_local_file(str(scratch / "late"), f"{staging}/_spilled-x/b", inside=staging)


def test_s3_intermediate_files_are_uploaded_and_discarded(s3, s3_storage, bucket, tmp_path):
    target = f"s3://{bucket}/repaired/sp"
    (tmp_path / "spilled").write_bytes(b"pieces")
    with s3_storage.publish_dir(target) as out:
        staging = out.share()
        s3_storage.put_local_file(str(tmp_path / "spilled"), f"{staging}/_spilled-x/a/subtask-0", inside=staging)
        assert "repaired/sp/_spilled-x/a/subtask-0" in s3.keys(bucket) and not (tmp_path / "spilled").exists()
        out.discard("_spilled-x")
        out.write("_metadata", b"meta")
    assert sorted(k for k in s3.keys(bucket) if k.startswith("repaired/sp/") and not k.endswith("/")) == ["repaired/sp/_metadata"]


def test_publish_dir_refuses_unsafe_names(tmp_path, local_storage):
    with pytest.raises(StorageError, match="refusing name '../escape'"):
        with local_storage.publish_dir(str(tmp_path / "out")) as out:
            out.write("../escape", b"x")
    assert list(tmp_path.iterdir()) == []


def test_written_files_get_the_usual_permissions(tmp_path, local_storage):
    """Outputs get the usual permissions (umask), not the 0600 of temporary files."""
    target = tmp_path / "f"
    local_storage.write_atomic(str(target), b"x")
    assert stat_module.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- configuration and unsupported stores --------------------------------------------------------
def test_storage_pickles_as_its_options(tmp_path):
    storage = Storage(StorageOptions(s3_region="eu-west-1", s3_secret_key="hidden"))
    storage.stat(str(tmp_path))  # creates a file system, which is not pickled
    clone = pickle.loads(pickle.dumps(storage))
    assert clone.options == storage.options
    assert clone.stat(str(tmp_path)).is_dir
    assert "hidden" not in repr(storage)


def test_options_from_env():
    options = StorageOptions.from_env(
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-central-1", "AWS_ALLOW_HTTP": "true"}
    )
    assert (options.s3_endpoint, options.s3_region, options.s3_allow_http) == ("http://127.0.0.1:9000", "eu-central-1", True)
    assert StorageOptions.from_env({"AWS_ENDPOINT_URL_S3": "a:1", "AWS_ENDPOINT_URL": "b:2"}).s3_endpoint == "a:1"
    assert StorageOptions.from_env({}) == StorageOptions()


def test_plain_http_to_a_remote_s3_endpoint_is_refused():
    storage = Storage(StorageOptions(s3_endpoint="http://s3.example.com:9000", s3_access_key="k", s3_secret_key="s"))
    with pytest.raises(StorageError, match="plain http to a non-loopback host"):
        storage.stat("s3://bucket/x")


def test_hdfs_without_libhdfs_is_a_clear_storage_error(local_storage, monkeypatch):
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")
    with pytest.raises(StorageError) as caught:
        local_storage.stat("hdfs://127.0.0.1:1/flink/chk-1")
    message = str(caught.value)
    assert message.startswith("hdfs://127.0.0.1:1/flink/chk-1: cannot connect to hdfs://127.0.0.1:1")
    assert "libhdfs" in message and "\n" not in message


# -- S3 (moto on loopback) -----------------------------------------------------------------------
@pytest.fixture
def bucket(s3) -> str:
    return s3.new_bucket(
        {
            "flink/chk-1/_metadata": CONTENT,
            "flink/chk-1/shared/a.sst": b"A" * 100,
            "flink/chk-1/shared/b.sst": b"",
        }
    )


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_s3_reads(s3_storage, bucket, scheme):
    base = f"{scheme}://{bucket}/flink"
    with s3_storage.open_input(f"{base}/chk-1/_metadata") as file:
        assert isinstance(file, RandomAccess)
        assert file.size == len(CONTENT)
        assert file.read(1000, 300) == CONTENT[1000:1300]
        assert file.read(len(CONTENT) - 5, 100) == CONTENT[-5:]
    assert s3_storage.read_bytes(f"{base}/chk-1/shared/a.sst") == b"A" * 100
    assert b"".join(s3_storage.iter_chunks(f"{base}/chk-1/_metadata", chunk_size=4000)) == CONTENT

    info = s3_storage.stat(f"{base}/chk-1/_metadata")
    assert (info.path, info.size, info.is_dir) == (f"{base}/chk-1/_metadata", len(CONTENT), False)
    assert info.mtime is not None
    assert s3_storage.stat(f"{base}/chk-1").is_dir
    assert s3_storage.stat(f"{base}/chk-2") is None

    assert [(e.path, e.is_dir) for e in s3_storage.list_dir(f"{base}/chk-1")] == [
        (f"{base}/chk-1/_metadata", False),
        (f"{base}/chk-1/shared", True),
    ]
    assert [(e.path, e.size) for e in s3_storage.list_dir(f"{base}/", recursive=True) if not e.is_dir] == [
        (f"{base}/chk-1/_metadata", len(CONTENT)),
        (f"{base}/chk-1/shared/a.sst", 100),
        (f"{base}/chk-1/shared/b.sst", 0),
    ]
    assert [e.path for e in s3_storage.list_dir(f"{scheme}://{bucket}")] == [f"{scheme}://{bucket}/flink"]


@pytest.mark.parametrize(
    "uri_template",
    ["s3a://{bucket}/flink/chk-9/_metadata", "s3://no-such-bucket-{bucket}/x"],
    ids=["missing key", "missing bucket"],
)
def test_s3_missing_is_a_storage_error_naming_the_uri(s3_storage, bucket, uri_template):
    uri = uri_template.format(bucket=bucket)
    for operation in (s3_storage.open_input, s3_storage.read_bytes, s3_storage.list_dir):
        with pytest.raises(StorageError) as caught:
            operation(uri)
        assert str(caught.value).startswith(f"{uri}: cannot ")
        assert "\n" not in str(caught.value)
    assert s3_storage.stat(uri) is None


def test_s3_list_dir_of_a_file(s3_storage, bucket):
    with pytest.raises(StorageError, match="not a directory"):
        s3_storage.list_dir(f"s3://{bucket}/flink/chk-1/_metadata")


def test_s3_write_atomic(s3, s3_storage, bucket):
    uri = f"s3a://{bucket}/out/report.json"
    s3_storage.write_atomic(uri, [b"{", b"}"])
    assert s3_storage.read_bytes(uri) == b"{}"
    with pytest.raises(StorageError, match="already exists"):
        s3_storage.write_atomic(uri, b"x")
    assert not [k for k in s3.keys(bucket) if ".tmp-" in k]
    assert s3_storage.write_atomic(f"s3://{bucket}/out/part.parquet", _writes_abc_def) == 6
    assert s3_storage.read_bytes(f"s3://{bucket}/out/part.parquet") == b"abcdef"


def test_s3_publish_dir_writes_the_commit_file_last(s3, s3_storage, bucket):
    target = f"s3://{bucket}/repaired/chk-1"
    with s3_storage.publish_dir(target) as out:
        out.write("_metadata", b"meta")
        out.write("shared/a.sst", s3_storage.iter_chunks(f"s3://{bucket}/flink/chk-1/shared/a.sst"))
        keys = s3.keys(bucket)
        assert "repaired/chk-1/shared/a.sst" in keys
        assert "repaired/chk-1/_metadata" not in keys  # held back until everything else is written
    assert s3_storage.read_bytes(f"{target}/_metadata") == b"meta"
    assert s3_storage.read_bytes(f"{target}/shared/a.sst") == b"A" * 100


def test_s3_publish_dir_failure_never_writes_the_commit_file(s3, s3_storage, bucket):
    target = f"s3://{bucket}/repaired/chk-1"
    with pytest.raises(RuntimeError):
        with s3_storage.publish_dir(target) as out:
            out.write("shared/a.sst", b"A")
            out.write("_metadata", b"meta")
            raise RuntimeError("rebuild failed")
    assert not [k for k in s3.keys(bucket) if k.startswith("repaired/") and not k.endswith("/")]
    with s3_storage.publish_dir(target) as out:  # a retry succeeds
        out.write("_metadata", b"meta")
    assert s3_storage.read_bytes(f"{target}/_metadata") == b"meta"


def test_s3_fixture_checkpoint_round_trip(s3, s3_storage, local_storage):
    """A real Flink checkpoint uploaded to S3 lists and reads exactly as it does on disk."""
    checkpoints = sorted(FIXTURES.glob("*/checkpoints/*"))
    if not checkpoints:
        pytest.skip("no fixture checkpoints under fixtures/")
    local_root = checkpoints[0]
    files = {
        str(p.relative_to(local_root)): p.read_bytes() for p in sorted(local_root.rglob("*")) if p.is_file()
    }
    bucket = s3.new_bucket({f"job/{name}": data for name, data in files.items()})
    remote_root = f"s3a://{bucket}/job"

    def listing(storage, root):
        return {
            e.path[len(root) + 1 :]: e.size for e in storage.list_dir(root, recursive=True) if not e.is_dir
        }

    assert listing(s3_storage, remote_root) == listing(local_storage, str(local_root)) == {
        name: len(data) for name, data in files.items()
    }
    name = max(files, key=lambda n: len(files[n]))
    with s3_storage.open_input(f"{remote_root}/{name}") as file:
        size = file.size
        assert file.read(size - 8, 8) == files[name][-8:]


def test_s3_storage_pickles(s3_storage, bucket):
    clone = pickle.loads(pickle.dumps(s3_storage))
    assert clone.read_bytes(f"s3://{bucket}/flink/chk-1/shared/a.sst") == b"A" * 100


def test_default_storage_from_environment(s3, bucket, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_REGION", s3_server.REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.SECRET_KEY)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    storage = default_storage()
    assert storage.options.s3_endpoint == s3.endpoint
    from repair.io import storage as storage_module

    assert storage_module.read_bytes(f"s3a://{bucket}/flink/chk-1/shared/a.sst") == b"A" * 100
    assert storage_module.exists(f"s3a://{bucket}/flink/chk-1")
    assert storage_module.stat(f"s3a://{bucket}/flink/chk-1/shared/b.sst").size == 0


def _zombie() -> subprocess.Popen:
    """A child that has ended and is not reaped yet: what a killed run's orphaned pool workers stay
    in a container whose first process reaps no orphans."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return child


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are read from /proc")
def test_a_run_whose_process_ended_unreaped_counts_as_gone_and_its_scratch_is_removed(tmp_path):
    from repair.io.resolved import remove_abandoned_scratch
    from repair.io.storage import owner_tag, writer_is_gone

    host = owner_tag().partition("-")[0]
    child = _zombie()
    try:
        dead = tmp_path / f"repair-sst-{host}-{child.pid}-abc123"
        alive = tmp_path / f"repair-sst-{host}-{os.getppid()}-def456"
        dead.mkdir(), alive.mkdir()
        assert writer_is_gone(f"{host}-{child.pid}")
        assert not writer_is_gone(f"{host}-{os.getppid()}")
        assert remove_abandoned_scratch(str(tmp_path)) == [str(dead)]
        assert alive.is_dir() and not dead.exists()
    finally:
        child.wait()
