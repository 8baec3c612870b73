"""Block checksums of RocksDB block-based tables (and the masked CRC32C shared with log files).

What is checksummed (RocksDB ``table/format.cc``, ``ComputeBuiltinChecksumWithLastByte``): the block
as stored (possibly compressed) **plus** the one-byte compression type that follows it. The four
bytes after the type byte hold the checksum, little-endian.

* ``kCRC32c`` (1): CRC-32C over payload + type byte, then *masked* (``util/crc32c.h``).
* ``kxxHash`` (2): XXH32, seed 0, over payload + type byte.
* ``kxxHash64`` (3): low 32 bits of XXH64, seed 0, over payload + type byte.
* ``kXXH3`` (4): low 32 bits of XXH3-64 over the payload only, then XOR ``type * 0x6b9083d9``
  (``ModifyChecksumForLastByte``); the checksum of an empty input is 0.
* format_version >= 6 adds a *context*: the stored value is the checksum above plus
  ``base ^ (low32(offset) + high32(offset))`` (``table/format.h``, ``ChecksumModifierForContext``),
  ``base`` being the random ``base_context_checksum`` of the footer and ``offset`` the block's offset.

All functions take memoryviews and hand them straight to the C libraries (``crc32c``, ``xxhash``).
"""

from __future__ import annotations

import enum
import importlib.machinery
import importlib.util
import struct
import sys
from itertools import count

import xxhash as _xxhash


def _crc32c_functions():
    """The ``crc32c`` package's C extension, loaded without running the package's ``__init__``: that
    reads the package's version from the installed distributions (``importlib.metadata``), about 0.02
    CPU s, a tenth of a short command's start-up (docs/benchmarks.md, "Start-up"). The package itself
    where it is imported already or laid out otherwise."""
    package = sys.modules.get("crc32c") or importlib.util.find_spec("crc32c")
    if package is not None and not isinstance(package, type(sys)):
        spec = importlib.machinery.PathFinder.find_spec("crc32c._crc32c", package.submodule_search_locations or [])
        if spec is not None and spec.loader is not None:
            extension = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(extension)
            sys.modules[spec.name] = extension  # the package, if imported later, takes this one
            return extension
    import crc32c

    return crc32c


_crc32c = _crc32c_functions()
_MASK_DELTA = 0xA282EAD8
_XXH3_LAST_BYTE_PRIME = 0x6B9083D9


class ChecksumType(enum.IntEnum):
    """``enum ChecksumType`` of ``include/rocksdb/table.h``."""

    NONE = 0
    CRC32C = 1
    XXHASH32 = 2
    XXHASH64 = 3
    XXH3 = 4


def mask_crc(crc: int) -> int:
    """RocksDB/LevelDB CRC masking: rotate right by 15 bits and add a constant (``crc32c::Mask``)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    """Inverse of :func:`mask_crc`."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def crc32c(data, crc: int = 0) -> int:
    """Plain (unmasked) CRC-32C of ``data``, optionally extending ``crc``."""
    return _crc32c.crc32c(data, crc)


def block_checksum(kind: int, payload, type_byte: int) -> int:
    """The builtin checksum of a block: ``payload`` followed by its compression ``type_byte``.

    ``payload`` is the stored block (bytes or memoryview), without the trailer. Returns the value
    RocksDB stores *before* any context modifier. Raises ``ValueError`` for an unknown type.
    """
    if kind == ChecksumType.CRC32C:
        return mask_crc(_crc32c.crc32c(bytes((type_byte,)), _crc32c.crc32c(payload)))
    if kind == ChecksumType.XXH3:
        return (_xxhash.xxh3_64_intdigest(payload) & 0xFFFFFFFF) ^ ((type_byte * _XXH3_LAST_BYTE_PRIME) & 0xFFFFFFFF)
    if kind == ChecksumType.XXHASH32:
        hasher = _xxhash.xxh32(payload)
        hasher.update(bytes((type_byte,)))
        return hasher.intdigest()
    if kind == ChecksumType.XXHASH64:
        hasher = _xxhash.xxh64(payload)
        hasher.update(bytes((type_byte,)))
        return hasher.intdigest() & 0xFFFFFFFF
    if kind == ChecksumType.NONE:
        return 0
    raise ValueError(f"unknown checksum type {kind}")


def buffer_checksum(kind: int, data) -> int:
    """The builtin checksum of a whole buffer (RocksDB ``ComputeBuiltinChecksum``).

    Used for the format_version 6 footer: the last byte plays the role of the type byte.
    """
    if len(data) == 0:
        return _empty_buffer_checksum(kind)
    view = memoryview(data)
    return block_checksum(kind, view[:-1], view[-1])


def _empty_buffer_checksum(kind: int) -> int:
    # kXXH3 special-cases the empty input to 0 (there is no last byte to mix in).
    if kind in (ChecksumType.NONE, ChecksumType.XXH3):
        return 0
    if kind == ChecksumType.CRC32C:
        return mask_crc(0)
    if kind == ChecksumType.XXHASH32:
        return _xxhash.xxh32_intdigest(b"")
    if kind == ChecksumType.XXHASH64:
        return _xxhash.xxh64_intdigest(b"") & 0xFFFFFFFF
    raise ValueError(f"unknown checksum type {kind}")


def context_modifier(base_context_checksum: int, offset: int) -> int:
    """Checksum modifier of format_version >= 6 for a block at ``offset`` (0 when ``base`` is 0)."""
    if base_context_checksum == 0:
        return 0
    return base_context_checksum ^ (((offset & 0xFFFFFFFF) + (offset >> 32)) & 0xFFFFFFFF)


def stored_block_checksum(kind: int, payload, type_byte: int, base_context_checksum: int = 0, offset: int = 0) -> int:
    """The 32-bit value a writer stores after ``payload`` + ``type_byte`` (context included)."""
    return (block_checksum(kind, payload, type_byte) + context_modifier(base_context_checksum, offset)) & 0xFFFFFFFF


_TYPE_BYTES = [bytes((i,)) for i in range(256)]
_XXH3_TYPE_MIX = [(i * _XXH3_LAST_BYTE_PRIME) & 0xFFFFFFFF for i in range(256)]


def checksum_function(kind: int):
    """A fast ``f(payload, type_byte) -> int`` equal to :func:`block_checksum` for ``kind``.

    ``None`` for :attr:`ChecksumType.NONE`. Used by the verification loop, where the per-block
    Python overhead matters as much as the hashing itself.
    """
    crc = _crc32c.crc32c
    if kind == ChecksumType.CRC32C:
        def crc32c_checksum(payload, type_byte: int) -> int:
            value = crc(_TYPE_BYTES[type_byte], crc(payload))
            return ((((value >> 15) | (value << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF

        return crc32c_checksum
    if kind == ChecksumType.XXH3:
        xxh3 = _xxhash.xxh3_64_intdigest

        def xxh3_checksum(payload, type_byte: int) -> int:
            return (xxh3(payload) & 0xFFFFFFFF) ^ _XXH3_TYPE_MIX[type_byte]

        return xxh3_checksum
    if kind == ChecksumType.NONE:
        return None
    if kind in (ChecksumType.XXHASH32, ChecksumType.XXHASH64):
        return lambda payload, type_byte: block_checksum(kind, payload, type_byte)
    raise ValueError(f"unknown checksum type {kind}")


# -- many blocks at once -------------------------------------------------------------------------

_U32 = struct.Struct("<I")


def mismatched_blocks(kind: int, data, starts: list[int], stops: list[int], *, base_context_checksum: int = 0,
                      offsets: list[int] | None = None) -> list[int]:
    """The indices ``k`` of the blocks whose stored checksum does not match, in increasing order.

    Block ``k`` is ``data[starts[k]:stops[k] - 1]``, its type byte ``data[stops[k] - 1]`` and its
    stored checksum the 4 bytes at ``stops[k]``, as in a table. ``offsets[k]`` (the blocks' file
    offsets) are needed with a ``base_context_checksum`` (format_version >= 6). The same answer as
    comparing :func:`stored_block_checksum` with the stored value block by block, with less work per
    block (the verification loop's main cost): one C call for the hash over a memoryview slice, a
    few integer operations, one C call for the stored value, and one list comparison for all blocks.
    """
    if kind == ChecksumType.NONE or not starts:
        return []
    mask = 0xFFFFFFFF
    unpack = _U32.unpack_from
    if kind == ChecksumType.CRC32C and not base_context_checksum:
        # The usual case in one pass, each block's value compared with the stored one as it is computed
        # (10% less than building both lists: docs/benchmarks/verify.md). crc32c::Mask: rotate right by 15
        # (v * (2^32 + 1) >> 15 holds the rotated value in its low 32 bits), add the delta.
        crc, delta = _crc32c.crc32c, _MASK_DELTA
        return [k for k, a, b in zip(count(), starts, stops) if ((crc(data[a:b]) * 0x100000001 >> 15) + delta) & mask != unpack(data, b)[0]]
    if kind == ChecksumType.CRC32C:
        crc, delta = _crc32c.crc32c, _MASK_DELTA
        values = [((crc(data[a:b]) * 0x100000001 >> 15) + delta) & mask for a, b in zip(starts, stops)]
    elif kind == ChecksumType.XXH3:
        xxh3, mix = _xxhash.xxh3_64_intdigest, _XXH3_TYPE_MIX
        values = [(xxh3(data[a : b - 1]) & mask) ^ mix[data[b - 1]] for a, b in zip(starts, stops)]
    elif kind == ChecksumType.XXHASH32:
        xxh32 = _xxhash.xxh32_intdigest
        values = [xxh32(data[a:b]) for a, b in zip(starts, stops)]
    elif kind == ChecksumType.XXHASH64:
        xxh64 = _xxhash.xxh64_intdigest
        values = [xxh64(data[a:b]) & mask for a, b in zip(starts, stops)]
    else:
        raise ValueError(f"unknown checksum type {kind}")
    if base_context_checksum:
        # ChecksumModifierForContext, added to the checksum: base ^ (low32(offset) + high32(offset)).
        base = base_context_checksum
        values = [(v + ((((o & mask) + (o >> 32)) & mask) ^ base)) & mask for v, o in zip(values, offsets)]
    stored = [unpack(data, b)[0] for b in stops]
    if values == stored:
        return []
    return [k for k, (x, y) in enumerate(zip(values, stored)) if x != y]
