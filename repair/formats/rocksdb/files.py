"""Small RocksDB files and names: CURRENT, OPTIONS-NNNNNN, and the numbered file names.

* CURRENT holds the name of the live MANIFEST and a newline, e.g. ``MANIFEST-000006\\n``
  (RocksDB ``file/filename.cc``, ``SetCurrentFile``; ``db/version_set.cc`` rejects a CURRENT
  without the trailing newline).
* OPTIONS files are INI-like text (``options/options_parser.cc``): ``#`` comments, sections
  ``[Version]``, ``[DBOptions]``, ``[CFOptions "name"]`` and ``[TableOptions/BlockBasedTable "name"]``,
  and ``key=value`` lines (values may contain ``=``; blank lines are ignored).
* File names (``ParseFileName``): ``NNNNNN.sst``, ``NNNNNN.log``, ``MANIFEST-NNNNNN``,
  ``OPTIONS-NNNNNN``, ``CURRENT``, ``IDENTITY``, ``LOCK``, ``LOG``, ``NNNNNN.blob``, ``NNNNNN.dbtmp``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import field
from typing import Any

from repair.errors import FormatError
from repair.formats.records import record

_MANIFEST_NAME = re.compile(r"MANIFEST-(\d+)")


class FileKind(str, enum.Enum):
    TABLE = "sst"
    WAL = "log"
    BLOB = "blob"
    MANIFEST = "manifest"
    OPTIONS = "options"
    CURRENT = "current"
    IDENTITY = "identity"
    LOCK = "lock"
    INFO_LOG = "info_log"
    TEMP = "temp"


@record(frozen=True)
class RocksDBFileName:
    """A parsed RocksDB file name; ``number`` is ``None`` for unnumbered files (CURRENT, LOCK ...)."""

    kind: FileKind
    number: int | None = None


_NUMBERED_SUFFIXES = {".sst": FileKind.TABLE, ".ldb": FileKind.TABLE, ".log": FileKind.WAL, ".blob": FileKind.BLOB, ".dbtmp": FileKind.TEMP}
_FIXED_NAMES = {"CURRENT": FileKind.CURRENT, "IDENTITY": FileKind.IDENTITY, "LOCK": FileKind.LOCK, "LOG": FileKind.INFO_LOG}


def parse_file_name(name: str) -> RocksDBFileName | None:
    """Parse a bare file name (no directory); ``None`` when RocksDB would not recognise it.

    >>> parse_file_name("000042.sst")
    RocksDBFileName(kind=<FileKind.TABLE: 'sst'>, number=42)
    """
    if name in _FIXED_NAMES:
        return RocksDBFileName(_FIXED_NAMES[name])
    if name.startswith("LOG.old."):
        return RocksDBFileName(FileKind.INFO_LOG)
    for prefix, kind in (("MANIFEST-", FileKind.MANIFEST), ("OPTIONS-", FileKind.OPTIONS)):
        if name.startswith(prefix):
            digits = name[len(prefix) :]
            if digits.isdigit() and digits.isascii():
                return RocksDBFileName(kind, int(digits))
            if kind == FileKind.OPTIONS and digits.endswith(".dbtmp") and digits[:-6].isdigit():
                return RocksDBFileName(FileKind.TEMP, int(digits[:-6]))
            return None
    stem, dot, suffix = name.partition(".")
    if dot and stem.isdigit() and stem.isascii() and "." + suffix in _NUMBERED_SUFFIXES:
        return RocksDBFileName(_NUMBERED_SUFFIXES["." + suffix], int(stem))
    return None


def file_number(name: str) -> int | None:
    """The number in a numbered file name (``000042.sst`` -> 42, ``MANIFEST-000006`` -> 6)."""
    parsed = parse_file_name(name)
    return None if parsed is None else parsed.number


def table_file_name(number: int) -> str:
    """``42`` -> ``000042.sst`` (RocksDB ``MakeTableFileName``, at least 6 digits)."""
    return f"{number:06d}.sst"


def manifest_file_name(number: int) -> str:
    """``6`` -> ``MANIFEST-000006`` (``DescriptorFileName``)."""
    return f"MANIFEST-{number:06d}"


def decode_current(data: bytes) -> str:
    """The MANIFEST name in a CURRENT file; must be exactly ``MANIFEST-<digits>\\n``."""
    data = bytes(data)
    if not data.endswith(b"\n"):
        raise FormatError("CURRENT", len(data), "contents ending with a newline", repr(data[-20:]), detail="CURRENT file does not end with newline")
    name = data[:-1]
    try:
        text = name.decode("ascii")
    except UnicodeDecodeError:
        raise FormatError("CURRENT", 0, "MANIFEST-<number>", repr(name[:40])) from None
    if not _MANIFEST_NAME.fullmatch(text):
        raise FormatError("CURRENT", 0, "MANIFEST-<number>", repr(text[:40]), detail="CURRENT file corrupted")
    return text


def encode_current(manifest_name: str) -> bytes:
    if not _MANIFEST_NAME.fullmatch(manifest_name):
        raise ValueError(f"not a MANIFEST name: {manifest_name!r}")
    return manifest_name.encode("ascii") + b"\n"


# -- OPTIONS -----------------------------------------------------------------------------------


@record
class OptionsFile:
    """A parsed OPTIONS file. Column families keep the file's order."""

    version: dict[str, str] = field(default_factory=dict)
    db_options: dict[str, str] = field(default_factory=dict)
    #: ``[CFOptions "name"]`` sections by column family name.
    cf_options: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``[TableOptions/<Factory> "name"]``: column family name -> (factory, options).
    table_options: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    #: Sections with other names, kept as ``(header, options)``.
    other_sections: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    @property
    def rocksdb_version(self) -> str | None:
        return self.version.get("rocksdb_version")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version, "db_options": self.db_options, "cf_options": self.cf_options,
            "table_options": {cf: {"factory": f, "options": o} for cf, (f, o) in self.table_options.items()},
        }


_SECTION = re.compile(r'\[\s*([A-Za-z][A-Za-z0-9_/]*)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]')


def parse_options(text: str | bytes) -> OptionsFile:
    """Parse an OPTIONS file; a syntax error raises :class:`FormatError` naming the line and its offset.

    Follows ``RocksDBOptionsParser::Parse``: ``#`` starts a comment unless escaped, every
    non-blank line outside a section header is ``key=value``, and the first section must be ``[Version]``.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError("OPTIONS", exc.start, "UTF-8 text", "undecodable bytes") from None
    result = OptionsFile()
    current: dict[str, str] | None = None
    seen_headers: set[tuple[str, str | None]] = set()
    line_offset = 0
    for line_no, raw_line in enumerate(text.splitlines(keepends=True), start=1):
        offset, line_offset = line_offset, line_offset + len(raw_line.encode("utf-8"))
        line = _strip_comment(raw_line).strip()
        if not line:
            continue
        if line.startswith("["):
            match = _SECTION.fullmatch(line)
            if match is None:
                raise _syntax(line_no, offset, 'a section header like [DBOptions] or [CFOptions "name"]', line)
            section, arg = match.group(1), match.group(2)
            arg = None if arg is None else unescape_option_string(arg)
            if (section, arg) in seen_headers:
                raise _syntax(line_no, offset, "each section once", line, detail="duplicate section")
            if not seen_headers and section != "Version":
                raise _syntax(line_no, offset, "[Version] as the first section", line)
            seen_headers.add((section, arg))
            current = {}
            if section == "Version":
                result.version = current
            elif section == "DBOptions":
                result.db_options = current
            elif section == "CFOptions":
                if arg is None:
                    raise _syntax(line_no, offset, '[CFOptions "<column family name>"]', line)
                result.cf_options[arg] = current
            elif section.startswith("TableOptions/"):
                if arg is None:
                    raise _syntax(line_no, offset, f'[{section} "<column family name>"]', line)
                result.table_options[arg] = (section.split("/", 1)[1], current)
            else:
                result.other_sections.append((line, current))
            continue
        if current is None:
            raise _syntax(line_no, offset, "a section header before the first option", line)
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not key:
            raise _syntax(line_no, offset, "key=value", line)
        current[key] = value.strip()
    if not seen_headers:
        raise FormatError("OPTIONS", 1, "a [Version] section", "no sections", detail="empty OPTIONS file")
    return result


_ESCAPED = {"\n": "n", "\r": "r"}
_UNESCAPED = {v: k for k, v in _ESCAPED.items()}


def escape_option_string(text: str) -> str:
    """``EscapeOptionString``: a backslash before ``\\``, ``#`` and ``:``; newline and CR as ``\\n``, ``\\r``."""
    return "".join("\\" + _ESCAPED.get(c, c) if c in "\\#:\r\n" else c for c in text)


def unescape_option_string(text: str) -> str:
    """``UnescapeOptionString``, the inverse of :func:`escape_option_string` (column family names in headers)."""
    out, escaped = [], False
    for c in text:
        if escaped:
            out.append(_UNESCAPED.get(c, c))
            escaped = False
        elif c == "\\":
            escaped = True
        else:
            out.append(c)
    return "".join(out)


def _strip_comment(line: str) -> str:
    """Drop a ``#`` comment unless the ``#`` is escaped with a backslash."""
    i = 0
    while True:
        i = line.find("#", i)
        if i < 0:
            return line
        if i == 0 or line[i - 1] != "\\":
            return line[:i]
        i += 1


def _syntax(line_no: int, offset: int, expected: str, found: str, *, detail: str | None = None) -> FormatError:
    """A syntax error naming the line number (in the field) and the line's byte offset."""
    return FormatError(f"OPTIONS line {line_no}", offset, expected, repr(found[:80]), detail=detail or "syntax error")
