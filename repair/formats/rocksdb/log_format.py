"""RocksDB's log file framing, shared by the MANIFEST and the write-ahead log.

Source: RocksDB ``db/log_format.h``, ``db/log_reader.cc``, ``db/log_writer.cc``. The file is a
sequence of 32 KiB blocks. A logical record is written as one or more physical records ("fragments")
that never straddle a block boundary; when fewer than a header's bytes remain in a block, they are
zero-filled and writing goes on in the next block.

* Legacy header (7 bytes): masked CRC32C (fixed32), payload length (fixed16), record type.
* Recyclable header (11 bytes, types 5-8 and odd types >= 10): the same plus the low 32 bits of the
  log number (fixed32); a record whose number differs is left over from a recycled file.
* The CRC covers the type byte, then (recyclable types) the log-number bytes, then the payload.
* A zero-length record of type 0 is preallocated space: the rest of the block is skipped.
* Unknown types with bit 7 set may be ignored (``kRecordTypeSafeIgnoreMask``).
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Iterator

from repair.errors import FormatError
from repair.findings import Problem
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.records import record
from repair.formats.rocksdb.table.checksum import crc32c, mask_crc, unmask_crc

BLOCK_SIZE = 32768
HEADER_SIZE = 7
RECYCLABLE_HEADER_SIZE = 11
_SAFE_IGNORE_MASK = 0x80
_READ_BLOCKS = 32  # blocks fetched per read (1 MiB)


class RecordType(enum.IntEnum):
    """Physical record types (``log::RecordType``)."""

    ZERO = 0
    FULL = 1
    FIRST = 2
    MIDDLE = 3
    LAST = 4
    RECYCLABLE_FULL = 5
    RECYCLABLE_FIRST = 6
    RECYCLABLE_MIDDLE = 7
    RECYCLABLE_LAST = 8
    SET_COMPRESSION_TYPE = 9
    USER_DEFINED_TIMESTAMP_SIZE = 10
    RECYCLABLE_USER_DEFINED_TIMESTAMP_SIZE = 11
    PREDECESSOR_WAL_INFO = 130
    RECYCLABLE_PREDECESSOR_WAL_INFO = 131


#: Metadata record types of WALs (compression type, timestamp sizes, predecessor WAL info).
_META_TYPES = frozenset({9, 10, 11, 130, 131})


def _is_recyclable(record_type: int) -> bool:
    return 5 <= record_type <= 8 or (record_type >= 10 and record_type & 1 == 1)


#: Fragment role of each data record type: (is_first, is_last).
_FRAGMENTS = {
    RecordType.FULL: (True, True),
    RecordType.FIRST: (True, False),
    RecordType.MIDDLE: (False, False),
    RecordType.LAST: (False, True),
    RecordType.RECYCLABLE_FULL: (True, True),
    RecordType.RECYCLABLE_FIRST: (True, False),
    RecordType.RECYCLABLE_MIDDLE: (False, False),
    RecordType.RECYCLABLE_LAST: (False, True),
}


class LogFormatError(FormatError):
    """A corrupt log record; ``kind`` names the problem (``bad_record_checksum``, ...)."""

    def __init__(self, kind: str, field: str, offset: int, expected, found, *, detail: str | None = None):
        super().__init__(field, offset, expected, found, detail=detail)
        self.kind = kind


@record(frozen=True)
class LogRecord:
    """A logical record: the file ``offset`` of its first fragment's header, and its payload."""

    offset: int
    payload: bytes
    #: Type of the metadata record (9, 10, 11, 130, 131), or ``None`` for a data record.
    meta_type: int | None = None


@record
class LogReader:
    """Reads the logical records of a log file.

    With ``strict`` (the default, right for a MANIFEST: RocksDB refuses to open a DB whose MANIFEST
    reports corruption) the first problem raises :class:`LogFormatError`. Otherwise problems are
    appended to :attr:`findings` and reading resumes at the next block, as RocksDB's WAL reader does.
    A header or payload cut by the end of the file is reported as ``truncated_record`` (RocksDB treats
    it as the end of the log: the writer died in the middle of a write).
    """

    source: RandomAccess
    strict: bool = True
    log_number: int | None = None
    findings: list[Problem] = field(default_factory=list)

    def _problem(self, kind: str, offset: int, message: str, dropped: int, *, field_name: str, expected, found) -> None:
        if self.strict:
            raise LogFormatError(kind, field_name, offset, expected, found, detail=message)
        self.findings.append(Problem(kind, message, offset, details=(("dropped_bytes", dropped),)))

    def physical_records(self) -> Iterator[tuple[int, int, memoryview]]:
        """Yield ``(offset, type, payload)`` of each physical record whose checksum is good."""
        size = self.source.size
        block_start = 0
        while block_start < size:
            chunk = memoryview(bytes(self.source.read(block_start, min(BLOCK_SIZE * _READ_BLOCKS, size - block_start))))
            for base in range(0, len(chunk), BLOCK_SIZE):
                yield from self._block_records(chunk[base : base + BLOCK_SIZE], block_start + base, size)
            block_start += len(chunk)
            if not chunk:
                break

    def _block_records(self, block: memoryview, block_offset: int, file_size: int) -> Iterator[tuple[int, int, memoryview]]:
        pos = 0
        n = len(block)
        at_file_end = block_offset + n >= file_size
        while pos < n:
            offset = block_offset + pos
            if n - pos < HEADER_SIZE:
                # Block trailer: the writer zero-fills what cannot hold a header.
                if at_file_end and any(block[pos:]):
                    self._problem("truncated_record", offset, "log ends inside a record header", n - pos,
                                  field_name="record header", expected=f"{HEADER_SIZE} bytes", found=f"{n - pos} bytes")
                return
            masked = int.from_bytes(block[pos : pos + 4], "little")
            length = block[pos + 4] | (block[pos + 5] << 8)
            record_type = block[pos + 6]
            if record_type == RecordType.ZERO and length == 0:
                # Preallocated, never written space (log_reader.cc skips the rest of the block).
                return
            header = RECYCLABLE_HEADER_SIZE if _is_recyclable(record_type) else HEADER_SIZE
            if header > n - pos or header + length > n - pos:
                if at_file_end:
                    self._problem("truncated_record", offset, "log ends inside a record", n - pos,
                                  field_name="record length", expected=f"at most {n - pos - header} bytes", found=length)
                else:
                    self._problem("bad_record_length", offset, f"record length {length} runs past the end of its 32 KiB block",
                                  n - pos, field_name="record length", expected=f"at most {max(n - pos - header, 0)} bytes", found=length)
                return
            payload = block[pos + header : pos + header + length]
            computed = crc32c(payload, crc32c(block[pos + 6 : pos + header]))
            if computed != unmask_crc(masked):
                self._problem("bad_record_checksum", offset,
                              f"record checksum mismatch: stored 0x{unmask_crc(masked):08x}, computed 0x{computed:08x}",
                              n - pos, field_name="record checksum", expected=f"0x{unmask_crc(masked):08x} (stored)",
                              found=f"0x{computed:08x} (computed)")
                return  # like RocksDB, drop the rest of the block
            if header == RECYCLABLE_HEADER_SIZE and self.log_number is not None:
                number = int.from_bytes(block[pos + 7 : pos + 11], "little")
                if number != self.log_number & 0xFFFFFFFF:
                    return  # a record left over from the recycled file's previous life: end of this log
            pos += header + length
            yield offset, record_type, payload

    def records(self) -> Iterator[LogRecord]:
        """Yield the logical records, reassembling FIRST/MIDDLE/LAST fragments."""
        pending: list[memoryview] = []
        pending_offset = -1
        for offset, record_type, payload in self.physical_records():
            role = _FRAGMENTS.get(record_type)
            if role is None:
                if record_type in _META_TYPES or record_type & _SAFE_IGNORE_MASK:
                    yield LogRecord(offset, bytes(payload), meta_type=record_type)
                    continue
                self._problem("unknown_record_type", offset, f"unknown record type {record_type}", len(payload),
                              field_name="record type", expected="1 to 11 or a type with bit 7 set", found=record_type)
                continue
            is_first, is_last = role
            if is_first and pending:
                self._problem("partial_record", pending_offset, "fragmented record without its last fragment",
                              sum(len(p) for p in pending), field_name="record type", expected="a MIDDLE or LAST fragment",
                              found=RecordType(record_type).name)
                pending = []
            if not is_first and not pending:
                self._problem("missing_record_start", offset, "fragment without the start of its record", len(payload),
                              field_name="record type", expected="a FULL or FIRST fragment", found=RecordType(record_type).name)
                continue
            if is_first:
                pending_offset = offset
            pending.append(payload)
            if is_last:
                yield LogRecord(pending_offset, b"".join(pending))
                pending = []
        if pending:
            self._problem("truncated_record", pending_offset, "log ends inside a fragmented record",
                          sum(len(p) for p in pending), field_name="record", expected="a LAST fragment", found="end of file")


def encode_log(records: list[bytes], *, log_number: int | None = None) -> bytes:
    """Frame ``records`` as a log file (legacy headers, or recyclable ones with ``log_number``).

    The inverse of :class:`LogReader`, used by tests and by a future MANIFEST writer.
    """
    out = bytearray()
    header = HEADER_SIZE if log_number is None else RECYCLABLE_HEADER_SIZE
    number_bytes = b"" if log_number is None else (log_number & 0xFFFFFFFF).to_bytes(4, "little")
    for payload in records:
        data = memoryview(bytes(payload))
        first = True
        while True:
            left = BLOCK_SIZE - len(out) % BLOCK_SIZE
            if left < header:
                out += b"\0" * left
                left = BLOCK_SIZE
            fragment = data[: left - header]
            data = data[len(fragment) :]
            last = len(data) == 0
            kind = (RecordType.FULL if last else RecordType.FIRST) if first else (RecordType.LAST if last else RecordType.MIDDLE)
            if log_number is not None:
                kind += 4
            type_and_number = bytes((kind,)) + number_bytes
            crc = mask_crc(crc32c(fragment, crc32c(type_and_number)))
            out += crc.to_bytes(4, "little") + len(fragment).to_bytes(2, "little") + type_and_number + fragment
            first = False
            if last:
                break
    return bytes(out)
