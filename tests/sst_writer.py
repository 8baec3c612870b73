"""A small writer of block-based tables, for corner-case tests and future repair tools.

It writes what :mod:`repair.formats.rocksdb.table.sst` reads, in every format version 0-6: data blocks with
restart points, a binary-search index (delta-encoded values from format_version 4), an optional
range-deletion block, a properties block, the metaindex and the footer, with any checksum type and
compression. Index keys are full internal keys (``rocksdb.index.key.is.user.key`` = 0), which every
format version accepts. Filters, partitioned indexes and dictionaries are not written.
"""

from __future__ import annotations

from dataclasses import dataclass

from repair.formats.bytes.coding import encode_varint, zigzag_encode
from repair.formats.rocksdb.table.block import BLOCK_TRAILER_SIZE, BlockHandle, InternalKey, encode_block_handle
from repair.formats.rocksdb.table.checksum import ChecksumType, buffer_checksum, context_modifier, stored_block_checksum
from repair.formats.rocksdb.table.compression import CompressionType, compress_block
from repair.formats.rocksdb.table.properties import encode_properties
from repair.formats.rocksdb.table.sst import BLOCK_BASED_MAGIC, LEGACY_BLOCK_BASED_MAGIC


class BlockBuilder:
    """Builds one block: prefix-compressed entries, restart array, footer (``block_builder.cc``)."""

    def __init__(self, restart_interval: int = 16, *, value_delta_encoding: bool = False):
        self.restart_interval = restart_interval
        self.value_delta_encoding = value_delta_encoding
        self.buffer = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""
        self.empty = True

    def add(self, key: bytes, value: bytes, *, delta_value: bytes | None = None) -> None:
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
        # Delta-encoded index values: full handle at restarts, size delta otherwise.
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
    format_version: int = 5
    checksum_type: int = ChecksumType.CRC32C
    compression: int = CompressionType.NONE
    block_size: int = 4096
    block_restart_interval: int = 16
    index_block_restart_interval: int = 1
    column_family_id: int = 0
    column_family_name: str = "default"
    base_context_checksum: int = 0x5EED1234


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


def build_table(
    entries: list[tuple[InternalKey, bytes]],
    options: TableOptions | None = None,
    *,
    range_tombstones: list[tuple[InternalKey, bytes]] = (),
    extra_properties: dict[str, int | str | bytes] | None = None,
) -> bytes:
    """Encode a table holding ``entries`` (sorted internal keys with values) and range tombstones."""
    opts = options or TableOptions()
    fv = opts.format_version
    if fv == 0 and opts.checksum_type != ChecksumType.CRC32C:
        raise ValueError("format_version 0 implies CRC32C checksums")
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
        # TableProperties counts deletions of every kind (range deletions too) and merge operands.
        deletions += key.value_type in (0x0, 0x7, 0x14)
        merges += key.value_type == 0x2
    if not block.empty:
        flush(last)
    data_size = len(writer.out)
    index_contents = index.finish()
    index_handle = writer.write_block(index_contents, opts.compression)
    meta: dict[str, BlockHandle] = {}
    if range_tombstones:
        range_block = BlockBuilder(1)
        for start, end in range_tombstones:
            range_block.add(start.encode(), end)
        meta["rocksdb.range_del"] = writer.write_block(range_block.finish())
    props = {
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
        "rocksdb.comparator": "leveldb.BytewiseComparator",
        "rocksdb.merge.operator": "nullptr",
        "rocksdb.prefix.extractor.name": "nullptr",
        "rocksdb.property.collectors": "[]",
        "rocksdb.compression": CompressionType(opts.compression).name.title() if opts.compression else "NoCompression",
        "rocksdb.index.key.is.user.key": 0,
        "rocksdb.index.value.is.delta.encoded": int(delta_index),
        "rocksdb.block.based.table.index.type": 0,
        "rocksdb.creation.time": 0,
        "rocksdb.oldest.key.time": 0,
    }
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
        assert metaindex.offset + metaindex.size + BLOCK_TRAILER_SIZE == footer_offset
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
