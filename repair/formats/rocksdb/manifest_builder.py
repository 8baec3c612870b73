"""Rebuild a MANIFEST (and CURRENT) from a DB's SST files alone: the pure core of ``repair rebuild-manifest``.

Pure: RandomAccess/bytes in, bytes out; no file access.

* :func:`describe_sst` scans one SST and gives what a ``FileMetaData`` needs: number, size, column
  family, smallest/largest internal keys (range tombstones included, as RocksDB's
  ``FileMetaData::UpdateBoundariesForRange`` does: ``start@seq`` and the ``end@kMaxSequenceNumber``
  range-deletion sentinel) and smallest/largest seqnos.
* :func:`derive_precedence` (optional, reads the data again) finds, for files whose key ranges
  overlap, which one holds the newer version of a shared user key (or covers the other with a newer
  range tombstone). Without it the level assignment relies on seqno ranges alone.
* :func:`assign_levels` is the level assignment: a pure function on file ranges and seqnos.
* :func:`build_manifest` gives the MANIFEST bytes, its number and the CURRENT bytes.
* :func:`check_consistency` re-implements RocksDB's ``VersionBuilder::CheckConsistency`` checks of
  FRocksDB 6.20.3 and 8.10.0 on a level assignment (the builder runs it on its own output).

RocksDB sources cited below are ververica/frocksdb branches ``FRocksDB-6.20.3`` (Flink <= 1.20) and
``FRocksDB-8.10.0`` (Flink 2.x).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence

from repair.errors import FormatError, RepairError, UsageError
from repair.formats.bytes.random_access import RandomAccess
from repair.formats.rocksdb.files import FileKind, encode_current, manifest_file_name, parse_file_name
from repair.formats.rocksdb.manifest import DEFAULT_COLUMN_FAMILY, FileMetaData, Tag, VersionEdit, encode_manifest
from repair.formats.rocksdb.table.block import (
    MAX_SEQUENCE_NUMBER,
    SST_VALUE_TYPES,
    InternalKey,
    ValueType,
    decode_internal_key,
)
from repair.formats.rocksdb.table.properties import UNKNOWN_COLUMN_FAMILY_ID
from repair.formats.rocksdb.table.sst import open_table

BYTEWISE_COMPARATOR = "leveldb.BytewiseComparator"
#: RocksDB's default ``num_levels`` (Flink does not change it).
DEFAULT_NUM_LEVELS = 7
FORMATS = ("frocksdb6", "frocksdb8")


class LevelAssignmentError(RepairError):
    """The files cannot be placed on levels that keep newer data above older data."""


def _ikey_order(key: bytes) -> tuple[bytes, int]:
    """Sort key of an encoded internal key under ``InternalKeyComparator`` with the bytewise comparator:
    user key ascending, then ``(seqno << 8 | type)`` descending (``db/dbformat.cc``)."""
    return bytes(key[:-8]), -int.from_bytes(key[-8:], "little")


def icmp(a: bytes, b: bytes) -> int:
    """``InternalKeyComparator::Compare`` for bytewise user keys: -1, 0 or 1."""
    ka, kb = _ikey_order(a), _ikey_order(b)
    return (ka > kb) - (ka < kb)


# -- describing one SST ------------------------------------------------------------------------


@dataclass
class SstSummary:
    """What a MANIFEST needs to know of one SST, taken from its data and properties."""

    number: int
    local_name: str
    file_size: int
    column_family_id: int
    column_family_name: str
    smallest: bytes  # encoded internal key
    largest: bytes  # encoded internal key
    smallest_seqno: int
    largest_seqno: int
    num_entries: int  # point entries
    num_range_deletions: int
    comparator: str | None = None
    #: SstFileWriter output (``rocksdb.external_sst_file.version``); its seqnos are the global seqno.
    external: bool = False

    @property
    def has_range_deletions(self) -> bool:
        return self.num_range_deletions > 0

    def smallest_key(self) -> InternalKey:
        return decode_internal_key(self.smallest)

    def largest_key(self) -> InternalKey:
        return decode_internal_key(self.largest)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["smallest"], out["largest"] = self.smallest.hex(), self.largest.hex()
        out["has_range_deletions"] = self.has_range_deletions
        return out


def describe_sst(source: RandomAccess, local_name: str) -> SstSummary:
    """Scan one SST (every data block and the range-deletion block, checksums verified).

    Raises :class:`UsageError` for a name that is not ``<number>.sst``, and :class:`FormatError` for
    corrupt data: undecodable blocks, entries out of internal-key order or of a type an SST cannot
    hold, an empty range tombstone, an entry count differing from ``rocksdb.num.entries``, a table
    with no entries, or properties without a column family.
    """
    parsed = parse_file_name(local_name)
    if parsed is None or parsed.kind != FileKind.TABLE:
        raise UsageError(f"{local_name!r} is not an SST file name (<number>.sst)")
    table = open_table(source)
    props = table.properties
    if props is None:
        raise FormatError("properties block", 0, "a readable properties block", "none", detail="cannot tell the column family")
    if props.comparator not in (None, BYTEWISE_COMPARATOR):
        raise UsageError(f"{local_name}: comparator {props.comparator!r} is not supported (only {BYTEWISE_COMPARATOR})")
    cf_id = props.column_family_id
    if cf_id is None or cf_id == UNKNOWN_COLUMN_FAMILY_ID or props.column_family_name is None:
        raise FormatError("rocksdb.column.family.id", 0, "a column family id and name", f"id {cf_id}, name {props.column_family_name!r}",
                          detail="file written outside a column family (SstFileWriter?): its column family cannot be told")

    external = props.external_sst_file_version is not None
    # An ingested file stores seqno 0; its real seqno is the global seqno (property, or the MANIFEST's
    # largest_seqno when the property is 0: GetGlobalSequenceNumber of table/block_based/block_based_table_reader.cc).
    global_seqno = (props.external_sst_file_global_seqno or 0) if external else None

    smallest = largest = None
    smallest_seqno, largest_seqno = MAX_SEQUENCE_NUMBER, 0
    count = 0
    previous: tuple[bytes, int] | None = None
    for entry in table.entries():
        packed = (entry.seqno << 8) | entry.value_type
        order = (entry.user_key, -packed)
        if previous is not None and order <= previous:
            raise FormatError("data block entry", 0, "internal keys in strictly increasing order",
                              f"{entry.user_key!r}@{entry.seqno} after {previous[0]!r}@{(-previous[1]) >> 8}",
                              detail=f"entry {count} of the table")
        if entry.value_type not in SST_VALUE_TYPES:
            raise FormatError("value type", 0, "a value type of a data block", f"0x{entry.value_type:02x}", detail=f"entry {count} of the table")
        previous = order
        seqno = global_seqno if external and global_seqno else entry.seqno
        key = InternalKey(entry.user_key, seqno, entry.value_type).encode()
        if smallest is None:
            smallest = key
        largest = key
        smallest_seqno, largest_seqno = min(smallest_seqno, seqno), max(largest_seqno, seqno)
        count += 1
    tombstones = 0
    for tombstone in table.range_tombstones():
        if tombstone.start >= tombstone.end:
            raise FormatError("range tombstone", 0, "start < end", f"[{tombstone.start!r}, {tombstone.end!r})")
        seqno = global_seqno if external and global_seqno else tombstone.seqno
        # FileMetaData::UpdateBoundariesForRange(start@seq, SerializeEndKey() = end@kMaxSequenceNumber, ...)
        # (6.20.3 db/builder.cc, db/version_edit.h)
        start = InternalKey(tombstone.start, seqno, ValueType.RANGE_DELETION).encode()
        end = InternalKey(tombstone.end, MAX_SEQUENCE_NUMBER, ValueType.RANGE_DELETION).encode()
        if smallest is None or icmp(start, smallest) < 0:
            smallest = start
        if largest is None or icmp(largest, end) < 0:
            largest = end
        smallest_seqno, largest_seqno = min(smallest_seqno, seqno), max(largest_seqno, seqno)
        tombstones += 1
    if smallest is None:
        raise FormatError("table", 0, "at least one entry or range tombstone", "none")
    if props.num_entries is not None and props.num_entries != count + tombstones and props.num_entries != count:
        # num_entries counts point entries plus range deletions (BlockBasedTableBuilder).
        raise FormatError("rocksdb.num.entries", 0, props.num_entries, count + tombstones,
                          detail="the data blocks hold a different number of entries than the properties say")
    return SstSummary(parsed.number, local_name, source.size, cf_id, props.column_family_name, smallest, largest,
                      smallest_seqno, largest_seqno, count, tombstones, props.comparator, external)


# -- key-level precedence ----------------------------------------------------------------------


def derive_precedence(sources: Mapping[int, RandomAccess], ssts: Sequence[SstSummary]) -> list[tuple[int, int]]:
    """Pairs ``(newer, older)`` of file numbers: ``newer`` holds a newer version of a user key than
    ``older`` (or a range tombstone newer than a key of ``older``, or a key newer than a tombstone of
    ``older``). Only files of the same column family whose key ranges overlap are read (merged as a
    stream, one entry of each file in memory at a time, besides the range tombstones).

    Two files holding the same user key at the same seqno cannot be ordered; that raises
    :class:`LevelAssignmentError`.
    """
    pairs: set[tuple[int, int]] = set()
    by_cf: dict[int, list[SstSummary]] = {}
    for s in ssts:
        by_cf.setdefault(s.column_family_id, []).append(s)
    for files in by_cf.values():
        for group in _overlap_components(files):
            if len(group) > 1:
                pairs |= _group_precedence(sources, group)
    return sorted(pairs)


def _overlap_components(files: Sequence[SstSummary]) -> list[list[SstSummary]]:
    ordered = sorted(files, key=lambda f: _ikey_order(f.smallest))
    groups: list[list[SstSummary]] = []
    end: bytes | None = None
    for f in ordered:
        if groups and icmp(end, f.smallest) >= 0:
            groups[-1].append(f)
            if icmp(f.largest, end) > 0:
                end = f.largest
        else:
            groups.append([f])
            end = f.largest
    return groups


def _entries(number: int, source: RandomAccess, summary: SstSummary) -> Iterator[tuple[bytes, int, int]]:
    for entry in open_table(source).entries():
        seqno = summary.largest_seqno if summary.external and summary.smallest_seqno == summary.largest_seqno else entry.seqno
        yield entry.user_key, -seqno, number


def _group_precedence(sources: Mapping[int, RandomAccess], group: list[SstSummary]) -> set[tuple[int, int]]:
    pairs: set[tuple[int, int]] = set()
    tombstones: list[tuple[bytes, bytes, int, int]] = []  # start, end, seqno, file
    for s in group:
        if s.has_range_deletions:
            for t in open_table(sources[s.number]).range_tombstones():
                tombstones.append((t.start, t.end, s.largest_seqno if s.external else t.seqno, s.number))
    tombstones.sort()

    def add(newer: int, older: int, key: bytes, seqno: int) -> None:
        if newer != older:
            pairs.add((newer, older))

    streams = [_entries(s.number, sources[s.number], s) for s in group]
    current: bytes | None = None
    versions: list[tuple[int, int]] = []  # (seqno, file) of the current user key, newest first

    def flush() -> None:
        for (seq_a, file_a), (seq_b, file_b) in zip(versions, versions[1:]):
            if file_a == file_b:
                continue
            if seq_a == seq_b:
                raise LevelAssignmentError(f"files #{file_a} and #{file_b} both hold user key {current!r} at seqno {seq_a}: "
                                           "which is newer cannot be told")
            add(file_a, file_b, current, seq_a)
        for start, end, t_seq, t_file in tombstones:
            if start > current:
                break
            if current < end:
                for seq, file in versions:
                    if file != t_file:
                        if t_seq > seq:
                            add(t_file, file, current, seq)
                        elif seq > t_seq:
                            add(file, t_file, current, seq)

    for user_key, neg_seqno, number in heapq.merge(*streams):
        if user_key != current:
            if versions:
                flush()
            current, versions = user_key, []
        versions.append((-neg_seqno, number))
    if versions:
        flush()
    return pairs


# -- level assignment --------------------------------------------------------------------------


class FileRange(Protocol):
    """What the level assignment needs of a file (:class:`SstSummary` and ``FileMetaData`` have it)."""

    number: int
    smallest: bytes
    largest: bytes
    smallest_seqno: int
    largest_seqno: int


@dataclass
class LevelAssignment:
    """Result of :func:`assign_levels`: level and a one-line reason per file number."""

    levels: dict[int, int]
    reasons: dict[int, str]
    #: ``(newer, older)`` pairs that had to be respected (newer on a lower-numbered level).
    above: list[tuple[int, int]] = field(default_factory=list)

    def files_at(self, level: int) -> list[int]:
        return sorted(n for n, lv in self.levels.items() if lv == level)


def ranges_overlap(a: FileRange, b: FileRange) -> bool:
    """Internal-key ranges intersect (the test of 8.10 ``CheckConsistencyDetails`` for L0 epochs)."""
    return icmp(a.smallest, b.largest) <= 0 and icmp(a.largest, b.smallest) >= 0


def _newer_by_seqno(a: FileRange, b: FileRange) -> bool:
    """Every entry of ``a`` is newer than every entry of ``b``, judged from seqno ranges alone.

    Seqno 0 counts as older than any other seqno, and as never shared: RocksDB zeroes a key's seqno
    only when compacting into the bottommost level holding that key (``CompactionIterator``,
    ``bottommost_level_`` in 6.20.3 db/compaction/compaction_iterator.cc), so no other version of it
    is left below, and a newer one is written with a new seqno.
    """
    if a.smallest_seqno > b.largest_seqno:
        return True
    return b.largest_seqno == 0 and a.largest_seqno > 0


def assign_levels(files: Sequence[FileRange], *, precedence: Iterable[tuple[int, int]] | None = None,
                  num_levels: int = DEFAULT_NUM_LEVELS) -> LevelAssignment:
    """Place one column family's files on levels both FRocksDB 6.20.3 and 8.10.0 accept and read correctly.

    Rules (``VersionBuilder::Rep::CheckConsistencyDetails``, 6.20.3 and 8.10.0 db/version_builder.cc):

    * levels >= 1: files sorted by smallest internal key must not overlap (``largest < next smallest``);
    * L0 (6.20.3, and 8.10.0 without epoch numbers): files sorted by ``NewestFirstBySeqNo`` (largest
      seqno, then smallest seqno, then number, descending); of each neighbouring pair, the older one
      either has ``smallest == largest`` seqno (an "ingested" file) below the newer's largest or 0, or
      the newer one has a strictly greater smallest seqno. 8.10.0 with epoch numbers: sorted by epoch,
      overlapping files need distinct epochs.
    * reads (``Version::Get``) search L0 newest first, then L1, L2 ... and stop at the first value or
      deletion, and compactions assume the same: for two files holding versions of one user key, the
      file with the newer version must sit on a lower-numbered level (or earlier in L0). This holds
      for files whose internal-key ranges are disjoint but share their boundary user key too (one
      ends with newer versions of k, the next starts with older ones): they may share a level (the
      level's order puts the newer first), but must not be placed the other way round.

    ``precedence`` gives the ``(newer, older)`` pairs (:func:`derive_precedence`); without it, two
    overlapping files are ordered by their seqno ranges (:func:`_newer_by_seqno`) and an overlap whose
    ranges interleave raises :class:`LevelAssignmentError`.

    Placement: the "must be above" graph is sorted topologically (newest first among free choices),
    overlapping files without a constraint are ordered the same way, and each file's height is the
    longest chain of overlapping files below it. Height 0 goes to the bottom level ``num_levels - 1``,
    height h to ``num_levels - 1 - h``; heights that do not fit in L1.. go to L0, which must then
    satisfy the L0 rules above (else :class:`LevelAssignmentError`). Non-overlapping files thus
    share the bottom level, newer overlapping ones stack above.
    """
    by_number = {f.number: f for f in files}
    if len(by_number) != len(files):
        raise LevelAssignmentError("a file number appears twice")
    ordered = sorted(files, key=lambda f: _ikey_order(f.smallest))
    overlaps: list[tuple[int, int]] = []
    # Files whose internal-key ranges are disjoint but share the boundary user key (``a`` ends with
    # versions of k, ``b`` starts with older versions of k): ``a`` holds the newer ones. They may share
    # a level, but on different levels ``a`` must be above, or Get (which searches level by level)
    # finds ``b``'s older version first while iteration (which merges all levels) finds ``a``'s.
    touching: set[tuple[int, int]] = set()
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if icmp(a.largest, b.smallest) >= 0:
                overlaps.append((a.number, b.number))
            elif a.largest[:-8] == b.smallest[:-8]:
                touching.add((a.number, b.number))
            else:
                break

    above: set[tuple[int, int]] = set()
    if precedence is None:
        for x, y in overlaps:
            a, b = by_number[x], by_number[y]
            if _newer_by_seqno(a, b):
                above.add((x, y))
            elif _newer_by_seqno(b, a):
                above.add((y, x))
            else:
                raise LevelAssignmentError(
                    f"files #{x} (seqnos {a.smallest_seqno}..{a.largest_seqno}) and #{y} (seqnos {b.smallest_seqno}..{b.largest_seqno}) "
                    "overlap and their seqno ranges interleave: which holds the newer data needs a key-level comparison (derive_precedence)")
    else:
        above = {(a, b) for a, b in precedence if a in by_number and b in by_number}

    # Topological order of "above" (Kahn), newest first among free files.
    succ: dict[int, set[int]] = {n: set() for n in by_number}
    indegree = dict.fromkeys(by_number, 0)
    for a, b in above | touching:
        if b not in succ[a]:
            succ[a].add(b)
            indegree[b] += 1

    def newest_first(n: int) -> tuple[int, int, int]:
        f = by_number[n]
        return (-f.largest_seqno, -f.smallest_seqno, -n)

    heap = [newest_first(n) for n, d in indegree.items() if d == 0]
    heapq.heapify(heap)
    topo: list[int] = []
    while heap:
        n = -heapq.heappop(heap)[2]
        topo.append(n)
        for m in succ[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(heap, newest_first(m))
    if len(topo) != len(by_number):
        stuck = sorted(n for n, d in indegree.items() if d > 0)
        raise LevelAssignmentError(f"files {stuck} hold versions of keys in contradicting order: no level order keeps newer data above older")
    position = {n: i for i, n in enumerate(topo)}
    below: dict[int, set[int]] = {n: set() for n in by_number}
    for a, b in above:
        below[a].add(b)
    for x, y in overlaps:  # overlapping files need different levels: order them as the topological order does
        a, b = (x, y) if position[x] < position[y] else (y, x)
        below[a].add(b)
    not_below: dict[int, set[int]] = {n: set() for n in by_number}
    for a, b in touching:
        not_below[a].add(b)
    height: dict[int, int] = {}
    for n in reversed(topo):  # every file in below[n] and not_below[n] comes later in topo
        height[n] = max(1 + max((height[m] for m in below[n]), default=-1),
                        max((height[m] for m in not_below[n]), default=0))

    bottom = num_levels - 1
    levels = {n: (bottom - h if h < bottom else 0) for n, h in height.items()}
    reasons = {}
    for n, h in height.items():
        lower = sorted(below[n])
        if levels[n] == 0:
            reasons[n] = f"L0: {h} overlapping layers below it do not fit in L1..L{bottom}"
        elif not lower:
            reasons[n] = f"bottom level L{bottom}: no overlapping older file"
        else:
            reasons[n] = f"L{levels[n]}: above overlapping older file(s) {lower}"
    problems = check_consistency([(levels[n], by_number[n]) for n in by_number], num_levels=num_levels)
    # L0 order must agree with "above": the newest-first sort is the order reads search L0 in.
    l0 = sorted((n for n in by_number if levels[n] == 0), key=newest_first)
    rank = {n: i for i, n in enumerate(l0)}
    for a, b in above | touching:
        if a in rank and b in rank and rank[a] > rank[b]:
            problems.append(f"L0 would search #{b} before the newer #{a}")
    if problems:
        raise LevelAssignmentError(f"the files need more than {bottom} levels and do not fit in L0: {problems[0]}")
    return LevelAssignment(levels, reasons, sorted(above))


def _newest_first_by_seqno(f: FileRange) -> tuple[int, int, int]:
    # NewestFirstBySeqNo (6.20.3 db/version_builder.cc): largest seqno, smallest seqno, number, all descending.
    return (-f.largest_seqno, -f.smallest_seqno, -f.number)


def check_consistency(placed: Iterable[tuple[int, FileRange]], *, num_levels: int = DEFAULT_NUM_LEVELS,
                      epoch_numbers: Mapping[int, int] | None = None) -> list[str]:
    """The problems RocksDB's consistency checks would report for ``(level, file)`` pairs of one column family.

    6.20.3 ``CheckConsistencyDetails``: L0 in ``NewestFirstBySeqNo`` order with the ingested-file /
    strictly-decreasing-smallest-seqno rule; levels >= 1 sorted by smallest key without overlaps.
    8.10.0 adds, with epoch numbers present, "L0 files of same epoch number but overlapping range".
    Levels must be < ``num_levels`` ("db has more levels than options.num_levels").
    """
    levels: dict[int, list[FileRange]] = {}
    problems = []
    for level, f in placed:
        if not 0 <= level < num_levels:
            problems.append(f"file #{f.number} on level {level}, beyond num_levels {num_levels}")
        levels.setdefault(level, []).append(f)
    for level, files in sorted(levels.items()):
        if level == 0:
            files = sorted(files, key=_newest_first_by_seqno)
            for f1, f2 in zip(files, files[1:]):
                if f2.smallest_seqno == f2.largest_seqno:
                    seqno = f2.smallest_seqno
                    if not (seqno < f1.largest_seqno or seqno == 0):
                        problems.append(f"L0 file with seqno {f1.smallest_seqno} {f1.largest_seqno} vs. file with global_seqno {seqno} (#{f2.number})")
                elif f1.smallest_seqno <= f2.smallest_seqno:
                    problems.append(f"L0 files seqno {f1.smallest_seqno} {f1.largest_seqno} #{f1.number} vs. "
                                    f"{f2.smallest_seqno} {f2.largest_seqno} #{f2.number}")
            if epoch_numbers is not None:
                for i, f1 in enumerate(files):
                    for f2 in files[i + 1:]:
                        if epoch_numbers[f1.number] == epoch_numbers[f2.number] and ranges_overlap(f1, f2):
                            problems.append(f"L0 files of same epoch number but overlapping range #{f1.number}, #{f2.number}")
        else:
            files = sorted(files, key=lambda f: (_ikey_order(f.smallest), f.number))
            for f1, f2 in zip(files, files[1:]):
                if icmp(f1.largest, f2.smallest) >= 0:
                    problems.append(f"L{level} has overlapping ranges: file #{f1.number} vs. file #{f2.number}")
    return problems


def epoch_numbers_for(levels: Mapping[int, int], files: Mapping[int, FileRange]) -> dict[int, int]:
    """Epoch numbers as 8.10.0 ``VersionStorageInfo::RecoverEpochNumbers`` infers them when absent
    (db/version_set.cc): one number per non-empty level from the bottom up, starting at 1, then one per
    L0 file, oldest first."""
    out: dict[int, int] = {}
    epoch = 1
    for level in sorted({lv for lv in levels.values() if lv > 0}, reverse=True):
        for n, lv in levels.items():
            if lv == level:
                out[n] = epoch
        epoch += 1
    for n in sorted((n for n, lv in levels.items() if lv == 0), key=lambda n: _newest_first_by_seqno(files[n]), reverse=True):
        out[n] = epoch
        epoch += 1
    return out


# -- the MANIFEST ------------------------------------------------------------------------------


@dataclass
class RebuiltManifest:
    manifest: bytes
    manifest_number: int
    current: bytes
    next_file_number: int
    last_sequence: int
    log_number: int
    #: ``(id, name)`` of every column family, by id.
    column_families: list[tuple[int, str]]
    #: Per column family id: the level assignment.
    levels: dict[int, LevelAssignment]
    edits: list[VersionEdit]

    @property
    def manifest_name(self) -> str:
        return manifest_file_name(self.manifest_number)

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest_name": self.manifest_name, "next_file_number": self.next_file_number,
            "last_sequence": self.last_sequence, "log_number": self.log_number,
            "column_families": [{"id": i, "name": n} for i, n in self.column_families],
            "files": [{"column_family": cf, "number": n, "level": a.levels[n], "reason": a.reasons[n]}
                      for cf, a in sorted(self.levels.items()) for n in sorted(a.levels)],
        }


def build_manifest(
    ssts: Sequence[SstSummary],
    column_families: Iterable[tuple[int, str]] = (),
    *,
    comparator: str = BYTEWISE_COMPARATOR,
    next_file_number: int | None = None,
    last_sequence: int | None = None,
    format: str = "frocksdb6",
    precedence: Iterable[tuple[int, int]] | None = None,
    manifest_number: int | None = None,
    log_number: int | None = None,
    existing_numbers: Iterable[int] = (),
    num_levels: int = DEFAULT_NUM_LEVELS,
) -> RebuiltManifest:
    """A MANIFEST holding ``ssts`` on levels from :func:`assign_levels`, with every column family.

    ``column_families`` adds ``(id, name)`` pairs for column families without files (Flink's DB has
    ``default`` = 0 plus one per state); the SST properties give the others. ``existing_numbers`` are
    other file numbers in the directory (OPTIONS, WAL ...): the MANIFEST number, log number and
    next file number are chosen above them all. ``log_number`` defaults to a number above every
    known file, so that no existing WAL is replayed (Flink writes no WAL). ``format="frocksdb8"``
    also writes epoch numbers (as 8.10.0 would infer them); "frocksdb6" writes none (6.20.3 has none).

    Layout as ``VersionSet::WriteCurrentStateToManifest`` (6.20.3 db/version_set.cc): per column
    family an edit adding it (id, name, comparator), then one with its files and log number; then an
    edit with next file number, last sequence, max column family and prev log number 0.
    """
    if format not in FORMATS:
        raise UsageError(f"format must be one of {FORMATS}, not {format!r}")
    if comparator != BYTEWISE_COMPARATOR:
        raise UsageError(f"only {BYTEWISE_COMPARATOR} is supported, not {comparator!r}")
    cfs: dict[int, str] = {0: DEFAULT_COLUMN_FAMILY}

    def register(cf_id: int, name: str, where: str) -> None:
        known = cfs.get(cf_id)
        if known is not None and known != name:
            raise UsageError(f"column family id {cf_id} is named both {known!r} and {name!r} ({where})")
        other = next((i for i, n in cfs.items() if n == name and i != cf_id), None)
        if other is not None:
            raise UsageError(f"column family {name!r} has ids {other} and {cf_id} ({where})")
        cfs[cf_id] = name

    for cf_id, name in column_families:
        register(cf_id, name, "given")
    numbers: set[int] = set()
    for s in ssts:
        if s.number in numbers:
            raise UsageError(f"file number {s.number} appears twice")
        numbers.add(s.number)
        if s.comparator not in (None, comparator):
            raise UsageError(f"{s.local_name}: comparator {s.comparator!r} differs from {comparator!r}")
        register(s.column_family_id, s.column_family_name, s.local_name)

    max_seqno = max((s.largest_seqno for s in ssts), default=0)
    if last_sequence is None:
        last_sequence = max_seqno
    elif last_sequence < max_seqno:
        raise UsageError(f"last_sequence {last_sequence} is below the largest seqno {max_seqno} of the files")
    known = max(numbers | set(existing_numbers), default=0)
    if manifest_number is None:
        manifest_number = known + 1
    if log_number is None:
        log_number = max(known, manifest_number) + 1
    minimum = max(known, manifest_number, log_number) + 1
    if next_file_number is None:
        next_file_number = minimum
    elif next_file_number < minimum:
        raise UsageError(f"next_file_number {next_file_number} must exceed every file, MANIFEST and log number (>= {minimum})")
    precedence = None if precedence is None else list(precedence)

    assignments: dict[int, LevelAssignment] = {}
    edits: list[VersionEdit] = []
    for cf_id in sorted(cfs):
        files = [s for s in ssts if s.column_family_id == cf_id]
        assignment = assign_levels(files, precedence=precedence, num_levels=num_levels)
        assignments[cf_id] = assignment
        by_number = {s.number: s for s in files}
        epochs = epoch_numbers_for(assignment.levels, by_number) if format == "frocksdb8" else None
        problems = check_consistency([(assignment.levels[s.number], s) for s in files], num_levels=num_levels, epoch_numbers=epochs)
        if problems:  # assign_levels checks this; a second look costs nothing
            raise LevelAssignmentError(f"column family {cfs[cf_id]!r}: {problems[0]}")
        add = VersionEdit(column_family=cf_id, has_column_family=cf_id != 0, comparator=comparator)
        if cf_id != 0:
            add.column_family_add = cfs[cf_id]
        edits.append(add)
        new_files = [
            FileMetaData(level=assignment.levels[s.number], number=s.number, file_size=s.file_size, smallest=s.smallest,
                         largest=s.largest, smallest_seqno=s.smallest_seqno, largest_seqno=s.largest_seqno, tag=Tag.NEW_FILE4,
                         epoch_number=None if epochs is None else epochs[s.number])
            for s in sorted(files, key=lambda s: (assignment.levels[s.number], s.number))
        ]
        edits.append(VersionEdit(column_family=cf_id, has_column_family=cf_id != 0, new_files=new_files, log_number=log_number))
    edits.append(VersionEdit(next_file_number=next_file_number, last_sequence=last_sequence, prev_log_number=0,
                             max_column_family=max(cfs)))
    manifest = encode_manifest(edits)
    name = manifest_file_name(manifest_number)
    return RebuiltManifest(manifest, manifest_number, encode_current(name), next_file_number, last_sequence, log_number,
                           sorted(cfs.items()), assignments, edits)
