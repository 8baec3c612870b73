"""Random access to the bytes of one file, the only way the RocksDB decoders see a file.

Decoders never open files: the storage layer hands them an object with ``size`` and
``read(offset, length)`` (local file, object store range reads, ...). :class:`BytesSource` is the
in-memory implementation, used for SSTs held inline in Flink's ``_metadata`` and in tests.

A source may also have ``preferred_read_size`` (bytes, or ``None``): the size of the sequential reads
that suit it, used by whole-file scans such as SST verification when the caller does not choose one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from repair.errors import FormatError, TruncatedError


@runtime_checkable
class RandomAccess(Protocol):
    """Read-only random access to a byte sequence of known size.

    ``read(offset, length)`` returns at most ``length`` bytes starting at ``offset``; it may return
    fewer only at the end of the data. Implementations may return ``bytes``, ``bytearray`` or a
    ``memoryview``; decoders treat the result as read-only.
    """

    @property
    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


class BytesSource:
    """A :class:`RandomAccess` over bytes already in memory; reads are zero-copy memoryviews."""

    __slots__ = ("_data", "_view")

    def __init__(self, data: bytes | bytearray | memoryview):
        self._data = data
        self._view = memoryview(data).cast("B")

    @property
    def size(self) -> int:
        return len(self._view)

    def read(self, offset: int, length: int) -> memoryview:
        if offset < 0 or length < 0:
            raise ValueError(f"negative offset or length: {offset}, {length}")
        return self._view[offset : offset + length]

    def __repr__(self) -> str:
        return f"BytesSource({self.size} bytes)"


def read_exactly(source: RandomAccess, offset: int, length: int, field: str) -> memoryview:
    """``length`` bytes at ``offset`` of ``source``, or a :class:`TruncatedError` naming ``field``.

    The range is checked against ``source.size`` before reading, so a corrupt length read from the
    data can never make us ask the storage layer for more than the file holds.
    """
    if offset < 0 or length < 0:
        raise FormatError(field, offset, "a non-negative offset and length", f"offset {offset}, length {length}")
    available = max(source.size - offset, 0)
    if length > available:
        raise TruncatedError(field, offset, length, available)
    data = source.read(offset, length)
    if len(data) != length:
        raise TruncatedError(field, offset, length, len(data))
    view = memoryview(data)
    return view if view.format == "B" else view.cast("B")
