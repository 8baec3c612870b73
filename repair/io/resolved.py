"""The bytes a ``_metadata`` handle points to, wherever they are: inline, a whole file, or a segment.

A :class:`~repair.io.layout.ResolvedFile` says where a handle's bytes are now (see
:class:`~repair.io.layout.PathResolver`). This module is the one way to get at them:

* :func:`read_resolved`: all of them (or a prefix) in memory, bounded by ``max_size``;
* :func:`open_resolved`: random access without reading them all (SSTs are read block by block),
  released with :func:`close`;
* :func:`write_resolved` / :func:`copy_to_scratch`: copied in chunks, to a stream or to local scratch
  space (remote SSTs, which would otherwise cost one request per block); :func:`copy_files` /
  :func:`copies_in_scratch`: many at once, :data:`IN_FLIGHT` files in flight, so that the latency of
  an object store's requests overlaps (memory: one chunk per file in flight);
* :func:`scratch_directory`: the one place scratch space is made (deleted when the block ends).

A file holding fewer bytes than ``_metadata`` records raises :class:`~repair.errors.StorageError`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import BinaryIO, Iterator, Sequence

from repair.errors import StorageError
from repair.formats.bytes.random_access import BytesSource, RandomAccess
from repair.io import storage as st
from repair.io.layout import ResolvedFile

#: Files read whole into memory (meta data streams, MANIFEST, CURRENT, OPTIONS) are bounded by this.
MAX_SMALL_FILE_BYTES = 256 << 20
#: Chunk size of copies to local scratch space: the bytes a copy in flight holds (an object store's
#: answer is streamed, one GET per file, and written a chunk at a time).
SCRATCH_CHUNK = 1 << 20
#: Files copied (or checked) at once from a remote store: each request waits for the network (tens of
#: milliseconds to the first byte on S3), so several are kept in flight; each holds one chunk in memory.
#: ``REPAIR_IN_FLIGHT`` sets another number (1: one at a time).
IN_FLIGHT = max(1, int(os.environ.get("REPAIR_IN_FLIGHT") or 16))
#: Copies in flight in this process, whichever thread asks (export copies the next RocksDB instance
#: while it reads the current one): at most :data:`IN_FLIGHT` at once.
_copy_slots = threading.BoundedSemaphore(IN_FLIGHT)


def read_resolved(
    storage: st.Storage, resolved: ResolvedFile, *, length: int | None = None, max_size: int = MAX_SMALL_FILE_BYTES
) -> bytes:
    """The bytes of a resolved handle; ``length`` reads only that many leading bytes (e.g. the meta
    data at the head of a full snapshot). More than ``max_size`` bytes are refused before reading."""
    wanted = resolved.size if length is None else min(length, resolved.size)
    if resolved.inline is not None:
        return resolved.inline[:wanted]
    if wanted > max_size:
        raise StorageError(f"state file of {wanted} bytes is larger than the limit of {max_size}", source=resolved.uri)
    with storage.open_input(resolved.uri, size=resolved.start + resolved.size) as file:
        data = file.read(resolved.start, wanted)
    if len(data) != wanted:
        raise StorageError(
            f"expected {resolved.size} bytes at offset {resolved.start} as _metadata records, found {len(data)}",
            source=resolved.uri,
        )
    return data


def open_resolved(storage: st.Storage, resolved: ResolvedFile, *, tail: int = 0) -> RandomAccess:
    """Random access to a resolved handle's bytes (in memory if inline); close it when done. ``tail``: the
    caller reads only near the end of a whole file (see :meth:`~repair.io.storage.Storage.open_input`)."""
    if resolved.inline is not None:
        return BytesSource(resolved.inline)
    file = storage.open_input(resolved.uri, tail=tail if resolved.start == 0 else 0, size=resolved.start + resolved.size)
    if resolved.start == 0 and file.size == resolved.size:
        return file
    return _Window(file, resolved.start, resolved.size)


def close(source: RandomAccess) -> None:
    """Close what :func:`open_resolved` returned (bytes in memory need no closing)."""
    closer = getattr(source, "close", None)
    if closer is not None:
        closer()


def is_remote(resolved: ResolvedFile) -> bool:
    """Whether a resolved handle's bytes are on a remote store (S3, GCS, HDFS, Azure)."""
    return resolved.inline is None and st.parse_location(resolved.uri).kind != "local"


class CopyStopped(Exception):
    """A copy given up because its ``stop`` event was set (see :func:`copy_files`)."""


def write_resolved(storage: st.Storage, resolved: ResolvedFile, out: BinaryIO, *, stop: threading.Event | None = None) -> None:
    """Write a resolved handle's bytes to ``out``, a chunk of about :data:`SCRATCH_CHUNK` bytes in memory at
    a time: from an object store in one GET, streamed (see :meth:`~repair.io.storage.InputFile.stream`). The
    caller checks the bytes written against ``resolved.size`` (a file shorter than it fails here). When
    ``stop`` is set, :class:`CopyStopped` is raised before the next chunk is written."""
    if resolved.inline is not None:
        out.write(resolved.inline)
        return
    with storage.open_input(resolved.uri, size=resolved.start + resolved.size) as file:
        for chunk in file.stream(resolved.start, resolved.size, SCRATCH_CHUNK):
            if stop is not None and stop.is_set():
                raise CopyStopped(resolved.uri)
            out.write(chunk)


@contextmanager
def scratch_write_errors(path: str) -> Iterator[None]:
    """A local scratch write that fails (a full disk, a quota, an I/O error) is a :class:`StorageError`
    naming the scratch file and the temporary directory to free or move (``TMPDIR``)."""
    try:
        yield
    except OSError as error:
        raise StorageError(f"cannot write a scratch copy ({error.strerror or error}); free space in "
                           f"{tempfile.gettempdir()} or point TMPDIR elsewhere", source=path) from error


def copy_to_scratch(storage: st.Storage, resolved: ResolvedFile, scratch: str) -> RandomAccess:
    """A local copy, in directory ``scratch``, of a handle's bytes, opened for random access."""
    return copies_in_scratch(storage, [resolved], scratch)[0]


def copy_file(storage: st.Storage, resolved: ResolvedFile, target: str, *, stop: threading.Event | None = None) -> None:
    """Copy a handle's bytes to the new local file ``target`` (never through a link or over a file),
    checking that it got as many bytes as ``_metadata`` records; ``stop``: see :func:`write_resolved`."""
    if stop is not None and stop.is_set():
        raise CopyStopped(resolved.uri)
    with scratch_write_errors(target), open(target, "xb") as out:
        write_resolved(storage, resolved, out, stop=stop)
    copied = os.path.getsize(target)
    if copied != resolved.size:
        raise StorageError(f"copied {copied} bytes, _metadata records {resolved.size}", source=resolved.uri)


def copy_files(storage: st.Storage, copies: Sequence[tuple[ResolvedFile, str]], *,
               in_flight: int = IN_FLIGHT, stop: threading.Event | None = None) -> list[StorageError | None]:
    """:func:`copy_file` for each ``(resolved, target)``, ``in_flight`` at a time; the error of each
    copy (None: copied), in the order given. Remote copies overlap their requests' latency (at most
    :data:`IN_FLIGHT` copies at once in the process, however many threads copy). Once ``stop``
    is set (another thread gives the copies up), every copy ends at its next chunk and
    :class:`CopyStopped` is raised."""
    def one(copy: tuple[ResolvedFile, str]) -> StorageError | None:
        try:
            with _copy_slots:
                copy_file(storage, *copy, stop=stop)
        except StorageError as error:
            return error
        return None

    if in_flight <= 1 or len(copies) <= 1:
        return [one(copy) for copy in copies]
    with ThreadPoolExecutor(max_workers=min(in_flight, len(copies)), thread_name_prefix="repair-copy") as pool:
        return list(pool.map(one, copies))


def copies_in_scratch(storage: st.Storage, resolved: Sequence[ResolvedFile], scratch: str, *,
                      in_flight: int = IN_FLIGHT) -> list[RandomAccess]:
    """Local copies, in directory ``scratch``, of handles' bytes (copied ``in_flight`` at a time),
    opened for random access, in the order given; the first copy that failed raises."""
    targets = [os.path.join(scratch, f"copy-{uuid.uuid4().hex}.sst") for _ in resolved]
    errors = copy_files(storage, list(zip(resolved, targets)), in_flight=in_flight)
    failed = next((error for error in errors if error is not None), None)
    if failed is not None:
        raise failed
    return [storage.open_input(path) for path in targets]


@contextmanager
def scratch_directory(purpose: str) -> Iterator[str]:
    """A fresh local directory for ``purpose`` (e.g. ``"sst"``, ``"rocksdb"``), deleted on exit.

    Scratch space holds copies only: nothing of the user's is ever opened in place. Its name,
    ``repair-<purpose>-<host>-<pid>-<random>`` in the temporary directory, says whose it is: scratch
    directories of runs that were killed (their process is gone) are deleted when the next one is made."""
    remove_abandoned_scratch()
    with tempfile.TemporaryDirectory(prefix=f"{_SCRATCH_PREFIX}{purpose}-{st.owner_tag()}-") as directory:
        yield directory


_SCRATCH_PREFIX = "repair-"
#: repair-<purpose>-<host hash>-<pid>-<tempfile's random part, no dashes>
_SCRATCH_NAME = re.compile(r"^repair-.+-([0-9a-f]{8}-[0-9]+)-[^-]+$")


def remove_abandoned_scratch(parent: str | None = None) -> list[str]:
    """Deletes the scratch directories in ``parent`` (the temporary directory) whose process is gone."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        match = _SCRATCH_NAME.match(name)
        if match and st.writer_is_gone(match.group(1)):
            path = os.path.join(parent, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class _Window:
    """A :class:`RandomAccess` over ``[start, start + size)`` of another source (file-merging segments)."""

    def __init__(self, source: RandomAccess, start: int, size: int):
        self._source, self._start, self._size = source, start, size

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int):
        length = max(0, min(length, self._size - offset))
        return self._source.read(self._start + offset, length)

    def close(self) -> None:
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
