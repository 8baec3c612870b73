"""The properties block of an SST (``rocksdb.properties``): decoded, typed, unknown ones kept raw.

The block is an ordinary block of name -> value entries sorted by name and never compressed.
Built-in numeric properties are varint64, strings are raw bytes (RocksDB ``table/meta_blocks.cc``,
``PropertyBlockBuilder``; names in ``table/table_properties.cc``). Collector-supplied properties
keep the collector's encoding; the block-based table factory's index type is a fixed32 and
SstFileWriter's ``rocksdb.external_sst_file.*`` are fixed32/fixed64.

Like RocksDB (``ReadTablePropertiesHelper``), a numeric property whose value is not a valid varint
does not fail the whole block: it is kept raw and listed in :attr:`TableProperties.malformed`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from repair.errors import FormatError
from repair.formats.bytes.coding import decode_varint64
from repair.formats.records import record

#: Built-in properties stored as varint64, by name -> attribute of :class:`TableProperties`.
NUMERIC_PROPERTIES: dict[str, str] = {
    "rocksdb.data.size": "data_size",
    "rocksdb.index.size": "index_size",
    "rocksdb.index.partitions": "index_partitions",
    "rocksdb.top-level.index.size": "top_level_index_size",
    "rocksdb.index.key.is.user.key": "index_key_is_user_key",
    "rocksdb.index.value.is.delta.encoded": "index_value_is_delta_encoded",
    "rocksdb.udi.is.primary.index": "udi_is_primary_index",
    "rocksdb.filter.size": "filter_size",
    "rocksdb.raw.key.size": "raw_key_size",
    "rocksdb.raw.value.size": "raw_value_size",
    "rocksdb.num.data.blocks": "num_data_blocks",
    "rocksdb.num.data.blocks.compression.rejected": "num_data_blocks_compression_rejected",
    "rocksdb.num.data.blocks.compression.bypassed": "num_data_blocks_compression_bypassed",
    "rocksdb.num.uniform.blocks": "num_uniform_blocks",
    "rocksdb.num.entries": "num_entries",
    "rocksdb.num.filter_entries": "num_filter_entries",
    "rocksdb.deleted.keys": "num_deletions",
    "rocksdb.merge.operands": "num_merge_operands",
    "rocksdb.num.range-deletions": "num_range_deletions",
    "rocksdb.format.version": "format_version",
    "rocksdb.fixed.key.length": "fixed_key_length",
    "rocksdb.column.family.id": "column_family_id",
    "rocksdb.creation.time": "creation_time",
    "rocksdb.oldest.key.time": "oldest_key_time",
    "rocksdb.newest.key.time": "newest_key_time",
    "rocksdb.file.creation.time": "file_creation_time",
    "rocksdb.sample_for_compression.slow.data.size": "slow_compression_estimated_data_size",
    "rocksdb.sample_for_compression.fast.data.size": "fast_compression_estimated_data_size",
    "rocksdb.original.file.number": "orig_file_number",
    "rocksdb.tail.start.offset": "tail_start_offset",
    "rocksdb.user.defined.timestamps.persisted": "user_defined_timestamps_persisted",
    "rocksdb.key.largest.seqno": "key_largest_seqno",
    "rocksdb.key.smallest.seqno": "key_smallest_seqno",
    "rocksdb.data.block.restart.interval": "data_block_restart_interval",
    "rocksdb.index.block.restart.interval": "index_block_restart_interval",
    "rocksdb.separate.key.value.in.data.block": "separate_key_value_in_data_block",
}

#: Built-in properties stored as raw strings.
STRING_PROPERTIES: dict[str, str] = {
    "rocksdb.column.family.name": "column_family_name",
    "rocksdb.comparator": "comparator",
    "rocksdb.merge.operator": "merge_operator",
    "rocksdb.prefix.extractor.name": "prefix_extractor",
    "rocksdb.property.collectors": "property_collectors",
    "rocksdb.compression": "compression",
    "rocksdb.compression_options": "compression_options",
    "rocksdb.filter.policy": "filter_policy",
    "rocksdb.creating.db.identity": "db_id",
    "rocksdb.creating.session.identity": "db_session_id",
    "rocksdb.creating.host.identity": "db_host_id",
    "rocksdb.seqno.time.map": "seqno_to_time_mapping",
    # BlockBasedTablePropertiesCollector: ASCII "1" or "0"
    "rocksdb.block.based.table.whole.key.filtering": "whole_key_filtering",
    "rocksdb.block.based.table.prefix.filtering": "prefix_filtering",
}

#: Collector properties with fixed-width little-endian values: name -> (attribute, width).
FIXED_PROPERTIES: dict[str, tuple[str, int]] = {
    # BlockBasedTablePropertiesCollector (table/block_based/block_based_table_builder.cc)
    "rocksdb.block.based.table.index.type": ("index_type", 4),
    # SstFileWriter (table/sst_file_writer_collectors.h)
    "rocksdb.external_sst_file.version": ("external_sst_file_version", 4),
    "rocksdb.external_sst_file.global_seqno": ("external_sst_file_global_seqno", 8),
}

#: ``rocksdb.column.family.id`` of files written without a column family (SstFileWriter).
UNKNOWN_COLUMN_FAMILY_ID = 0x7FFFFFFF

#: Binary properties that are not text (kept as bytes, shown as hex).
_BINARY_PROPERTIES = {"rocksdb.seqno.time.map"}


@record
class TableProperties:
    """Decoded table properties. ``None`` means the property is absent from the file."""

    # numeric
    data_size: int | None = None
    index_size: int | None = None
    index_partitions: int | None = None
    top_level_index_size: int | None = None
    index_key_is_user_key: int | None = None
    index_value_is_delta_encoded: int | None = None
    udi_is_primary_index: int | None = None
    filter_size: int | None = None
    raw_key_size: int | None = None
    raw_value_size: int | None = None
    num_data_blocks: int | None = None
    num_data_blocks_compression_rejected: int | None = None
    num_data_blocks_compression_bypassed: int | None = None
    num_uniform_blocks: int | None = None
    num_entries: int | None = None
    num_filter_entries: int | None = None
    num_deletions: int | None = None
    num_merge_operands: int | None = None
    num_range_deletions: int | None = None
    format_version: int | None = None
    fixed_key_length: int | None = None
    column_family_id: int | None = None
    creation_time: int | None = None
    oldest_key_time: int | None = None
    newest_key_time: int | None = None
    file_creation_time: int | None = None
    slow_compression_estimated_data_size: int | None = None
    fast_compression_estimated_data_size: int | None = None
    orig_file_number: int | None = None
    tail_start_offset: int | None = None
    user_defined_timestamps_persisted: int | None = None
    key_largest_seqno: int | None = None
    key_smallest_seqno: int | None = None
    data_block_restart_interval: int | None = None
    index_block_restart_interval: int | None = None
    separate_key_value_in_data_block: int | None = None
    # strings
    column_family_name: str | None = None
    comparator: str | None = None
    merge_operator: str | None = None
    prefix_extractor: str | None = None
    property_collectors: str | None = None
    compression: str | None = None
    compression_options: str | None = None
    filter_policy: str | None = None
    db_id: str | None = None
    db_session_id: str | None = None
    db_host_id: str | None = None
    #: ``rocksdb.seqno.time.map`` as hex (a binary delta-encoded list, kept undecoded).
    seqno_to_time_mapping: str | None = None
    whole_key_filtering: str | None = None
    prefix_filtering: str | None = None
    # fixed-width collector properties
    index_type: int | None = None
    external_sst_file_version: int | None = None
    external_sst_file_global_seqno: int | None = None
    #: Every property as stored (name -> raw value bytes), known or not.
    raw: dict[str, bytes] = field(default_factory=dict)
    #: Names of properties that are not in the tables above (user collectors, newer RocksDB).
    unknown: list[str] = field(default_factory=list)
    #: ``(name, reason)`` of known properties whose value could not be decoded.
    malformed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def column_family_is_unknown(self) -> bool:
        """True for files written outside a column family (SstFileWriter): id 0x7FFFFFFF."""
        return self.column_family_id == UNKNOWN_COLUMN_FAMILY_ID

    def to_json(self) -> dict[str, Any]:
        """Known properties that are present, plus unknown ones as hex under ``"unknown"``."""
        out: dict[str, Any] = {}
        for attr in list(NUMERIC_PROPERTIES.values()) + list(STRING_PROPERTIES.values()):
            value = getattr(self, attr)
            if value is not None:
                out[attr] = value
        for attr, _ in FIXED_PROPERTIES.values():
            value = getattr(self, attr)
            if value is not None:
                out[attr] = value
        if self.unknown:
            out["unknown"] = {name: self.raw[name].hex() for name in self.unknown}
        if self.malformed:
            out["malformed"] = [{"name": n, "reason": r} for n, r in self.malformed]
        return out


def decode_properties(items, offset: int = 0) -> TableProperties:
    """Build :class:`TableProperties` from ``(name_bytes, value_bytes)`` pairs of the block.

    ``offset`` is the properties block's file offset (for :class:`FormatError` positions).
    """
    props = TableProperties()
    for raw_name, value in items:
        name = bytes(raw_name).decode("utf-8", errors="backslashreplace")
        value = bytes(value)
        props.raw[name] = value
        if name in NUMERIC_PROPERTIES:
            try:
                number, end = decode_varint64(value, 0, len(value), name, offset)
            except FormatError as exc:
                props.malformed.append((name, f"not a varint64: {exc.message}"))
                continue
            if end != len(value):
                props.malformed.append((name, f"{len(value) - end} bytes after the varint64"))
            setattr(props, NUMERIC_PROPERTIES[name], number)
        elif name in STRING_PROPERTIES:
            text = value.hex() if name in _BINARY_PROPERTIES else value.decode("utf-8", errors="backslashreplace")
            setattr(props, STRING_PROPERTIES[name], text)
        elif name in FIXED_PROPERTIES:
            attr, width = FIXED_PROPERTIES[name]
            if len(value) != width:
                props.malformed.append((name, f"expected {width} bytes, found {len(value)}"))
                continue
            setattr(props, attr, int.from_bytes(value, "little"))
        else:
            props.unknown.append(name)
    return props


def encode_properties(values: dict[str, int | str | bytes]) -> list[tuple[bytes, bytes]]:
    """Encode name -> value into sorted block entries (numbers as varint64, text as UTF-8).

    The inverse of :func:`decode_properties` (the table writer).
    """
    from repair.formats.bytes.coding import encode_varint

    entries = []
    for name in sorted(values):
        value = values[name]
        if name in FIXED_PROPERTIES:
            raw = int(value).to_bytes(FIXED_PROPERTIES[name][1], "little")
        elif isinstance(value, int):
            raw = encode_varint(value)
        elif isinstance(value, str):
            raw = value.encode("utf-8")
        else:
            raw = bytes(value)
        entries.append((name.encode(), raw))
    return entries
