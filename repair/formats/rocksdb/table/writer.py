"""Writer of block-based tables (``*.sst``) that FRocksDB 6.20 (Flink 1.x) and 8.10 (Flink 2.x) read.

The inverse of :mod:`repair.formats.rocksdb.table.sst`, after RocksDB's ``BlockBasedTableBuilder``
(``table/block_based/block_based_table_builder.cc``): sorted internal entries go into data blocks
(prefix-compressed keys, restart points every ``block_restart_interval`` entries), then the index
block (one entry per data block: the block's last internal key and its handle, delta-encoded from
format_version 4), an optional range-deletion block, the properties block, the metaindex and the
footer of the table's format_version. Every block gets its trailer (compression type, checksum of the table's checksum
type; from format_version 6 with the context of its offset). Data and index blocks are compressed with
the table's compression; range-deletion, properties and metaindex blocks are stored uncompressed, as
RocksDB stores them.

Index keys are full internal keys (``rocksdb.index.key.is.user.key`` = 0), which every format version
accepts. No filter, partitioned index or compression dictionary is written: a table without a filter
is read by RocksDB whatever the column family's filter policy (the filter only saves reads).

The properties say what RocksDB and Flink look at: column family id and name, comparator, merge
operator, prefix extractor, compression, and the counts recomputed from the entries written (entries,
deletions, merge operands, range deletions, raw key and value sizes, data blocks, data and index
sizes). The identity properties of a source table (:data:`CARRIED_PROPERTIES`: creating DB and
session, creation times ...) are carried over with ``TableOptions.properties``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from repair.formats.bytes.coding import encode_varint, zigzag_encode
from repair.formats.rocksdb.table.block import BLOCK_TRAILER_SIZE, BlockHandle, InternalKey, ValueType, encode_block_handle
from repair.formats.rocksdb.table.checksum import ChecksumType, buffer_checksum, context_modifier, stored_block_checksum
from repair.formats.rocksdb.table.compression import CompressionType, compress_block
from repair.formats.rocksdb.table.properties import TableProperties, encode_properties
from repair.formats.rocksdb.table.sst import BLOCK_BASED_MAGIC, LEGACY_BLOCK_BASED_MAGIC, Table

#: The ``rocksdb.compression`` property's text per compression type (``CompressionTypeToString``).
COMPRESSION_PROPERTY_NAMES = {
    CompressionType.NONE: "NoCompression",
    CompressionType.SNAPPY: "Snappy",
    CompressionType.ZLIB: "Zlib",
    CompressionType.BZIP2: "BZip2",
    CompressionType.LZ4: "LZ4",
    CompressionType.LZ4HC: "LZ4HC",
    CompressionType.ZSTD: "ZSTD",
}

#: Properties of a source table that a rewrite of it keeps: what it is (comparator, merge operator,
#: prefix extractor, collectors, compression options, filtering flags) and where and when it was made
#: (the creating DB, session and host, original file number: RocksDB's unique id of the file, which
#: a MANIFEST built from the rewritten file records again). Every other property follows from the
#: entries written and is computed.
CARRIED_PROPERTIES = frozenset({
    "rocksdb.comparator", "rocksdb.merge.operator", "rocksdb.prefix.extractor.name", "rocksdb.property.collectors",
    "rocksdb.compression_options", "rocksdb.creation.time", "rocksdb.oldest.key.time", "rocksdb.newest.key.time",
    "rocksdb.file.creation.time", "rocksdb.original.file.number", "rocksdb.creating.db.identity",
    "rocksdb.creating.session.identity", "rocksdb.creating.host.identity",
    "rocksdb.block.based.table.whole.key.filtering", "rocksdb.block.based.table.prefix.filtering",
    "rocksdb.user.defined.timestamps.persisted",
})

#: Value types counted as deletions in the properties (``rocksdb.deleted.keys``): deletion, single
#: deletion, deletion with timestamp; range deletions are counted as they are added.
_DELETION_TYPES = frozenset({ValueType.DELETION, ValueType.SINGLE_DELETION, ValueType.DELETION_WITH_TIMESTAMP})


class BlockBuilder:
    """Builds one block: prefix-compressed entries, restart array, restart count (``block_builder.cc``)."""

    def __init__(self, restart_interval: int = 16, *, value_delta_encoding: bool = False):
        self.restart_interval = restart_interval
        self.value_delta_encoding = value_delta_encoding
        self.buffer = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""
        self.empty = True

    def add(self, key: bytes, value: bytes, *, delta_value: bytes | None = None) -> None:
        """Append one entry; ``delta_value`` replaces ``value`` inside a restart interval (delta-encoded index)."""
        shared = 0
        if self.counter >= self.restart_interval:
            self.restarts.append(len(self.buffer))
            self.counter = 0
        elif not self.empty:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        if self.value_delta_encoding:
            self.buffer += encode_varint(shared) + encode_varint(len(key) - shared)
        else:
            self.buffer += encode_varint(shared) + encode_varint(len(key) - shared) + encode_varint(len(value))
        self.buffer += key[shared:]
        # Delta-encoded index values: the full handle at restarts, the size delta otherwise.
        self.buffer += delta_value if (shared and self.value_delta_encoding and delta_value is not None) else value
        self.last_key = key
        self.counter += 1
        self.empty = False

    def finish(self) -> bytes:
        out = bytearray(self.buffer)
        for restart in self.restarts:
            out += restart.to_bytes(4, "little")
        out += len(self.restarts).to_bytes(4, "little")
        return bytes(out)

    def size_estimate(self) -> int:
        return len(self.buffer) + 4 * len(self.restarts) + 4


@dataclass
class TableOptions:
    """How a table is written: its format (as the source table's, to be read where it was) and identity."""

    format_version: int = 5
    checksum_type: int = ChecksumType.CRC32C
    compression: int = CompressionType.NONE
    block_size: int = 4096
    block_restart_interval: int = 16
    index_block_restart_interval: int = 1
    column_family_id: int = 0
    column_family_name: str = "default"
    #: From format_version 6: the per-file seed of the blocks' context checksums (non-zero).
    base_context_checksum: int = 0x5EED1234
    #: Properties carried over from a source table (name -> value); only :data:`CARRIED_PROPERTIES` are written.
    properties: dict[str, int | str | bytes] = field(default_factory=dict)


class _FileWriter:
    def __init__(self, options: TableOptions):
        self.options = options
        self.out = bytearray()

    def write_block(self, contents: bytes, compression: int = CompressionType.NONE) -> BlockHandle:
        opts = self.options
        payload = compress_block(compression, contents, opts.format_version) if compression else contents
        handle = BlockHandle(len(self.out), len(payload))
        base = opts.base_context_checksum if opts.format_version >= 6 else 0
        checksum = stored_block_checksum(opts.checksum_type, payload, compression, base, handle.offset)
        self.out += payload + bytes((compression,)) + checksum.to_bytes(4, "little")
        return handle


def internal_key_order(key: InternalKey) -> tuple[bytes, int]:
    """Sort key of RocksDB's internal key comparator (bytewise user keys): user key ascending, then
    ``(seqno << 8 | type)`` descending."""
    return key.user_key, -((key.seqno << 8) | key.value_type)


def check_sorted(keys: Iterable[InternalKey], what: str = "entries") -> None:
    """Raise ``ValueError`` unless ``keys`` are strictly increasing in internal key order."""
    previous = None
    for index, key in enumerate(keys):
        order = internal_key_order(key)
        if previous is not None and order <= previous:
            raise ValueError(f"{what} must be sorted by internal key with no duplicates: entry {index} ({key}) is not after the one before it")
        previous = order


def build_table(
    entries: list[tuple[InternalKey, bytes]],
    options: TableOptions | None = None,
    *,
    range_tombstones: list[tuple[InternalKey, bytes]] = (),
    extra_properties: dict[str, int | str | bytes] | None = None,
    allow_unsorted: bool = False,
) -> bytes:
    """Encode a table holding ``entries`` (internal keys in internal key order, with their values) and
    ``range_tombstones`` (``(start internal key of type 0xF, end user key)``).

    Range tombstones are kept in the order given (RocksDB reads the whole block and fragments them).
    ``extra_properties`` override every property, computed ones included, and ``allow_unsorted`` writes
    entries out of order (both for tests of bad tables only).
    """
    opts = options or TableOptions()
    fv = opts.format_version
    if fv == 0 and opts.checksum_type != ChecksumType.CRC32C:
        raise ValueError("format_version 0 implies CRC32C checksums")
    if not allow_unsorted:
        check_sorted((key for key, _ in entries), "entries")
    writer = _FileWriter(opts)
    delta_index = fv >= 4
    index = BlockBuilder(opts.index_block_restart_interval, value_delta_encoding=delta_index)
    block = BlockBuilder(opts.block_restart_interval)
    previous_handle: BlockHandle | None = None
    raw_key_size = raw_value_size = num_blocks = 0
    deletions = merges = 0

    def flush(last_key: bytes) -> None:
        nonlocal block, previous_handle, num_blocks
        handle = writer.write_block(block.finish(), opts.compression)
        delta = None
        if previous_handle is not None:
            delta = encode_varint(zigzag_encode(handle.size - previous_handle.size))
        index.add(last_key, encode_block_handle(handle), delta_value=delta)
        previous_handle = handle
        num_blocks += 1
        block = BlockBuilder(opts.block_restart_interval)

    last = b""
    for key, value in entries:
        encoded = key.encode()
        if not block.empty and block.size_estimate() + len(encoded) + len(value) > opts.block_size:
            flush(last)
        block.add(encoded, value)
        last = encoded
        raw_key_size += len(encoded)
        raw_value_size += len(value)
        deletions += key.value_type in _DELETION_TYPES
        merges += key.value_type == ValueType.MERGE
    if not block.empty:
        flush(last)
    data_size = len(writer.out)
    index_contents = index.finish()
    index_handle = writer.write_block(index_contents, opts.compression)
    meta: dict[str, BlockHandle] = {}
    if range_tombstones:
        range_block = BlockBuilder(1)
        for start, end in range_tombstones:
            encoded = start.encode()
            range_block.add(encoded, end)
            raw_key_size += len(encoded)
            raw_value_size += len(end)
        meta["rocksdb.range_del"] = writer.write_block(range_block.finish())
    props = {name: value for name, value in opts.properties.items() if name in CARRIED_PROPERTIES}
    props.update({
        "rocksdb.data.size": data_size,
        "rocksdb.index.size": len(index_contents),
        "rocksdb.filter.size": 0,
        "rocksdb.raw.key.size": raw_key_size,
        "rocksdb.raw.value.size": raw_value_size,
        "rocksdb.num.data.blocks": num_blocks,
        "rocksdb.num.entries": len(entries) + len(range_tombstones),
        "rocksdb.deleted.keys": deletions + len(range_tombstones),
        "rocksdb.merge.operands": merges,
        "rocksdb.num.range-deletions": len(range_tombstones),
        "rocksdb.format.version": 0,
        "rocksdb.fixed.key.length": 0,
        "rocksdb.column.family.id": opts.column_family_id,
        "rocksdb.column.family.name": opts.column_family_name,
        "rocksdb.compression": COMPRESSION_PROPERTY_NAMES.get(opts.compression, CompressionType(opts.compression).name.title()),
        "rocksdb.index.key.is.user.key": 0,
        "rocksdb.index.value.is.delta.encoded": int(delta_index),
        "rocksdb.block.based.table.index.type": 0,
    })
    for name, default in (("rocksdb.comparator", "leveldb.BytewiseComparator"), ("rocksdb.merge.operator", "nullptr"),
                          ("rocksdb.prefix.extractor.name", "nullptr"), ("rocksdb.property.collectors", "[]"),
                          ("rocksdb.creation.time", 0), ("rocksdb.oldest.key.time", 0)):
        props.setdefault(name, default)
    props.update(extra_properties or {})
    properties_block = BlockBuilder(1 << 30)
    for name, value in encode_properties(props):
        properties_block.add(name, value)
    meta["rocksdb.properties"] = writer.write_block(properties_block.finish())
    if fv >= 6:
        meta["rocksdb.index"] = index_handle
    metaindex = BlockBuilder(1)
    for name in sorted(meta):
        metaindex.add(name.encode(), encode_block_handle(meta[name]))
    metaindex_handle = writer.write_block(metaindex.finish())
    writer.out += encode_footer(opts, metaindex_handle, index_handle, len(writer.out))
    return bytes(writer.out)


def encode_footer(opts: TableOptions, metaindex: BlockHandle, index: BlockHandle, footer_offset: int) -> bytes:
    """The footer of ``opts.format_version`` (see :mod:`repair.formats.rocksdb.table.sst` for the layouts)."""
    fv = opts.format_version
    if fv >= 6:
        if metaindex.offset + metaindex.size + BLOCK_TRAILER_SIZE != footer_offset:
            raise ValueError("from format_version 6 the metaindex ends right before the footer")
        body = bytearray(bytes((opts.checksum_type,)) + b"\x3e\x00\x7a\x00" + b"\0\0\0\0")
        body += opts.base_context_checksum.to_bytes(4, "little") + metaindex.size.to_bytes(4, "little") + b"\0" * 24
        body += fv.to_bytes(4, "little") + BLOCK_BASED_MAGIC.to_bytes(8, "little")
        if opts.checksum_type != ChecksumType.NONE:
            checksum = (buffer_checksum(opts.checksum_type, body) + context_modifier(opts.base_context_checksum, footer_offset)) & 0xFFFFFFFF
            body[5:9] = checksum.to_bytes(4, "little")
        return bytes(body)
    handles = encode_block_handle(metaindex) + encode_block_handle(index)
    handles += b"\0" * (40 - len(handles))
    if fv == 0:
        return handles + LEGACY_BLOCK_BASED_MAGIC.to_bytes(8, "little")
    return bytes((opts.checksum_type,)) + handles + fv.to_bytes(4, "little") + BLOCK_BASED_MAGIC.to_bytes(8, "little")


def carried_properties(properties: TableProperties | None) -> dict[str, bytes]:
    """The properties of a source table a rewrite of it keeps (:data:`CARRIED_PROPERTIES`), as stored."""
    if properties is None:
        return {}
    return {name: value for name, value in properties.raw.items() if name in CARRIED_PROPERTIES}


def configured_compression(properties: TableProperties | None) -> int | None:
    """The compression a table was written with, from its ``rocksdb.compression`` property (its data
    blocks may still be stored uncompressed: RocksDB keeps a block uncompressed when compressing saves
    too little); ``None`` when the property is absent or unknown."""
    if properties is None or properties.compression is None:
        return None
    by_name = {name.lower(): kind for kind, name in COMPRESSION_PROPERTY_NAMES.items()}
    return by_name.get(properties.compression.lower())


def rewrite_options(table: Table, *, compression: int | None = None, column_family: tuple[int, str] | None = None) -> TableOptions:
    """Options writing a table as ``table`` was written: its format_version, checksum type and context
    seed, its compression, its column family and carried properties.

    ``compression`` (default: :func:`configured_compression`) and ``column_family`` (id, name) are
    required when ``table`` has no readable properties.
    """
    props = table.properties
    if column_family is None:
        if props is None or props.column_family_id is None or props.column_family_name is None:
            raise ValueError("the table's column family is unknown (no readable properties): give column_family")
        column_family = (props.column_family_id, props.column_family_name)
    if compression is None:
        compression = configured_compression(props)
        if compression is None:
            raise ValueError("the table's compression is unknown (no readable properties): give compression")
    footer = table.footer
    return TableOptions(
        format_version=footer.format_version,
        checksum_type=footer.checksum_type,
        compression=compression,
        column_family_id=column_family[0],
        column_family_name=column_family[1],
        base_context_checksum=footer.base_context_checksum or TableOptions.base_context_checksum,
        properties=carried_properties(props),
    )
