"""Reads of objects on S3, GCS and Azure through ``obstore`` (a binding of Rust's ``object_store``).

:class:`~repair.io.storage.Storage` reads object-store objects with it, and looks at them (:func:`stat`,
and :func:`list_entries` for listings one level deep; recursive listings and writes stay on ``pyarrow.fs``,
so that reading a checkpoint never creates pyarrow's S3 file system, a tenth of a CPU second with its
import): a ranged GET needs no HEAD before it, where pyarrow's Python API asks the size of
every file it opens (one more request, tens of milliseconds to the first byte each), and every answer
says the object's size, so a file shorter than the caller expected is told from a connection that
lost bytes. Measured against pyarrow on the same store (120 objects of 1.5 MB, 30 ms to the first
byte, 16 at once): half the requests, about 0.6x the CPU (docs/benchmarks/remote.md).

The SDK's own retries are off: :class:`~repair.io.retry.RetryPolicy` retries (one budget for every
store). Its errors become the ``OSError`` kinds the policy and the storage layer classify:
``FileNotFoundError`` (404), ``PermissionError`` (403, bad credentials), ``ConnectionError`` (a
request that got no answer or lost its body: transient), or ``OSError`` naming the HTTP status.

S3 credentials: explicit options, the ``AWS_*`` variables, web identity and container credentials,
then the instance's metadata service (unless ``AWS_EC2_METADATA_DISABLED`` is true: with no credentials
otherwise, :func:`can_serve` says no). A named profile (``AWS_PROFILE``, ``~/.aws/credentials``) is the
AWS SDK's alone: with one and no keys given otherwise, :func:`can_serve` says no and pyarrow reads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Iterator

from repair.io.options import StorageOptions, parse_endpoint
from repair.io.uris import Location

#: Kinds of location this module reads.
OBJECT_KINDS = frozenset({"s3", "gcs", "azure"})
#: Variables that give ``object_store`` S3 credentials without a profile.
_S3_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                            "AWS_CONTAINER_CREDENTIALS_FULL_URI")
#: A host name that does not resolve (a mistyped endpoint or bucket): the same next time.
#: ("Temporary failure in name resolution" is not one of them: it may pass.)
_UNRESOLVED = re.compile(r"Name or service not known|nodename nor servname|No address associated with hostname")
_STATUS = re.compile(r"status code: (\d{3})")


#: Whether this process made an ``obstore`` store; see :func:`usable`.
_used = False
#: Whether this process was forked from one that had (its Rust runtime's threads are gone here).
_forked_after_use = False


def _after_fork_in_child() -> None:
    global _forked_after_use
    _forked_after_use = _forked_after_use or _used


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def usable() -> bool:
    """Whether ``obstore`` may be used in this process: not in a process forked from one that used it
    (a pool's workers, forked after the parent read ``_metadata``), where its runtime would wait
    forever for threads that were not forked. Such a process reads with pyarrow, as before."""
    return not _forked_after_use


def can_serve(location: Location, options: StorageOptions, environ: dict | None = None) -> bool:
    """Whether ``obstore`` can read ``location`` with these options (else pyarrow does)."""
    if location.kind not in OBJECT_KINDS or not usable():
        return False
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    if location.kind != "s3" or options.s3_anonymous or options.s3_access_key:
        return True
    env = os.environ if environ is None else environ
    if any(env.get(name) for name in _S3_CREDENTIAL_VARIABLES):
        return True
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return False  # no credentials left to find (object_store would still ask the metadata service)
    profile_files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials"),
                     env.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config")]
    return not env.get("AWS_PROFILE") and not any(os.path.exists(path) for path in profile_files)


def create_store(location: Location, options: StorageOptions, *, s3_region: str | None = None) -> Any:
    """The ``obstore`` store of ``location``'s bucket (or container); no request is made."""
    from obstore.store import AzureStore, GCSStore, S3Store

    global _used
    _used = True
    retry_config = {"max_retries": 0}  # RetryPolicy retries
    o = options
    if location.kind == "s3":
        config: dict = {"region": s3_region or o.s3_region or "us-east-1"}
        client: dict = {}
        if o.s3_endpoint:
            host, scheme = parse_endpoint(o.s3_endpoint, allow_http=o.s3_allow_http, service="S3",
                                          allow_hint="AWS_ALLOW_HTTP=true or StorageOptions.s3_allow_http")
            config["endpoint"] = f"{scheme}://{host}"
            client["allow_http"] = scheme == "http"
        if o.s3_anonymous:
            config["skip_signature"] = True
        elif o.s3_access_key:
            config["access_key_id"], config["secret_access_key"] = o.s3_access_key, o.s3_secret_key or ""
            if o.s3_session_token:
                config["token"] = o.s3_session_token
        return S3Store(location.authority, config=config, client_options=client, retry_config=retry_config)
    if location.kind == "gcs":
        config = {"skip_signature": True} if o.gcs_anonymous else {}
        client = {}
        if o.gcs_endpoint:
            host, scheme = parse_endpoint(o.gcs_endpoint, allow_http=False, service="GCS", allow_hint="only loopback emulators may use http")
            config["base_url"] = f"{scheme}://{host}"
            client["allow_http"] = scheme == "http"
        return GCSStore(location.authority, config=config, client_options=client, retry_config=retry_config)
    container, _, host = location.authority.partition("@")
    config = {"account_name": host.split(".", 1)[0]}
    if o.azure_account_key:
        config["account_key"] = o.azure_account_key
    return AzureStore(container, config=config, retry_config=retry_config)


def object_path(location: Location) -> str:
    """The object's key inside its bucket or container."""
    return location.fs_path.partition("/")[2]


def os_error(error: BaseException) -> BaseException:
    """``obstore``'s error as the ``OSError`` kind that :mod:`repair.io.retry` classifies (see the module)."""
    from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError

    if not isinstance(error, (BaseError, FileNotFoundError)):
        return error
    text = str(error)
    first = text.split("\n\nDebug source", 1)[0].strip()
    if isinstance(error, FileNotFoundError):
        return FileNotFoundError(first)
    if isinstance(error, (PermissionDeniedError, UnauthenticatedError)):
        return PermissionError(first)
    if _STATUS.search(first):
        return OSError(first)  # the policy reads 4xx (permanent) and 5xx (transient) from it
    unresolved = _UNRESOLVED.search(text)
    if unresolved:
        return OSError(f"{first} (could not resolve host: {unresolved.group(0)})")
    if "HTTP error" in first or "error sending request" in first or "body error" in first:
        return ConnectionError(first)
    return OSError(first)


@dataclass(frozen=True)
class Entry:
    """An object, or a "directory" (a key prefix), as :func:`stat` and :func:`list_entries` find it."""

    #: The key (no trailing ``/``).
    key: str
    size: int
    is_dir: bool
    #: Seconds since the epoch (None for a directory).
    mtime: float | None


def _object_entry(meta: dict) -> Entry:
    return Entry(meta["path"], meta["size"], False, meta["last_modified"].timestamp())


def _calling(operation):
    """``operation()`` with ``obstore``'s errors as :func:`os_error` makes them."""
    try:
        return operation()
    except Exception as error:  # noqa: BLE001 - translated for the retry policy
        raise os_error(error) from error


def _is_not_found(error: BaseException) -> bool:
    """A 404 answer: a missing key, or a missing bucket (a listing's error names only the status)."""
    return isinstance(error, FileNotFoundError) or (isinstance(error, OSError) and "404" in str(error))


def stat(store: Any, key: str) -> Entry | None:
    """What ``key`` is: an object (one HEAD), a directory (a HEAD and a listing of its first page: objects
    below ``key/``, a "directory" marker object ``key/`` included), or None. The bucket itself (``key``
    empty) is a directory when it can be listed, None when it does not exist."""
    import obstore

    if key:
        try:
            return _object_entry(_calling(lambda: obstore.head(store, key)))
        except OSError as error:
            if not _is_not_found(error):
                raise
    try:
        first = _calling(lambda: next(iter(obstore.list(store, key or None, chunk_size=1)), None))
    except OSError as error:
        if _is_not_found(error):
            return None  # the bucket does not exist
        raise
    return Entry(key, 0, True, None) if first or not key else None


def list_entries(store: Any, key: str) -> list[Entry]:
    """The objects and directories directly below directory ``key`` (all pages of the listing). A
    "directory" marker object below it (``key/sub/``) is a directory, the marker of ``key`` itself
    nothing. Empty for an empty or missing directory, and for an object: the caller asks :func:`stat`."""
    import obstore

    listed = _calling(lambda: obstore.list_with_delimiter(store, key or None))
    entries = [_object_entry(meta) for meta in listed["objects"] if meta["path"] != key]
    return entries + [Entry(name, 0, True, None) for name in listed["common_prefixes"]]


class TooLarge(ValueError):
    """A whole object larger than the caller's limit (see :meth:`ObjectFile.get`)."""


class ObjectFile:
    """One object read by ranged GETs; ``read_at`` as ``pyarrow.NativeFile`` has it. Makes no request
    until asked; :attr:`size` is the object's size as the last answer said (None before any)."""

    __slots__ = ("_store", "_path", "size")

    def __init__(self, store: Any, path: str):
        self._store = store
        self._path = path
        self.size: int | None = None

    def get(self, start: int | None = None, end: int | None = None, *, suffix: int | None = None,
            at_most: int | None = None) -> memoryview:
        """The bytes ``[start, end)`` (fewer at the object's end), the last ``suffix`` bytes, or the
        whole object: one request; :attr:`size` is set from its answer. ``at_most``: a whole object of
        more bytes is not read (:class:`TooLarge`, its body left unread)."""
        import obstore

        options: dict = {}
        if suffix is not None:
            options["range"] = {"suffix": suffix}
        elif start is not None:
            options["range"] = (start, end)
        try:
            result = obstore.get(self._store, self._path, options=options)
            self.size = result.meta["size"]
            if at_most is not None and self.size > at_most:
                raise TooLarge(f"file is {self.size} bytes, more than the limit of {at_most}")
            return memoryview(result.bytes())
        except TooLarge:
            raise
        except Exception as error:  # noqa: BLE001 - translated for the retry policy
            raise os_error(error) from error

    def stream(self, start: int, end: int, chunk_size: int) -> Iterator[bytes]:
        """The bytes ``[start, end)`` (fewer at the object's end) in one GET, passed on as they arrive in
        chunks of at least ``chunk_size`` bytes (the last one fewer): only a chunk is in memory at a time.
        :attr:`size` is set from the answer."""
        import obstore

        try:
            result = obstore.get(self._store, self._path, options={"range": (start, end)})
            self.size = result.meta["size"]
            yield from result.stream(min_chunk_size=chunk_size)
        except Exception as error:  # noqa: BLE001 - translated for the retry policy
            raise os_error(error) from error

    def head(self) -> int:
        """The object's size (one HEAD request)."""
        import obstore

        try:
            self.size = obstore.head(self._store, self._path)["size"]
        except Exception as error:  # noqa: BLE001 - translated for the retry policy
            raise os_error(error) from error
        return self.size

    def read_at(self, length: int, offset: int) -> bytes:
        return bytes(self.read_view(length, offset))  # bytes, as pyarrow's read_at returns

    def read_view(self, length: int, offset: int) -> memoryview:
        """:meth:`read_at` without the copy into ``bytes``: a view of the client's buffer."""
        return self.get(offset, offset + length)

    def close(self) -> None:
        pass
