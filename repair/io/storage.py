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

import functools
import ipaddress
import os
import re
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from repair.errors import RepairError, StorageError, UsageError
from repair.formats.bytes.random_access import RandomAccess

__all__ = [
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
#: keep the reader's default, large ranged reads.
LOCAL_READ_SIZE = 1024 * 1024
#: Default bound of :meth:`Storage.read_bytes`.
DEFAULT_MAX_READ_BYTES = 512 * 1024 * 1024

#: URI scheme -> kind of file system.
_SCHEME_KINDS = {
    "file": "local",
    "s3": "s3",
    "s3a": "s3",
    "s3p": "s3",
    "s3n": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "hdfs": "hdfs",
    "abfs": "azure",
    "abfss": "azure",
    "wasb": "azure",
    "wasbs": "azure",
}
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
_URI_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/]*)(?P<path>.*)$", re.DOTALL)
_TMP_MARKER = ".tmp-"


# -- locations -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Location:
    """A parsed URI or path.

    ``prefix`` is what precedes the path as written (``"s3a://bucket"``, ``"file:"``, ``""``) and
    ``path`` the rest, so ``prefix + path`` is the URI as given. ``fs_path`` is the path as the
    ``pyarrow.fs`` file system of ``kind`` wants it (``bucket/key`` on object stores, absolute on local
    disks and HDFS).
    """

    uri: str
    kind: str
    scheme: str
    authority: str
    prefix: str
    path: str

    @property
    def fs_path(self) -> str:
        if self.kind == "local":
            return os.path.abspath(self.path or ".")
        if self.kind == "hdfs":
            return "/" + self.path.strip("/")
        root = self.authority if self.kind != "azure" else self.authority.partition("@")[0]
        key = self.path.strip("/")
        return f"{root}/{key}" if key else root


def _split(uri: str) -> tuple[str, str]:
    """``(prefix, path)`` of a URI or path, without validating the scheme."""
    match = _URI_RE.match(uri)
    if match:
        return f"{match['scheme']}://{match['authority']}", match["path"]
    if uri[:5].lower() == "file:":
        return uri[:5], uri[5:]
    return "", uri


def parse_location(uri: str) -> Location:
    """Parses ``uri`` (a URI or a local path); raises :class:`StorageError` for unsupported ones."""
    if not isinstance(uri, str) or not uri:
        raise StorageError(f"not a path or URI: {uri!r}")
    if "\0" in uri:
        raise StorageError("path contains a NUL character", source=repr(uri))
    prefix, path = _split(uri)
    match = _URI_RE.match(uri)
    if match is None:
        if prefix:  # file:/path
            return Location(uri, "local", "file", "", prefix, path)
        scheme_like = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*):", uri)
        if scheme_like and len(scheme_like[1]) > 1:
            raise StorageError(f"unsupported URI {uri!r}: expected scheme://..., a file: URI or a local path", source=uri)
        return Location(uri, "local", "", "", "", path)

    scheme, authority = match["scheme"].lower(), match["authority"]
    kind = _SCHEME_KINDS.get(scheme)
    if kind is None:
        supported = ", ".join(sorted(_SCHEME_KINDS))
        raise StorageError(f"unsupported URI scheme {scheme!r} (supported: {supported} and local paths)", source=uri)
    if kind == "local":
        if authority not in ("", "localhost"):
            raise StorageError(f"file URI names host {authority!r}; only local files are supported", source=uri)
        return Location(uri, kind, scheme, "", prefix, path)
    if kind in ("s3", "gcs", "azure") and not authority:
        raise StorageError(f"{scheme}:// URI has no bucket or container", source=uri)
    if kind == "azure" and "@" not in authority:
        raise StorageError(f"{scheme}:// URI must look like {scheme}://container@account.<host>/path", source=uri)
    return Location(uri, kind, scheme, authority, prefix, path)


def join(base: str, *parts: str) -> str:
    """Joins ``parts`` under ``base``, keeping the form of ``base`` (scheme, authority).

    Parts are taken as relative: their leading and trailing ``/`` are ignored, empty parts are
    skipped, and ``..`` is not interpreted. Use :func:`resolve_within` for names read from a
    checkpoint.
    """
    prefix, path = _split(base)
    segments = [p.strip("/") for p in parts if p.strip("/")]
    if not segments:
        return base
    trimmed = path.rstrip("/")
    if trimmed:
        head = trimmed + "/"
    elif path.startswith("/") or prefix:
        head = "/"  # the root of a file system or bucket
    else:
        head = ""  # an empty relative base
    return prefix + head + "/".join(segments)


def parent(uri: str) -> str:
    """The directory holding ``uri``: ``s3://b/x/y`` -> ``s3://b/x``; ``s3://b/x`` -> ``s3://b/``; ``/x`` -> ``/``.

    The root of a bucket or file system is its own parent; a bare relative name has parent ``"."``.
    """
    prefix, path = _split(uri)
    trimmed = path.rstrip("/")
    if not trimmed:
        return uri
    head, sep, _ = trimmed.rpartition("/")
    if not sep:
        return prefix + "."
    return prefix + (head or "/")


def basename(uri: str) -> str:
    """The last segment of ``uri``'s path (``""`` for the root of a bucket or file system)."""
    return _split(uri)[1].rstrip("/").rpartition("/")[2]


def _unsafe_name_reason(name: object) -> str | None:
    """Why ``name`` may not be joined under a directory, or ``None`` when it is a safe relative name."""
    if not isinstance(name, str):
        return "it is not a string"
    if not name:
        return "it is empty"
    if any(ord(c) < 0x20 or c == "\x7f" for c in name):
        return "it contains control characters"
    if "\\" in name:
        return "it contains a backslash"
    if ":" in name:
        return "it contains ':' (a drive letter or URI scheme)"
    if name.startswith("/"):
        return "it is absolute"
    if any(segment in ("", ".", "..") for segment in name.split("/")):
        return "it has an empty, '.' or '..' segment"
    return None


def resolve_within(base: str, name: str) -> str:
    """Joins ``name``, read from untrusted data (a checkpoint), under ``base``.

    ``name`` may have several ``/``-separated segments but must stay inside ``base``: absolute names,
    ``..`` or ``.`` segments, empty segments, backslashes, ``:`` (drive letters, URI schemes) and
    control characters are refused with a :class:`StorageError`.
    """
    reason = _unsafe_name_reason(name)
    if reason:
        raise StorageError(f"refusing name {name!r} read from the data: {reason}", source=base)
    joined = join(base, name)
    base_path = _split(base)[1].rstrip("/")
    if not _split(joined)[1].startswith(base_path + "/"):  # cannot happen after the checks above
        raise StorageError(f"refusing name {name!r} read from the data: it escapes the directory", source=base)
    return joined


def iso_utc(seconds: float | None) -> str | None:
    """A file time (seconds since the epoch) as ``2026-11-25T00:43:46Z``; None stays None."""
    if seconds is None:
        return None
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def absolute(uri: str) -> str:
    """A local path (or ``file:`` URI) as an absolute path, as Flink needs it; other URIs as they are."""
    location = parse_location(uri)
    return os.path.abspath(location.fs_path) if location.kind == "local" else uri


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it: same store (scheme kind and bucket or host), and
    local paths compared after resolving symbolic links (so a link into the directory counts)."""
    target, base = parse_location(path), parse_location(directory)
    if (target.kind, target.authority) != (base.kind, base.authority):
        return False
    if target.kind == "local":
        inner, outer = os.path.realpath(target.fs_path), os.path.realpath(base.fs_path)
    else:
        inner, outer = target.fs_path.rstrip("/"), base.fs_path.rstrip("/")
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def refuse_output_inside(out: str, inputs: Iterable[str], command: str, option: str = "--out") -> None:
    """:class:`~repair.errors.UsageError` (exit 2) when ``out`` is one of ``inputs`` or inside one.

    Every command that writes calls this before writing: inputs are only ever read, and a file written
    inside a checkpoint directory is one that ``repair orphans`` would then list for deletion.
    """
    for source in dict.fromkeys(inputs):
        if source and is_within(out, source):
            raise UsageError(
                f"{command}: {option} {out} is inside the input {source}; inputs are never written to, "
                "choose a directory outside it"
            )


# -- errors --------------------------------------------------------------------------------------
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
        if isinstance(error, (OSError, pa.ArrowException)):
            raise StorageError(f"cannot {self.action}: {_reason(error)}", source=self.uri) from error
        return False


# -- options -------------------------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class StorageOptions:
    """Settings of the file systems. Plain values only, so a :class:`Storage` pickles cheaply.

    Credentials left ``None`` are found by the cloud SDKs inside pyarrow in their standard places:
    for S3 ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
    ``~/.aws``, then instance metadata; for GCS ``GOOGLE_APPLICATION_CREDENTIALS``; for Azure the
    ``DefaultAzureCredential`` chain. Credentials given here travel with a pickled :class:`Storage`.
    """

    #: S3 endpoint, ``host:port`` or ``http(s)://host:port`` (MinIO, Ceph, localstack, moto, ...).
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key: str | None = None
    s3_secret_key: str | None = field(default=None, repr=False)
    s3_session_token: str | None = field(default=None, repr=False)
    s3_anonymous: bool = False
    #: Allow ``http://`` to an endpoint that is not a loopback address (loopback is always allowed).
    s3_allow_http: bool = False
    #: GCS endpoint (an emulator), ``host:port`` or ``http(s)://host:port``.
    gcs_endpoint: str | None = None
    gcs_anonymous: bool = False
    azure_account_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "StorageOptions":
        """Options from the standard environment variables.

        ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``; ``AWS_REGION`` or ``AWS_DEFAULT_REGION``;
        ``AWS_ALLOW_HTTP`` (``true`` allows plain http to non-loopback endpoints);
        ``STORAGE_EMULATOR_HOST`` (a GCS emulator, used anonymously). Credentials are left to the
        SDKs (see the class).
        """
        env = os.environ if environ is None else environ
        gcs_emulator = env.get("STORAGE_EMULATOR_HOST") or None
        return cls(
            s3_endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            s3_region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            s3_allow_http=_truthy(env.get("AWS_ALLOW_HTTP")),
            gcs_endpoint=gcs_emulator,
            gcs_anonymous=gcs_emulator is not None,
        )


def _endpoint(endpoint: str, *, allow_http: bool, service: str, allow_hint: str) -> tuple[str, str]:
    """``(host:port, scheme)`` of an endpoint URL; plain http only to loopback unless allowed."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        scheme, rest = "https", endpoint
    scheme = scheme.lower()
    host_port = rest.split("/", 1)[0]
    try:
        host = urllib.parse.urlsplit(f"//{host_port}").hostname
    except ValueError:
        host = None
    if scheme not in ("http", "https") or not host:
        raise StorageError(f"{service} endpoint {endpoint!r} is not host:port or http(s)://host:port")
    if scheme == "http" and not allow_http and not _is_loopback(host):
        raise StorageError(
            f"{service} endpoint {endpoint!r} uses plain http to a non-loopback host; "
            f"use https, or allow it explicitly ({allow_hint})"
        )
    return host_port, scheme


# -- reading -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileInfo:
    """What :meth:`Storage.stat` and :meth:`Storage.list_dir` report about one entry."""

    #: The entry's URI, in the form of the URI that was asked for.
    path: str
    #: Size in bytes (0 for directories).
    size: int
    is_dir: bool
    #: Modification time, seconds since the epoch, when the store reports one.
    mtime: float | None


class InputFile:
    """Random-access reads of one file; a :class:`~repair.formats.bytes.random_access.RandomAccess`.

    ``read(offset, length)`` returns ``length`` bytes, fewer only at the end of the file. Reads are
    positional and may come from several threads. Close it (or use ``with``) when done.
    """

    __slots__ = ("uri", "_file", "_size", "preferred_read_size")

    def __init__(self, uri: str, file: pa.NativeFile, size: int, preferred_read_size: int | None = None):
        self.uri = uri
        self._file = file
        self._size = size
        #: Size of sequential reads that suits this store (``None``: no preference); whole-file scans
        #: such as SST verification use it.
        self.preferred_read_size = preferred_read_size

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError(f"negative offset or length: {offset}, {length}")
        length = max(min(length, self._size - offset), 0)
        if length == 0:
            return b""
        with _StorageErrors(self.uri, f"read {length} bytes at offset {offset}"):
            data = self._file.read_at(length, offset)
        return data

    def close(self) -> None:
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
        self._lock = threading.Lock()

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
        }
        if o.s3_endpoint:
            kwargs["endpoint_override"], kwargs["scheme"] = _endpoint(
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
            kwargs["endpoint_override"], kwargs["scheme"] = _endpoint(
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

    def _resolve(self, uri: str) -> tuple[Location, pafs.FileSystem]:
        location = parse_location(uri)
        return location, self.filesystem(location)

    # -- reading ---------------------------------------------------------------------------------
    def open_input(self, uri: str) -> InputFile:
        """Opens ``uri`` for random-access reads; :class:`StorageError` if missing or unreadable."""
        location, fs = self._resolve(uri)
        with _StorageErrors(uri, "open for reading"):
            file = fs.open_input_file(location.fs_path)
            return InputFile(uri, file, file.size(), LOCAL_READ_SIZE if location.kind == "local" else None)

    def stat(self, uri: str) -> FileInfo | None:
        """What ``uri`` is, or ``None`` when nothing is there."""
        location, fs = self._resolve(uri)
        with _StorageErrors(uri, "stat"):
            info = fs.get_file_info(location.fs_path)
        return None if info.type == pafs.FileType.NotFound else _file_info(uri, info)

    def exists(self, uri: str) -> bool:
        return self.stat(uri) is not None

    def list_dir(self, uri: str, *, recursive: bool = False) -> list[FileInfo]:
        """Entries of directory ``uri`` (all descendants with ``recursive``), sorted by path.

        On object stores a "directory" is a key prefix; ``recursive`` lists the implied
        subdirectories too.
        """
        location, fs = self._resolve(uri)
        base = location.fs_path.rstrip("/")
        with _StorageErrors(uri, "list directory"):
            try:
                infos = fs.get_file_info(pafs.FileSelector(base or "/", recursive=recursive))
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

    def read_bytes(self, uri: str, *, max_size: int = DEFAULT_MAX_READ_BYTES) -> bytes:
        """The whole content of ``uri``; :class:`StorageError` if it is larger than ``max_size`` bytes."""
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
        location, fs = self._resolve(uri)
        with _StorageErrors(uri, "open for reading"):
            stream = fs.open_input_stream(location.fs_path)
        with stream:
            offset = 0
            while True:
                with _StorageErrors(uri, f"read at offset {offset}"):
                    chunk = stream.read(chunk_size)
                if not chunk:
                    return
                offset += len(chunk)
                yield chunk

    # -- writing (outputs only) ------------------------------------------------------------------
    def write_atomic(self, uri: str, data: bytes | Iterable[bytes], *, overwrite: bool = False) -> int:
        """Writes ``data`` (bytes, or an iterable of byte chunks) to ``uri`` atomically; returns the size.

        Local disks and HDFS: written to ``<uri>.tmp-<random>`` (fsynced on local disks) and renamed.
        Object stores: uploaded to the final key, which becomes visible only when complete. Refuses
        to replace an existing file unless ``overwrite``.
        """
        location, fs = self._resolve(uri)
        if not overwrite and self.exists(uri):
            raise StorageError("already exists; refusing to overwrite it", source=uri)
        if location.kind not in _RENAME_KINDS:
            return self._write_file(location, fs, location.fs_path, data, uri)
        final = location.fs_path
        temporary = _temporary_name(final)
        try:
            size = self._write_file(location, fs, temporary, data, uri)
            with _StorageErrors(uri, "rename the temporary file into place"):
                if location.kind == "hdfs" and overwrite and fs.get_file_info(final).type != pafs.FileType.NotFound:
                    fs.delete_file(final)  # HDFS rename does not replace
                fs.move(temporary, final)
            _sync_directory(location, os.path.dirname(final))
        except BaseException:
            _delete_quietly(fs, temporary, directory=False)
            raise
        return size

    def publish_dir(self, uri: str, *, commit_file: str | None = "_metadata") -> "DirectoryPublisher":
        """A :class:`DirectoryPublisher` building the new directory ``uri``; use it with ``with``."""
        return DirectoryPublisher(self, uri, commit_file=commit_file)

    @staticmethod
    def _write_file(
        location: Location, fs: pafs.FileSystem, fs_path: str, data: bytes | Iterable[bytes], uri: str
    ) -> int:
        """Writes ``data`` to ``fs_path`` (creating parent directories where they exist as such).

        ``uri`` names the file in errors. Local files are written with Python's own I/O so they can
        be fsynced before they are renamed into place.
        """
        chunks = (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data
        written = 0
        with _StorageErrors(uri, "write"):
            if location.kind == "local":
                os.makedirs(os.path.dirname(fs_path), exist_ok=True)
                with open(fs_path, "xb") as out:
                    for chunk in chunks:
                        written += out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                return written
            if location.kind in _RENAME_KINDS:
                fs.create_dir(fs_path.rsplit("/", 1)[0] or "/", recursive=True)
            with fs.open_output_stream(fs_path) as out:
                for chunk in chunks:
                    written += out.write(chunk)
        return written


def _file_info(uri: str, info: pafs.FileInfo) -> FileInfo:
    is_dir = info.type == pafs.FileType.Directory
    mtime_ns = info.mtime_ns
    return FileInfo(
        path=uri,
        size=0 if is_dir else (info.size or 0),
        is_dir=is_dir,
        mtime=None if mtime_ns is None else mtime_ns / 1e9,
    )


def _temporary_name(fs_path: str) -> str:
    return f"{fs_path.rstrip('/')}{_TMP_MARKER}{secrets.token_hex(8)}"


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
    its commit file as incomplete, as Flink does with a checkpoint without ``_metadata``.

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
        if existing is not None and (not existing.is_dir or self.storage.list_dir(self.uri)):
            raise StorageError("already exists; refusing to publish over it", source=self.uri)
        self._target_existed = existing is not None
        self._state = "open"
        return self

    def __exit__(self, exc_type, error, traceback) -> None:
        if error is None:
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
        self.storage._write_file(self._location, self._fs, fs_path, data, final_uri)

    def share(self) -> str:
        """:attr:`staging_uri`, for other processes to write into; from now on an abort deletes
        everything below it (the target was empty when the block began)."""
        if self._state != "open":
            raise StorageError(f"cannot share the staging directory: it is {self._state}", source=self.uri)
        self._shared = True
        return self.staging_uri

    def adopt(self, names: Iterable[str]) -> None:
        """Files other processes wrote below :attr:`staging_uri` (relative names): they are part of the
        directory; on commit, every other file below it that this publisher did not write is deleted."""
        for name in names:
            resolve_within(self.uri, name)
            self._adopted.add(name.strip("/"))

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
            _delete_quietly(self._fs, self._root, directory=True)
            return
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
