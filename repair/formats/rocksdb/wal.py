"""Write-ahead log files (``NNNNNN.log``): WriteBatch records in log framing, summarized.

Pure: RandomAccess/bytes in, summaries out.

A WAL is a log file (:mod:`repair.formats.rocksdb.log_format`) whose data records each hold one
``WriteBatch`` (RocksDB ``db/write_batch.cc``): a 12-byte header, ``fixed64`` sequence number of the
first entry and ``fixed32`` entry count, then the entries, each a tag byte and its fields
(``ReadRecordFromWriteBatch``). Tags naming a column family carry its id as a ``varint32`` right
after the tag; the others belong to column family 0 ("default"). Each counted entry takes one
sequence number. Flink writes with the WAL disabled, so its WALs hold no records; a generic RocksDB
directory may hold data only there.

:func:`decode_write_batch` gives one batch's header and entries per column family;
:func:`summarize_wal` reads a whole WAL leniently, like RocksDB's point-in-time recovery, and says
how many batches and entries it holds, their sequence numbers and column family ids, and where
(if anywhere) it stops being readable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from repair.errors import FormatError
from repair.formats.bytes.coding import LittleEndianReader
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.rocksdb.log_format import LogReader, RecordType

HEADER_SIZE = 12


class BatchTag(enum.IntEnum):
    """WriteBatch entry tags (``ValueType`` of ``db/dbformat.h`` as ``WriteBatch`` uses them)."""

    DELETION = 0x0
    VALUE = 0x1
    MERGE = 0x2
    LOG_DATA = 0x3
    CF_DELETION = 0x4
    CF_VALUE = 0x5
    CF_MERGE = 0x6
    SINGLE_DELETION = 0x7
    CF_SINGLE_DELETION = 0x8
    BEGIN_PREPARE_XID = 0x9
    END_PREPARE_XID = 0xA
    COMMIT_XID = 0xB
    ROLLBACK_XID = 0xC
    NOOP = 0xD
    CF_RANGE_DELETION = 0xE
    RANGE_DELETION = 0xF
    CF_BLOB_INDEX = 0x10
    BLOB_INDEX = 0x11
    BEGIN_PERSISTED_PREPARE_XID = 0x12
    BEGIN_UNPREPARE_XID = 0x13
    COMMIT_XID_AND_TIMESTAMP = 0x15
    WIDE_COLUMN_ENTITY = 0x16
    CF_WIDE_COLUMN_ENTITY = 0x17
    VALUE_PREFERRED_SEQNO = 0x18
    CF_VALUE_PREFERRED_SEQNO = 0x19


#: Counted entries: tag -> (has a column family id, number of length-prefixed fields).
_ENTRIES = {
    BatchTag.DELETION: (False, 1), BatchTag.SINGLE_DELETION: (False, 1),
    BatchTag.VALUE: (False, 2), BatchTag.MERGE: (False, 2), BatchTag.RANGE_DELETION: (False, 2),
    BatchTag.BLOB_INDEX: (False, 2), BatchTag.WIDE_COLUMN_ENTITY: (False, 2), BatchTag.VALUE_PREFERRED_SEQNO: (False, 2),
    BatchTag.CF_DELETION: (True, 1), BatchTag.CF_SINGLE_DELETION: (True, 1),
    BatchTag.CF_VALUE: (True, 2), BatchTag.CF_MERGE: (True, 2), BatchTag.CF_RANGE_DELETION: (True, 2),
    BatchTag.CF_BLOB_INDEX: (True, 2), BatchTag.CF_WIDE_COLUMN_ENTITY: (True, 2), BatchTag.CF_VALUE_PREFERRED_SEQNO: (True, 2),
}
#: Markers that are not counted: tag -> number of length-prefixed fields.
_MARKERS = {
    BatchTag.LOG_DATA: 1, BatchTag.NOOP: 0, BatchTag.BEGIN_PREPARE_XID: 0, BatchTag.BEGIN_PERSISTED_PREPARE_XID: 0,
    BatchTag.BEGIN_UNPREPARE_XID: 0, BatchTag.END_PREPARE_XID: 1, BatchTag.COMMIT_XID: 1, BatchTag.ROLLBACK_XID: 1,
    BatchTag.COMMIT_XID_AND_TIMESTAMP: 2,
}


@dataclass
class WriteBatchSummary:
    """One WriteBatch: the sequence number of its first entry, its entry count, entries per column family id."""

    sequence: int
    count: int
    entries_by_column_family: dict[int, int] = field(default_factory=dict)

    @property
    def last_sequence(self) -> int:
        return self.sequence + max(self.count, 1) - 1


def decode_write_batch(payload: bytes, offset: int = 0) -> WriteBatchSummary:
    """Decode a WriteBatch record; ``offset`` (the record's file offset) is added to error positions.

    Raises :class:`FormatError` for an unknown tag, a field running past the end, or an entry count
    that differs from the header's (RocksDB: "WriteBatch has wrong count").
    """
    reader = LittleEndianReader(payload, base=offset)
    sequence = reader.fixed64("WriteBatch sequence")
    count = reader.fixed32("WriteBatch count")
    per_cf: dict[int, int] = {}
    seen = 0
    while not reader.at_end():
        at = reader.offset
        tag = reader.u8("WriteBatch tag")
        if tag in _ENTRIES:
            has_cf, fields = _ENTRIES[tag]
            cf = reader.varint32("column family id") if has_cf else 0
            for _ in range(fields):
                reader.length_prefixed("WriteBatch entry field")
            per_cf[cf] = per_cf.get(cf, 0) + 1
            seen += 1
        elif tag in _MARKERS:
            for _ in range(_MARKERS[tag]):
                reader.length_prefixed("WriteBatch marker field")
        else:
            raise FormatError("WriteBatch tag", at, "a known WriteBatch tag", f"0x{tag:02x}", detail="unknown WriteBatch tag")
    if seen != count:
        raise FormatError("WriteBatch count", offset + 8, count, seen, detail="WriteBatch has wrong count")
    return WriteBatchSummary(sequence, count, per_cf)


@dataclass
class WalSummary:
    """What a WAL holds, as far as it reads."""

    batches: int = 0
    entries: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    entries_by_column_family: dict[int, int] = field(default_factory=dict)
    #: The records are compressed (``wal_compression``): their contents were not inspected.
    compressed: bool = False
    #: File offset of the first unreadable record, and why; ``None`` when the whole log reads.
    problem_offset: int | None = None
    problem: str | None = None

    @property
    def holds_data(self) -> bool:
        """At least one record (data, or compressed records that could not be looked into)."""
        return self.batches > 0 or self.compressed

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches, "entries": self.entries,
            "sequence_numbers": None if self.first_sequence is None else [self.first_sequence, self.last_sequence],
            "entries_by_column_family_id": {str(k): v for k, v in sorted(self.entries_by_column_family.items())},
            "compressed": self.compressed, "problem_offset": self.problem_offset, "problem": self.problem,
        }


def summarize_wal(source: RandomAccess, log_number: int | None = None) -> WalSummary:
    """Summarize a WAL; reading stops at the first corrupt record (:attr:`WalSummary.problem_offset`).

    That is where RocksDB's default ``kPointInTimeRecovery`` stops replaying too. A truncated last
    record (a writer that died mid-write) is reported the same way. ``log_number`` recognises records
    left over from a recycled log file.
    """
    summary = WalSummary()
    reader = LogReader(source, strict=False, log_number=log_number)
    for record in reader.records():
        if reader.findings:
            break
        if record.meta_type is not None:
            if record.meta_type == RecordType.SET_COMPRESSION_TYPE and any(record.payload[:1]):
                summary.compressed = True
                break
            continue
        try:
            batch = decode_write_batch(record.payload, record.offset)
        except FormatError as error:
            summary.problem_offset, summary.problem = record.offset, error.message
            return summary
        summary.batches += 1
        summary.entries += batch.count
        if batch.count:
            if summary.first_sequence is None:
                summary.first_sequence = batch.sequence
            summary.first_sequence = min(summary.first_sequence, batch.sequence)
            summary.last_sequence = max(summary.last_sequence or 0, batch.last_sequence)
        for cf, n in batch.entries_by_column_family.items():
            summary.entries_by_column_family[cf] = summary.entries_by_column_family.get(cf, 0) + n
    if reader.findings:
        first = reader.findings[0]
        summary.problem_offset, summary.problem = first.offset, first.message
    return summary
