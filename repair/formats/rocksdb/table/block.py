"""Blocks of a RocksDB block-based table: handles, trailers, entries, internal keys.

Block layout (RocksDB ``table/block_based/block_builder.cc``)::

    entry*  restart_offset(fixed32)*  [hash index]  footer(fixed32)

Each entry is ``shared`` (varint32), ``non_shared`` (varint32), ``value_length`` (varint32), the
``non_shared`` key bytes and the value; the key is the first ``shared`` bytes of the previous key
plus the new bytes, and ``shared`` is 0 at restart points. The footer's low 28 bits are the number
of restart points; bit 31 says a data-block hash index sits between the restart array and the
footer (``table/block_based/data_block_footer.cc``), bit 29 is a "uniform keys" hint and bit 28
marks the separated key/value layout of RocksDB 11 (not supported here).

Index blocks with delta-encoded values (format_version >= 4, property
``rocksdb.index.value.is.delta.encoded``) omit ``value_length``; the value is a full BlockHandle
when ``shared == 0`` and otherwise a zigzag varint64 size delta, the offset following the previous
block and its 5-byte trailer (``table/format.cc``, ``IndexValue::DecodeFrom``).

Every decoder here is pure: it gets bytes and the file offset they came from, and raises
:class:`TableFormatError` (a :class:`~repair.errors.FormatError`) naming field and file offset.
"""

from __future__ import annotations

import enum
import sys
from typing import Any, Iterator, NamedTuple

from repair.errors import FormatError
from repair.formats.bytes.coding import U32, decode_varint32, decode_varint64, zigzag_decode
from repair.formats.records import record

#: Every block on disk is followed by 1 byte of compression type and a 4-byte checksum.
BLOCK_TRAILER_SIZE = 5

_HASH_INDEX_BIT = 1 << 31
_UNIFORM_KEYS_BIT = 1 << 29
_SEPARATED_KV_BIT = 1 << 28
_MAX_NUM_RESTARTS = (1 << 28) - 1


class TableFormatError(FormatError):
    """A :class:`FormatError` in an SST, with the finding ``kind`` it maps to and the block kind.

    ``kind`` is one of the finding kinds of :mod:`repair.formats.rocksdb.table.sst` (``bad_block``,
    ``bad_block_handle``, ``bad_magic`` ...).
    """

    def __init__(self, kind: str, field: str, offset: int, expected, found, *, block_kind: str | None = None, detail: str | None = None):
        super().__init__(field, offset, expected, found, detail=detail)
        self.kind = kind
        self.block_kind = block_kind


class BlockHandle(NamedTuple):
    """Where a block lives: ``offset`` and ``size`` (trailer excluded), ``table/format.h``."""

    offset: int
    size: int

    @property
    def end(self) -> int:
        """Offset just past the block's trailer."""
        return self.offset + self.size + BLOCK_TRAILER_SIZE

    def is_null(self) -> bool:
        return self.offset == 0 and self.size == 0


def decode_block_handle(data, pos: int, end: int, field: str, base: int = 0) -> tuple[BlockHandle, int]:
    """A BlockHandle (varint64 offset, varint64 size) at ``data[pos:]``; returns ``(handle, next)``."""
    offset, pos = decode_varint64(data, pos, end, field + " offset", base)
    size, pos = decode_varint64(data, pos, end, field + " size", base)
    return BlockHandle(offset, size), pos


def encode_block_handle(handle: BlockHandle) -> bytes:
    from repair.formats.bytes.coding import encode_varint

    return encode_varint(handle.offset) + encode_varint(handle.size)


class ValueType(enum.IntEnum):
    """Value types of internal keys (RocksDB ``db/dbformat.h``); names follow RocksDB's."""

    DELETION = 0x0
    VALUE = 0x1
    MERGE = 0x2
    LOG_DATA = 0x3
    COLUMN_FAMILY_DELETION = 0x4
    COLUMN_FAMILY_VALUE = 0x5
    COLUMN_FAMILY_MERGE = 0x6
    SINGLE_DELETION = 0x7
    COLUMN_FAMILY_SINGLE_DELETION = 0x8
    BEGIN_PREPARE_XID = 0x9
    END_PREPARE_XID = 0xA
    COMMIT_XID = 0xB
    ROLLBACK_XID = 0xC
    NOOP = 0xD
    COLUMN_FAMILY_RANGE_DELETION = 0xE
    RANGE_DELETION = 0xF
    COLUMN_FAMILY_BLOB_INDEX = 0x10
    BLOB_INDEX = 0x11
    BEGIN_PERSISTED_PREPARE_XID = 0x12
    BEGIN_UNPREPARE_XID = 0x13
    DELETION_WITH_TIMESTAMP = 0x14
    COMMIT_XID_AND_TIMESTAMP = 0x15
    WIDE_COLUMN_ENTITY = 0x16
    COLUMN_FAMILY_WIDE_COLUMN_ENTITY = 0x17
    VALUE_PREFERRED_SEQNO = 0x18
    COLUMN_FAMILY_VALUE_PREFERRED_SEQNO = 0x19


#: Value types that may appear in the data blocks of an SST (``IsExtendedValueType``).
SST_VALUE_TYPES = frozenset(
    {
        ValueType.DELETION,
        ValueType.VALUE,
        ValueType.MERGE,
        ValueType.SINGLE_DELETION,
        ValueType.BLOB_INDEX,
        ValueType.DELETION_WITH_TIMESTAMP,
        ValueType.WIDE_COLUMN_ENTITY,
        ValueType.VALUE_PREFERRED_SEQNO,
    }
)

#: Largest sequence number, ``kMaxSequenceNumber = 2^56 - 1``.
MAX_SEQUENCE_NUMBER = (1 << 56) - 1


def value_type_name(code: int) -> str:
    try:
        return ValueType(code).name.lower()
    except ValueError:
        return f"0x{code:02x}"


@record(frozen=True, slots=True)
class InternalKey:
    """An internal key: user key, then ``(seqno << 8) | type`` as fixed64 (``db/dbformat.h``)."""

    user_key: bytes
    seqno: int
    value_type: int

    def encode(self) -> bytes:
        return self.user_key + ((self.seqno << 8) | self.value_type).to_bytes(8, "little")


def decode_internal_key(key: bytes, offset: int = 0, field: str = "internal key") -> InternalKey:
    """Split an encoded internal key; ``offset`` is the file offset used in errors."""
    if len(key) < 8:
        raise TableFormatError("bad_entry", field, offset, "at least 8 bytes (user key + seqno/type)", f"{len(key)} bytes")
    packed = int.from_bytes(key[-8:], "little")
    return InternalKey(bytes(key[:-8]), packed >> 8, packed & 0xFF)


@record(frozen=True, slots=True)
class BlockLayout:
    """Where the entries of a decoded block end, and its restart points."""

    entries_end: int
    num_restarts: int
    restarts_offset: int
    has_hash_index: bool


def _two_byte_varints(data, pos: int) -> tuple[int, int, int, int] | None:
    """Three varints of at most two bytes each at ``pos`` (six bytes must be left), and the position
    after them; None when one is longer."""
    values = []
    for _ in range(3):
        byte = data[pos]
        if byte < 0x80:
            values.append(byte)
            pos += 1
            continue
        high = data[pos + 1]
        if high >= 0x80:
            return None
        values.append((byte & 0x7F) | (high << 7))
        pos += 2
    return values[0], values[1], values[2], pos


class BlockReader:
    """Decodes one (already decompressed) block.

    ``file_offset`` is the block's offset in the file. When the block was stored compressed,
    positions inside it do not map to file offsets, so errors give the block's offset and say at
    which byte of the decompressed block the problem is.
    """

    __slots__ = ("data", "file_offset", "compressed", "block_kind", "layout")

    def __init__(self, data, file_offset: int, *, compressed: bool = False, block_kind: str = "data"):
        self.data = bytes(data)
        self.file_offset = file_offset
        self.compressed = compressed
        self.block_kind = block_kind
        self.layout = self._decode_layout()

    # -- errors ----------------------------------------------------------------------------------
    def error(self, field: str, pos: int, expected, found, *, detail: str | None = None, kind: str = "bad_block") -> TableFormatError:
        """A :class:`TableFormatError` at byte ``pos`` of this block."""
        where = f"{self.block_kind} block at offset {self.file_offset}"
        if self.compressed:
            extra = f"byte {pos} of the decompressed {where}"
            return TableFormatError(kind, field, self.file_offset, expected, found, block_kind=self.block_kind, detail=f"{extra}; {detail}" if detail else extra)
        return TableFormatError(kind, field, self.file_offset + pos, expected, found, block_kind=self.block_kind, detail=detail or where)

    def _varint32(self, pos: int, end: int, field: str) -> tuple[int, int]:
        try:
            return decode_varint32(self.data, pos, end, field)
        except FormatError as exc:
            raise self.error(field, pos, exc.expected, exc.found) from None

    # -- layout ----------------------------------------------------------------------------------
    def _decode_layout(self) -> BlockLayout:
        data = self.data
        size = len(data)
        if size < 4:
            raise self.error("block footer", 0, "at least 4 bytes (restart count)", f"{size} bytes", kind="truncated")
        packed = U32.unpack_from(data, size - 4)[0]
        has_hash_index = bool(packed & _HASH_INDEX_BIT)
        if packed & _SEPARATED_KV_BIT:
            raise self.error("block footer", size - 4, "a block without separated keys and values (RocksDB 11 feature)", f"0x{packed:08x}", kind="unsupported_feature")
        num_restarts = packed & ~(_HASH_INDEX_BIT | _UNIFORM_KEYS_BIT)
        if num_restarts > _MAX_NUM_RESTARTS:
            raise self.error("block footer", size - 4, "no reserved feature bits", f"0x{packed:08x}")
        end = size - 4
        if has_hash_index:
            # Data-block hash index: buckets (1 byte each) then a uint16 bucket count.
            if end < 2:
                raise self.error("hash index bucket count", 0, "2 bytes", f"{end} bytes", kind="truncated")
            num_buckets = int.from_bytes(data[end - 2 : end], "little")
            end -= 2 + num_buckets
            if end < 0:
                raise self.error("hash index bucket count", size - 6, f"at most {size - 6} buckets", num_buckets)
        if num_restarts == 0:
            raise self.error("restart count", size - 4, "at least 1 restart point", 0)
        restarts_offset = end - 4 * num_restarts
        if restarts_offset < 0:
            raise self.error("restart count", size - 4, f"at most {end // 4} restart points (block size {size})", num_restarts)
        first = U32.unpack_from(data, restarts_offset)[0]
        if first != 0:
            raise self.error("restart point 0", restarts_offset, 0, first)
        last = U32.unpack_from(data, restarts_offset + 4 * (num_restarts - 1))[0]
        if last > restarts_offset or (last == restarts_offset and restarts_offset > 0):
            raise self.error(f"restart point {num_restarts - 1}", restarts_offset + 4 * (num_restarts - 1), f"an offset below {restarts_offset}", last)
        return BlockLayout(restarts_offset, num_restarts, restarts_offset, has_hash_index)

    def restart_points(self) -> list[int]:
        """The restart offsets (checked to be increasing and inside the entries)."""
        layout = self.layout
        points = [U32.unpack_from(self.data, layout.restarts_offset + 4 * i)[0] for i in range(layout.num_restarts)]
        for i in range(1, len(points)):
            if not points[i - 1] < points[i] < layout.entries_end:
                raise self.error(f"restart point {i}", layout.restarts_offset + 4 * i, f"an offset in ({points[i - 1]}, {layout.entries_end})", points[i])
        return points

    # -- entries ---------------------------------------------------------------------------------
    def entries(self) -> Iterator[tuple[int, bytes, bytes]]:
        """Yield ``(position, key, value)`` for every entry, keys fully rebuilt from shared prefixes."""
        data = self.data
        end = self.layout.entries_end
        pos = 0
        key = b""
        while pos < end:
            start = pos
            # Fast paths: all three varints are single bytes (RocksDB's DecodeEntry does the same), or
            # each takes at most two (keys and values below 16 KiB).
            if pos + 3 <= end and (data[pos] | data[pos + 1] | data[pos + 2]) < 0x80:
                shared, non_shared, value_len = data[pos], data[pos + 1], data[pos + 2]
                pos += 3
            elif pos + 6 <= end and (two := _two_byte_varints(data, pos)) is not None:
                shared, non_shared, value_len, pos = two
            else:
                shared, pos = self._varint32(pos, end, "entry shared key length")
                non_shared, pos = self._varint32(pos, end, "entry unshared key length")
                value_len, pos = self._varint32(pos, end, "entry value length")
            if shared > len(key):
                raise self.error("entry shared key length", start, f"at most {len(key)} (previous key length)", shared)
            value_start = pos + non_shared
            value_end = value_start + value_len
            if value_end > end:
                raise self.error("entry", start, f"key and value within the block ({end - pos} bytes left)", f"{non_shared + value_len} bytes", kind="bad_block")
            key = key[:shared] + data[pos:value_start] if shared else data[pos:value_start]
            yield start, key, data[value_start:value_end]
            pos = value_end

    def index_entries(self, *, value_delta_encoded: bool, have_first_key: bool = False) -> Iterator[tuple[int, bytes, BlockHandle, bytes | None]]:
        """Yield ``(position, key, handle, first_internal_key)`` for every entry of an index block."""
        if not value_delta_encoded:
            for pos, key, value in self.entries():
                handle, used = self._decode_handle(value, 0, len(value), pos)
                first_key = None
                if have_first_key:
                    first_key, used = self._length_prefixed(value, used, len(value), pos, "index entry first key")
                yield pos, key, handle, first_key
            return
        data = self.data
        end = self.layout.entries_end
        pos = 0
        key = b""
        previous: BlockHandle | None = None
        while pos < end:
            start = pos
            shared, pos = self._varint32(pos, end, "index entry shared key length")
            non_shared, pos = self._varint32(pos, end, "index entry unshared key length")
            if shared > len(key):
                raise self.error("index entry shared key length", start, f"at most {len(key)} (previous key length)", shared)
            if pos + non_shared > end:
                raise self.error("index entry key", pos, f"at most {end - pos} bytes", non_shared)
            key = key[:shared] + data[pos : pos + non_shared]
            pos += non_shared
            if shared == 0 or previous is None:
                # Restart point (or first entry): a full handle.
                handle, pos = self._decode_handle(data, pos, end, start)
            else:
                try:
                    delta, pos = decode_varint64(data, pos, end, "index entry size delta")
                except FormatError as exc:
                    raise self.error(exc.field, start, exc.expected, exc.found, kind="bad_block_handle") from None
                size = previous.size + zigzag_decode(delta)
                if size < 0:
                    raise self.error("index entry size delta", start, f"a delta >= {-previous.size}", zigzag_decode(delta), kind="bad_block_handle")
                handle = BlockHandle(previous.end, size)
            first_key = None
            if have_first_key:
                first_key, pos = self._length_prefixed(data, pos, end, start, "index entry first key")
            previous = handle
            yield start, key, handle, first_key

    def index_handles(self, *, value_delta_encoded: bool, have_first_key: bool = False) -> list[BlockHandle]:
        """The handles of an index block, without rebuilding keys (fast path for verification)."""
        if not value_delta_encoded or have_first_key:
            return [h for _, _, h, _ in self.index_entries(value_delta_encoded=value_delta_encoded, have_first_key=have_first_key)]
        data = self.data
        end = self.layout.entries_end
        handles: list[BlockHandle] = []
        pos = 0
        prev_end = -1
        prev_size = 0
        while pos < end:
            start = pos
            shared = data[pos]
            if shared < 0x80 and pos + 1 < end and data[pos + 1] < 0x80:
                pos += 2 + data[pos + 1]
            else:
                shared, pos = self._varint32(pos, end, "index entry shared key length")
                non_shared, pos = self._varint32(pos, end, "index entry unshared key length")
                pos += non_shared
            if pos > end:
                raise self.error("index entry key", start, f"a key within the block ({end - start} bytes left)", "a longer key")
            try:
                if shared == 0 or prev_end < 0:
                    offset, pos = decode_varint64(data, pos, end, "block handle offset")
                    size, pos = decode_varint64(data, pos, end, "block handle size")
                else:
                    delta, pos = decode_varint64(data, pos, end, "index entry size delta")
                    offset, size = prev_end, prev_size + zigzag_decode(delta)
            except FormatError as exc:
                raise self.error(exc.field, start, exc.expected, exc.found, kind="bad_block_handle") from None
            if size < 0:
                raise self.error("index entry size delta", start, "a resulting size >= 0", size, kind="bad_block_handle")
            handles.append(BlockHandle(offset, size))
            prev_end = offset + size + BLOCK_TRAILER_SIZE
            prev_size = size
        return handles

    def _decode_handle(self, data, pos: int, end: int, entry_pos: int) -> tuple[BlockHandle, int]:
        try:
            return decode_block_handle(data, pos, end, "block handle")
        except FormatError as exc:
            raise self.error(exc.field, entry_pos, exc.expected, exc.found, kind="bad_block_handle") from None

    def _length_prefixed(self, data, pos: int, end: int, entry_pos: int, field: str) -> tuple[bytes, int]:
        try:
            length, pos = decode_varint32(data, pos, end, field + " length")
        except FormatError as exc:
            raise self.error(exc.field, entry_pos, exc.expected, exc.found) from None
        if pos + length > end:
            raise self.error(field, entry_pos, f"at most {end - pos} bytes", length)
        return bytes(data[pos : pos + length]), pos + length


# -- bulk decoding of index blocks -----------------------------------------------------------------

#: Index blocks with fewer entries are decoded by the Python loop (the bulk decoder's fixed cost of
#: about 80 array operations only pays off for larger blocks).
BULK_INDEX_MIN_ENTRIES = 256


def bulk_index_arrays(data: bytes, layout: BlockLayout) -> tuple[list[int], list[int]] | None:
    """The handles of a delta-encoded index block as ``(offsets, sizes)``, decoded in bulk, or ``None``.

    RocksDB writes index blocks with a restart point at every entry (``index_block_restart_interval``
    1, the default), so every entry is ``shared`` 0, a 1- or 2-byte ``non_shared``, the key and a
    full handle (two varints), and the restart array says where each entry starts. That makes each
    field a column: gathered for all entries at once with ``pyarrow``'s ``take`` and decoded with
    vectorised integer operations, instead of about 40 Python operations per entry (large tables have
    tens of thousands of entries; this is 5 to 8 times faster).

    Answers only when every entry has exactly that shape and ends where the next one starts (the last
    one at ``entries_end``): then the sequential decoders (:meth:`BlockReader.index_handles`) read the
    same entries and return the same handles. Anything else (a shorter restart interval, longer
    varints, a key length of more than 2 bytes, offsets or sizes of 2^35 or more, bytes that do not
    fit) gives ``None``, and the caller runs the sequential decoder, which gives the result or the
    error. Also ``None`` for blocks of fewer than :data:`BULK_INDEX_MIN_ENTRIES` entries.
    """
    n = layout.num_restarts
    if n < BULK_INDEX_MIN_ENTRIES:
        return None
    k = _array_kernels()
    if k is None:
        return None
    pa = k.pa
    data = bytes(data)
    restarts = pa.py_buffer(data[layout.restarts_offset : layout.restarts_offset + 4 * n])
    starts = pa.Array.from_buffers(pa.uint32(), n, [None, restarts])
    # Gathers read the 8 bytes from each handle's start; the zero padding keeps the last ones in range.
    padded = data + bytes(16)
    column = pa.Array.from_buffers(pa.uint8(), len(padded), [None, pa.py_buffer(padded)])
    try:
        if k.max(k.take(column, starts)):  # shared key length: 0 at every restart point
            return None
        key_length = k.take(column, k.add(starts, k.u64(1)))  # non_shared, first byte
        handle_start = k.add(k.add(starts, k.u64(2)), key_length)
        if k.max(key_length) >= 0x80:
            # A 2-byte non_shared: (b1 & 0x7f) | (b2 << 7), and one more header byte.
            long_key = k.shift_right(key_length, k.u64(7))
            second = k.take(column, k.add(starts, k.u64(2)))
            if k.max(k.bit_wise_and(long_key, k.shift_right(second, k.u64(7)))):
                return None
            extra = k.subtract(k.multiply(k.shift_left(second, k.u64(7)), long_key), k.multiply(long_key, k.u64(127)))
            handle_start = k.add(handle_start, extra)
        # The handle as one 8-byte word per entry: offset varint, size varint, then whatever follows.
        word = k.gather_words(column, handle_start, n)
        offsets, offset_length = k.varint(word)
        if offsets is None:
            return None
        sizes, size_length = k.varint(k.shift_right(word, k.multiply(offset_length, k.u64(8))))
        if sizes is None:
            return None
        # The size was decoded from the bytes of the word after the offset, then zeros: a size varint
        # that runs past the word's 8 bytes seems to end on one of those zeros, at byte 9 or later.
        handle_length = k.add(offset_length, size_length)
        if k.max(handle_length) > 8:
            return None
        # Every entry must end where the next one starts, the last at entries_end.
        ends = k.add(handle_start, handle_length)
        if not k.all_equal(ends.slice(0, n - 1), starts.slice(1)) or k.to_list(ends.slice(n - 1), 1) != [layout.entries_end]:
            return None
    except (pa.ArrowIndexError, pa.ArrowInvalid, IndexError):
        return None
    return k.to_list(offsets, n), k.to_list(sizes, n)


class _ArrayKernels:
    """The ``pyarrow`` compute kernels :func:`bulk_index_arrays` uses, with unsigned 64-bit scalars."""

    def __init__(self, pa, get_function):
        self.pa = pa
        self._u64 = pa.uint64()
        call = {name: get_function(name).call for name in (
            "take", "add", "subtract", "multiply", "bit_wise_and", "bit_wise_or", "bit_wise_xor",
            "shift_left", "shift_right", "negate", "min_max", "equal", "all",
        )}
        self._call = call
        self._scalars: dict[int, Any] = {}
        u = self.u64
        # Varint decoding of the low 5 bytes of a word (see varint).
        self._continuation = u(0x8080808080)
        self._payload = u(0x7F7F7F7F7F)
        self._groups = [(u(j), u(0x7F << (7 * j))) for j in range(5)]  # byte j's bits move right by j
        # (low >> 7) is 256^(L-1) for a varint of L bytes; times this, its byte 4 is L.
        self._length_multiplier = u(5 | 4 << 8 | 3 << 16 | 2 << 24 | 1 << 32)

    def u64(self, value: int):
        scalar = self._scalars.get(value)
        if scalar is None:
            scalar = self._scalars[value] = self.pa.scalar(value, self._u64)
        return scalar

    def __getattr__(self, name: str):
        call = self._call[name]
        return lambda *args: call(list(args))

    def max(self, array) -> int:
        return self._call["min_max"]([array])["max"].as_py()

    def all_equal(self, a, b) -> bool:
        return bool(self._call["all"]([self._call["equal"]([a, b])]).as_py())

    def gather_words(self, column, positions, n: int):
        """``column[p : p + 8]`` as one little-endian uint64 per position (8 gathers, interleaved)."""
        take, add, u = self._call["take"], self._call["add"], self.u64
        word = bytearray(8 * n)
        for j in range(8):
            plane = take([column, add([positions, u(j)]) if j else positions])
            word[j::8] = memoryview(plane.buffers()[1])[plane.offset : plane.offset + n]
        return self.pa.Array.from_buffers(self._u64, n, [None, self.pa.py_buffer(word)])

    def varint(self, word):
        """The varint of at most 5 bytes at the low end of each word: ``(values, lengths)``.

        ``(None, None)`` if some word holds no varint end in its low 5 bytes.
        """
        c = self._call
        u = self.u64
        # One bit per byte that ends a varint (high bit clear); keep the lowest.
        ends = c["bit_wise_xor"]([c["bit_wise_and"]([word, self._continuation]), self._continuation])
        low = c["bit_wise_and"]([ends, c["negate"]([ends])])  # wraps around: the lowest set bit
        if c["min_max"]([low])["min"].as_py() == 0:
            return None, None
        # The 7 payload bits of each byte of the varint (those below the last byte's high bit).
        payload = c["bit_wise_and"]([word, c["bit_wise_and"]([c["subtract"]([low, u(1)]), self._payload])])
        value = None
        for shift, group in self._groups:
            part = c["bit_wise_and"]([c["shift_right"]([payload, shift]) if shift.as_py() else payload, group])
            value = part if value is None else c["bit_wise_or"]([value, part])
        length = c["bit_wise_and"]([
            c["shift_right"]([c["multiply"]([c["shift_right"]([low, u(7)]), self._length_multiplier]), u(32)]), u(0xFF),
        ])
        return value, length

    @staticmethod
    def to_list(array, n: int) -> list[int]:
        return memoryview(array.buffers()[1])[8 * array.offset : 8 * (array.offset + n)].cast("Q").tolist()


_KERNELS: list = []


def _array_kernels() -> _ArrayKernels | None:
    """The kernels, created on first use; ``None`` where ``pyarrow`` or a little-endian host is missing."""
    if not _KERNELS:
        kernels = None
        if sys.byteorder == "little":
            try:
                import pyarrow as pa
                from pyarrow._compute import get_function  # pyarrow.compute imports 300 wrappers (50 ms)
            except ImportError:
                pass
            else:
                kernels = _ArrayKernels(pa, get_function)
        _KERNELS.append(kernels)
    return _KERNELS[0]
