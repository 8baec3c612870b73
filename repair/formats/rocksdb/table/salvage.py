"""Salvage of a damaged block-based table: every entry whose data block proves sound, and what was lost.

A data block is kept when its trailer's checksum verifies *and* it decodes as a data block: every entry
parses, every key is an internal key of a type an SST holds, keys are strictly increasing in internal
key order and lie within the bounds the index gives the block (after the previous block's separator,
up to its own). A block failing any of these is dropped, never written. Metadata blocks (properties,
filter, index, metaindex) hold no entries: when only they are damaged, every entry is recovered.

Two ways to find the data blocks:

* ``index``: the footer, metaindex and index decode; the data blocks are the index's, each with its
  separator keys as bounds. A damaged properties block (RocksDB opens such a table) or filter loses
  nothing.
* ``scan``: the footer, metaindex or index is damaged. Blocks are found from offset 0 on, each proven by
  its trailer's checksum (the block ends where the checksum of the bytes before a trailer matches it);
  data blocks are the run of blocks from the start that decode as data blocks in increasing key order,
  up to the first that is not one (the filter, index or properties block follows the data); the
  properties and range deletions are read through the metaindex (the footer's, or the block found
  after the data whose entries name ``rocksdb.`` meta blocks walked before it). The scan
  stops at the first block no checksum proves: a damaged data block's end cannot be told, so what
  follows it is lost too (:attr:`Salvage.scan_stopped_at`). The checksum type is the footer's, or, when
  the footer is damaged, the one that proves the first block. From format_version 6 a block's checksum
  depends on a per-file seed stored only in the footer: such a table with a damaged footer cannot be
  scanned (:class:`SalvageError`).

Entries lost: the properties' entry count minus the entries kept (exact when the properties block is
sound, split per damaged block when there is one); 0 when no data block is damaged; unknown (``None``)
otherwise. Each lost block's keys are bounded by the last key before it (of the previous sound block,
or the previous index separator) and its own index separator (:class:`LostBlock`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from repair.errors import FormatError
from repair.formats.bytes.coding import U32
from repair.formats.bytes.random_access import RandomAccess, read_exactly
from repair.formats.rocksdb.table.block import (
    BLOCK_TRAILER_SIZE,
    SST_VALUE_TYPES,
    BlockHandle,
    BlockReader,
    InternalKey,
    ValueType,
    decode_block_handle,
)
from repair.formats.rocksdb.table.checksum import ChecksumType, block_checksum, context_modifier
from repair.formats.rocksdb.table.compression import CompressionType, decompress_block
from repair.formats.rocksdb.table.properties import TableProperties, decode_properties
from repair.formats.rocksdb.table.sst import FOOTER_SIZE, BlockKind, IndexType, Table, decode_footer, open_table
from repair.formats.rocksdb.table.writer import TableOptions, build_table, carried_properties, check_sorted, configured_compression

#: Largest block the scan looks for (RocksDB's blocks are block_size, 4 KiB by default in Flink, plus
#: one entry; a bigger "block" means the scan has lost its way).
SCAN_MAX_BLOCK_SIZE = 4 << 20

#: Checksum types the scan tries when the footer does not say.
_SCANNED_CHECKSUMS = (ChecksumType.CRC32C, ChecksumType.XXH3, ChecksumType.XXHASH64, ChecksumType.XXHASH32)
_COMPRESSION_TYPES = frozenset(int(kind) for kind in CompressionType)


class SalvageError(FormatError):
    """The table cannot be salvaged (nothing of it can be proven)."""


@dataclass(frozen=True)
class LostBlock:
    """A data block dropped by the salvage: where, why, how many entries, between which user keys."""

    offset: int
    size: int | None
    reason: str
    #: Entries it held: exact when knowable (see :class:`Salvage`), else ``None``.
    entries: int | None
    #: Its keys come after this user key (``None``: from the start of the table).
    after_key: bytes | None
    #: Its keys are at most this user key (``None``: up to the end of the table).
    up_to_key: bytes | None
    #: The keys of its entries as its damaged bytes still read (checksum ignored, decoded in order within
    #: its bounds), else ``None``. Proven only collectively: when every lost block reads so and their
    #: counts add up to the entries lost (then :attr:`entries` is set from them), see :func:`_count_lost`.
    read_keys: tuple[InternalKey, ...] | None = None
    #: The values of those entries as the damaged bytes read (unproven: the block fails its checksum).
    read_values: tuple[bytes, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset, "size": self.size, "reason": self.reason, "entries": self.entries,
            "after_key": None if self.after_key is None else self.after_key.hex(),
            "up_to_key": None if self.up_to_key is None else self.up_to_key.hex(),
        }


@dataclass
class Salvage:
    """What a damaged table still holds, and what it lost."""

    method: str  # "index" or "scan"
    entries: list[tuple[InternalKey, bytes]]
    range_tombstones: list[tuple[InternalKey, bytes]]
    lost_blocks: list[LostBlock]
    #: Damaged blocks that hold no entries (``"properties at 1234: ..."``): nothing lost by them.
    damaged_metadata: list[str]
    #: Point entries lost in all: exact when the properties are sound or no data block is lost.
    entries_lost: int | None
    #: Range deletions lost (their block was damaged), when known.
    range_deletions_lost: int | None
    properties: TableProperties | None
    format_version: int
    checksum_type: int
    base_context_checksum: int
    #: The compression the data blocks were written with (property, or the blocks' own type bytes).
    compression: int
    #: Where a scan stopped before the end of the data (a block no checksum proves), else ``None``.
    scan_stopped_at: int | None = None

    @property
    def lossless(self) -> bool:
        return self.entries_lost == 0 and not self.range_deletions_lost and self.scan_stopped_at is None

    def ending_at(self, largest: InternalKey) -> Salvage:
        """This salvage, knowing the table's largest key (as the MANIFEST records it): a scan that stopped
        early after keeping an entry with exactly that key lost no point entry (entries are in increasing
        order, none follows the largest). Otherwise unchanged. Range deletions lost stay as they were."""
        last = self.entries[-1][0] if self.entries else None
        if self.scan_stopped_at is None or last is None or (last.user_key, last.seqno, last.value_type) != (
                largest.user_key, largest.seqno, largest.value_type):
            return self
        note = (f"no block is proven from offset {self.scan_stopped_at} on, but the last entry kept is the table's largest "
                "key (as its MANIFEST record says): no entry was lost after it")
        return replace(self, lost_blocks=[b for b in self.lost_blocks if b.offset != self.scan_stopped_at],
                       entries_lost=0, scan_stopped_at=None, damaged_metadata=[*self.damaged_metadata, note])

    def options(self, column_family: tuple[int, str] | None = None) -> TableOptions:
        """How the salvaged table is written: in the source's format_version, checksum type and
        compression, with its column family and carried properties (:func:`carried_properties`).

        ``column_family`` (id, name) is required when the properties are unreadable.
        """
        props = self.properties
        if column_family is None:
            if props is None or props.column_family_id is None or props.column_family_name is None:
                raise ValueError("the table's column family is unknown (its properties are unreadable): give column_family")
            column_family = (props.column_family_id, props.column_family_name)
        return TableOptions(
            format_version=self.format_version, checksum_type=self.checksum_type, compression=self.compression,
            column_family_id=column_family[0], column_family_name=column_family[1],
            base_context_checksum=self.base_context_checksum or TableOptions.base_context_checksum,
            properties=carried_properties(props),
        )

    def write(self, column_family: tuple[int, str] | None = None) -> bytes:
        """The salvaged table's bytes: every kept entry and range deletion, in the source's format.

        ``column_family`` (id, name) is needed when the source's properties are unreadable.
        """
        return build_table(self.entries, self.options(column_family), range_tombstones=self.range_tombstones)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method, "entries_kept": len(self.entries), "entries_lost": self.entries_lost,
            "range_deletions_lost": self.range_deletions_lost, "lost_blocks": [b.to_json() for b in self.lost_blocks],
            "damaged_metadata": self.damaged_metadata, "scan_stopped_at": self.scan_stopped_at,
        }


# -- one data block ---------------------------------------------------------------------------------


def decode_data_block(
    data, offset: int, *, compressed: bool, after: Separator | InternalKey | None = None, up_to: Separator | None = None,
) -> list[tuple[InternalKey, bytes]]:
    """The entries of one decompressed data block, checked as :mod:`salvage` keeps a block.

    ``after`` (the previous block's index separator, or its last key) and ``up_to`` (the block's own
    separator) bound the keys: every key must be after ``after`` and at most ``up_to``. Raises :class:`~repair.formats.rocksdb.table.block.TableFormatError`.
    """
    reader = BlockReader(data, offset, compressed=compressed, block_kind=BlockKind.DATA.value)
    reader.restart_points()
    entries: list[tuple[InternalKey, bytes]] = []
    for pos, key, value in reader.entries():
        if len(key) < 8:
            raise reader.error("internal key", pos, "at least 8 bytes", f"{len(key)} bytes", kind="bad_entry")
        packed = int.from_bytes(key[-8:], "little")
        if packed & 0xFF not in SST_VALUE_TYPES:
            raise reader.error("internal key type", pos, "a value type of an SST", f"0x{packed & 0xFF:02x}", kind="bad_entry")
        entries.append((InternalKey(bytes(key[:-8]), packed >> 8, packed & 0xFF), bytes(value)))
    if not entries:
        raise reader.error("entries", 0, "at least one entry", "none", kind="bad_entry")
    try:
        check_sorted((k for k, _ in entries), "data block entries")
    except ValueError as exc:
        raise reader.error("entry order", 0, "keys in increasing internal key order", str(exc), kind="bad_entry") from None
    first, last = entries[0][0], entries[-1][0]
    if isinstance(after, InternalKey) and _order(first) <= _order(after):
        raise reader.error("first key", 0, "a key after the previous block's last key", first.user_key.hex(), kind="bad_entry")
    if isinstance(after, Separator) and not after.precedes(first):
        raise reader.error("first key", 0, "a key after the previous block's index separator", first.user_key.hex(), kind="bad_entry")
    if up_to is not None and not up_to.covers(last):
        raise reader.error("last key", 0, "a key at most the block's index separator", last.user_key.hex(), kind="bad_entry")
    return entries


def _order(key: InternalKey) -> tuple[bytes, int]:
    return key.user_key, -((key.seqno << 8) | key.value_type)


@dataclass(frozen=True)
class Separator:
    """An index separator: ``key`` is an internal key, a user key (``rocksdb.index.key.is.user.key``),
    or, when the properties that say which are unreadable (``user_key`` None), either."""

    key: bytes
    user_key: bool | None

    def _internal(self) -> InternalKey | None:
        if self.user_key is True or len(self.key) < 8:
            return None
        packed = int.from_bytes(self.key[-8:], "little")
        return InternalKey(self.key[:-8], packed >> 8, packed & 0xFF)

    def precedes(self, key: InternalKey) -> bool:
        """``key`` may follow this separator (it is the previous block's): after it, in either form."""
        internal = self._internal()
        return (internal is not None and _order(key) > _order(internal)) or (self.user_key is not False and key.user_key >= self.key)

    def covers(self, key: InternalKey) -> bool:
        """``key`` may be in this separator's block: at most it, in either form."""
        internal = self._internal()
        return (internal is not None and _order(key) <= _order(internal)) or (self.user_key is not False and key.user_key <= self.key)

    @property
    def lowest_user_key(self) -> bytes:
        """A user key at most every key that may follow the separator."""
        internal = self._internal()
        return internal.user_key if internal is not None else self.key

    @property
    def highest_user_key(self) -> bytes:
        """A user key at least every key its block may hold."""
        internal = self._internal()
        return internal.user_key if internal is not None and self.user_key is False else self.key


# -- the whole table ----------------------------------------------------------------------------


def salvage_table(source: RandomAccess) -> Salvage:
    """Salvage ``source`` (a possibly damaged block-based table). Raises :class:`SalvageError` when
    nothing of it can be proven (see the module's docstring for when)."""
    try:
        table = open_table(source)
        blocks = _indexed_blocks(table)
    except FormatError as exc:
        return _scan(source, f"{exc}")
    return _salvage_indexed(source, table, blocks)


def _indexed_blocks(table: Table) -> list[tuple[BlockHandle, Separator]]:
    """Every data block with its index separator, through the (possibly partitioned) index."""
    props = table.properties
    user_keys = None if props is None or props.index_key_is_user_key is None else bool(props.index_key_is_user_key)
    have_first_key = table.index_type == IndexType.BINARY_SEARCH_WITH_FIRST_KEY
    tops = list(table.block_reader(table.index_handle, BlockKind.INDEX).index_entries(
        value_delta_encoded=table.index_value_is_delta_encoded, have_first_key=have_first_key and not table.is_partitioned_index))
    if not table.is_partitioned_index:
        return [(handle, Separator(bytes(key), user_keys)) for _, key, handle, _ in tops]
    blocks = []
    for _, _, partition, _ in tops:
        reader = table.block_reader(partition, BlockKind.INDEX_PARTITION)
        blocks += [(handle, Separator(bytes(key), user_keys)) for _, key, handle, _ in reader.index_entries(value_delta_encoded=table.index_value_is_delta_encoded)]
    return blocks


def _salvage_indexed(source: RandomAccess, table: Table, blocks: list[tuple[BlockHandle, Separator]]) -> Salvage:
    entries: list[tuple[InternalKey, bytes]] = []
    lost: list[tuple[BlockHandle, str, bytes | None, bytes | None, tuple[InternalKey, ...] | None]] = []
    types: list[int] = []
    previous_bound: Separator | None = None
    previous_last: bytes | None = None  # last user key of the previous kept block
    previous_kept = False
    for handle, separator in blocks:
        try:
            reader = table.block_reader(handle, BlockKind.DATA)  # checksum verified, decompressed
            block = decode_data_block(reader.data, handle.offset, compressed=reader.compressed, after=previous_bound, up_to=separator)
            type_byte = read_exactly(source, handle.offset + handle.size, 1, "data block trailer")[0]
        except FormatError as exc:
            after = previous_last if previous_kept else previous_bound.lowest_user_key if previous_bound else None
            read = _read_damaged(source, table.format_version, handle, previous_bound, separator)
            lost.append((handle, str(exc), after, separator.highest_user_key, read))
            previous_kept = False
        else:
            entries += block
            types.append(type_byte)
            previous_last, previous_kept = block[-1][0].user_key, True
        previous_bound = separator
    damaged_metadata = [f"{p.block_kind or 'block'} at offset {p.offset}: {p.message}" for p in table.open_findings]
    tombstones, range_lost = _range_tombstones(table, damaged_metadata)
    damaged_metadata += _damaged_filters(table)
    props = table.properties
    return Salvage(
        method="index", entries=entries, range_tombstones=tombstones,
        lost_blocks=_count_lost(lost, props, len(entries)), damaged_metadata=damaged_metadata,
        entries_lost=_entries_lost(lost, props, len(entries)), range_deletions_lost=range_lost, properties=props,
        format_version=table.format_version, checksum_type=table.checksum_type,
        base_context_checksum=table.footer.base_context_checksum, compression=_compression(props, types),
    )


def _range_tombstones(table: Table, damaged: list[str]) -> tuple[list[tuple[InternalKey, bytes]], int | None]:
    handle = table.metaindex.get("rocksdb.range_del")
    try:
        kept = [(InternalKey(t.start, t.seqno, ValueType.RANGE_DELETION), bytes(t.end)) for t in table.range_tombstones()]
    except FormatError as exc:
        damaged.append(f"range_del at offset {handle.offset if handle else '?'}: {exc}")
        props = table.properties
        return [], (props.num_range_deletions if props is not None else None)
    return kept, 0


def _damaged_filters(table: Table) -> list[str]:
    """Filter and other meta blocks that fail their checksum: reported, nothing lost (none is written)."""
    damaged = []
    for info in table.meta_blocks():
        if info.kind in (BlockKind.PROPERTIES, BlockKind.RANGE_DEL):
            continue
        try:
            table.read_block(info.handle, info.kind)
        except FormatError as exc:
            damaged.append(f"{info.kind.value} at offset {info.handle.offset}: {exc}")
    return damaged


def _entries_lost(lost: list, props: TableProperties | None, kept: int) -> int | None:
    if not lost:
        return 0
    if props is None or props.num_entries is None:
        return None
    total = props.num_entries - (props.num_range_deletions or 0)
    return total - kept if total >= kept else None


def _count_lost(lost: list, props: TableProperties | None, kept: int) -> list[LostBlock]:
    """Each lost block with its entry count: the whole loss when one block is lost; when several are, the
    counts their damaged bytes read (``read_keys``) if those add up to the whole loss, else unknown."""
    total = _entries_lost(lost, props, kept)
    reads = [read for *_, read in lost]
    if len(lost) == 1:
        counts = [total]
    elif total is not None and all(r is not None for r in reads) and sum(len(r) for r in reads) == total:
        counts = [len(r) for r in reads]
    else:
        counts = [None] * len(lost)
    return [LostBlock(h.offset, h.size, reason, count, after, up_to,
                      None if read is None else tuple(k for k, _ in read), None if read is None else tuple(v for _, v in read))
            for (h, reason, after, up_to, read), count in zip(lost, counts)]


def _read_damaged(source: RandomAccess, format_version: int, handle: BlockHandle, after: Separator | None,
                  up_to: Separator) -> tuple[tuple[InternalKey, bytes], ...] | None:
    """The entries (keys and values) of a damaged data block as its bytes still read (checksum ignored), when all of it
    decompresses and decodes in order within its index bounds; ``None`` otherwise."""
    try:
        raw = read_exactly(source, handle.offset, handle.size + 1, "damaged data block")
        data = decompress_block(raw[-1], memoryview(raw)[:-1], format_version, offset=handle.offset)
        block = decode_data_block(data, handle.offset, compressed=raw[-1] != CompressionType.NONE, after=after, up_to=up_to)
    except (FormatError, IndexError, ValueError):
        return None
    return tuple((key, bytes(value)) for key, value in block)


def _compression(props: TableProperties | None, block_types: list[int]) -> int:
    configured = configured_compression(props)
    if configured is not None:
        return configured
    compressed = [t for t in block_types if t != CompressionType.NONE]
    return max(set(compressed), key=compressed.count) if compressed else CompressionType.NONE


# -- scan -----------------------------------------------------------------------------------------


def _scan(source: RandomAccess, why: str) -> Salvage:
    """Salvage without the index: blocks found by their checksums from offset 0 on."""
    data = bytes(read_exactly(source, 0, source.size, "table"))
    footer = None
    try:
        footer = decode_footer(data[-min(len(data), FOOTER_SIZE):], len(data))
    except FormatError:
        pass
    if footer is not None and footer.format_version >= 6:
        kinds, base, fv = (footer.checksum_type,), footer.base_context_checksum, footer.format_version
    elif footer is not None:
        kinds, base, fv = (footer.checksum_type,), 0, footer.format_version
    else:
        kinds, base, fv = _SCANNED_CHECKSUMS, 0, None
    limit = footer.footer_offset if footer is not None else len(data)
    found = None
    for kind in kinds:
        end = _find_block_end(data, 0, limit, kind, base)
        if end is not None:
            found = kind, end
            break
    if found is None:
        detail = ("its format_version 6+ block checksums depend on the footer's seed" if footer is None else
                  "no block at offset 0 is proven by its checksum")
        raise SalvageError("first block", 0, "a block proven by its checksum (the index or footer is damaged, so the table is scanned)",
                           "none", detail=f"{detail}; {why}")
    kind, end = found
    fv = fv if fv is not None else 5  # compression framing of format_version >= 2 (every Flink release)
    entries: list[tuple[InternalKey, bytes]] = []
    types: list[int] = []
    offsets: list[int] = []
    pos, stopped, last = 0, None, None
    while pos < limit:
        end = _find_block_end(data, pos, limit, kind, base) if pos else end
        if end is None:
            stopped = pos
            break
        handle = BlockHandle(pos, end - pos)
        type_byte = data[end]
        try:
            block_data = decompress_block(type_byte, memoryview(data)[pos:end], fv, offset=pos)
            block = decode_data_block(block_data, pos, compressed=type_byte != CompressionType.NONE, after=last)
        except FormatError:
            break  # not a data block: the data ends here (filter, index or properties follows)
        if _is_index_of(block_data, offsets) or all(k.user_key.startswith(b"rocksdb.") for k, _ in block):
            break
        entries += block
        types.append(type_byte)
        offsets.append(handle.offset)
        last = block[-1][0]
        pos = end + BLOCK_TRAILER_SIZE
    if stopped is not None and footer is not None and footer.index_handle is not None and stopped >= footer.index_handle.offset:
        stopped = None  # the unproven block is the (damaged) index: every data block lies before it
    walked = _walk_after_data(data, pos, limit, kind, base, fv) if stopped is None else None
    metaindex = footer.metaindex_handle if footer is not None else walked.metaindex if walked else None
    props, tombstones = _meta_blocks(data, metaindex, kind, base, fv) if metaindex is not None else (None, None)
    if tombstones is None and walked is not None and (walked.range_del is not None or walked.complete):
        tombstones = walked.range_del or []
    lost = [(BlockHandle(stopped, 0), "no block from here on is proven by its checksum", last.user_key if last else None, None, None)] if stopped is not None else []
    range_lost = None
    if tombstones is not None:
        range_lost = 0
    elif props is not None and props.num_range_deletions is not None:
        range_lost = props.num_range_deletions
    return Salvage(
        method="scan", entries=entries, range_tombstones=tombstones or [], lost_blocks=_count_lost(lost, props, len(entries)),
        damaged_metadata=[f"index or footer: {why}"], entries_lost=_entries_lost(lost, props, len(entries)),
        range_deletions_lost=range_lost, properties=props, format_version=fv, checksum_type=kind, base_context_checksum=base,
        compression=_compression(props, types), scan_stopped_at=stopped,
    )


@dataclass
class _AfterData:
    """What the blocks after the data are, walked by their checksums."""

    metaindex: BlockHandle | None = None
    range_del: list[tuple[InternalKey, bytes]] | None = None
    #: Every block up to the footer was proven (so a range-deletion block not found is not there).
    complete: bool = False


def _walk_after_data(data: bytes, pos: int, limit: int, kind: int, base: int, fv: int) -> _AfterData:
    """Walk the blocks after the data: the metaindex is the block whose keys all start with ``rocksdb.``
    and whose values are handles of blocks walked before it; the range-deletion block the one whose
    keys are all internal keys of type 0x0F (no other block holds such keys)."""
    found = _AfterData()
    proven: set[int] = set()
    while pos < limit and (end := _find_block_end(data, pos, limit, kind, base)) is not None:
        try:
            contents = decompress_block(data[end], memoryview(data)[pos:end], fv, offset=pos)
            entries = list(BlockReader(contents, pos, block_kind=BlockKind.META.value).entries())
        except (FormatError, IndexError):
            entries = []
        keys = [bytes(key) for _, key, _ in entries]
        if entries and all(len(key) >= 8 and key[-8] == ValueType.RANGE_DELETION for key in keys):
            found.range_del = [_range_tombstone(key, bytes(value), BlockHandle(pos, end - pos)) for _, key, value in entries]
        elif entries and all(key.startswith(b"rocksdb.") for key in keys):
            try:
                handles = [decode_block_handle(value, 0, len(value), "meta block handle")[0] for _, _, value in entries]
            except FormatError:
                handles = []
            if handles and all(h.offset in proven for h in handles):
                found.metaindex = BlockHandle(pos, end - pos)
        proven.add(pos)
        pos = end + BLOCK_TRAILER_SIZE
    # The footer follows the last block (53 bytes, 48 for the legacy footer).
    found.complete = len(data) - pos in (FOOTER_SIZE, FOOTER_SIZE - 5) or pos == limit
    return found


def _meta_blocks(data: bytes, metaindex: BlockHandle, kind: int, base: int, fv: int) -> tuple[TableProperties | None, list | None]:
    """The properties and range deletions of a table whose index or footer is damaged, through its
    metaindex (``None`` for what cannot be read and proven)."""

    def block(handle: BlockHandle, what: str) -> BlockReader:
        stop = handle.offset + handle.size  # where its trailer starts
        if handle.end > len(data):
            raise SalvageError(f"{what} block handle", handle.offset, "a block inside the table", f"size {handle.size}")
        type_byte = data[stop]
        stored = U32.unpack_from(data, stop + 1)[0]
        computed = (block_checksum(kind, memoryview(data)[handle.offset:stop], type_byte) + context_modifier(base, handle.offset)) & 0xFFFFFFFF
        if computed != stored:
            raise SalvageError(f"{what} block checksum", handle.offset, f"0x{stored:08x}", f"0x{computed:08x}")
        contents = decompress_block(type_byte, memoryview(data)[handle.offset:stop], fv, offset=handle.offset)
        return BlockReader(contents, handle.offset, compressed=type_byte != CompressionType.NONE, block_kind=what)

    props = tombstones = None
    try:
        metaindex = {bytes(k): decode_block_handle(v, 0, len(v), "meta block handle")[0] for _, k, v in block(metaindex, "metaindex").entries()}
    except FormatError:
        return None, None
    handle = metaindex.get(b"rocksdb.properties")
    try:
        props = decode_properties(((k, v) for _, k, v in block(handle, "properties").entries()), handle.offset) if handle else None
    except FormatError:
        props = None
    handle = metaindex.get(b"rocksdb.range_del")
    try:
        tombstones = [] if handle is None else [_range_tombstone(key, value, handle) for _, key, value in block(handle, "range_del").entries()]
    except FormatError:
        tombstones = None
    return props, tombstones


def _range_tombstone(key: bytes, value: bytes, handle: BlockHandle) -> tuple[InternalKey, bytes]:
    if len(key) < 8 or key[-8] != ValueType.RANGE_DELETION:
        raise SalvageError("range tombstone", handle.offset, "an internal key of type 0x0f", bytes(key).hex())
    return InternalKey(bytes(key[:-8]), int.from_bytes(key[-8:], "little") >> 8, ValueType.RANGE_DELETION), bytes(value)


def _find_block_end(data: bytes, start: int, limit: int, kind: int, base: int) -> int | None:
    """Where the block starting at ``start`` ends (its trailer's offset): the first end whose trailer's
    checksum matches the bytes before it; ``None`` when there is none within :data:`SCAN_MAX_BLOCK_SIZE`."""
    modifier = context_modifier(base, start)
    view = memoryview(data)
    stop = min(limit - BLOCK_TRAILER_SIZE, start + SCAN_MAX_BLOCK_SIZE)
    for end in range(start + 4, stop + 1):  # a block holds at least its restart count
        type_byte = data[end]
        if type_byte not in _COMPRESSION_TYPES:
            continue
        stored = U32.unpack_from(data, end + 1)[0]
        if (block_checksum(kind, view[start:end], type_byte) + modifier) & 0xFFFFFFFF == stored:
            return end
    return None


def _is_index_of(block_data, offsets: list[int]) -> bool:
    """Whether a block parsed as data is rather an index over the blocks found so far (its entries'
    values are handles of those blocks)."""
    if not offsets:
        return False
    known = set(offsets)
    for delta in (False, True):
        try:
            reader = BlockReader(block_data, 0, block_kind=BlockKind.INDEX.value)
            handles = [h for _, _, h, _ in reader.index_entries(value_delta_encoded=delta)]
        except (FormatError, IndexError):
            continue
        if handles and all(h.offset in known for h in handles):
            return True
    return False
