"""MANIFEST files: VersionEdit records, and their replay into the live version of a DB.

A MANIFEST is a log file (:mod:`repair.formats.rocksdb.log_format`) whose records each hold one
``VersionEdit``: a sequence of ``varint32 tag`` + tag-specific body (RocksDB ``db/version_edit.h``
and ``db/version_edit.cc``, ``VersionEdit::DecodeFrom`` / ``EncodeTo``).

* Tags >= 8193 have bit ``kTagSafeIgnoreMask`` (1 << 13): unknown ones are a varint32 length and
  that many bytes, and may be skipped. Any other unknown tag is corruption.
* ``kNewFile4`` (103) carries custom fields after the fixed part, each ``varint32 tag`` +
  length-prefixed value, ending with tag 1. Unknown custom tags with bit 6 (``kCustomTagNonSafeIgnoreMask``)
  set must not be ignored; others may be.

:func:`decode_version_edit` decodes one record; :func:`encode_version_edit` is its inverse (kept
complete so that a MANIFEST can be rewritten). :func:`read_manifest` decodes a whole file and
:func:`replay` applies the edits like ``VersionEditHandler`` to give the live files of each column family.
"""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any, Iterable, Iterator

from repair.errors import FormatError
from repair.findings import Problem
from repair.formats.bytes.coding import LittleEndianReader, encode_varint, length_prefixed
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.records import record
from repair.formats.rocksdb.log_format import LogReader, encode_log
from repair.formats.rocksdb.table.block import InternalKey, decode_internal_key

SAFE_IGNORE_TAG_MASK = 1 << 13
NON_SAFE_IGNORE_CUSTOM_TAG_MASK = 1 << 6
DEFAULT_COLUMN_FAMILY = "default"


class Tag(enum.IntEnum):
    """VersionEdit tags (``enum Tag`` of ``db/version_edit.h``)."""

    COMPARATOR = 1
    LOG_NUMBER = 2
    NEXT_FILE_NUMBER = 3
    LAST_SEQUENCE = 4
    COMPACT_CURSOR = 5
    DELETED_FILE = 6
    NEW_FILE = 7
    PREV_LOG_NUMBER = 9
    MIN_LOG_NUMBER_TO_KEEP = 10
    NEW_FILE2 = 100
    NEW_FILE3 = 102
    NEW_FILE4 = 103
    COLUMN_FAMILY = 200
    COLUMN_FAMILY_ADD = 201
    COLUMN_FAMILY_DROP = 202
    MAX_COLUMN_FAMILY = 203
    IN_ATOMIC_GROUP = 300
    BLOB_FILE_ADDITION = 400
    BLOB_FILE_GARBAGE = 401
    DB_ID = 8193
    BLOB_FILE_ADDITION_DEPRECATED = 8194
    BLOB_FILE_GARBAGE_DEPRECATED = 8195
    WAL_ADDITION = 8196
    WAL_DELETION = 8197
    FULL_HISTORY_TS_LOW = 8198
    WAL_ADDITION2 = 8199
    WAL_DELETION2 = 8200
    PERSIST_USER_DEFINED_TIMESTAMPS = 8201


class CustomTag(enum.IntEnum):
    """Custom field tags of ``kNewFile4`` (``enum NewFileCustomTag``)."""

    TERMINATE = 1
    NEED_COMPACTION = 2
    MIN_LOG_NUMBER_TO_KEEP_HACK = 3
    OLDEST_BLOB_FILE_NUMBER = 4
    OLDEST_ANCESTER_TIME = 5
    FILE_CREATION_TIME = 6
    FILE_CHECKSUM = 7
    FILE_CHECKSUM_FUNC_NAME = 8
    TEMPERATURE = 9
    MIN_TIMESTAMP = 10
    MAX_TIMESTAMP = 11
    UNIQUE_ID = 12
    EPOCH_NUMBER = 13
    COMPENSATED_RANGE_DELETION_SIZE = 14
    TAIL_SIZE = 15
    USER_DEFINED_TIMESTAMPS_PERSISTED = 16
    FILE_OPEN_METADATA = 17
    PATH_ID = 65


#: Custom fields holding a varint64, by tag -> attribute of :class:`FileMetaData`.
_VARINT_CUSTOM_FIELDS = {
    CustomTag.OLDEST_BLOB_FILE_NUMBER: "oldest_blob_file_number",
    CustomTag.OLDEST_ANCESTER_TIME: "oldest_ancester_time",
    CustomTag.FILE_CREATION_TIME: "file_creation_time",
    CustomTag.EPOCH_NUMBER: "epoch_number",
    CustomTag.COMPENSATED_RANGE_DELETION_SIZE: "compensated_range_deletion_size",
    CustomTag.TAIL_SIZE: "tail_size",
}
#: Custom fields kept as raw bytes.
_BYTES_CUSTOM_FIELDS = {
    CustomTag.FILE_CHECKSUM: "file_checksum",
    CustomTag.MIN_TIMESTAMP: "min_timestamp",
    CustomTag.MAX_TIMESTAMP: "max_timestamp",
    CustomTag.FILE_OPEN_METADATA: "file_open_metadata",
}


class ManifestFormatError(FormatError):
    """A VersionEdit that does not decode. ``offset`` is the file offset of its log record."""


@record
class FileMetaData:
    """One SST added by a VersionEdit (``FileMetaData`` of ``db/version_edit.h``)."""

    level: int
    number: int
    file_size: int
    smallest: bytes  # encoded internal key
    largest: bytes  # encoded internal key
    smallest_seqno: int = 0
    largest_seqno: int = 0
    #: Tag the file was encoded with (7, 100, 102 or 103).
    tag: int = Tag.NEW_FILE4
    path_id: int = 0
    need_compaction: bool = False
    min_log_number_to_keep: int | None = None
    oldest_blob_file_number: int | None = None
    oldest_ancester_time: int | None = None
    file_creation_time: int | None = None
    file_checksum: bytes | None = None
    file_checksum_func_name: str | None = None
    temperature: int | None = None
    min_timestamp: bytes | None = None
    max_timestamp: bytes | None = None
    unique_id: tuple[int, int] | None = None
    epoch_number: int | None = None
    compensated_range_deletion_size: int | None = None
    tail_size: int | None = None
    user_defined_timestamps_persisted: bool | None = None
    file_open_metadata: bytes | None = None
    #: Custom fields this decoder does not know (safe to ignore), as ``(tag, value)``.
    unknown_custom_fields: list[tuple[int, bytes]] = field(default_factory=list)

    @property
    def file_name(self) -> str:
        return f"{self.number:06d}.sst"

    def smallest_key(self) -> InternalKey:
        return decode_internal_key(self.smallest)

    def largest_key(self) -> InternalKey:
        return decode_internal_key(self.largest)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if value is None or value == [] or (name == "need_compaction" and not value) or (name == "path_id" and value == 0):
                continue
            if isinstance(value, bytes):
                value = value.hex()
            elif name == "unknown_custom_fields":
                value = [{"tag": t, "value": v.hex()} for t, v in value]
            out[name] = value
        return out


@record
class BlobFileAddition:
    number: int
    total_blob_count: int
    total_blob_bytes: int
    checksum_method: bytes
    checksum_value: bytes
    unknown_custom_fields: list[tuple[int, bytes]] = field(default_factory=list)


@record
class BlobFileGarbage:
    number: int
    garbage_blob_count: int
    garbage_blob_bytes: int
    unknown_custom_fields: list[tuple[int, bytes]] = field(default_factory=list)


@record
class VersionEdit:
    """One decoded VersionEdit. ``None`` means the field is absent from the record."""

    #: File offset of the log record holding this edit.
    offset: int = 0
    comparator: str | None = None
    log_number: int | None = None
    prev_log_number: int | None = None
    next_file_number: int | None = None
    last_sequence: int | None = None
    max_column_family: int | None = None
    min_log_number_to_keep: int | None = None
    #: Column family the edit applies to (0 when the record has no kColumnFamily).
    column_family: int = 0
    has_column_family: bool = False
    column_family_add: str | None = None
    column_family_drop: bool = False
    deleted_files: list[tuple[int, int]] = field(default_factory=list)
    new_files: list[FileMetaData] = field(default_factory=list)
    compact_cursors: list[tuple[int, bytes]] = field(default_factory=list)
    blob_file_additions: list[BlobFileAddition] = field(default_factory=list)
    blob_file_garbages: list[BlobFileGarbage] = field(default_factory=list)
    #: WAL additions as ``(tag, encoded body)``; WAL deletions likewise (kept for re-encoding).
    wal_edits: list[tuple[int, bytes]] = field(default_factory=list)
    db_id: str | None = None
    full_history_ts_low: bytes | None = None
    persist_user_defined_timestamps: bool | None = None
    #: Remaining entries of the atomic group this edit belongs to (kInAtomicGroup), if any.
    remaining_in_atomic_group: int | None = None
    #: Unknown safe-to-ignore tags as ``(tag, value)``.
    unknown_tags: list[tuple[int, bytes]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if value is None or value == [] or value is False or (name == "column_family" and not self.has_column_family):
                continue
            if name == "has_column_family":
                continue
            if name == "new_files":
                value = [f.to_json() for f in value]
            elif name == "compact_cursors":
                value = [{"level": level, "key": key.hex()} for level, key in value]
            elif name in ("unknown_tags", "wal_edits"):
                value = [{"tag": t, "value": v.hex()} for t, v in value]
            elif name in ("blob_file_additions", "blob_file_garbages"):
                value = [{k: (v.hex() if isinstance(v, bytes) else v) for k, v in b.__dict__.items()} for b in value]
            elif isinstance(value, bytes):
                value = value.hex()
            out[name] = value
        return out


# -- decoding ----------------------------------------------------------------------------------


class _EditDecoder:
    """Decodes the payload of one record; errors name the record offset and the byte inside it."""

    def __init__(self, payload: bytes, record_offset: int):
        self.reader = LittleEndianReader(payload)
        self.record_offset = record_offset

    def fail(self, field_name: str, expected, found, pos: int | None = None) -> ManifestFormatError:
        pos = self.reader.pos if pos is None else pos
        return ManifestFormatError(
            field_name, self.record_offset, expected, found, detail=f"byte {pos} of the VersionEdit record at offset {self.record_offset}"
        )

    def call(self, method, field_name: str, *args):
        """Run a reader method, turning its error into one naming the record."""
        pos = self.reader.pos
        try:
            return method(field_name, *args)
        except FormatError as exc:
            raise self.fail(field_name, exc.expected, exc.found, pos) from None

    def varint32(self, f: str) -> int:
        return self.call(self.reader.varint32, f)

    def varint64(self, f: str) -> int:
        return self.call(self.reader.varint64, f)

    def bytes_(self, f: str) -> bytes:
        return self.call(self.reader.length_prefixed, f)

    def text(self, f: str) -> str:
        return self.bytes_(f).decode("utf-8", errors="backslashreplace")

    def internal_key(self, f: str) -> bytes:
        pos = self.reader.pos
        key = self.bytes_(f)
        if len(key) < 8:
            raise self.fail(f, "an internal key of at least 8 bytes", f"{len(key)} bytes", pos)
        return key

    def level(self) -> int:
        pos = self.reader.pos
        level = self.varint32("level")
        # VersionEdit::GetLevel rejects levels >= 1 << 16 ... in practice num_levels is small;
        # RocksDB checks against the configured number of levels when applying, we bound loosely.
        if level >= 1 << 16:
            raise self.fail("level", "a level below 65536", level, pos)
        return level


def decode_version_edit(payload: bytes, record_offset: int = 0) -> VersionEdit:
    """Decode one VersionEdit from a MANIFEST record's payload.

    Raises :class:`ManifestFormatError` (offset = ``record_offset``) for an unknown tag without the
    safe-ignore bit, a truncated field, or an unknown forward-incompatible custom field.
    """
    d = _EditDecoder(payload, record_offset)
    r = d.reader
    edit = VersionEdit(offset=record_offset)
    while not r.at_end():
        tag_pos = r.pos
        tag = d.varint32("tag")
        if tag == Tag.COMPARATOR:
            edit.comparator = d.text("comparator")
        elif tag == Tag.LOG_NUMBER:
            edit.log_number = d.varint64("log number")
        elif tag == Tag.PREV_LOG_NUMBER:
            edit.prev_log_number = d.varint64("prev log number")
        elif tag == Tag.NEXT_FILE_NUMBER:
            edit.next_file_number = d.varint64("next file number")
        elif tag == Tag.LAST_SEQUENCE:
            edit.last_sequence = d.varint64("last sequence")
        elif tag == Tag.MAX_COLUMN_FAMILY:
            edit.max_column_family = d.varint32("max column family")
        elif tag == Tag.MIN_LOG_NUMBER_TO_KEEP:
            edit.min_log_number_to_keep = d.varint64("min log number to keep")
        elif tag == Tag.COMPACT_CURSOR:
            edit.compact_cursors.append((d.level(), d.internal_key("compact cursor")))
        elif tag == Tag.DELETED_FILE:
            edit.deleted_files.append((d.level(), d.varint64("deleted file number")))
        elif tag in (Tag.NEW_FILE, Tag.NEW_FILE2, Tag.NEW_FILE3, Tag.NEW_FILE4):
            edit.new_files.append(_decode_new_file(d, tag))
        elif tag == Tag.COLUMN_FAMILY:
            edit.column_family = d.varint32("column family")
            edit.has_column_family = True
        elif tag == Tag.COLUMN_FAMILY_ADD:
            edit.column_family_add = d.text("column family name")
        elif tag == Tag.COLUMN_FAMILY_DROP:
            edit.column_family_drop = True
        elif tag == Tag.IN_ATOMIC_GROUP:
            edit.remaining_in_atomic_group = d.varint32("remaining entries in atomic group")
        elif tag in (Tag.BLOB_FILE_ADDITION, Tag.BLOB_FILE_ADDITION_DEPRECATED):
            edit.blob_file_additions.append(
                BlobFileAddition(d.varint64("blob file number"), d.varint64("total blob count"), d.varint64("total blob bytes"),
                                 d.bytes_("blob checksum method"), d.bytes_("blob checksum value"), _blob_custom_fields(d))
            )
        elif tag in (Tag.BLOB_FILE_GARBAGE, Tag.BLOB_FILE_GARBAGE_DEPRECATED):
            edit.blob_file_garbages.append(
                BlobFileGarbage(d.varint64("blob file number"), d.varint64("garbage blob count"), d.varint64("garbage blob bytes"),
                                _blob_custom_fields(d))
            )
        elif tag == Tag.DB_ID:
            edit.db_id = d.text("db id")
        elif tag == Tag.WAL_ADDITION:
            # Old encoding, not length-prefixed (db/wal_edit.cc): number, then tag/value until tag 1.
            start = r.pos
            d.varint64("WAL number")
            while True:
                wal_tag = d.varint32("WAL addition tag")
                if wal_tag == 1:
                    break
                if wal_tag != 2:
                    raise d.fail("WAL addition tag", "1 (terminate) or 2 (synced size)", wal_tag)
                d.varint64("WAL synced size")
            edit.wal_edits.append((tag, bytes(r.data[start : r.pos])))
        elif tag == Tag.WAL_DELETION:
            start = r.pos
            d.varint64("WAL number")
            edit.wal_edits.append((tag, bytes(r.data[start : r.pos])))
        elif tag in (Tag.WAL_ADDITION2, Tag.WAL_DELETION2):
            edit.wal_edits.append((tag, d.bytes_("WAL edit")))
        elif tag == Tag.FULL_HISTORY_TS_LOW:
            edit.full_history_ts_low = d.bytes_("full history ts low")
        elif tag == Tag.PERSIST_USER_DEFINED_TIMESTAMPS:
            value = d.bytes_("persist user defined timestamps")
            edit.persist_user_defined_timestamps = value[:1] == b"\x01"
        elif tag & SAFE_IGNORE_TAG_MASK:
            edit.unknown_tags.append((tag, d.bytes_(f"safe-to-ignore tag {tag}")))
        else:
            raise d.fail("tag", "a known VersionEdit tag (or one with the safe-ignore bit 8192)", tag, tag_pos)
    return edit


def _decode_new_file(d: _EditDecoder, tag: int) -> FileMetaData:
    level = d.level()
    number = d.varint64("file number")
    path_id = d.varint32("path id") if tag == Tag.NEW_FILE3 else 0
    size = d.varint64("file size")
    smallest = d.internal_key("smallest key")
    largest = d.internal_key("largest key")
    meta = FileMetaData(level, number, size, smallest, largest, tag=tag, path_id=path_id)
    if tag == Tag.NEW_FILE:
        # leveldb's kNewFile has no seqnos; take them from the keys.
        meta.smallest_seqno = decode_internal_key(smallest).seqno
        meta.largest_seqno = decode_internal_key(largest).seqno
        return meta
    meta.smallest_seqno = d.varint64("smallest seqno")
    meta.largest_seqno = d.varint64("largest seqno")
    if tag != Tag.NEW_FILE4:
        return meta
    while True:
        custom_pos = d.reader.pos
        custom = d.varint32("new file custom tag")
        if custom == CustomTag.TERMINATE:
            return meta
        value = d.bytes_(f"new file custom field {custom}")
        _set_custom_field(d, meta, custom, value, custom_pos)


def _set_custom_field(d: _EditDecoder, meta: FileMetaData, custom: int, value: bytes, pos: int) -> None:
    """Store one kNewFile4 custom field (``VersionEdit::DecodeNewFile4From``)."""
    if custom in _VARINT_CUSTOM_FIELDS:
        setattr(meta, _VARINT_CUSTOM_FIELDS[custom], _field_varint(d, value, f"custom field {CustomTag(custom).name.lower()}", pos))
    elif custom in _BYTES_CUSTOM_FIELDS:
        setattr(meta, _BYTES_CUSTOM_FIELDS[custom], value)
    elif custom == CustomTag.FILE_CHECKSUM_FUNC_NAME:
        meta.file_checksum_func_name = value.decode("utf-8", errors="backslashreplace")
    elif custom == CustomTag.PATH_ID:
        if len(value) != 1:
            raise d.fail("custom field path_id", "1 byte", f"{len(value)} bytes", pos)
        meta.path_id = value[0]
    elif custom == CustomTag.NEED_COMPACTION:
        if len(value) != 1:
            raise d.fail("custom field need_compaction", "1 byte", f"{len(value)} bytes", pos)
        meta.need_compaction = value[0] == 1
    elif custom == CustomTag.MIN_LOG_NUMBER_TO_KEEP_HACK:
        if len(value) != 8:
            raise d.fail("custom field min_log_number_to_keep", "8 bytes (fixed64)", f"{len(value)} bytes", pos)
        meta.min_log_number_to_keep = int.from_bytes(value, "little")
    elif custom == CustomTag.TEMPERATURE:
        if len(value) != 1:
            raise d.fail("custom field temperature", "1 byte", f"{len(value)} bytes", pos)
        meta.temperature = value[0]
    elif custom == CustomTag.UNIQUE_ID:
        if len(value) != 16:
            raise d.fail("custom field unique_id", "16 bytes", f"{len(value)} bytes", pos)
        meta.unique_id = (int.from_bytes(value[:8], "little"), int.from_bytes(value[8:], "little"))
    elif custom == CustomTag.USER_DEFINED_TIMESTAMPS_PERSISTED:
        if len(value) != 1:
            raise d.fail("custom field user_defined_timestamps_persisted", "1 byte", f"{len(value)} bytes", pos)
        meta.user_defined_timestamps_persisted = value[0] == 1
    elif custom & NON_SAFE_IGNORE_CUSTOM_TAG_MASK:
        raise d.fail("new file custom tag", "a known tag, or an unknown one without bit 64 (safe to ignore)", custom, pos)
    else:
        meta.unknown_custom_fields.append((custom, value))


def _field_varint(d: _EditDecoder, value: bytes, field_name: str, pos: int) -> int:
    reader = LittleEndianReader(value)
    try:
        return reader.varint64(field_name)
    except FormatError as exc:
        raise d.fail(field_name, exc.expected, exc.found, pos) from None


def _blob_custom_fields(d: _EditDecoder) -> list[tuple[int, bytes]]:
    fields = []
    while True:
        pos = d.reader.pos
        tag = d.varint32("blob custom field tag")
        if tag == 1:
            return fields
        if tag & NON_SAFE_IGNORE_CUSTOM_TAG_MASK:
            raise d.fail("blob custom field tag", "a tag without bit 64 (forward incompatible)", tag, pos)
        fields.append((tag, d.bytes_("blob custom field")))


# -- encoding ----------------------------------------------------------------------------------


def encode_version_edit(edit: VersionEdit) -> bytes:
    """Encode ``edit`` as RocksDB does (``VersionEdit::EncodeTo``); inverse of :func:`decode_version_edit`."""
    out = bytearray()

    def tag(t: int) -> None:
        out.extend(encode_varint(t))

    if edit.db_id is not None:
        tag(Tag.DB_ID)
        out += length_prefixed(edit.db_id.encode())
    if edit.comparator is not None:
        tag(Tag.COMPARATOR)
        out += length_prefixed(edit.comparator.encode())
    for t, value in ((Tag.LOG_NUMBER, edit.log_number), (Tag.PREV_LOG_NUMBER, edit.prev_log_number),
                     (Tag.NEXT_FILE_NUMBER, edit.next_file_number), (Tag.MAX_COLUMN_FAMILY, edit.max_column_family),
                     (Tag.MIN_LOG_NUMBER_TO_KEEP, edit.min_log_number_to_keep), (Tag.LAST_SEQUENCE, edit.last_sequence)):
        if value is not None:
            tag(t)
            out += encode_varint(value)
    for level, key in edit.compact_cursors:
        tag(Tag.COMPACT_CURSOR)
        out += encode_varint(level) + length_prefixed(key)
    for level, number in edit.deleted_files:
        tag(Tag.DELETED_FILE)
        out += encode_varint(level) + encode_varint(number)
    for meta in edit.new_files:
        out += _encode_new_file(meta)
    for blob in edit.blob_file_additions:
        tag(Tag.BLOB_FILE_ADDITION)
        out += encode_varint(blob.number) + encode_varint(blob.total_blob_count) + encode_varint(blob.total_blob_bytes)
        out += length_prefixed(blob.checksum_method) + length_prefixed(blob.checksum_value)
        out += _encode_custom(blob.unknown_custom_fields)
    for garbage in edit.blob_file_garbages:
        tag(Tag.BLOB_FILE_GARBAGE)
        out += encode_varint(garbage.number) + encode_varint(garbage.garbage_blob_count) + encode_varint(garbage.garbage_blob_bytes)
        out += _encode_custom(garbage.unknown_custom_fields)
    for t, body in edit.wal_edits:
        tag(t)
        out += length_prefixed(body) if t in (Tag.WAL_ADDITION2, Tag.WAL_DELETION2) else body
    if edit.has_column_family or edit.column_family != 0:
        tag(Tag.COLUMN_FAMILY)
        out += encode_varint(edit.column_family)
    if edit.column_family_add is not None:
        tag(Tag.COLUMN_FAMILY_ADD)
        out += length_prefixed(edit.column_family_add.encode())
    if edit.column_family_drop:
        tag(Tag.COLUMN_FAMILY_DROP)
    if edit.remaining_in_atomic_group is not None:
        tag(Tag.IN_ATOMIC_GROUP)
        out += encode_varint(edit.remaining_in_atomic_group)
    if edit.full_history_ts_low is not None:
        tag(Tag.FULL_HISTORY_TS_LOW)
        out += length_prefixed(edit.full_history_ts_low)
    if edit.persist_user_defined_timestamps is not None:
        tag(Tag.PERSIST_USER_DEFINED_TIMESTAMPS)
        out += length_prefixed(b"\x01" if edit.persist_user_defined_timestamps else b"\x00")
    for t, body in edit.unknown_tags:
        tag(t)
        out += length_prefixed(body)
    return bytes(out)


def _encode_custom(fields: Iterable[tuple[int, bytes]]) -> bytes:
    out = bytearray()
    for t, value in fields:
        out += encode_varint(t) + length_prefixed(value)
    return bytes(out + encode_varint(CustomTag.TERMINATE))


def _encode_new_file(meta: FileMetaData) -> bytes:
    out = bytearray(encode_varint(meta.tag))
    out += encode_varint(meta.level) + encode_varint(meta.number)
    if meta.tag == Tag.NEW_FILE3:
        out += encode_varint(meta.path_id)
    out += encode_varint(meta.file_size) + length_prefixed(meta.smallest) + length_prefixed(meta.largest)
    if meta.tag == Tag.NEW_FILE:
        return bytes(out)
    out += encode_varint(meta.smallest_seqno) + encode_varint(meta.largest_seqno)
    if meta.tag != Tag.NEW_FILE4:
        return bytes(out)
    fields: list[tuple[int, bytes]] = []
    if meta.oldest_ancester_time is not None:
        fields.append((CustomTag.OLDEST_ANCESTER_TIME, encode_varint(meta.oldest_ancester_time)))
    if meta.file_creation_time is not None:
        fields.append((CustomTag.FILE_CREATION_TIME, encode_varint(meta.file_creation_time)))
    if meta.epoch_number is not None:
        fields.append((CustomTag.EPOCH_NUMBER, encode_varint(meta.epoch_number)))
    if meta.file_checksum is not None:
        fields.append((CustomTag.FILE_CHECKSUM, meta.file_checksum))
    if meta.file_checksum_func_name is not None:
        fields.append((CustomTag.FILE_CHECKSUM_FUNC_NAME, meta.file_checksum_func_name.encode()))
    if meta.path_id:
        fields.append((CustomTag.PATH_ID, bytes((meta.path_id,))))
    if meta.temperature is not None:
        fields.append((CustomTag.TEMPERATURE, bytes((meta.temperature,))))
    if meta.need_compaction:
        fields.append((CustomTag.NEED_COMPACTION, b"\x01"))
    if meta.min_log_number_to_keep is not None:
        fields.append((CustomTag.MIN_LOG_NUMBER_TO_KEEP_HACK, meta.min_log_number_to_keep.to_bytes(8, "little")))
    if meta.oldest_blob_file_number is not None:
        fields.append((CustomTag.OLDEST_BLOB_FILE_NUMBER, encode_varint(meta.oldest_blob_file_number)))
    if meta.min_timestamp is not None:
        fields.append((CustomTag.MIN_TIMESTAMP, meta.min_timestamp))
    if meta.max_timestamp is not None:
        fields.append((CustomTag.MAX_TIMESTAMP, meta.max_timestamp))
    if meta.unique_id is not None:
        fields.append((CustomTag.UNIQUE_ID, meta.unique_id[0].to_bytes(8, "little") + meta.unique_id[1].to_bytes(8, "little")))
    if meta.compensated_range_deletion_size is not None:
        fields.append((CustomTag.COMPENSATED_RANGE_DELETION_SIZE, encode_varint(meta.compensated_range_deletion_size)))
    if meta.tail_size is not None:
        fields.append((CustomTag.TAIL_SIZE, encode_varint(meta.tail_size)))
    if meta.user_defined_timestamps_persisted is not None:
        fields.append((CustomTag.USER_DEFINED_TIMESTAMPS_PERSISTED, b"\x01" if meta.user_defined_timestamps_persisted else b"\x00"))
    if meta.file_open_metadata is not None:
        fields.append((CustomTag.FILE_OPEN_METADATA, meta.file_open_metadata))
    fields += meta.unknown_custom_fields
    return bytes(out + _encode_custom(fields))


def encode_manifest(edits: Iterable[VersionEdit]) -> bytes:
    """A whole MANIFEST file holding ``edits`` (one log record each)."""
    return encode_log([encode_version_edit(e) for e in edits])


# -- reading and replay ------------------------------------------------------------------------


def iter_version_edits(source: RandomAccess, *, strict: bool = True, findings: list | None = None) -> Iterator[VersionEdit]:
    """Decode every VersionEdit of a MANIFEST.

    ``strict`` raises on the first corrupt record (RocksDB's behaviour when opening a DB). Otherwise
    log-level problems and undecodable edits are appended to ``findings`` and skipped.
    """
    reader = LogReader(source, strict=strict)
    for log_record in reader.records():
        if log_record.meta_type is not None:
            continue
        try:
            yield decode_version_edit(log_record.payload, log_record.offset)
        except ManifestFormatError as exc:
            if strict:
                raise
            if findings is not None:
                findings.append(Problem("bad_version_edit", exc.message, log_record.offset))
        finally:
            if findings is not None:
                while reader.findings:
                    findings.append(reader.findings.pop(0))
    if findings is not None:
        findings.extend(reader.findings)


def read_manifest(source: RandomAccess) -> list[VersionEdit]:
    """Every VersionEdit of a MANIFEST; raises on the first corrupt record."""
    return list(iter_version_edits(source))


@record
class ColumnFamilyVersion:
    """The live state of one column family after replay."""

    id: int
    name: str
    comparator: str | None = None
    log_number: int = 0
    #: Live files by file number.
    files: dict[int, FileMetaData] = field(default_factory=dict)

    def files_by_level(self) -> dict[int, list[FileMetaData]]:
        levels: dict[int, list[FileMetaData]] = {}
        for meta in sorted(self.files.values(), key=lambda m: (m.level, m.number)):
            levels.setdefault(meta.level, []).append(meta)
        return levels

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "comparator": self.comparator, "log_number": self.log_number,
            "files": [m.to_json() for m in sorted(self.files.values(), key=lambda m: (m.level, m.number))],
        }


@record
class LiveVersion:
    """Result of :func:`replay`: live column families and files, and the DB-wide counters."""

    column_families: dict[int, ColumnFamilyVersion] = field(default_factory=dict)
    dropped_column_families: dict[int, str] = field(default_factory=dict)
    log_number: int | None = None
    prev_log_number: int | None = None
    #: As recorded in the MANIFEST (RocksDB, once opened, hands out numbers from this value + 1).
    next_file_number: int | None = None
    last_sequence: int | None = None
    max_column_family: int = 0
    min_log_number_to_keep: int | None = None
    db_id: str | None = None
    edits_applied: int = 0
    findings: list[Problem] = field(default_factory=list)

    def live_files(self) -> list[tuple[ColumnFamilyVersion, FileMetaData]]:
        """Every live file with its column family, by column family id, level and number."""
        return [
            (cf, meta)
            for cf_id, cf in sorted(self.column_families.items())
            for meta in sorted(cf.files.values(), key=lambda m: (m.level, m.number))
        ]

    def column_family(self, name: str) -> ColumnFamilyVersion | None:
        return next((cf for cf in self.column_families.values() if cf.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "column_families": [cf.to_json() for _, cf in sorted(self.column_families.items())],
            "log_number": self.log_number, "prev_log_number": self.prev_log_number,
            "next_file_number": self.next_file_number, "last_sequence": self.last_sequence,
            "max_column_family": self.max_column_family, "min_log_number_to_keep": self.min_log_number_to_keep,
            "db_id": self.db_id, "edits_applied": self.edits_applied, "findings": [f.to_json() for f in self.findings],
        }


def replay(edits: Iterable[VersionEdit]) -> LiveVersion:
    """Apply VersionEdits in order, as RocksDB's ``VersionEditHandler`` does on DB open.

    Column family 0 ("default") exists from the start. Problems RocksDB would refuse to open with
    (an edit for an unknown column family, a column family added twice, deleting a file that is not
    live, adding a file twice) become :attr:`LiveVersion.findings` naming the record offset; the
    offending part of the edit is skipped. Edits of an atomic group that never completes are not
    applied (RocksDB ignores such a trailing group).
    """
    version = LiveVersion()
    version.column_families[0] = ColumnFamilyVersion(0, DEFAULT_COLUMN_FAMILY)
    group: list[VersionEdit] = []
    for edit in edits:
        if edit.remaining_in_atomic_group is not None:
            group.append(edit)
            if edit.remaining_in_atomic_group == 0:
                for member in group:
                    _apply(version, member)
                group = []
            continue
        if group:
            version.findings.append(Problem("incomplete_atomic_group", f"atomic group of {len(group)} edits is interrupted by a regular edit; group ignored",
                                                    group[0].offset))
            group = []
        _apply(version, edit)
    if group:
        version.findings.append(Problem("incomplete_atomic_group", f"MANIFEST ends inside an atomic group ({len(group)} edits); group ignored",
                                                group[0].offset))
    return version


def _apply(version: LiveVersion, edit: VersionEdit) -> None:
    def problem(kind: str, message: str) -> None:
        version.findings.append(Problem(kind, f"VersionEdit at offset {edit.offset}: {message}", edit.offset))

    version.edits_applied += 1
    for name in ("prev_log_number", "next_file_number", "last_sequence", "min_log_number_to_keep", "db_id"):
        value = getattr(edit, name)
        if value is not None:
            setattr(version, name, value)
    cf_id = edit.column_family
    # ColumnFamilySet::UpdateMaxColumnFamily keeps the maximum of recorded values and added ids.
    if edit.max_column_family is not None:
        version.max_column_family = max(version.max_column_family, edit.max_column_family)
    if edit.column_family_add is not None:
        if cf_id in version.column_families:
            problem("duplicate_column_family", f"column family {cf_id} ({edit.column_family_add!r}) is added twice")
            return
        version.column_families[cf_id] = ColumnFamilyVersion(cf_id, edit.column_family_add)
        version.max_column_family = max(version.max_column_family, cf_id)
    cf = version.column_families.get(cf_id)
    if cf is None:
        problem("unknown_column_family", f"edit references column family {cf_id}, which was never added or was dropped")
        return
    if edit.column_family_drop:
        version.dropped_column_families[cf_id] = cf.name
        del version.column_families[cf_id]
        return
    if edit.comparator is not None:
        cf.comparator = edit.comparator
    if edit.log_number is not None:
        cf.log_number = edit.log_number
        version.log_number = edit.log_number if version.log_number is None else max(version.log_number, edit.log_number)
    for level, number in edit.deleted_files:
        meta = cf.files.get(number)
        if meta is None or meta.level != level:
            where = "is not live" if meta is None else f"is on level {meta.level}"
            problem("delete_of_missing_file", f"deletes file {number} from level {level} of {cf.name!r}, but it {where}")
            continue
        del cf.files[number]
    for meta in edit.new_files:
        if meta.number in cf.files:
            problem("duplicate_file", f"adds file {meta.number} to {cf.name!r} twice")
        cf.files[meta.number] = meta
