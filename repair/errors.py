"""Typed errors of the toolkit.

Every problem a user can cause (bad input bytes, a missing file, a wrong argument) is one of these,
never a bare Python exception. The CLI prints ``str(error)`` on one line and exits with
``error.exit_code``.

Pure decoders do not know which file they read; they raise with ``source=None`` and the layer that
opened the file adds it with :meth:`RepairError.in_source`.
"""

from __future__ import annotations

from typing import Any


class RepairError(Exception):
    """Base class of every error this toolkit raises on purpose."""

    #: Exit code of the CLI when this error ends a command (2 = usage error or unreadable input).
    exit_code = 2
    #: Where in the bytes and what was compared, when the error knows (a :class:`FormatError` always does):
    #: what a finding built from it (``repair.findings.Problem.from_error``) reports.
    offset: int | None = None
    expected: Any = None
    found: Any = None

    def __init__(self, message: str, *, source: str | None = None):
        super().__init__(message)
        self.message = message
        self.source = source

    def in_source(self, source: str) -> "RepairError":
        """Return this error with ``source`` (a file name or URI) set, unless one is set already."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        return f"{self.source}: {self.message}" if self.source else self.message


class FormatError(RepairError):
    """Bytes that do not follow the format being decoded.

    Names the field, its byte offset, and what was expected versus what was found.
    """

    def __init__(
        self,
        field: str,
        offset: int,
        expected: Any,
        found: Any,
        *,
        source: str | None = None,
        detail: str | None = None,
    ):
        self.field = field
        self.offset = offset
        self.expected = expected
        self.found = found
        self.detail = detail
        message = f"{field} at offset {offset}: expected {expected}, found {found}"
        if detail:
            message += f" ({detail})"
        super().__init__(message, source=source)


class TruncatedError(FormatError):
    """The input ended before a field was complete."""

    def __init__(self, field: str, offset: int, needed: int, available: int, *, source: str | None = None):
        super().__init__(
            field,
            offset,
            f"{needed} more bytes",
            f"{available}",
            source=source,
            detail="input is truncated",
        )


class UnsupportedSerializerError(FormatError):
    """A value of a Flink serializer whose wire format the decoders do not know: the value stays raw."""

    def __init__(self, class_name: str, offset: int, *, detail: str | None = None):
        self.class_name = class_name
        super().__init__("value", offset, "a serializer this decoder knows", class_name, detail=detail or f"cannot decode {class_name}")


class StorageError(RepairError):
    """A file or directory could not be read (missing, permission denied, unreachable storage).

    ``transient`` is set when the last failure was one that may go away (throttling, a reset, a
    timeout, a short read) and the retries ran out of time: the file's state is unknown, not bad.
    """

    def __init__(self, message: str, *, source: str | None = None, transient: bool = False):
        super().__init__(message, source=source)
        self.transient = transient


class UsageError(RepairError):
    """The command was called with arguments that cannot work."""
