"""Files on local disks and object stores, through ``pyarrow.fs``, chosen by URI scheme.

Modelled on pyiceberg's ``PyArrowFileIO``: a :class:`Storage` holds only plain options and creates one
``pyarrow.fs`` file system per scheme and authority (bucket, name node, account) on first use. It
pickles as its options alone, so Spark executors re-create the file systems on their side.

Supported locations:

* local files: ``/abs/path``, ``rel/path``, ``file:/p`` (as Flink writes them), ``file:///p``,
  ``file://localhost/p``;
* S3 and S3-compatible stores: ``s3://bucket/key``, and Flink's and Hadoop's ``s3a``, ``s3p``,
  ``s3n`` (see :class:`StorageOptions` for endpoint, region and credentials);
* Google Cloud Storage: ``gs://bucket/key`` (or ``gcs://``);
* HDFS: ``hdfs://host:port/path`` (pyarrow needs libhdfs and a JVM for it);
* Azure: ``abfs[s]://container@account.dfs.core.windows.net/path``, ``wasb[s]://`` likewise.

URIs keep the form they were given in: listing ``s3a://b/dir`` yields ``s3a://b/dir/...``.

Objects on S3, GCS and Azure are read through ``obstore`` (:mod:`repair.io.objects`): a ranged GET with
no HEAD before it, so a size the caller knows (from ``_metadata`` or a listing) costs no request, and a
small file scanned whole is one request. Local files are read, listed and looked at with the operating
system's calls (:mod:`repair.io.local_files`), so that reading a local checkpoint never imports ``pyarrow``;
other listings and status, and all writes, go through ``pyarrow.fs``, imported when first used.

Every failure is a :class:`~repair.errors.StorageError` naming the URI and the reason; pyarrow's
``OSError`` and ``ArrowException`` never escape.

Reading never modifies anything. Writing is for outputs only and is atomic per file:

* local disks and HDFS: written under ``<name>.tmp-<random>`` next to the target, then renamed;
* object stores (S3, GCS, Azure): written straight to the final key, because an object upload
  becomes visible only once complete (a single PUT or a completed multipart upload), while a
  "rename" would be a non-atomic copy and delete.

A directory is published with :meth:`Storage.publish_dir`: on local disks and HDFS it is built as
``<target>.tmp-<random>`` and renamed into place. On object stores its files are written to their
final keys and a *commit file* (``_metadata`` by default, the file whose presence makes a Flink
checkpoint complete) is written last, only once everything else succeeded. Readers must treat a
directory without its commit file as incomplete, exactly as Flink does.
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, Union

from repair.errors import RepairError, StorageError
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.records import record
from repair.io import objects
from repair.io.local_files import LocalStatus, list_local, open_local, stat_local
from repair.io.objects import ObjectFile
from repair.io.options import StorageOptions, parse_endpoint
from repair.io.retry import RetryPolicy, ShortRead, is_transient
from repair.io.uris import (
    Location,
    absolute,
    basename,
    is_within,
    join,
    parent,
    parse_location,
    resolve_within,
)


class _ImportedOnUse:
    """Stands for a module imported at its first attribute access: ``pyarrow`` costs about 0.06 CPU s to
    import, and a command reading local files only never needs it (see :mod:`repair.io.local_files`)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


pa = _ImportedOnUse("pyarrow")
pafs = _ImportedOnUse("pyarrow.fs")


def _arrow_exception_types() -> tuple[type, ...]:
    """``pyarrow.ArrowException`` once pyarrow is imported (no pyarrow error exists before), else nothing."""
    module = sys.modules.get("pyarrow")
    return (module.ArrowException,) if module is not None else ()


__all__ = [
    "absolute",
    "iso_utc",
    "ByteBudget",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_READ_BYTES",
    "DirectoryPublisher",
    "FileInfo",
    "InputFile",
    "Location",
    "RandomAccess",
    "Storage",
    "StorageOptions",
    "basename",
    "default_storage",
    "exists",
    "is_within",
    "iter_chunks",
    "join",
    "list_dir",
    "open_input",
    "parent",
    "parse_location",
    "read_bytes",
    "resolve_within",
    "stat",
]

#: Chunk size of sequential whole-file reads (:meth:`Storage.iter_chunks`).
DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
#: Preferred size of sequential reads of local files: 1 MiB pieces stay in the CPU cache while they
#: are processed (16 MiB ones do not), which makes SST verification about 20 % faster. Object stores
#: keep the reader's default, large ranged reads, except for a file held whole in memory (a whole-file
#: scan, :data:`SCAN_WHOLE_MAX`): its bytes are read from memory as a local file's (10-15 % less CPU
#: for verify's checksums and decompression than 16 MiB pieces, docs/benchmarks/remote.md).
LOCAL_READ_SIZE = 1024 * 1024
#: Retry budget of local reads, in seconds (see :attr:`Storage.retry`).
LOCAL_RETRY_BUDGET = 1.0
#: Default bound of :meth:`Storage.read_bytes`.
DEFAULT_MAX_READ_BYTES = 512 * 1024 * 1024
#: Whole-file scans of remote files (``open_input(uri, scan=True)``): a file of up to this many bytes
#: is read in one request at its first read, and every later read is served from memory. Each request
#: to an object store waits tens of milliseconds for its first byte, and an SST is read as footer,
#: metaindex, properties, index, then its blocks: one request for all of them instead of half a dozen.
#: RocksDB's SSTs as Flink writes them stay near 64 MB (its target file size), a few just above: all of
#: them are one request (within :data:`READ_BUFFERS`; verify reads ahead only as many files as fit in it).
SCAN_WHOLE_MAX = 128 << 20
#: ... a larger remote file keeps this many of its last bytes, read in one request at the first read that
#: lands in them: an SST's footer, metaindex, index, properties and filter blocks (its data blocks are read
#: in large ranges as the scan asks for them).
SCAN_TAIL = 1 << 20
#: Bytes that the reads of :data:`SCAN_WHOLE_MAX` and :data:`SCAN_TAIL` may hold in memory at once in one
#: process, whatever the number of files open (``REPAIR_READ_BUFFER_MB``); a file whose buffer does not
#: fit is read by ranges, as asked, instead of waiting.
READ_BUFFER_BYTES = max(0, int(os.environ.get("REPAIR_READ_BUFFER_MB") or 128)) << 20

#: What :meth:`Storage.write_atomic` writes: bytes, an iterable of byte chunks, or a function writing into
#: the output stream it is given (a ``pyarrow.NativeFile``: e.g. a Parquet writer, with no copy through Python).
Data = Union[bytes, bytearray, memoryview, Iterable[bytes], Callable[["pa.NativeFile"], None]]

#: Kinds where a rename is atomic, so files and directories are staged under a temporary name.
_RENAME_KINDS = frozenset({"local", "hdfs"})
#: The pyarrow.fs class each kind needs (pyarrow may be built without some of them).
_FILESYSTEM_CLASSES = {
    "local": "LocalFileSystem",
    "s3": "S3FileSystem",
    "gcs": "GcsFileSystem",
    "hdfs": "HadoopFileSystem",
    "azure": "AzureFileSystem",
}
_TMP_MARKER = ".tmp-"
_STAGING_DELETE_ATTEMPTS = 5
#: Object stores: ``<target>`` + this is the object a :class:`DirectoryPublisher` writes first and
#: deletes after the commit file, naming its writer, so that a rerun can delete the output of a run
#: that died. Beside the target, not in it: pyarrow leaves a "directory" object for the parent of a
#: deleted object, which must not appear in the output.
IN_PROGRESS_SUFFIX = ".repair-in-progress"


def iso_utc(seconds: float | None) -> str | None:
    """A file time (seconds since the epoch) as ``2026-11-25T00:43:46Z``; None stays None."""
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# -- errors --------------------------------------------------------------------------------------
class FileChanged(OSError):
    """A read found the file shorter than it was known to be: an answer of the store, not a lost connection."""


def _reason(error: BaseException) -> str:
    """One line saying why ``error`` happened, without pyarrow's noise."""
    if isinstance(error, FileNotFoundError):
        return "not found"
    if isinstance(error, PermissionError):
        return "permission denied"
    if isinstance(error, IsADirectoryError):
        return "is a directory"
    if isinstance(error, NotADirectoryError):
        return "not a directory"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 400 else text[:400] + "..."


class _StorageErrors:
    """Context manager turning pyarrow's and the OS's errors into ``StorageError(uri, action: reason)``."""

    __slots__ = ("uri", "action")

    def __init__(self, uri: str, action: str):
        self.uri = uri
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, error, traceback) -> bool:
        if error is None or isinstance(error, RepairError):
            return False
        if isinstance(error, (OSError, *_arrow_exception_types())):
            transient = is_transient(error)
            why = _reason(error) + (" (a transient fault; retries ran out of time)" if transient else "")
            raise StorageError(f"cannot {self.action}: {why}", source=self.uri, transient=transient) from error
        return False


@record(frozen=True)
class FileInfo:
    """What :meth:`Storage.stat` and :meth:`Storage.list_dir` report about one entry."""

    #: The entry's URI, in the form of the URI that was asked for.
    path: str
    #: Size in bytes (0 for directories).
    size: int
    is_dir: bool
    #: Modification time, seconds since the epoch, when the store reports one.
    mtime: float | None


class ByteBudget:
    """Bytes that may be held at once (read buffers of one process), taken without waiting."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        #: The most bytes held at once so far.
        self.peak = 0
        self._lock = threading.Lock()

    def try_take(self, size: int) -> bool:
        """Takes ``size`` bytes if they fit under the limit (True), else takes nothing (False)."""
        with self._lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            self.peak = max(self.peak, self.held)
            return True

    def take(self, size: int) -> None:
        """Takes ``size`` bytes already held (the limit may be passed: a read that returned more than asked)."""
        with self._lock:
            self.held += size
            self.peak = max(self.peak, self.held)

    def give_back(self, size: int) -> None:
        with self._lock:
            self.held -= size


#: The read buffers of this process (see :data:`READ_BUFFER_BYTES`).
READ_BUFFERS = ByteBudget(READ_BUFFER_BYTES)


class InputFile:
    """Random-access reads of one file; a :class:`~repair.formats.bytes.random_access.RandomAccess`.

    ``read(offset, length)`` returns ``length`` bytes, fewer only at the end of the file. Reads are
    positional and may come from several threads. Close it (or use ``with``) when done.

    ``buffer_whole`` / ``buffer_tail`` (remote whole-file scans, see :meth:`Storage.open_input`): at the
    first read, the whole file, or at the first read that lands in them its last ``buffer_tail`` bytes,
    are read in one request (if :data:`READ_BUFFERS` has room) and later reads inside them are served from
    memory as ``memoryview`` slices; other reads are ranged requests. The buffer is freed on close.
    A file held whole prefers :data:`LOCAL_READ_SIZE` reads from then on (:attr:`preferred_read_size`),
    as a local one: the scan's pieces then stay in the CPU cache while they are checked.
    """

    __slots__ = ("uri", "_file", "_size", "preferred_read_size", "_retry", "_buffer_whole", "_buffer_tail",
                 "_buffer", "_buffer_start", "_held", "_buffer_lock", "_budget")

    def __init__(self, uri: str, file: pa.NativeFile | ObjectFile, size: int, preferred_read_size: int | None = None,
                 retry: RetryPolicy | None = None, *, buffer_whole: bool = False, buffer_tail: int = 0,
                 budget: ByteBudget | None = None):
        self.uri = uri
        self._file = file
        self._size = size
        self._retry = retry or RetryPolicy(budget_seconds=0)
        #: Size of sequential reads that suits this store (``None``: no preference); whole-file scans
        #: such as SST verification use it.
        self.preferred_read_size = preferred_read_size
        self._buffer_whole = buffer_whole
        self._buffer_tail = min(buffer_tail, size)
        self._buffer: memoryview | None = None
        self._buffer_start = 0
        self._held = 0
        self._buffer_lock = threading.Lock() if buffer_whole or buffer_tail else None
        self._budget = budget or READ_BUFFERS

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int):
        return self._read(offset, length, view=False)

    def read_view(self, offset: int, length: int):
        """:meth:`read`, for a caller that only passes the bytes on (a copy to scratch space): an object
        store's answer comes as a ``memoryview`` of the client's buffer, not copied into ``bytes`` (every
        byte copied into fresh memory: 0.3-0.5 CPU s of a loop copying 186 MB alone, docs/benchmarks/remote.md)."""
        return self._read(offset, length, view=True)

    def _read(self, offset: int, length: int, *, view: bool):
        if offset < 0 or length < 0:
            raise ValueError(f"negative offset or length: {offset}, {length}")
        length = max(min(length, self._size - offset), 0)
        if length == 0:
            return b""
        if self._buffer_lock is not None:
            buffered = self._read_buffered(offset, length)
            if buffered is not None:
                return buffered
        return self._read_range(offset, length, view=view)

    @property
    def in_memory(self) -> bool:
        """Whether every byte of the file is held in memory (a whole-file scan's buffer): reads make no request."""
        buffer = self._buffer
        return buffer is not None and self._buffer_start == 0 and len(buffer) >= self._size

    def read_ahead(self) -> None:
        """Reads now what the first reads of a whole-file scan would read into the buffer (the whole file,
        or its tail; nothing if it is not buffered, or is already): for a thread that only fetches, so
        that the thread checking the file finds its bytes in memory (pyarrow's files, opened with a HEAD;
        an ``obstore`` scan reads them when it opens)."""
        if self._buffer is None and (self._buffer_whole or self._buffer_tail) and self._size:
            self._read_buffered(0 if self._buffer_whole else self._size - self._buffer_tail, 1)

    def _read_buffered(self, offset: int, length: int) -> memoryview | None:
        """The bytes from the buffer (filled first if this read is the one that fills it), or None."""
        buffer = self._buffer
        if buffer is None:
            if not (self._buffer_whole or self._buffer_tail):
                return None
            with self._buffer_lock:
                if self._buffer is None and (self._buffer_whole or self._buffer_tail):
                    start = 0 if self._buffer_whole else self._size - self._buffer_tail
                    if offset >= start:  # a read before the tail leaves it for later
                        self._fill_buffer(start)
                buffer = self._buffer
            if buffer is None:
                return None
        start = offset - self._buffer_start
        if start < 0 or start + length > len(buffer):
            return None
        return buffer[start : start + length]

    def _hold(self, start: int, data, held: int) -> None:
        """Serve reads of ``[start, start + len(data))`` from ``data`` (read already), ``held`` bytes of the
        budget taken for it (given back on close)."""
        self._held = held
        self._keep(start, data)
        self._buffer_whole = False
        self._buffer_tail = 0
        if self._buffer_lock is None:
            self._buffer_lock = threading.Lock()

    def _keep(self, start: int, data) -> None:
        self._buffer_start = start
        self._buffer = memoryview(data)
        if start == 0 and len(data) >= self._size:  # the whole file in memory: read it as a local one
            self.preferred_read_size = LOCAL_READ_SIZE

    def _fill_buffer(self, start: int) -> None:
        """Reads ``[start, size)`` into the buffer, once, if the budget has room (else never tries again).
        Called with the lock held; other threads see the buffer, or that there will be none, afterwards."""
        size = self._size - start
        try:
            if not self._budget.try_take(size):
                return
            try:
                data = self._read_range(start, size)
            except BaseException:
                self._budget.give_back(size)
                raise
            self._held = size
            self._keep(start, data)
        finally:
            self._buffer_whole = False
            self._buffer_tail = 0

    def _read_range(self, offset: int, length: int, *, view: bool = False) -> bytes | memoryview:
        read_at = self._file.read_view if view and isinstance(self._file, ObjectFile) else self._file.read_at

        def read_once() -> bytes | memoryview:
            data = read_at(length, offset)
            if len(data) < length:
                raise self._short_read(offset, length, len(data))
            return data

        with _StorageErrors(self.uri, f"read {length} bytes at offset {offset}"):
            return self._retry.call(read_once)

    def _short_read(self, offset: int, length: int, got: int) -> OSError:
        """Why a read of ``length`` bytes at ``offset`` got only ``got``: the file is shorter than expected
        (:class:`FileChanged`, as an object store's answer says), or the connection lost them (:class:`ShortRead`)."""
        actual = getattr(self._file, "size", None)  # an object store's answer says the object's size
        if isinstance(actual, int) and actual < offset + length:
            return FileChanged(f"the file has {actual} bytes, not the {self._size} expected: "
                               f"cannot read {length} bytes at offset {offset}")
        # the file holds them: the connection lost them, not the file
        return ShortRead(f"read {got} of {length} bytes at offset {offset} of a {self._size}-byte file")

    def stream(self, offset: int, length: int, chunk_size: int) -> Iterator[bytes | memoryview]:
        """The bytes ``[offset, offset + length)`` in order, as chunks for a caller that passes them on (a
        copy to scratch space). On an object store: one GET, its body passed on as it arrives in chunks of
        at least ``chunk_size`` bytes (only a chunk in memory at a time); a transient fault (a reset, a body
        cut short) is retried from the byte reached, by a ranged GET. Elsewhere: :meth:`read_view` of
        ``chunk_size`` bytes at a time. Fewer bytes only at the end of the file (its known size)."""
        end = max(min(offset + length, self._size), offset)
        if not isinstance(self._file, ObjectFile):
            for position in range(offset, end, chunk_size):
                yield self.read_view(position, min(chunk_size, end - position))
            return
        reached = offset
        chunks: Iterator[bytes] | None = None

        def next_chunk() -> bytes:
            nonlocal chunks
            if chunks is None:
                chunks = self._file.stream(reached, end, chunk_size)
            try:
                chunk = next(chunks, None)
            except BaseException:
                chunks = None  # the request is over: the next try asks from the byte reached
                raise
            if chunk is None:
                chunks = None
                raise self._short_read(reached, end - reached, 0)
            return chunk

        with _StorageErrors(self.uri, f"read {end - offset} bytes at offset {offset}"):
            while reached < end:
                chunk = self._retry.call(next_chunk)
                reached += len(chunk)
                yield chunk

    def close(self) -> None:
        if self._held:
            self._budget.give_back(self._held)
            self._held = 0
        self._buffer = None
        self._file.close()

    def __enter__(self) -> "InputFile":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"InputFile({self.uri!r}, {self._size} bytes)"


# -- the storage ---------------------------------------------------------------------------------
class Storage:
    """Reads and writes files by URI, creating ``pyarrow.fs`` file systems on first use.

    Picklable: only :attr:`options` is pickled; file systems are re-created where it is unpickled.
    """

    def __init__(self, options: StorageOptions | None = None):
        self.options = options if options is not None else StorageOptions.from_env()
        self._filesystems: dict[tuple[str, str], pafs.FileSystem] = {}
        #: ``obstore`` stores by (kind, bucket or container); None: pyarrow reads there.
        self._stores: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()
        #: Transient faults of remote stores are retried within this budget; local disks get a short one
        #: (a local read fails again the same way, it does not come back after a pause).
        self.retry = RetryPolicy(budget_seconds=self.options.retry_budget)
        self._local_retry = RetryPolicy(budget_seconds=min(self.options.retry_budget, LOCAL_RETRY_BUDGET))

    def _retry_for(self, location: Location) -> RetryPolicy:
        return self._local_retry if location.kind == "local" else self.retry

    @classmethod
    def from_env(cls) -> "Storage":
        return cls(StorageOptions.from_env())

    def __getstate__(self) -> dict:
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    def __repr__(self) -> str:
        return f"Storage({self.options!r})"

    # -- file systems ----------------------------------------------------------------------------
    def filesystem(self, location: Location) -> pafs.FileSystem:
        """The ``pyarrow.fs`` file system serving ``location`` (created once per scheme and authority)."""
        key = (location.kind, "" if location.kind in ("local", "gcs") else location.authority)
        with self._lock:
            fs = self._filesystems.get(key)
            if fs is None:
                fs = self._filesystems[key] = self._create_filesystem(location)
            return fs

    def _create_filesystem(self, location: Location) -> pafs.FileSystem:
        class_name = _FILESYSTEM_CLASSES[location.kind]
        fs_class = getattr(pafs, class_name, None)
        if fs_class is None:
            raise StorageError(
                f"{location.scheme}:// needs pyarrow.fs.{class_name}, which this pyarrow "
                f"({pa.__version__}) was built without",
                source=location.uri,
            )
        try:
            return self._filesystem_factories[location.kind](self, fs_class, location)
        except RepairError:
            raise
        except (OSError, ValueError, pa.ArrowException) as error:  # ValueError: inconsistent options
            hint = ""
            if location.kind == "hdfs":
                hint = (
                    " (pyarrow's HDFS needs a JVM and libhdfs: set JAVA_HOME, HADOOP_HOME or "
                    "ARROW_LIBHDFS_DIR, and CLASSPATH=$(hadoop classpath --glob))"
                )
            raise StorageError(
                f"cannot connect to {location.scheme}://{location.authority}: {_reason(error)}{hint}",
                source=location.uri,
            ) from error

    def _local_fs(self, fs_class, location: Location) -> pafs.FileSystem:
        return fs_class()

    def _s3_fs(self, fs_class, location: Location) -> pafs.FileSystem:
        o = self.options
        kwargs: dict = {
            "access_key": o.s3_access_key,
            "secret_key": o.s3_secret_key,
            "session_token": o.s3_session_token,
            "anonymous": o.s3_anonymous,
            "region": o.s3_region,
            # Retries are this toolkit's (Storage.retry: one budget, the same for every store); the SDK's
            # own would back off again underneath them, about a second per throttled request.
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=1),
        }
        if o.s3_endpoint:
            kwargs["endpoint_override"], kwargs["scheme"] = parse_endpoint(
                o.s3_endpoint,
                allow_http=o.s3_allow_http,
                service="S3",
                allow_hint="AWS_ALLOW_HTTP=true or StorageOptions.s3_allow_http",
            )
        elif not o.s3_region:
            # Like pyiceberg: ask AWS where the bucket lives; fall back to the SDK's default region.
            try:
                kwargs["region"] = pafs.resolve_s3_region(location.authority)
            except (OSError, pa.ArrowException):
                pass
        return fs_class(**kwargs)

    def _gcs_fs(self, fs_class, location: Location) -> pafs.FileSystem:
        o = self.options
        kwargs: dict = {"anonymous": o.gcs_anonymous}
        if o.gcs_endpoint:
            kwargs["endpoint_override"], kwargs["scheme"] = parse_endpoint(
                o.gcs_endpoint, allow_http=False, service="GCS", allow_hint="only loopback emulators may use http"
            )
        return fs_class(**kwargs)

    def _hdfs_fs(self, fs_class, location: Location) -> pafs.FileSystem:
        host, _, port = location.authority.partition(":")
        if not host:  # hdfs:///path: the default file system of the Hadoop configuration
            return fs_class("default", 0)
        return fs_class(host, int(port) if port.isdigit() else 8020)

    def _azure_fs(self, fs_class, location: Location) -> pafs.FileSystem:
        account = location.authority.partition("@")[2].split(".", 1)[0]
        if not account:
            raise StorageError("Azure URI has no storage account after '@'", source=location.uri)
        return fs_class(account_name=account, account_key=self.options.azure_account_key)

    _filesystem_factories = {
        "local": _local_fs,
        "s3": _s3_fs,
        "gcs": _gcs_fs,
        "hdfs": _hdfs_fs,
        "azure": _azure_fs,
    }

    def _object_store(self, location: Location):
        """The ``obstore`` store reading ``location``'s objects, or None when pyarrow reads them (local
        files, HDFS, an S3 profile: see :func:`repair.io.objects.can_serve`)."""
        if location.kind not in objects.OBJECT_KINDS or not objects.usable():
            return None
        key = (location.kind, location.authority)
        with self._lock:
            if key in self._stores:
                return self._stores[key]
        store = None
        if objects.can_serve(location, self.options):
            region = None
            if location.kind == "s3" and not self.options.s3_region and not self.options.s3_endpoint:
                region = self.filesystem(location).region  # where the bucket lives, as pyarrow found it
            try:
                store = objects.create_store(location, self.options, s3_region=region)
            except RepairError:
                raise
            except Exception as error:  # noqa: BLE001 - obstore's configuration errors
                raise StorageError(f"cannot connect to {location.scheme}://{location.authority}: {_reason(error)}",
                                   source=location.uri) from error
        with self._lock:
            return self._stores.setdefault(key, store)

    def object_store_serves(self, uri: str) -> bool:
        """Whether ``obstore`` reads ``uri``'s objects in this process (else pyarrow, or local calls)."""
        return self._object_store(parse_location(uri)) is not None

    def _resolve(self, uri: str) -> tuple[Location, pafs.FileSystem]:
        location = parse_location(uri)
        return location, self.filesystem(location)

    # -- reading ---------------------------------------------------------------------------------
    def open_input(self, uri: str, *, scan: bool = False, tail: int = 0, size: int | None = None) -> InputFile:
        """Opens ``uri`` for random-access reads; :class:`StorageError` if missing or unreadable.

        ``scan``: the caller will read the whole file (verification). On a remote store a file of up to
        :data:`SCAN_WHOLE_MAX` bytes is then read in one request, a larger one's last :data:`SCAN_TAIL`
        bytes, within :data:`READ_BUFFERS` (see :class:`InputFile`). ``tail``: the caller reads only near
        the end (an SST's footer, metaindex and properties): on a remote store the last ``tail`` bytes
        are read in one request. Local files are read as asked, either way.

        ``size``: the file's size as the caller knows it (from ``_metadata`` or a listing; for a segment
        of a file, where the segment ends). On S3, GCS
        and Azure (:mod:`repair.io.objects`) nothing then asks the store for it: a scan's or a tail's
        first request is made here and its answer gives the true size (:attr:`InputFile.size`); other
        reads are ranged requests as asked, and a file found shorter fails them (never retried).
        """
        location = parse_location(uri)
        if location.kind == "local":
            with _StorageErrors(uri, "open for reading"):
                file, size = self._local_retry.call(lambda: open_local(location.fs_path))
            return InputFile(uri, file, size, LOCAL_READ_SIZE, self._local_retry)
        store = self._object_store(location)
        if store is not None:
            return self._open_object(uri, location, store, scan=scan, tail=tail, size=size)
        fs = self.filesystem(location)
        retry = self._retry_for(location)
        with _StorageErrors(uri, "open for reading"):
            file = retry.call(lambda: fs.open_input_file(location.fs_path))
            size = retry.call(file.size)
        whole = scan and size <= SCAN_WHOLE_MAX
        return InputFile(uri, file, size, None, retry, buffer_whole=whole, buffer_tail=SCAN_TAIL if scan and not whole else tail)

    def _open_object(self, uri: str, location: Location, store, *, scan: bool, tail: int, size: int | None) -> InputFile:
        """:meth:`open_input` of an object read through ``obstore``. A scan of a file known to be small
        reads it whole here, a scan of a larger one or a ``tail`` reads its tail here: one GET, whose
        answer gives the true size. Otherwise a known ``size`` costs no request, an unknown one a HEAD."""
        file = ObjectFile(store, objects.object_path(location))
        whole = scan and size is not None and size <= SCAN_WHOLE_MAX
        first = size if whole else SCAN_TAIL if scan else tail  # the bytes read now (budget permitting)
        with _StorageErrors(uri, "open for reading"):
            if first and READ_BUFFERS.try_take(first):
                data = self._first_read(file, first, whole)
                if data is not None:
                    opened = InputFile(uri, file, file.size, None, self.retry)
                    opened._hold(0 if whole else file.size - len(data), data, len(data))
                    return opened
            if size is None or scan or tail:
                size = self.retry.call(file.head)
        return InputFile(uri, file, size, None, self.retry)

    def _first_read(self, file: ObjectFile, taken: int, whole: bool) -> memoryview | None:
        """The whole object (at most :data:`SCAN_WHOLE_MAX` bytes) or its last ``taken`` bytes, ``taken``
        bytes of :data:`READ_BUFFERS` taken for them and settled to what was read; None when the answer
        gives the size but no bytes worth holding (a larger object than expected, or a range that an
        empty object cannot satisfy)."""
        try:
            data = self.retry.call(lambda: file.get(at_most=SCAN_WHOLE_MAX) if whole else file.get(suffix=taken))
        except objects.TooLarge:
            READ_BUFFERS.give_back(taken)
            return None
        except BaseException as error:
            READ_BUFFERS.give_back(taken)
            if isinstance(error, OSError) and not isinstance(error, FileNotFoundError) and not is_transient(error):
                return None  # asked again by a HEAD, which says what is wrong or the size
            raise
        if len(data) > taken:  # more than _metadata recorded (a size mismatch): held all the same, bounded above
            READ_BUFFERS.take(len(data) - taken)
        else:
            READ_BUFFERS.give_back(taken - len(data))
        return data

    def stat(self, uri: str) -> FileInfo | None:
        """What ``uri`` is, or ``None`` when nothing is there."""
        location = parse_location(uri)
        if location.kind == "local":
            with _StorageErrors(uri, "stat"):
                status = self._local_retry.call(lambda: stat_local(location.fs_path))
            return None if status is None else _local_file_info(uri, status)
        store = self._object_store(location)
        if store is not None:
            with _StorageErrors(uri, "stat"):
                entry = self.retry.call(lambda: objects.stat(store, objects.object_path(location).rstrip("/")))
            return None if entry is None else FileInfo(uri, entry.size, entry.is_dir, entry.mtime)
        fs = self.filesystem(location)
        with _StorageErrors(uri, "stat"):
            info = self._retry_for(location).call(lambda: fs.get_file_info(location.fs_path))
        return None if info.type == pafs.FileType.NotFound else _file_info(uri, info)

    def exists(self, uri: str) -> bool:
        return self.stat(uri) is not None

    def list_dir(self, uri: str, *, recursive: bool = False) -> list[FileInfo]:
        """Entries of directory ``uri`` (all descendants with ``recursive``), sorted by path.

        On object stores a "directory" is a key prefix; ``recursive`` lists the implied
        subdirectories too.
        """
        location = parse_location(uri)
        if location.kind == "local":
            with _StorageErrors(uri, "list directory"):
                listed = self._local_retry.call(lambda: list_local(location.fs_path, recursive=recursive))
            return sorted((_local_file_info(join(uri, relative), status) for relative, status in listed),
                          key=lambda entry: entry.path)
        store = None if recursive else self._object_store(location)
        if store is not None:
            return self._list_objects(uri, location, store)
        fs = self.filesystem(location)
        base = location.fs_path.rstrip("/")
        with _StorageErrors(uri, "list directory"):
            try:
                selector = pafs.FileSelector(base or "/", recursive=recursive)
                infos = self._retry_for(location).call(lambda: fs.get_file_info(selector))
            except FileNotFoundError:
                info = self.stat(uri)
                if info is not None and not info.is_dir:
                    raise NotADirectoryError(uri) from None
                raise
        entries = []
        for info in infos:
            relative = info.path[len(base) + 1 :] if info.path.startswith(base + "/") else None
            if not relative:
                raise StorageError(f"listing returned {info.path!r}, outside the directory", source=uri)
            entries.append(_file_info(join(uri, relative), info))
        return sorted(entries, key=lambda entry: entry.path)

    def _list_objects(self, uri: str, location: Location, store) -> list[FileInfo]:
        """:meth:`list_dir` (not recursive) of a directory read through ``obstore``: one listing (a page per
        thousand entries); only an empty one asks what the path is (missing, a file, an empty directory)."""
        key = objects.object_path(location).rstrip("/")
        with _StorageErrors(uri, "list directory"):
            entries = self.retry.call(lambda: objects.list_entries(store, key))
            if not entries:
                info = self.stat(uri)
                if info is None:
                    raise FileNotFoundError(uri)
                if not info.is_dir:
                    raise NotADirectoryError(uri)
        start = len(key) + 1 if key else 0
        return sorted((FileInfo(join(uri, entry.key[start:]), entry.size, entry.is_dir, entry.mtime) for entry in entries),
                      key=lambda entry: entry.path)

    def read_bytes(self, uri: str, *, max_size: int = DEFAULT_MAX_READ_BYTES) -> bytes:
        """The whole content of ``uri``; :class:`StorageError` if it is larger than ``max_size`` bytes."""
        location = parse_location(uri)
        store = self._object_store(location)
        if store is not None:  # one GET: its answer says the size, the body is read only within the limit
            file = ObjectFile(store, objects.object_path(location))
            try:
                with _StorageErrors(uri, "read"):
                    data = self.retry.call(lambda: file.get(at_most=max_size))
            except objects.TooLarge as error:
                raise StorageError(str(error), source=uri) from None
            if len(data) != file.size:
                raise StorageError(f"read {len(data)} of {file.size} bytes: the file changed while reading", source=uri)
            return bytes(data)
        with self.open_input(uri) as file:
            if file.size > max_size:
                raise StorageError(f"file is {file.size} bytes, more than the limit of {max_size}", source=uri)
            data = file.read(0, file.size)
        if len(data) != file.size:
            raise StorageError(f"read {len(data)} of {file.size} bytes: the file changed while reading", source=uri)
        return data

    def iter_chunks(self, uri: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
        """The content of ``uri`` as sequential chunks of ``chunk_size`` bytes (the last may be shorter)."""
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        with self.open_input(uri) as file:  # ranged reads: each one retried on its own
            for offset in range(0, file.size, chunk_size):
                yield file.read(offset, chunk_size)

    # -- writing (outputs only) ------------------------------------------------------------------
    def write_atomic(self, uri: str, data: Data, *, overwrite: bool = False, inside: str | None = None) -> int:
        """Writes ``data`` (bytes, an iterable of byte chunks, or a function writing into the output
        stream it is given) to ``uri`` atomically; returns the size.

        Local disks and HDFS: written to ``<uri>.tmp-<random>`` (fsynced on local disks) and renamed; the
        temporary files of ``uri`` that a writer now gone left (killed) are deleted first.
        Object stores: uploaded to the final key, which becomes visible only when complete. Refuses
        to replace an existing file unless ``overwrite``.

        ``inside``: a directory ``uri`` lies below that must already exist (a publisher's
        :attr:`DirectoryPublisher.staging_uri`). Missing directories are created only below it, so a
        task still running after its run was aborted cannot bring the deleted directory back.
        """
        location, fs = self._resolve(uri)
        if not overwrite and self.exists(uri):
            raise StorageError("already exists; refusing to overwrite it", source=uri)
        root = None if inside is None else self._resolve(inside)[0].fs_path.rstrip("/")
        if location.kind not in _RENAME_KINDS:
            return self._write_retrying(location, fs, location.fs_path, data, uri)
        final = location.fs_path
        temporary = _temporary_name(final)
        if inside is None:  # an output of its own (not a file of a staging directory): a killed run's temporary file goes
            _remove_abandoned_staging(fs, final)
        try:
            size = self._write_retrying(location, fs, temporary, data, uri, root)
            with _StorageErrors(uri, "rename the temporary file into place"):
                if location.kind == "hdfs" and overwrite and fs.get_file_info(final).type != pafs.FileType.NotFound:
                    fs.delete_file(final)  # HDFS rename does not replace
                fs.move(temporary, final)
            _sync_directory(location, os.path.dirname(final))
        except BaseException:
            _delete_quietly(fs, temporary, directory=False)
            raise
        return size

    def put_local_file(self, local_path: str, uri: str, *, inside: str | None = None) -> int:
        """Moves the local scratch file ``local_path`` to ``uri`` (replacing a file there); returns its
        size. On a local disk it is renamed when both are on the same file system (nothing copied, not
        fsynced: for intermediate files), else its bytes are written with :meth:`write_atomic`
        (``overwrite=True``, ``inside`` as there) and it is deleted."""
        location, _ = self._resolve(uri)
        if location.kind == "local":
            root = None if inside is None else self._resolve(inside)[0].fs_path.rstrip("/")
            with _StorageErrors(uri, "move a scratch file into place"):
                if root is not None and not os.path.isdir(root):
                    raise FileNotFoundError(f"{root} is gone (its run was aborted or has ended)")
                _make_parents_below(os.path.dirname(location.fs_path), root)
                size = os.path.getsize(local_path)
                try:
                    os.replace(local_path, location.fs_path)
                    return size
                except OSError as error:
                    if error.errno != errno.EXDEV:
                        raise
        size = self.write_atomic(uri, _local_file_chunks(local_path), overwrite=True, inside=inside)
        os.remove(local_path)
        return size

    def is_new_output(self, uri: str) -> bool:
        """Whether ``uri`` can take a new output directory: it does not exist, is an empty directory, or
        holds an earlier run's incomplete output on an object store (its in-progress marker), which
        :meth:`publish_dir` deletes if that run's process is gone, and refuses otherwise."""
        existing = self.stat(uri)
        if existing is None:
            return True
        return existing.is_dir and (not self.list_dir(uri) or self.exists(uri.rstrip("/") + IN_PROGRESS_SUFFIX))

    def publish_dir(self, uri: str, *, commit_file: str | None = "_metadata") -> "DirectoryPublisher":
        """A :class:`DirectoryPublisher` building the new directory ``uri``; use it with ``with``."""
        return DirectoryPublisher(self, uri, commit_file=commit_file)

    def _write_retrying(
        self, location: Location, fs: pafs.FileSystem, fs_path: str, data: Data, uri: str,
        root: str | None = None,
    ) -> int:
        """:meth:`_write_file`, tried again after transient faults (a 503, a reset) within the retry
        budget when ``data`` is bytes in memory on a remote store; a stream of chunks cannot be sent
        twice, and a local write that fails does not come back."""
        if location.kind == "local" or not isinstance(data, (bytes, bytearray, memoryview)):
            return self._write_file(location, fs, fs_path, data, uri, root)
        return self._retry_for(location).call(lambda: self._write_file(location, fs, fs_path, data, uri, root))

    @staticmethod
    def _write_file(
        location: Location, fs: pafs.FileSystem, fs_path: str, data: Data, uri: str,
        root: str | None = None,
    ) -> int:
        """Writes ``data`` to ``fs_path``, creating missing parent directories (only below ``root``,
        which must exist, when given; see :meth:`write_atomic`).

        ``uri`` names the file in errors. Local files are created exclusively and fsynced before they
        are renamed into place: chunks with Python's own I/O, a writing function into a
        ``pyarrow.OSFile`` (its bytes never pass through Python objects).
        """
        chunks = (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data
        written = 0
        with _StorageErrors(uri, "write"):
            if root is not None and fs.get_file_info(root).type != pafs.FileType.Directory:
                raise FileNotFoundError(f"{root} is gone (its run was aborted or has ended)")
            if location.kind == "local":
                _make_parents_below(os.path.dirname(fs_path), root)
                if callable(data):
                    return _write_local_natively(fs_path, data)
                with open(fs_path, "xb") as out:
                    for chunk in chunks:
                        written += out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                return written
            if location.kind in _RENAME_KINDS:
                fs.create_dir(fs_path.rsplit("/", 1)[0] or "/", recursive=True)
            with fs.open_output_stream(fs_path) as out:
                if callable(data):
                    data(out)
                    return out.tell()
                for chunk in chunks:
                    written += out.write(chunk)
        return written


def _write_local_natively(fs_path: str, write: Callable[[pa.NativeFile], None]) -> int:
    """``write`` into a new local file (created exclusively) through a ``pyarrow.OSFile``, fsynced."""
    os.close(os.open(fs_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    with pa.OSFile(fs_path, "wb") as out:
        write(out)
        written = out.tell()
    descriptor = os.open(fs_path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return written


def _local_file_chunks(path: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
    with open(path, "rb") as file:
        while chunk := file.read(chunk_size):
            yield chunk


def _make_parents_below(directory: str, root: str | None) -> None:
    """Creates local ``directory`` and its missing parents; with ``root``, one level at a time below
    it, so that a ``root`` deleted meanwhile is never created again (the next level fails instead)."""
    if root is None or not directory.startswith(root + "/"):
        os.makedirs(directory, exist_ok=True)
        return
    path = root
    for part in directory[len(root) + 1 :].split("/"):
        path = f"{path}/{part}"
        try:
            os.mkdir(path)
        except FileExistsError:
            pass


def _file_info(uri: str, info: pafs.FileInfo) -> FileInfo:
    is_dir = info.type == pafs.FileType.Directory
    mtime_ns = info.mtime_ns
    return FileInfo(
        path=uri,
        size=0 if is_dir else (info.size or 0),
        is_dir=is_dir,
        mtime=None if mtime_ns is None else mtime_ns / 1e9,
    )


def _local_file_info(uri: str, status: LocalStatus) -> FileInfo:
    return FileInfo(path=uri, size=status.size, is_dir=status.is_dir, mtime=status.mtime_ns / 1e9)


def owner_tag() -> str:
    """``<host hash>-<pid>``: who is writing, so that a later run can tell a staging area whose writer
    died (killed, out of power) from one still in use."""
    import hashlib  # writes only: a command that reads imports neither (start-up)
    import socket

    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{host}-{os.getpid()}"


def _temporary_name(fs_path: str) -> str:
    import secrets

    return f"{fs_path.rstrip('/')}{_TMP_MARKER}{owner_tag()}-{secrets.token_hex(4)}"


def writer_is_gone(owner: str) -> bool:
    """Whether the process named by an owner tag (``<host hash>-<pid>``) is known to have ended: it ran
    on this host and no process has its pid. Another host's writer is never taken for gone."""
    host, _, pid = owner.partition("-")
    if host != owner_tag().partition("-")[0] or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has ended but was never reaped. A killed run's pool workers are orphans, and a
    container's first process often reaps no orphans: they stay zombies, which signal 0 still reaches."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:  # no /proc (not Linux), or the process just went
        return False
    return bool(fields) and fields[0] in (b"Z", b"X")


def _remove_abandoned_staging(fs: pafs.FileSystem, target: str) -> list[str]:
    """Deletes the staging directories of ``target`` (``<target>.tmp-<host>-<pid>-<random>``), and the
    temporary files :meth:`Storage.write_atomic` names the same way, whose writer is gone (see
    :func:`writer_is_gone`); returns their paths. Best effort."""
    parent, _, name = target.rstrip("/").rpartition("/")
    prefix = name + _TMP_MARKER
    try:
        siblings = fs.get_file_info(pafs.FileSelector(parent or "/", allow_not_found=True))
    except (OSError, pa.ArrowException):
        return []
    removed = []
    for info in siblings:
        base = info.path.rstrip("/").rpartition("/")[2]
        if info.type in (pafs.FileType.Directory, pafs.FileType.File) and base.startswith(prefix):
            owner = base[len(prefix) :].rpartition("-")[0]
            if writer_is_gone(owner):
                _delete_quietly(fs, info.path, directory=info.type == pafs.FileType.Directory)
                removed.append(info.path)
    return removed


def _sync_directory(location: Location, fs_path: str) -> None:
    """Makes a rename in local directory ``fs_path`` durable (no-op elsewhere)."""
    if location.kind != "local" or not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(fs_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete_quietly(fs: pafs.FileSystem, fs_path: str, *, directory: bool) -> None:
    """Best-effort removal of our own partial output; never hides the error being handled."""
    try:
        if directory:
            fs.delete_dir(fs_path)
        else:
            fs.delete_file(fs_path)
    except (OSError, pa.ArrowException):
        pass


class DirectoryPublisher:
    """Builds a new output directory and publishes it whole, or not at all.

    ::

        with storage.publish_dir("s3://bucket/repaired/chk-42") as out:
            out.write("shared/0001.sst", storage.iter_chunks(source_uri))
            out.write("_metadata", metadata_bytes)   # the commit file: held back until the end

    Local disks and HDFS: files go to ``<target>.tmp-<random>``, which is renamed to ``<target>``
    when the ``with`` block ends without an error (an existing empty ``<target>`` directory is
    replaced); on an error it is deleted.

    Object stores (no atomic rename): files go straight to their final keys; the commit file is
    written last, only when everything else succeeded; on an error the keys written so far are
    deleted (best effort) and the commit file is never written. Readers treat a directory without
    its commit file as incomplete, as Flink does with a checkpoint without ``_metadata``. The object
    ``<target>.repair-in-progress`` (:data:`IN_PROGRESS_SUFFIX`), naming the writer's host and pid,
    exists from the start until after the commit file: a later run deletes the output of a writer
    that died (killed before it could clean up) and refuses one whose writer may still run.

    Names are relative paths checked like :func:`resolve_within`; the target must not exist yet
    (or be an empty directory).

    Other processes (Spark executors, pool workers) may write files too: they write below
    :attr:`staging_uri` (with :meth:`Storage.write_atomic`, ``overwrite=True`` so that a retried task
    replaces its own file), and the driver names what they wrote with :meth:`adopt`. On commit, any
    other file below the staging directory (left by a task attempt that died) is deleted; on abort
    everything below it is.
    """

    def __init__(self, storage: Storage, uri: str, *, commit_file: str | None = "_metadata"):
        self.storage = storage
        self.uri = uri
        self.commit_file = commit_file
        self._location, self._fs = storage._resolve(uri)
        self._staged = self._location.kind in _RENAME_KINDS
        suffix = _temporary_name("") if self._staged else ""
        self._root = self._location.fs_path.rstrip("/") + suffix if self._staged else self._location.fs_path
        #: Where other processes write their files: the temporary directory (absolute, for processes
        #: with another working directory), or the target itself on object stores.
        self.staging_uri = uri
        if self._staged:
            self.staging_uri = self._root if self._location.kind == "local" else uri.rstrip("/") + suffix
        self._shared = False
        self._adopted: set[str] = set()
        self._written: list[str] = []
        self._commit_data: bytes | None = None
        self._state = "not opened (use it in a with block)"
        self._target_existed = False

    def __enter__(self) -> "DirectoryPublisher":
        existing = self.storage.stat(self.uri)
        if self._staged:
            _remove_abandoned_staging(self._fs, self._location.fs_path)
        else:
            self._take_over_abandoned_output(existing is not None and existing.is_dir)
            existing = self.storage.stat(self.uri)
        if existing is not None and (not existing.is_dir or self.storage.list_dir(self.uri)):
            raise StorageError("already exists; refusing to publish over it", source=self.uri)
        self._target_existed = existing is not None
        self._state = "open"
        if not self._staged:  # the marker first: a run that dies leaves it, saying whose output this was
            self.storage._write_retrying(self._location, self._fs, self._marker_path, owner_tag().encode(), self._marker_uri)
        return self

    @property
    def _marker_uri(self) -> str:
        return self.uri.rstrip("/") + IN_PROGRESS_SUFFIX

    @property
    def _marker_path(self) -> str:
        return self._location.fs_path.rstrip("/") + IN_PROGRESS_SUFFIX

    def _take_over_abandoned_output(self, target_is_dir: bool) -> None:
        """Object stores: an earlier run's incomplete output (its in-progress marker, no commit file),
        whose writer is gone, is deleted; one whose writer may still run is refused with the way out."""
        if not self.storage.exists(self._marker_uri):
            return
        owner = self.storage.read_bytes(self._marker_uri, max_size=256).decode("ascii", "replace")
        if not writer_is_gone(owner):
            raise StorageError(
                f"holds the incomplete output of another run (writer {owner}, maybe on another host, maybe "
                f"still running); if it is not running, delete {self.uri} and {self._marker_uri} and run again",
                source=self.uri)
        complete = target_is_dir and self.commit_file and self.storage.exists(join(self.uri, self.commit_file))
        with _StorageErrors(self.uri, "delete the incomplete output of a run that died"):
            if target_is_dir and not complete:  # complete: died between commit file and marker removal
                self._fs.delete_dir(self._location.fs_path)  # with its "directory" object: it was ours
            self._fs.delete_file(self._marker_path)

    def __exit__(self, exc_type, error, traceback) -> None:
        if error is None and self._state != "aborted":  # aborted in the block on purpose: nothing to publish
            self.commit()
        else:
            self.abort()

    def write(self, name: str, data: bytes | Iterable[bytes]) -> str:
        """Writes file ``name`` (bytes or an iterable of chunks); returns its final URI."""
        if self._state != "open":
            raise StorageError(f"cannot write {name!r}: the directory is {self._state}", source=self.uri)
        final_uri = resolve_within(self.uri, name)
        if name == self.commit_file:
            self._commit_data = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else b"".join(data)
            return final_uri
        self._write(name, data, final_uri)
        return final_uri

    def _write(self, name: str, data: bytes | Iterable[bytes], final_uri: str) -> None:
        fs_path = f"{self._root}/{name}"
        self._written.append(fs_path)
        self.storage._write_retrying(self._location, self._fs, fs_path, data, final_uri)

    def share(self) -> str:
        """:attr:`staging_uri`, for other processes to write into; from now on an abort deletes
        everything below it (the target was empty when the block began)."""
        if self._state != "open":
            raise StorageError(f"cannot share the staging directory: it is {self._state}", source=self.uri)
        if self._staged:  # created here: writers pass it as ``inside`` and create directories only below it
            with _StorageErrors(self.uri, "create the staging directory"):
                self._fs.create_dir(self._root, recursive=True)
        self._shared = True
        return self.staging_uri

    def adopt(self, names: Iterable[str]) -> None:
        """Files other processes wrote below :attr:`staging_uri` (relative names): they are part of the
        directory; on commit, every other file below it that this publisher did not write is deleted."""
        for name in names:
            resolve_within(self.uri, name)
            self._adopted.add(name.strip("/"))

    def discard(self, name: str) -> None:
        """Deletes ``name`` (a file or directory below :attr:`staging_uri` that other processes wrote and
        that is not part of the output, e.g. intermediate files), if it exists."""
        resolve_within(self.uri, name)
        if self._state != "open":
            return
        fs_path = f"{self._root}/{name.strip('/')}"
        with _StorageErrors(self.uri, f"delete {name}"):
            info = self._fs.get_file_info(fs_path)
            if info.type == pafs.FileType.Directory:
                self._fs.delete_dir(fs_path)
            elif info.type != pafs.FileType.NotFound:
                self._fs.delete_file(fs_path)

    def _remove_strays(self) -> None:
        mine = {path[len(self._root) + 1 :] for path in self._written} | self._adopted
        with _StorageErrors(self.uri, "list the staging directory"):
            infos = self._fs.get_file_info(pafs.FileSelector(self._root, recursive=True, allow_not_found=True))
        for info in infos:
            if info.type == pafs.FileType.File and info.path[len(self._root) + 1 :] not in mine:
                with _StorageErrors(self.uri, "delete a file left by a failed task"):
                    self._fs.delete_file(info.path)

    def commit(self) -> None:
        """Writes the commit file and publishes the directory (called when the ``with`` block ends)."""
        if self._state != "open":
            raise StorageError(f"cannot commit: the directory is {self._state}", source=self.uri)
        try:
            if self._shared:
                self._remove_strays()
            if self._commit_data is not None:
                self._write(self.commit_file, self._commit_data, join(self.uri, self.commit_file))
            if self._staged:
                self._rename_into_place()
            else:
                with _StorageErrors(self.uri, "delete the in-progress marker"):
                    self._fs.delete_file(self._marker_path)
        except BaseException:
            self.abort()
            raise
        self._state = "already committed"

    def _rename_into_place(self) -> None:
        target = self._location.fs_path
        with _StorageErrors(self.uri, "publish the directory"):
            if not self._written:  # nothing written: publish an empty directory
                self._fs.create_dir(self._root, recursive=True)
            existing = self._fs.get_file_info(target)
            if existing.type == pafs.FileType.Directory:
                if self._fs.get_file_info(pafs.FileSelector(target)):
                    raise StorageError("appeared while publishing; refusing to replace it", source=self.uri)
                self._fs.delete_dir(target)
            elif existing.type != pafs.FileType.NotFound:
                raise StorageError("appeared while publishing; refusing to replace it", source=self.uri)
            self._fs.move(self._root, target)
        _sync_directory(self._location, os.path.dirname(target))

    def abort(self) -> None:
        """Removes what was written; the target is left as it was."""
        if self._state in ("already committed", "aborted"):
            return
        self._state = "aborted"
        if self._staged:
            self._delete_staging()
            return
        self._abort_object_store()
        _delete_quietly(self._fs, self._marker_path, directory=False)  # last: until now it says whose

    def _delete_staging(self) -> None:
        """Deletes the staging directory. A task of a failed Spark job may still be finishing its file
        in there (Spark does not wait for the others when one fails the job): a delete that races with
        it fails or leaves its file, so try again a few times (writers never recreate the directory)."""
        for attempt in range(_STAGING_DELETE_ATTEMPTS):
            _delete_quietly(self._fs, self._root, directory=True)
            try:
                if self._fs.get_file_info(self._root).type == pafs.FileType.NotFound:
                    return
            except (OSError, pa.ArrowException):
                return
            time.sleep(0.2 * (attempt + 1))

    def _abort_object_store(self) -> None:
        if self._shared:  # files of other processes too: everything below the (formerly empty) target
            self._clear_root()
            return
        for fs_path in reversed(self._written):
            _delete_quietly(self._fs, fs_path, directory=False)
        # Deleting an object makes pyarrow leave an empty "directory" marker for its parent; remove
        # them when nothing but such markers is left below the target (which was empty at the start).
        try:
            remaining = self._fs.get_file_info(pafs.FileSelector(self._root, recursive=True, allow_not_found=True))
        except (OSError, pa.ArrowException):
            return
        if all(info.type == pafs.FileType.Directory for info in remaining):
            self._clear_root()

    def _clear_root(self) -> None:
        """Best effort: delete everything below the target (the target itself unless it existed before)."""
        try:
            if self._target_existed:
                self._fs.delete_dir_contents(self._root, missing_dir_ok=True)
            else:
                self._fs.delete_dir(self._root)
        except (OSError, pa.ArrowException):
            pass


# -- the default storage -------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _storage_for(options: StorageOptions) -> Storage:
    return Storage(options)


def default_storage() -> Storage:
    """The :class:`Storage` configured by the environment (one per distinct configuration)."""
    return _storage_for(StorageOptions.from_env())


def open_input(uri: str) -> InputFile:
    """:meth:`Storage.open_input` of :func:`default_storage`."""
    return default_storage().open_input(uri)


def stat(uri: str) -> FileInfo | None:
    """:meth:`Storage.stat` of :func:`default_storage`."""
    return default_storage().stat(uri)


def exists(uri: str) -> bool:
    """:meth:`Storage.exists` of :func:`default_storage`."""
    return default_storage().exists(uri)


def list_dir(uri: str, *, recursive: bool = False) -> list[FileInfo]:
    """:meth:`Storage.list_dir` of :func:`default_storage`."""
    return default_storage().list_dir(uri, recursive=recursive)


def read_bytes(uri: str, *, max_size: int = DEFAULT_MAX_READ_BYTES) -> bytes:
    """:meth:`Storage.read_bytes` of :func:`default_storage`."""
    return default_storage().read_bytes(uri, max_size=max_size)


def iter_chunks(uri: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[bytes]:
    """:meth:`Storage.iter_chunks` of :func:`default_storage`."""
    return default_storage().iter_chunks(uri, chunk_size)
