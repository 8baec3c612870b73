"""Local files read with the OS's calls (repair/io/local_files.py) answer as ``pyarrow.fs.LocalFileSystem`` did:
the same entries, types, sizes and times, the same "nothing there", the same failures, on one tree with
files, directories, links (to files, to directories, broken) and a FIFO. And a command reading a local
checkpoint no longer imports pyarrow for it."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from repair.errors import StorageError
from repair.io.local_files import list_local, open_local, stat_local
from repair.io.storage import Storage, StorageOptions


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    (root / "d" / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "f").write_bytes(b"hello world")
    (root / "d" / "sub" / "g").write_bytes(bytes(range(256)) * 40)
    (root / "d" / "zero").write_bytes(b"")
    os.symlink(root / "f", root / "link")
    os.symlink(root / "missing", root / "broken")
    os.symlink(root / "d", root / "dlink")
    os.mkfifo(root / "fifo")
    return root


_TYPES = {pafs.FileType.File: "file", pafs.FileType.Directory: "dir", pafs.FileType.Unknown: "other"}


def _pyarrow_status(info: pafs.FileInfo):
    if info.type == pafs.FileType.NotFound:
        return None
    return info.type == pafs.FileType.Directory, (info.size or 0) if info.type == pafs.FileType.File else 0, info.mtime_ns


def _outcome(call):
    """A call's result, or the type of what it raised (pyarrow's ArrowInvalid counts as an OSError: both become
    storage errors; its plain OSError for a directory is an IsADirectoryError here, whose reason reads better)."""
    try:
        return call()
    except (OSError, ValueError) as error:
        if "is a directory" in str(error):
            return "IsADirectoryError"
        return "OSError" if type(error).__name__ in ("OSError", "ArrowInvalid") else type(error).__name__


@pytest.mark.parametrize("name", ["f", "link", "broken", "d", "dlink", "empty", "fifo", "missing", "d/sub/g", "f/x", "d/zero", "a\0b"])
def test_status_as_pyarrow_gives_it(tree, name):
    path = os.path.join(tree, name)
    theirs = _outcome(lambda: _pyarrow_status(pafs.LocalFileSystem().get_file_info(path)))
    ours = _outcome(lambda: None if (status := stat_local(path)) is None else tuple(status))
    assert ours == theirs


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("name", ["", "d", "dlink", "empty", "f", "missing", "broken"])
def test_listings_as_pyarrow_gives_them(tree, name, recursive):
    path = os.path.join(tree, name) if name else str(tree)

    def theirs():
        infos = pafs.LocalFileSystem().get_file_info(pafs.FileSelector(path, recursive=recursive))
        return sorted((info.path[len(path) + 1 :], _pyarrow_status(info)) for info in infos)

    expected = _outcome(theirs)
    assert _outcome(lambda: sorted((relative, tuple(status)) for relative, status in list_local(path, recursive=recursive))) == expected
    if name == "":
        assert "broken" not in dict(expected) and ("dlink/sub/g" in dict(expected)) == recursive  # the cases this covers


@pytest.mark.parametrize("name", ["f", "link", "d/sub/g", "d/zero", "broken", "d", "dlink", "missing", "f/x", "a\0b"])
def test_opening_and_reading_as_pyarrow_does(tree, name):
    path = os.path.join(tree, name)

    def theirs():
        with pafs.LocalFileSystem().open_input_file(path) as file:
            size = file.size()
            return size, [file.read_at(length, offset) for offset, length in _reads(size)]

    def ours():
        file, size = open_local(path)
        try:
            return size, [file.read_at(length, offset) for offset, length in _reads(size)]
        finally:
            file.close()

    assert _outcome(ours) == _outcome(theirs)


def _reads(size: int) -> list[tuple[int, int]]:
    return [(0, size), (0, 3), (size // 2, size), (size, 10), (size + 5, 10), (max(size - 1, 0), 1)]


def test_storage_reads_local_files_through_them(tree):
    storage = Storage(StorageOptions())
    assert [(e.path, e.is_dir, e.size) for e in storage.list_dir(str(tree / "d"))] == [
        (f"{tree}/d/sub", True, 0), (f"{tree}/d/zero", False, 0)]
    assert storage.stat(f"file://{tree}/link").size == 11 and storage.stat(str(tree / "broken")) is None
    assert storage.read_bytes(str(tree / "link")) == b"hello world"
    for uri, reason in [(tree / "missing", "not found"), (tree / "d", "is a directory")]:
        with pytest.raises(StorageError, match=f"cannot open for reading: {reason}"):
            storage.open_input(str(uri))
    with pytest.raises(StorageError, match="cannot list directory: not a directory"):
        storage.list_dir(str(tree / "f"))
    with pytest.raises(StorageError, match="NUL character"):
        storage.stat(str(tree / "a\0b"))
