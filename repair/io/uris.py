"""URIs and local paths: parsing, joining, and the checks that keep writes where they belong.

Pure string work, no I/O except :func:`is_within`, which resolves symbolic links of local paths.
:mod:`repair.io.storage` re-exports these names; the rest of the code uses them from there.
"""

from __future__ import annotations

import os
import re

from repair.errors import StorageError
from repair.formats.records import record

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
_URI_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/]*)(?P<path>.*)$", re.DOTALL)


# -- locations -----------------------------------------------------------------------------------
@record(frozen=True)
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


def absolute(uri: str) -> str:
    """A local path (or ``file:`` URI) as an absolute path, as Flink needs it; other URIs as they are."""
    location = parse_location(uri)
    return os.path.abspath(location.fs_path) if location.kind == "local" else uri


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it: the same file system (scheme and authority, local
    paths in any of their spellings) and a path under it, local paths compared after resolving
    symbolic links, so a link into the input counts as inside."""
    target, base = parse_location(path), parse_location(directory)
    if target.kind != base.kind or (target.kind != "local" and target.authority != base.authority):
        return False
    if target.kind == "local":
        inner, outer = os.path.realpath(target.fs_path), os.path.realpath(base.fs_path)
    else:
        inner, outer = target.fs_path.rstrip("/"), base.fs_path.rstrip("/")
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")
