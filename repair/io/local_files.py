"""Reading local files with the operating system's own calls: open, read, status and listing.

:class:`~repair.io.storage.Storage` reads local paths through this module and leaves ``pyarrow.fs`` to remote
stores and to writes, so that a command reading a local checkpoint never imports ``pyarrow`` for it (about
0.06 CPU s, a third of the start-up of a short command: docs/benchmarks/verify.md, "Start-up without pyarrow").
The answers are those ``pyarrow.fs.LocalFileSystem`` gave (tests/io/test_local_files.py compares both on the
same tree):

* status follows symbolic links; a missing path, a broken link and a path through a file (``ENOTDIR``) are
  "nothing there" (``None``); other failures raise;
* an entry is a directory, a file (its size) or something else (a FIFO, a device: size 0);
* a listing leaves out broken links and follows linked directories when recursive (a link back to a
  directory being listed is not entered again: pyarrow went round such a loop until the path was too long);
* opening a directory fails (``IsADirectoryError``), as does any path with a NUL character (an ``OSError``
  here, pyarrow's ``ArrowInvalid`` there: both become a :class:`~repair.errors.StorageError`).

Errors are the OS's ``OSError`` subclasses; the storage layer turns them into one-line storage errors.
"""

from __future__ import annotations

import errno
import os
import stat as stat_modes
from typing import NamedTuple

#: Opening never waits for a writer: a FIFO opened for reading without one blocks (pyarrow's open did);
#: the flag changes nothing for regular files.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class LocalStatus(NamedTuple):
    """What a status or a listing says about one entry."""

    is_dir: bool
    #: Bytes of a regular file; 0 for directories and other entries.
    size: int
    mtime_ns: int


def _checked_path(path: str) -> str:
    if "\0" in path:
        raise OSError(errno.EINVAL, "embedded NUL character in the path", path.replace("\0", "\\0"))
    return path


def _status(result: os.stat_result) -> LocalStatus:
    mode = result.st_mode
    return LocalStatus(stat_modes.S_ISDIR(mode), result.st_size if stat_modes.S_ISREG(mode) else 0, result.st_mtime_ns)


class LocalFile:
    """An open local file; ``read_at(length, offset)`` as ``pyarrow.NativeFile`` has it (positional reads, safe
    from several threads). Its size is what :func:`open_local` returned with it."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int):
        self._fd = fd

    def read_at(self, length: int, offset: int) -> bytes:
        """``length`` bytes at ``offset``, fewer only where the file ends."""
        data = os.pread(self._fd, length, offset)
        if 0 < len(data) < length:  # one call returns at most about 2 GiB (Linux); the rest follows
            parts = [data]
            done = len(data)
            while done < length:
                more = os.pread(self._fd, length - done, offset + done)
                if not more:
                    break
                parts.append(more)
                done += len(more)
            data = b"".join(parts)
        return data

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


def open_local(path: str) -> tuple[LocalFile, int]:
    """``path`` opened for reading, and its size; ``IsADirectoryError`` for a directory."""
    fd = os.open(_checked_path(path), _OPEN_FLAGS)
    try:
        result = os.fstat(fd)
        if stat_modes.S_ISDIR(result.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    except BaseException:
        os.close(fd)
        raise
    return LocalFile(fd), _status(result).size


def stat_local(path: str) -> LocalStatus | None:
    """What is at ``path`` (links followed), or ``None`` when nothing is."""
    try:
        return _status(os.stat(_checked_path(path)))
    except (FileNotFoundError, NotADirectoryError):
        return None


def list_local(directory: str, *, recursive: bool = False) -> list[tuple[str, LocalStatus]]:
    """``(path relative to directory, status)`` of each entry of ``directory`` (of every descendant with
    ``recursive``), in no particular order. ``FileNotFoundError`` / ``NotADirectoryError`` when ``directory``
    is missing or a file."""
    entries: list[tuple[str, LocalStatus]] = []
    top = os.stat(_checked_path(directory))
    if not stat_modes.S_ISDIR(top.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", directory)
    pending = [(directory, "", ((top.st_dev, top.st_ino),))]
    while pending:
        path, relative, ancestors = pending.pop()
        with os.scandir(path) as listing:
            for entry in listing:
                try:
                    result = entry.stat()  # follows links
                except (FileNotFoundError, NotADirectoryError):
                    continue  # a broken link: pyarrow lists nothing for it
                name = f"{relative}/{entry.name}" if relative else entry.name
                status = _status(result)
                entries.append((name, status))
                identity = (result.st_dev, result.st_ino)
                if recursive and status.is_dir and identity not in ancestors:
                    pending.append((entry.path, name, ancestors + (identity,)))
    return entries
