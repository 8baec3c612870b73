"""Reader and verifier of RocksDB block-based tables (``*.sst``), format versions 0 to 7.

File layout (RocksDB ``table/block_based/block_based_table_builder.cc``, ``Finish``): data blocks,
filter block(s), index block(s), compression dictionary, range-deletion block, properties block,
metaindex block, footer. Every block is followed by a 5-byte trailer (compression type, checksum).

The footer (``table/format.cc``, ``Footer::DecodeFrom``) is the last 53 bytes (48 for the legacy
format_version 0 footer):

* legacy (magic ``0xdb4775248b80fb57``): metaindex handle, index handle, zero padding to 40 bytes,
  magic; CRC32C checksums are implied.
* format_version 1-5: checksum type (1 byte), metaindex and index handles padded to 40 bytes,
  format_version (fixed32), magic ``0x88e241b785f4cff7``.
* format_version >= 6: checksum type, extended magic ``3e 00 7a 00``, footer checksum (fixed32,
  computed with that field zeroed, plus the context modifier of the footer offset),
  ``base_context_checksum`` (fixed32, non-zero), metaindex size (fixed32; the metaindex ends right
  before the footer), 16 ignored bytes, 8 reserved bytes that must be zero, format_version, magic.
  The index handle moves into the metaindex under ``rocksdb.index``.
  format_version 7 (RocksDB 10.4+) only changes the ``rocksdb.compression`` property's format.

:func:`open_table` decodes the footer, metaindex, properties and top-level index and raises a
:class:`~repair.formats.rocksdb.table.block.TableFormatError` when the table cannot be opened.
:func:`verify_table` never raises for bad bytes: it returns a :class:`VerifyReport` of findings.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from bisect import bisect_right
from dataclasses import field
from itertools import islice, repeat
from operator import add, gt, lt, sub
from typing import Any, Callable, Iterator, NamedTuple

import cramjam

from repair.errors import FormatError, TruncatedError
from repair.findings import Problem
from repair.formats.bytes.coding import U32, U64
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.formats.records import record
from repair.formats.rocksdb.table.block import (
    BLOCK_TRAILER_SIZE,
    BlockHandle,
    BlockReader,
    TableFormatError,
    ValueType,
    bulk_index_arrays,
    decode_block_handle,
)
from repair.formats.rocksdb.table.checksum import (
    ChecksumType,
    block_checksum,
    buffer_checksum,
    context_modifier,
    mismatched_blocks,
)
from repair.formats.rocksdb.table.compression import (
    DEFAULT_MAX_BLOCK_SIZE,
    CompressionType,
    DecompressionError,
    UnsupportedCompressionError,
    compression_name,
    decompress_block,
)
from repair.formats.rocksdb.table.properties import TableProperties, decode_properties

BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
LEGACY_BLOCK_BASED_MAGIC = 0xDB4775248B80FB57
PLAIN_TABLE_MAGIC = 0x8242229663BF9564
LEGACY_PLAIN_TABLE_MAGIC = 0x4F3418EB7A8F13B8
CUCKOO_TABLE_MAGIC = 0x926789D0C5F17873
_OTHER_TABLE_MAGICS = {
    PLAIN_TABLE_MAGIC: "a plain table",
    LEGACY_PLAIN_TABLE_MAGIC: "a legacy plain table",
    CUCKOO_TABLE_MAGIC: "a cuckoo table",
}

LEGACY_FOOTER_SIZE = 48
FOOTER_SIZE = 53
LATEST_FORMAT_VERSION = 7
_EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"

#: Default size of the sequential reads of :meth:`Table.verify`, unless the source prefers another
#: (``preferred_read_size``: local files read faster in 1 MiB pieces, which stay in the CPU cache
#: while their blocks are checked; object stores want large ranged reads).
DEFAULT_CHUNK_SIZE = 16 << 20
#: Initial size of the buffer Snappy blocks are decompressed into while verifying (grows as needed).
_SNAPPY_SCRATCH_SIZE = 1 << 20
#: Use the fast paths of verification (index decoding, block loop). The general paths give the same
#: results; tests switch this off to compare.
_FAST_PATHS = True


class IndexType(enum.IntEnum):
    """``BlockBasedTableOptions::IndexType`` (property ``rocksdb.block.based.table.index.type``)."""

    BINARY_SEARCH = 0
    HASH_SEARCH = 1
    TWO_LEVEL_INDEX_SEARCH = 2
    BINARY_SEARCH_WITH_FIRST_KEY = 3


class BlockKind(str, enum.Enum):
    """What a block of the table holds."""

    DATA = "data"
    INDEX = "index"
    INDEX_PARTITION = "index_partition"
    FILTER = "filter"
    FILTER_INDEX = "filter_index"
    FILTER_PARTITION = "filter_partition"
    COMPRESSION_DICT = "compression_dict"
    RANGE_DEL = "range_del"
    PROPERTIES = "properties"
    METAINDEX = "metaindex"
    META = "meta"


# -- footer ------------------------------------------------------------------------------------


@record(frozen=True)
class Footer:
    """A decoded footer. ``index_handle`` is ``None`` for format_version >= 6 (it is in the metaindex)."""

    magic: int
    format_version: int
    checksum_type: int
    metaindex_handle: BlockHandle
    index_handle: BlockHandle | None
    footer_offset: int
    base_context_checksum: int = 0
    footer_checksum: int | None = None

    @property
    def is_legacy(self) -> bool:
        return self.magic == LEGACY_BLOCK_BASED_MAGIC

    @property
    def size(self) -> int:
        return LEGACY_FOOTER_SIZE if self.is_legacy else FOOTER_SIZE

    def to_json(self) -> dict[str, Any]:
        return {
            "magic": f"0x{self.magic:016x}",
            "format_version": self.format_version,
            "checksum_type": _checksum_name(self.checksum_type),
            "metaindex": {"offset": self.metaindex_handle.offset, "size": self.metaindex_handle.size},
            "index": None if self.index_handle is None else {"offset": self.index_handle.offset, "size": self.index_handle.size},
            "footer_offset": self.footer_offset,
            "base_context_checksum": f"0x{self.base_context_checksum:08x}" if self.base_context_checksum else None,
        }


def _checksum_name(kind: int) -> str:
    try:
        return ChecksumType(kind).name.lower()
    except ValueError:
        return f"unknown({kind})"


def decode_footer(tail, file_size: int) -> Footer:
    """Decode the footer from ``tail``, the last ``min(file_size, 53)`` bytes of a file.

    Raises :class:`TableFormatError` with kind ``truncated``, ``bad_magic``,
    ``not_block_based_table``, ``unsupported_format_version``, ``unsupported_checksum_type``,
    ``bad_footer`` or ``footer_checksum_mismatch``.
    """
    tail = bytes(tail)
    if len(tail) < LEGACY_FOOTER_SIZE:
        raise TableFormatError(
            "truncated", "footer", 0, f"a file of at least {LEGACY_FOOTER_SIZE} bytes", f"{file_size} bytes",
            block_kind="footer", detail="file is too short to be an SST",
        )
    magic_offset = file_size - 8
    magic = U64.unpack_from(tail, len(tail) - 8)[0]
    if magic in _OTHER_TABLE_MAGICS:
        raise TableFormatError(
            "not_block_based_table", "table magic number", magic_offset, "a block-based table",
            f"{_OTHER_TABLE_MAGICS[magic]} (magic 0x{magic:016x})", block_kind="footer",
        )
    if magic == LEGACY_BLOCK_BASED_MAGIC:
        footer_offset = file_size - LEGACY_FOOTER_SIZE
        part2 = tail[len(tail) - LEGACY_FOOTER_SIZE :]
        metaindex, pos = _footer_handle(part2, 0, footer_offset, "metaindex handle")
        index, _ = _footer_handle(part2, pos, footer_offset, "index handle")
        return Footer(magic, 0, ChecksumType.CRC32C, metaindex, index, footer_offset)
    if magic != BLOCK_BASED_MAGIC:
        raise TableFormatError(
            "bad_magic", "table magic number", magic_offset, f"0x{BLOCK_BASED_MAGIC:016x}", f"0x{magic:016x}",
            block_kind="footer", detail="not an SST file, or its end is missing",
        )
    if len(tail) < FOOTER_SIZE:
        raise TableFormatError(
            "truncated", "footer", 0, f"a file of at least {FOOTER_SIZE} bytes", f"{file_size} bytes", block_kind="footer"
        )
    footer_offset = file_size - FOOTER_SIZE
    footer = tail[len(tail) - FOOTER_SIZE :]
    format_version = U32.unpack_from(footer, FOOTER_SIZE - 12)[0]
    if not 1 <= format_version <= LATEST_FORMAT_VERSION:
        raise TableFormatError(
            "unsupported_format_version", "format_version", file_size - 12, f"1 to {LATEST_FORMAT_VERSION}", format_version,
            block_kind="footer",
        )
    checksum_type = footer[0]
    if checksum_type > ChecksumType.XXH3:
        raise TableFormatError(
            "unsupported_checksum_type", "checksum type", footer_offset, "0 (none) to 4 (xxh3)", checksum_type, block_kind="footer"
        )
    if format_version < 6:
        metaindex, pos = _footer_handle(footer, 1, footer_offset, "metaindex handle")
        index, _ = _footer_handle(footer, pos, footer_offset, "index handle")
        return Footer(magic, format_version, checksum_type, metaindex, index, footer_offset)
    if footer[1:5] != _EXTENDED_MAGIC:
        raise TableFormatError(
            "bad_footer", "extended magic", footer_offset + 1, _EXTENDED_MAGIC.hex(), footer[1:5].hex(), block_kind="footer"
        )
    stored, base_context, metaindex_size = (U32.unpack_from(footer, i)[0] for i in (5, 9, 13))
    if base_context == 0:
        raise TableFormatError("bad_footer", "base context checksum", footer_offset + 9, "a non-zero value", 0, block_kind="footer")
    if checksum_type != ChecksumType.NONE:
        zeroed = footer[:5] + b"\0\0\0\0" + footer[9:]
        computed = (buffer_checksum(checksum_type, zeroed) + context_modifier(base_context, footer_offset)) & 0xFFFFFFFF
        if computed != stored:
            raise TableFormatError(
                "footer_checksum_mismatch", "footer checksum", footer_offset + 5, f"0x{computed:08x} (computed)",
                f"0x{stored:08x} (stored)", block_kind="footer",
            )
    reserved = U64.unpack_from(footer, 33)[0]
    if reserved != 0:
        raise TableFormatError(
            "unsupported_feature", "footer reserved bytes", footer_offset + 33, 0, f"0x{reserved:016x}", block_kind="footer",
            detail="the file uses a feature of a newer RocksDB",
        )
    metaindex_end = footer_offset - BLOCK_TRAILER_SIZE
    if metaindex_size > metaindex_end:
        raise TableFormatError(
            "bad_block_handle", "metaindex size", footer_offset + 13, f"at most {max(metaindex_end, 0)}", metaindex_size,
            block_kind="footer",
        )
    metaindex = BlockHandle(metaindex_end - metaindex_size, metaindex_size)
    return Footer(magic, format_version, checksum_type, metaindex, None, footer_offset, base_context, stored)


def _footer_handle(data: bytes, pos: int, footer_offset: int, field_name: str) -> tuple[BlockHandle, int]:
    try:
        return decode_block_handle(data, pos, len(data) - 12 if len(data) == FOOTER_SIZE else 40, field_name, footer_offset)
    except FormatError as exc:
        raise TableFormatError("bad_footer", exc.field, exc.offset, exc.expected, exc.found, block_kind="footer") from None


# -- results -----------------------------------------------------------------------------------


class BlockInfo(NamedTuple):
    """One block of the table: its kind, handle and (for meta blocks) metaindex name."""

    kind: BlockKind
    handle: BlockHandle
    name: str | None = None


class InternalEntry(NamedTuple):
    """One entry of a data block."""

    user_key: bytes
    seqno: int
    value_type: int
    value: bytes


class RangeTombstone(NamedTuple):
    """A range deletion ``[start, end)`` of user keys at ``seqno``."""

    start: bytes
    end: bytes
    seqno: int


@record(frozen=True)
class BlockProblem(Problem):
    """One problem found while verifying a table: a :class:`~repair.findings.Problem` that also says
    which kind of block (``data``, ``index``, ``footer``, ...) and the block's size, when known."""

    block_kind: str | None = None
    size: int | None = None

    def context(self) -> tuple[tuple[str, Any], ...]:
        return tuple((name, value) for name, value in (("block_kind", self.block_kind), ("size", self.size)) if value is not None)


@record
class VerifyReport:
    """Result of :func:`verify_table`: findings, and how much was checked."""

    file_size: int
    findings: list[BlockProblem] = field(default_factory=list)
    blocks_checked: int = 0
    bytes_checked: int = 0
    blocks_decompressed: int = 0
    format_version: int | None = None
    checksum_type: int | None = None
    blocks_by_kind: dict[str, int] = field(default_factory=dict)
    #: When RocksDB wrote the file (seconds since the epoch), as its properties record it (``rocksdb.file.creation.time``;
    #: every SST of Flink 1.15 to 2.3 has it); None when absent or 0 (unknown to RocksDB).
    file_creation_time: int | None = None
    _seen: set = field(default_factory=set, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, finding: BlockProblem) -> None:
        """Record ``finding`` unless the same kind was already reported for the same block."""
        key = (finding.kind, finding.offset, finding.block_kind)
        if key not in self._seen:
            self._seen.add(key)
            self.findings.append(finding)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "file_size": self.file_size,
            "format_version": self.format_version,
            "checksum_type": None if self.checksum_type is None else _checksum_name(self.checksum_type),
            "blocks_checked": self.blocks_checked,
            "bytes_checked": self.bytes_checked,
            "blocks_decompressed": self.blocks_decompressed,
            "blocks_by_kind": dict(self.blocks_by_kind),
            "findings": [f.to_json() for f in self.findings],
        }


class BlockChecksumError(TableFormatError):
    """The checksum in a block's trailer does not match the block."""

    def __init__(self, kind: BlockKind, handle: BlockHandle, stored: int, computed: int, *, context: bool = False):
        super().__init__(
            "block_checksum_mismatch", f"{kind.value} block checksum", handle.offset, f"0x{stored:08x}", f"0x{computed:08x}",
            block_kind=kind.value,
        )
        self.handle = handle
        self.stored = stored
        self.computed = computed
        # RocksDB (reader_common.cc) reports the stored value with the fv6 context removed, as here.
        self.message = (
            f"{kind.value} block checksum mismatch at offset {handle.offset} (size {handle.size}): "
            f"stored 0x{stored:08x}{' (context removed)' if context else ''}, computed 0x{computed:08x}"
        )


def problem_from_error(error: FormatError, block_kind: str | None = None, handle: BlockHandle | None = None) -> BlockProblem:
    """Turn a decoder error into a :class:`BlockProblem` (kind from the error type)."""
    if isinstance(error, TableFormatError):
        kind = error.kind
        block_kind = error.block_kind or block_kind
    elif isinstance(error, UnsupportedCompressionError):
        kind = "unsupported_compression"
    elif isinstance(error, DecompressionError):
        kind = "decompression_failed"
    elif isinstance(error, TruncatedError):
        kind = "truncated"
    else:
        kind = "bad_block"
    prefix = f"{block_kind} block: " if block_kind and block_kind != "footer" and not error.message.startswith(block_kind) else ""
    return BlockProblem.from_error(
        kind, error, message=prefix + error.message, block_kind=block_kind,
        offset=error.offset if handle is None else handle.offset, size=None if handle is None else handle.size,
    )


# -- the table ---------------------------------------------------------------------------------


class Table:
    """An opened block-based table: footer, metaindex, properties and top-level index decoded.

    Use :func:`open_table` to create one. Block reads verify checksums and decompress.
    """

    def __init__(self, source: RandomAccess, footer: Footer, *, max_block_size: int = DEFAULT_MAX_BLOCK_SIZE):
        self._open_meta(source, footer, max_block_size)
        self.index_handle = self._find_index_handle()
        self.index_type = self._index_type()
        self.index_value_is_delta_encoded = self._index_value_delta_encoded()
        # The top-level index as two lists (offsets, sizes): a big table has tens of thousands of
        # entries, and verification does not need a BlockHandle object per entry.
        self._top_offsets, self._top_sizes = self._index_arrays(
            self.index_handle,
            BlockKind.INDEX,
            have_first_key=self.index_type == IndexType.BINARY_SEARCH_WITH_FIRST_KEY,
        )
        self._top_level_index: list[BlockHandle] | None = None

    def _open_meta(self, source: RandomAccess, footer: Footer, max_block_size: int) -> None:
        """The footer's, the metaindex's and the properties block's part of opening (no index)."""
        self.source = source
        self.footer = footer
        self.max_block_size = max_block_size
        self.file_size = source.size
        #: Problems that did not prevent opening (unreadable properties block ...).
        self.open_findings: list[BlockProblem] = []
        self.metaindex: dict[str, BlockHandle] = self._read_metaindex()
        self.properties: TableProperties | None = self._read_properties()

    @property
    def top_level_index(self) -> list[BlockHandle]:
        """Handles of the top-level index: data blocks, or index partitions for a partitioned index.

        Built on first use; the list is the table's own (changes to it are what :meth:`verify` reads).
        """
        if self._top_level_index is None:
            self._top_level_index = [BlockHandle(o, s) for o, s in zip(self._top_offsets, self._top_sizes)]
        return self._top_level_index

    @top_level_index.setter
    def top_level_index(self, handles: list[BlockHandle]) -> None:
        self._top_level_index = handles

    def _top_level_arrays(self) -> tuple[list[int], list[int]]:
        if self._top_level_index is None:
            return self._top_offsets, self._top_sizes
        return [h.offset for h in self._top_level_index], [h.size for h in self._top_level_index]

    # -- layout ----------------------------------------------------------------------------------
    @property
    def format_version(self) -> int:
        return self.footer.format_version

    @property
    def checksum_type(self) -> int:
        return self.footer.checksum_type

    @property
    def is_partitioned_index(self) -> bool:
        return self.index_type == IndexType.TWO_LEVEL_INDEX_SEARCH

    def _block_limit(self) -> int:
        """Blocks must end (trailer included) before the footer."""
        return self.footer.footer_offset

    def check_handle(self, handle: BlockHandle, kind: BlockKind | str, field_name: str = "block handle") -> None:
        """Raise ``bad_block_handle`` when ``handle`` does not fit between the file start and the footer."""
        limit = self._block_limit()
        kind_name = BlockKind(kind).value
        if handle.size > self.max_block_size + 64:
            raise TableFormatError(
                "bad_block_handle", f"{kind_name} {field_name}", handle.offset, f"a block of at most {self.max_block_size} bytes",
                f"size {handle.size}", block_kind=kind_name,
            )
        if handle.end > limit:
            raise TableFormatError(
                "bad_block_handle",
                f"{kind_name} {field_name}",
                handle.offset,
                f"a block ending by offset {limit} (before the footer)",
                f"offset {handle.offset} size {handle.size}",
                block_kind=kind_name,
                detail=f"{kind_name} block handle points past the end of the table data (file size {self.file_size})",
            )

    def _read_metaindex(self) -> dict[str, BlockHandle]:
        reader = self.block_reader(self.footer.metaindex_handle, BlockKind.METAINDEX)
        result: dict[str, BlockHandle] = {}
        for pos, key, value in reader.entries():
            name = key.decode("utf-8", errors="backslashreplace")
            try:
                meta_handle, _ = decode_block_handle(value, 0, len(value), f"meta block handle of {name!r}")
            except FormatError as exc:
                raise reader.error(exc.field, pos, exc.expected, exc.found, kind="bad_block_handle") from None
            result[name] = meta_handle
        return result

    def _read_properties(self) -> TableProperties | None:
        handle = self.metaindex.get("rocksdb.properties") or self.metaindex.get("rocksdb.stats")
        if handle is None:
            return None
        try:
            reader = self.block_reader(handle, BlockKind.PROPERTIES)
            return decode_properties(((key, value) for _, key, value in reader.entries()), handle.offset)
        except FormatError as exc:
            # RocksDB opens a table whose properties block is unreadable (with a warning).
            self.open_findings.append(problem_from_error(exc, BlockKind.PROPERTIES.value, handle))
            return None

    def _find_index_handle(self) -> BlockHandle:
        if self.footer.index_handle is not None:
            return self.footer.index_handle
        handle = self.metaindex.get("rocksdb.index")
        if handle is None:
            raise TableFormatError(
                "bad_metaindex", "metaindex entry rocksdb.index", self.footer.metaindex_handle.offset,
                "the index handle (format_version >= 6)", "no such entry", block_kind="metaindex",
            )
        return handle

    def _index_type(self) -> int:
        props = self.properties
        if props is not None and props.index_type is not None:
            return props.index_type
        if props is not None and props.index_partitions:
            return IndexType.TWO_LEVEL_INDEX_SEARCH
        return IndexType.BINARY_SEARCH

    def _index_value_delta_encoded(self) -> bool:
        props = self.properties
        if props is not None and props.index_value_is_delta_encoded is not None:
            return bool(props.index_value_is_delta_encoded)
        # Without properties: writers delta-encode from format_version 4 on, unless block_align is set
        # (BlockBasedTableBuilder::Rep, use_delta_encoding_for_index_values).
        return self.format_version >= 4

    # -- blocks ----------------------------------------------------------------------------------
    def read_block(self, handle: BlockHandle, kind: BlockKind | str, *, verify_checksum: bool = True):
        """Read one block, check its checksum and decompress it; returns the block contents."""
        kind = BlockKind(kind)
        self.check_handle(handle, kind)
        raw = read_exactly(self.source, handle.offset, handle.size + BLOCK_TRAILER_SIZE, f"{kind.value} block")
        return self._unpack_block(raw, handle, kind, verify_checksum=verify_checksum)[0]

    def _check_checksum(self, raw: memoryview, handle: BlockHandle, kind: BlockKind) -> None:
        """Raise :class:`BlockChecksumError` unless the trailer's checksum matches the block."""
        if self.footer.checksum_type == ChecksumType.NONE:
            return
        size = handle.size
        stored = U32.unpack_from(raw, size + 1)[0]
        # format_version >= 6: the stored value includes the context of the block's offset.
        expected = (stored - context_modifier(self.footer.base_context_checksum, handle.offset)) & 0xFFFFFFFF
        computed = block_checksum(self.footer.checksum_type, raw[:size], raw[size])
        if computed != expected:
            raise BlockChecksumError(kind, handle, expected, computed, context=bool(self.footer.base_context_checksum))

    def _unpack_block(self, raw: memoryview, handle: BlockHandle, kind: BlockKind, *, verify_checksum: bool = True):
        """Check the checksum of ``raw`` (block + trailer) and decompress; returns ``(data, type_byte)``."""
        if verify_checksum:
            self._check_checksum(raw, handle, kind)
        type_byte = raw[handle.size]
        data = decompress_block(type_byte, raw[: handle.size], self.format_version, offset=handle.offset, max_size=self.max_block_size)
        return data, type_byte

    def block_reader(self, handle: BlockHandle, kind: BlockKind) -> BlockReader:
        """Read, verify and decompress one block and open it for entry decoding."""
        self.check_handle(handle, kind)
        raw = read_exactly(self.source, handle.offset, handle.size + BLOCK_TRAILER_SIZE, f"{kind.value} block")
        data, type_byte = self._unpack_block(raw, handle, kind)
        return BlockReader(data, handle.offset, compressed=type_byte != CompressionType.NONE, block_kind=kind.value)

    def _index_handles(self, handle: BlockHandle, kind: BlockKind, *, have_first_key: bool = False) -> list[BlockHandle]:
        """Read an index-like block (index, index partition, filter index) and return its handles."""
        reader = self.block_reader(handle, kind)
        return reader.index_handles(value_delta_encoded=self.index_value_is_delta_encoded, have_first_key=have_first_key)

    def _index_arrays(self, handle: BlockHandle, kind: BlockKind, *, have_first_key: bool = False) -> tuple[list[int], list[int]]:
        """Like :meth:`_index_handles`, as ``(offsets, sizes)``; same results and same errors."""
        reader = self.block_reader(handle, kind)
        if _FAST_PATHS and self.index_value_is_delta_encoded and not have_first_key:
            # The bulk decoder runs on pyarrow's kernels: only where pyarrow is loaded already (export, remote
            # stores). Importing it for this alone costs more than it saves (0.06 CPU s against about 0.1 µs per
            # entry, 1 GB of SSTs' worth: docs/benchmarks/verify.md, "Start-up without pyarrow").
            bulk = bulk_index_arrays(reader.data, reader.layout) if "pyarrow" in sys.modules else None
            fast = bulk or _delta_index_arrays(reader.data, reader.layout.entries_end)
            if fast is not None:
                return fast
        handles = reader.index_handles(value_delta_encoded=self.index_value_is_delta_encoded, have_first_key=have_first_key)
        return [h.offset for h in handles], [h.size for h in handles]

    def index_partitions(self) -> list[BlockHandle]:
        """Handles of the index partitions (empty unless the index is partitioned)."""
        return list(self.top_level_index) if self.is_partitioned_index else []

    def iter_data_block_handles(self) -> Iterator[BlockHandle]:
        """Every data block, in index order (reads index partitions for a partitioned index)."""
        if not self.is_partitioned_index:
            yield from self.top_level_index
            return
        for partition in self.top_level_index:
            # Partitions of a two-level index never carry first keys (PartitionedIndexBuilder).
            yield from self._index_handles(partition, BlockKind.INDEX_PARTITION)

    def meta_blocks(self) -> list[BlockInfo]:
        """The blocks named by the metaindex, with their kinds."""
        result = []
        for name, handle in self.metaindex.items():
            if name in ("rocksdb.properties", "rocksdb.stats"):
                kind = BlockKind.PROPERTIES
            elif name == "rocksdb.index":
                continue  # the top-level index, listed separately
            elif name == "rocksdb.range_del":
                kind = BlockKind.RANGE_DEL
            elif name == "rocksdb.compression_dict":
                kind = BlockKind.COMPRESSION_DICT
            elif name.startswith("partitionedfilter."):
                kind = BlockKind.FILTER_INDEX
            elif name.startswith(("fullfilter.", "filter.")):
                kind = BlockKind.FILTER
            else:
                kind = BlockKind.META
            result.append(BlockInfo(kind, handle, name))
        return result

    def filter_partitions(self, filter_index: BlockHandle) -> list[BlockHandle]:
        """Handles of the partitions of a partitioned filter, from its top-level filter index."""
        return self._index_handles(filter_index, BlockKind.FILTER_INDEX)

    def iter_block_handles(self) -> Iterator[BlockInfo]:
        """Every block of the table with its kind, in file order."""
        blocks = [BlockInfo(BlockKind.DATA, h) for h in self.iter_data_block_handles()]
        blocks += [BlockInfo(BlockKind.INDEX_PARTITION, h) for h in self.index_partitions()]
        blocks.append(BlockInfo(BlockKind.INDEX, self.index_handle, "rocksdb.index" if self.footer.index_handle is None else None))
        for info in self.meta_blocks():
            blocks.append(info)
            if info.kind == BlockKind.FILTER_INDEX:
                blocks += [BlockInfo(BlockKind.FILTER_PARTITION, h) for h in self.filter_partitions(info.handle)]
        blocks.append(BlockInfo(BlockKind.METAINDEX, self.footer.metaindex_handle))
        blocks.sort(key=lambda b: b.handle.offset)
        return iter(blocks)

    # -- entries ---------------------------------------------------------------------------------
    def entries(self) -> Iterator[InternalEntry]:
        """Every entry of every data block, in file order, as internal entries."""
        unpack_u64 = U64.unpack_from
        for handle in self.iter_data_block_handles():
            reader = self.block_reader(handle, BlockKind.DATA)
            for pos, key, value in reader.entries():
                size = len(key) - 8
                if size < 0:
                    raise reader.error("internal key", pos, "at least 8 bytes", f"{len(key)} bytes", kind="bad_entry")
                packed = unpack_u64(key, size)[0]
                yield InternalEntry(key[:size], packed >> 8, packed & 0xFF, value)

    def range_tombstones(self) -> Iterator[RangeTombstone]:
        """The range deletions of the ``rocksdb.range_del`` meta block (empty when there is none)."""
        handle = self.metaindex.get("rocksdb.range_del")
        if handle is None:
            return
        reader = self.block_reader(handle, BlockKind.RANGE_DEL)
        for pos, key, value in reader.entries():
            if len(key) < 8:
                raise reader.error("range tombstone key", pos, "at least 8 bytes", f"{len(key)} bytes", kind="bad_entry")
            packed = int.from_bytes(key[-8:], "little")
            if packed & 0xFF != ValueType.RANGE_DELETION:
                raise reader.error("range tombstone type", pos, f"0x{ValueType.RANGE_DELETION:02x}", f"0x{packed & 0xFF:02x}", kind="bad_entry")
            yield RangeTombstone(key[:-8], value, packed >> 8)

    # -- verification ----------------------------------------------------------------------------
    def verify(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        chunk_size: int | None = None,
        report: VerifyReport | None = None,
        decompress: bool = True,
    ) -> VerifyReport:
        """Read every block once, check its checksum and decompress it; return the findings.

        Index partitions and the filter index are read first (they say where the other blocks are);
        then every remaining block is checked in file order, reading ``chunk_size`` bytes at a time
        (default: the source's ``preferred_read_size`` if it has one, else :data:`DEFAULT_CHUNK_SIZE`).
        ``progress(done_bytes, total_bytes)`` is called after each chunk.

        ``decompress=False`` only checks the checksums of the data, filter and other leaf blocks, as
        ``sst_dump --command=verify`` does; blocks that must be decoded (metaindex, properties,
        index and its partitions, filter index) are decompressed anyway.
        """
        report = report or VerifyReport(self.file_size)
        report.format_version = self.format_version
        report.checksum_type = self.checksum_type
        report.file_creation_time = (self.properties.file_creation_time or None) if self.properties is not None else None
        for finding in self.open_findings:
            report.add(finding)
        checked: set[int] = set()
        by_kind = report.blocks_by_kind

        def count(kind: BlockKind, handle: BlockHandle) -> None:
            checked.add(handle.offset)
            report.blocks_checked += 1
            report.bytes_checked += handle.size + BLOCK_TRAILER_SIZE
            by_kind[kind.value] = by_kind.get(kind.value, 0) + 1

        # The blocks open_table already read and verified.
        metadata = [(BlockKind.METAINDEX, self.footer.metaindex_handle), (BlockKind.INDEX, self.index_handle)]
        if self.properties is not None:
            metadata.append((BlockKind.PROPERTIES, self.metaindex.get("rocksdb.properties") or self.metaindex["rocksdb.stats"]))
        for kind, handle in metadata:
            count(kind, handle)

        # The blocks still to check, as three parallel lists (offset, size, kind value): no object
        # per block.
        offsets: list[int] = []
        sizes: list[int] = []
        kinds: list[str] = []
        # Second-level structures: each read is verified here, and what they point to is queued.
        if self.is_partitioned_index:
            for partition in self.top_level_index:
                try:
                    part_offsets, part_sizes = self._index_arrays(partition, BlockKind.INDEX_PARTITION)
                except FormatError as exc:
                    report.add(problem_from_error(exc, BlockKind.INDEX_PARTITION.value, partition))
                    part_offsets, part_sizes = [], []
                count(BlockKind.INDEX_PARTITION, partition)
                offsets += part_offsets
                sizes += part_sizes
                kinds += [BlockKind.DATA.value] * len(part_offsets)
        else:
            top_offsets, top_sizes = self._top_level_arrays()
            offsets += top_offsets
            sizes += top_sizes
            kinds += [BlockKind.DATA.value] * len(top_offsets)
        for info in self.meta_blocks():
            if info.handle.offset in checked:
                continue
            if info.kind == BlockKind.FILTER_INDEX:
                try:
                    partitions = self.filter_partitions(info.handle)
                except FormatError as exc:
                    report.add(problem_from_error(exc, info.kind.value, info.handle))
                    partitions = []
                count(info.kind, info.handle)
                offsets += [h.offset for h in partitions]
                sizes += [h.size for h in partitions]
                kinds += [BlockKind.FILTER_PARTITION.value] * len(partitions)
            else:
                offsets.append(info.handle.offset)
                sizes.append(info.handle.size)
                kinds.append(info.kind.value)
        if self.properties is None and BlockKind.PROPERTIES.value not in kinds:
            if not any(f.block_kind == BlockKind.PROPERTIES.value for f in report.findings):
                report.add(BlockProblem("missing_properties", "the metaindex names no properties block", self.footer.metaindex_handle.offset,
                                                block_kind="metaindex"))

        if chunk_size is None:
            chunk_size = getattr(self.source, "preferred_read_size", None) or DEFAULT_CHUNK_SIZE
        self._verify_blocks(offsets, sizes, kinds, report, progress, chunk_size, decompress)
        return report

    def _verify_blocks(
        self,
        offsets: list[int],
        sizes: list[int],
        kinds: list[str],
        report: VerifyReport,
        progress,
        chunk_size: int,
        decompress: bool = True,
    ) -> None:
        """Check checksums (and decompress) the blocks ``offsets[k], sizes[k]`` of kind ``kinds[k]``.

        This is the hot loop of verification. The file is read in large sequential chunks (one
        memoryview each, sliced without copies); the checksums of a chunk's blocks are compared all at
        once (:func:`~repair.formats.rocksdb.table.checksum.mismatched_blocks`: per block one checksum call over the
        block and its type byte, contiguous in the chunk, and one read of the stored value; format
        version 6 context checksums included) and, for Snappy blocks, each is decompressed in one
        call into a reused buffer. Anything unusual (a checksum mismatch, another codec, a size or
        decompression problem) goes through the general code (:func:`block_checksum`,
        :func:`decompress_block`), which makes the exact finding. Nothing per entry, no object per
        block.
        """
        limit = self._block_limit()
        max_size = self.max_block_size + 64
        trailer = BLOCK_TRAILER_SIZE
        n = len(offsets)
        ends = list(map(add, map(add, offsets, sizes), repeat(trailer, n)))  # trailer included
        if n and (max(ends) > limit or max(sizes) > max_size):
            keep = []
            for k in range(n):
                offset, size = offsets[k], sizes[k]
                if offset + size + trailer > limit or size > max_size:
                    handle = BlockHandle(offset, size)
                    try:
                        self.check_handle(handle, kinds[k])
                    except TableFormatError as exc:
                        report.add(problem_from_error(exc, kinds[k], handle))
                    continue
                keep.append(k)
            offsets = [offsets[k] for k in keep]
            sizes = [sizes[k] for k in keep]
            kinds = [kinds[k] for k in keep]
            ends = [ends[k] for k in keep]
            n = len(offsets)
        # The usual layout: no block starts before the previous one ends (so they are sorted). Then
        # chunks are found by bisection and no block needs the overlap check.
        clean = not any(map(lt, islice(offsets, 1, None), ends))
        if not clean and any(map(gt, offsets, islice(offsets, 1, None))):
            order = sorted(range(n), key=offsets.__getitem__)  # stable, as the file order of blocks
            offsets = [offsets[k] for k in order]
            sizes = [sizes[k] for k in order]
            kinds = [kinds[k] for k in order]
            ends = [ends[k] for k in order]
        total = sum(sizes) + trailer * n

        checksum_type = self.footer.checksum_type
        base_context = self.footer.base_context_checksum
        check = self._check_block
        # The fast loop needs the usual layout (blocks in file order, none overlapping).
        fast = _FAST_PATHS and clean
        source = self.source
        snappy_into = cramjam.snappy.decompress_raw_into
        snappy_length = cramjam.snappy.decompress_raw_len
        max_block_size = self.max_block_size
        scratch = bytearray(_SNAPPY_SCRATCH_SIZE) if decompress else None
        decompressed = 0
        done = 0
        previous_end = 0
        i = 0
        while i < n:
            chunk_start = offsets[i]
            chunk_limit = chunk_start + chunk_size
            if clean:
                j = bisect_right(ends, chunk_limit, i + 1)
            else:
                j = i + 1
                chunk_end = ends[i]
                while j < n and offsets[j] >= chunk_end and ends[j] <= chunk_limit:
                    chunk_end = ends[j]
                    j += 1
            chunk_end = ends[j - 1]
            try:
                chunk = read_exactly(source, chunk_start, chunk_end - chunk_start, "table blocks")
            except FormatError as exc:
                report.add(problem_from_error(exc, kinds[i]))
                break
            if not fast:
                # General loop: overlap check, then the general check of each block.
                for k in range(i, j):
                    offset = offsets[k]
                    size = sizes[k]
                    if offset < previous_end:
                        report.add(BlockProblem(
                            "bad_block_handle",
                            f"{kinds[k]} block at offset {offset} (size {size}) overlaps the previous block, "
                            f"which ends at {previous_end}",
                            offset, block_kind=kinds[k], size=size,
                        ))
                    previous_end = ends[k]
                    decompressed += check(chunk, offset - chunk_start, offset, size, kinds[k], report, decompress)
                done += chunk_end - chunk_start
                if progress is not None:
                    progress(min(done, total), total)
                del chunk
                i = j
                continue
            # Fast loop. The checksums of all blocks of the chunk at once (one C call per block over
            # a memoryview slice, the comparison in bulk: checksum.mismatched_blocks); then, for
            # Snappy, one C call per block decompressing into a reused buffer. A block that fails, or
            # needs another codec, is queued for the general check, which makes the exact finding;
            # the queue is sorted into the blocks' order, and so the order of the findings.
            starts = list(map(sub, offsets[i:j], repeat(chunk_start)))
            stops = list(map(sub, ends[i:j], repeat(chunk_start + 4)))  # each block's end, type byte included
            bad = mismatched_blocks(
                checksum_type, chunk, starts, stops,
                base_context_checksum=base_context, offsets=offsets[i:j] if base_context else None,
            )
            slow: list[tuple[int, bool]] = [(i + k, False) for k in bad]
            if decompress:
                skip = set(bad)
                for k, start, end in zip(range(i, j), starts, stops):
                    end -= 1  # the type byte
                    type_byte = chunk[end]
                    if not type_byte or (skip and k - i in skip):
                        continue
                    if type_byte == 1 and end - start > 2 and (chunk[start] < 0x80 or chunk[start + 1] < 0x80 or chunk[start + 2] < 0x80):
                        # Snappy, with a header (the uncompressed length, a varint) of at most 3 bytes,
                        # which the general path reads alike. The decoder checks that the output has
                        # exactly that length, so a success returns it.
                        try:
                            written = snappy_into(chunk[start:end], scratch)
                        except Exception:  # the general check names the problem
                            written = -1
                        if 0 <= written <= max_block_size and written <= (end - start) * 32 + 64:
                            decompressed += 1
                            continue
                    slow.append((k, True))
                if bad:
                    slow.sort()
            for k, checksum_ok in slow:
                offset = offsets[k]
                start = offset - chunk_start
                size = sizes[k]
                if check(chunk, start, offset, size, kinds[k], report, decompress, checksum_ok=checksum_ok):
                    decompressed += 1
                    if chunk[start + size] == 1:  # a Snappy block larger than the buffer: grow it
                        length = snappy_length(chunk[start : start + size])
                        if length > len(scratch):
                            scratch = bytearray(length)
            done += chunk_end - chunk_start
            if progress is not None:
                progress(min(done, total), total)
            del chunk
            i = j
        # Every block of a chunk that was read counts as checked (also those with findings).
        report.blocks_decompressed += decompressed
        report.bytes_checked += total if i == n else sum(sizes[:i]) + trailer * i
        counted = kinds if i == n else kinds[:i]
        by_kind = report.blocks_by_kind
        for kind_value in dict.fromkeys(counted):  # in order of first appearance, as Counter
            number = counted.count(kind_value)
            report.blocks_checked += number
            by_kind[kind_value] = by_kind.get(kind_value, 0) + number

    def _check_block(
        self, chunk, start: int, offset: int, size: int, kind_value: str, report: VerifyReport, decompress: bool,
        *, checksum_ok: bool = False,
    ) -> int:
        """The general check of one block at ``chunk[start:]``: checksum, then decompression.

        Adds the findings to ``report``; returns 1 when the block was decompressed, else 0.
        """
        end = start + size
        type_byte = chunk[end]
        footer = self.footer
        if footer.checksum_type != ChecksumType.NONE and not checksum_ok:
            base_context = footer.base_context_checksum
            expected = U32.unpack_from(chunk, end + 1)[0]
            if base_context:
                expected = (expected - context_modifier(base_context, offset)) & 0xFFFFFFFF
            computed = block_checksum(footer.checksum_type, chunk[start:end], type_byte)
            if computed != expected:
                kind = BlockKind(kind_value)
                handle = BlockHandle(offset, size)
                error = BlockChecksumError(kind, handle, expected, computed, context=bool(base_context))
                report.add(problem_from_error(error, kind.value, handle))
                return 0
        if type_byte and decompress:
            try:
                decompress_block(type_byte, chunk[start:end], self.format_version, offset=offset, max_size=self.max_block_size)
                return 1
            except FormatError as exc:
                report.add(_decompression_finding(exc, BlockInfo(BlockKind(kind_value), BlockHandle(offset, size)), type_byte))
        return 0


def _varint(data, pos: int, max_bytes: int = 9) -> tuple[int, int]:
    """A varint of at most ``max_bytes`` bytes at ``data[pos:]``: ``(value, next)``, value -1 when longer.

    Raises ``IndexError`` past the end of ``data``.
    """
    value = 0
    shift = 0
    limit = 7 * max_bytes
    while shift < limit:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return -1, pos


def _delta_index_arrays(data: bytes, end: int) -> tuple[list[int], list[int]] | None:
    """The handles of a delta-encoded index block as ``(offsets, sizes)``, or ``None``.

    The fast path of :meth:`BlockReader.index_handles` for the common case (varints of at most 9
    bytes, every entry inside the entries area): ``None`` whenever anything is unusual, and the
    caller then runs the general decoder, which gives the result or the error. Varints of up to 4
    bytes (offsets below 256 MiB, sizes below 2 MiB) are decoded inline.
    """
    offsets: list[int] = []
    sizes: list[int] = []
    add_offset = offsets.append
    add_size = sizes.append
    varint = _varint
    pos = 0
    try:
        while pos < end:
            shared = data[pos]
            non_shared = data[pos + 1]
            if shared < 0x80 and non_shared < 0x80:
                pos += 2 + non_shared
            else:
                # varint32s, as BlockReader reads them: at most 5 bytes, below 2^32
                shared, pos = varint(data, pos, 5)
                non_shared, pos = varint(data, pos, 5)
                if not (0 <= shared <= 0xFFFFFFFF and 0 <= non_shared <= 0xFFFFFFFF):
                    return None
                pos += non_shared
            # The handle's first varint: the offset (full handle) or the size delta.
            b0 = data[pos]
            if b0 < 0x80:
                value = b0
                pos += 1
            else:
                b1 = data[pos + 1]
                if b1 < 0x80:
                    value = (b0 & 0x7F) | (b1 << 7)
                    pos += 2
                else:
                    b2 = data[pos + 2]
                    if b2 < 0x80:
                        value = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
                        pos += 3
                    else:
                        b3 = data[pos + 3]
                        if b3 < 0x80:
                            value = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | ((b2 & 0x7F) << 14) | (b3 << 21)
                            pos += 4
                        else:
                            value, pos = varint(data, pos)
                            if value < 0:
                                return None
            if shared == 0 or not offsets:
                offset = value
                b0 = data[pos]
                if b0 < 0x80:
                    size = b0
                    pos += 1
                else:
                    b1 = data[pos + 1]
                    if b1 < 0x80:
                        size = (b0 & 0x7F) | (b1 << 7)
                        pos += 2
                    else:
                        size, pos = varint(data, pos)
                        if size < 0:
                            return None
            else:
                # A size delta: the block follows the previous one (and its trailer).
                size = sizes[-1]
                offset = offsets[-1] + size + BLOCK_TRAILER_SIZE
                size += (value >> 1) ^ -(value & 1)
                if size < 0:
                    return None
            if pos > end:
                return None
            add_offset(offset)
            add_size(size)
    except IndexError:
        return None
    return offsets, sizes


def _decompression_finding(exc: FormatError, info: BlockInfo, type_byte: int) -> BlockProblem:
    finding = problem_from_error(exc, info.kind.value, info.handle)
    offset, size = info.handle
    return dataclasses.replace(
        finding,
        message=f"{info.kind.value} block at offset {offset} (size {size}, {compression_name(type_byte)}) does not decompress: {exc.message}",
        block_kind=info.kind.value, offset=offset, size=size,
    )


def open_table(source: RandomAccess, *, max_block_size: int = DEFAULT_MAX_BLOCK_SIZE) -> Table:
    """Open a block-based table: decode footer, metaindex, properties and top-level index.

    Raises :class:`TableFormatError` (kinds as for :class:`BlockProblem`) or :class:`TruncatedError`.
    """
    size = source.size
    tail_length = min(size, FOOTER_SIZE)
    tail = read_exactly(source, size - tail_length, tail_length, "footer")
    footer = decode_footer(tail, size)
    return Table(source, footer, max_block_size=max_block_size)


def read_table_properties(source: RandomAccess, *, max_block_size: int = DEFAULT_MAX_BLOCK_SIZE) -> TableProperties | None:
    """A table's properties (None when it has no properties block), reading only its footer, metaindex
    and properties block: a few KiB whatever the table's size (``repair size``).

    Raises :class:`TableFormatError` or :class:`TruncatedError` when one of them cannot be read.
    """
    size = source.size
    tail_length = min(size, FOOTER_SIZE)
    footer = decode_footer(read_exactly(source, size - tail_length, tail_length, "footer"), size)
    table = Table.__new__(Table)  # only the meta part of opening: the index is not read
    table._open_meta(source, footer, max_block_size)
    if table.open_findings:
        problem = table.open_findings[0]
        raise TableFormatError(problem.kind, "properties block", problem.offset or 0, "a readable properties block",
                               problem.message, block_kind=BlockKind.PROPERTIES.value)
    return table.properties


def verify_table(
    source: RandomAccess,
    progress: Callable[[int, int], None] | None = None,
    *,
    chunk_size: int | None = None,
    max_block_size: int = DEFAULT_MAX_BLOCK_SIZE,
    decompress: bool = True,
) -> VerifyReport:
    """Verify a whole table; problems become findings, never exceptions (except storage errors).

    Every block's checksum is checked and every compressed block is decompressed;
    ``decompress=False`` skips decompressing the blocks that are only checked (see :meth:`Table.verify`).
    """
    report = VerifyReport(source.size)
    try:
        table = open_table(source, max_block_size=max_block_size)
    except FormatError as exc:
        report.add(_open_failure(exc))
        return report
    return table.verify(progress, chunk_size=chunk_size, report=report, decompress=decompress)


def _open_failure(exc: FormatError) -> BlockProblem:
    finding = problem_from_error(exc, getattr(exc, "block_kind", None), getattr(exc, "handle", None))
    return dataclasses.replace(finding, message=finding.message + "; the table cannot be opened")
