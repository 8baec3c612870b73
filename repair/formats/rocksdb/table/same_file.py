"""Whether a sound SST is the intact original of a damaged one: the same physical file, byte for byte.

Copies of one SST exist outside its checkpoint's root: a native savepoint's copy of the instance's live
files, the root of a job restored from it in NO_CLAIM mode (whose first checkpoint uploads every live
SST again), a copy a user made. When such a copy is the damaged file's original, putting it in the
damaged file's place loses nothing. :func:`intact_original` proves it from the bytes alone:

* the copy has the size ``_metadata`` records for the damaged file and verifies whole (every block's
  checksum, every compressed block decompressed);
* every block of the copy is either byte-identical in the damaged file, or fails its checksum there
  (the damage: a block that *proves itself* with different bytes belongs to another file), or lies past
  the damaged file's end (a truncation); only the footer, which carries no checksum before
  format_version 6, may differ beyond that;
* at least one whole block is identical (a damaged file all of whose blocks fail proves nothing).

A file without block checksums (``kNoChecksum``) can never be matched. Pure: bytes in, a reason out.
"""

from __future__ import annotations

from repair.errors import FormatError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.block import BLOCK_TRAILER_SIZE
from repair.formats.rocksdb.table.checksum import block_checksum, context_modifier
from repair.formats.rocksdb.table.sst import ChecksumType, open_table, verify_table


def intact_original(damaged: bytes, copy: bytes, recorded_size: int) -> str | None:
    """How ``copy`` is proven to be the intact original of ``damaged`` (a file of ``recorded_size`` bytes
    by ``_metadata``, possibly truncated since), or None when it is not (or cannot be told)."""
    if len(copy) != recorded_size or len(damaged) > len(copy) or damaged == copy:
        return None
    try:
        table = open_table(BytesSource(copy))
        blocks = list(table.iter_block_handles())
    except FormatError:
        return None
    footer = table.footer
    if footer.checksum_type == ChecksumType.NONE or not verify_table(BytesSource(copy)).ok:
        return None
    same = failed = cut = 0
    covered_until = 0
    for info in blocks:
        start, end = info.handle.offset, info.handle.offset + info.handle.size + BLOCK_TRAILER_SIZE
        if start < covered_until:
            return None  # overlapping blocks: not a table we can reason about
        if damaged[covered_until:start] != copy[covered_until:start]:
            return None  # bytes between blocks differ: not explained by a damaged block
        covered_until = end
        theirs = damaged[start:end]
        if theirs == copy[start:end]:
            same += 1
        elif len(theirs) < end - start:
            cut += 1
        elif _checksum_holds(theirs, info.handle.size, info.handle.offset, footer):
            return None  # a block that proves itself with other bytes: another file
        else:
            failed += 1
    if same == 0:
        return None
    parts = [f"{same} of its {len(blocks)} blocks byte-identical"]
    if failed:
        parts.append(f"{failed} failing their checksum in the damaged file")
    if cut:
        parts.append(f"{cut} past the damaged file's end (truncated)")
    return ", ".join(parts) + f"; the copy has the recorded size ({recorded_size} bytes) and verifies"


def _checksum_holds(raw: bytes, size: int, offset: int, footer) -> bool:
    """Whether the block ``raw`` (its bytes and trailer) matches its stored checksum, read as ``footer``'s table."""
    stored = int.from_bytes(raw[size + 1:size + 5], "little")
    expected = (stored - context_modifier(footer.base_context_checksum, offset)) & 0xFFFFFFFF
    return block_checksum(footer.checksum_type, raw[:size], raw[size]) == expected
