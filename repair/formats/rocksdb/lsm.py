"""The logical content of a set of RocksDB SST files: LSM resolution per column family, streaming.

Flink's checkpointed RocksDB instance is the list of its SST files. Their union is not the state: an
entry is hidden by a newer one of the same user key, by a newer point tombstone (delete, single
delete) and by a newer range tombstone covering it; merge operands (Flink list state: the
``stringappendtest`` operator) are joined with ``,`` oldest first, after their base value if any.

:func:`iter_column_family` does that for one column family as a k-way merge of its tables' entries in
internal-key order (user key ascending, then sequence number descending): it holds one entry and one
data block per table, never the whole family, and yields the live ``(user key, value)`` pairs sorted
by key. Every entry is accounted for in :class:`LsmStats`: live, merged into a live value, shadowed by
a newer entry, deleted by a range tombstone, or a point tombstone; the invariant is checked when the
iteration ends. Anything it cannot resolve (an unknown value type, two different entries with the same
key and sequence number, entries out of order, a table without a column-family name) raises a
:class:`~repair.errors.FormatError`; nothing is dropped silently.

:func:`resolve_lsm` and :func:`resolve_column_family` are the same resolution materialised in lists.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from repair.errors import FormatError, RepairError
from repair.formats.rocksdb.table.block import ValueType
from repair.formats.rocksdb.table.sst import InternalEntry, RangeTombstone, Table

#: ``stringappendtest`` (``StringAppendTESTOperator``) delimiter, the merge operator of every Flink CF.
MERGE_DELIMITER = b","

_PUT = ValueType.VALUE
_MERGE = ValueType.MERGE
_DELETES = (ValueType.DELETION, ValueType.SINGLE_DELETION, ValueType.DELETION_WITH_TIMESTAMP)


@dataclass
class LsmStats:
    """How every entry of one column family was accounted for."""

    entries: int = 0
    #: Live keys (a put, merged operands, or both).
    live: int = 0
    #: Merge operands (and base puts) folded into a live value (beyond the one entry counted in ``live``).
    merged: int = 0
    #: Older versions hidden by a newer put, merge base or point tombstone.
    shadowed: int = 0
    #: Entries hidden by a range tombstone.
    range_deleted: int = 0
    #: Point tombstones (the newest entry of a key that is deleted, or older tombstones).
    tombstones: int = 0
    range_tombstones: int = 0

    def accounted(self) -> int:
        return self.live + self.merged + self.shadowed + self.range_deleted + self.tombstones

    def add(self, other: "LsmStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class ColumnFamily:
    """The resolved live content of one column family: ``user key -> value``, sorted by key."""

    name: str
    items: list[tuple[bytes, bytes]] = field(default_factory=list)
    stats: LsmStats = field(default_factory=LsmStats)


class RangeDeletions:
    """The range tombstones of one column family, cut into disjoint fragments for lookups by key.

    Each fragment ``[start, end)`` carries the highest sequence number of the tombstones covering it,
    so :meth:`covering_seqno` is a binary search however many tombstones overlap.
    """

    def __init__(self, tombstones: Iterable[RangeTombstone]):
        tombstones = sorted((t for t in tombstones if t.start < t.end), key=lambda t: t.start)
        self.count = len(tombstones)
        bounds = sorted({t.start for t in tombstones} | {t.end for t in tombstones})
        self._starts: list[bytes] = []
        self._ends: list[bytes] = []
        self._seqnos: list[int] = []
        active: list[tuple[int, bytes]] = []  # (-seqno, end) of tombstones started before the fragment
        next_tombstone = 0
        for start, end in zip(bounds, bounds[1:]):
            while next_tombstone < len(tombstones) and tombstones[next_tombstone].start <= start:
                t = tombstones[next_tombstone]
                heapq.heappush(active, (-t.seqno, t.end))
                next_tombstone += 1
            while active and active[0][1] <= start:  # ended before this fragment: drop lazily
                heapq.heappop(active)
            if active:
                self._starts.append(start)
                self._ends.append(end)
                self._seqnos.append(-active[0][0])

    def __bool__(self) -> bool:
        return bool(self._starts)

    def covering_seqno(self, key: bytes) -> int:
        """The highest sequence number of a range tombstone covering ``key`` (-1 if none)."""
        i = bisect.bisect_right(self._starts, key) - 1
        if i >= 0 and key < self._ends[i]:
            return self._seqnos[i]
        return -1


def _check_duplicates(key: bytes, versions: list[InternalEntry]) -> None:
    for newer, older in zip(versions, versions[1:]):
        if newer.seqno == older.seqno and (newer.value_type, bytes(newer.value)) != (older.value_type, bytes(older.value)):
            raise FormatError(
                "internal key", 0, "one entry per user key and sequence number",
                f"two different entries for key {bytes(key).hex()} at sequence number {newer.seqno}",
            )


def _resolve(key: bytes, versions: list[InternalEntry], range_seqno: int, stats: LsmStats) -> bytes | None:
    """The live value of ``key`` from its ``versions`` (newest first), or None when it is deleted."""
    _check_duplicates(key, versions)
    operands: list[bytes] = []
    base: bytes | None = None
    ended = False  # a put or a point tombstone ended the walk: every older version is shadowed
    for entry in versions:
        if entry.seqno < range_seqno:
            stats.range_deleted += 1
            continue
        if ended:
            stats.shadowed += 1
            continue
        kind = entry.value_type
        if kind == _MERGE:
            operands.append(bytes(entry.value))
        elif kind == _PUT:
            base = bytes(entry.value)
            ended = True
        elif kind in _DELETES:
            stats.tombstones += 1
            ended = True
        else:
            type_name = ValueType(kind).name if kind in ValueType._value2member_map_ else str(kind)
            raise FormatError(
                "value type", 0, "a put, merge or deletion",
                f"{type_name} for key {bytes(key).hex()} at sequence number {entry.seqno}",
            )
    if base is None and not operands:
        return None
    parts = ([base] if base is not None else []) + operands[::-1]
    stats.live += 1
    stats.merged += len(parts) - 1
    return MERGE_DELIMITER.join(parts)


def resolve_versions(
    key: bytes, versions: list[InternalEntry], tombstones: Sequence[RangeTombstone] | RangeDeletions, stats: LsmStats
) -> bytes | None:
    """The live value of ``key`` from all its ``versions`` (any order), or None when it is deleted."""
    versions = sorted(versions, key=lambda e: e.seqno, reverse=True)
    if not isinstance(tombstones, RangeDeletions):
        tombstones = RangeDeletions(tombstones)
    return _resolve(key, versions, tombstones.covering_seqno(key) if tombstones else -1, stats)


def _ordered_entries(source: str, table: Table, index: int) -> Iterator[tuple[bytes, int, int, InternalEntry]]:
    """``(user key, -(seqno << 8 | type), index, entry)`` of every entry of ``table``; raises when the
    table is not in internal-key order (the merge relies on it)."""
    previous_key: bytes | None = None
    previous_order = 0
    try:
        for entry in table.entries():
            key = entry.user_key
            order = -((entry.seqno << 8) | entry.value_type)
            if previous_key is not None and (key < previous_key or (key == previous_key and order <= previous_order)):
                raise FormatError(
                    "data block entry order", 0, "internal keys in ascending order",
                    f"key {bytes(key).hex()} at sequence number {entry.seqno} after "
                    f"{bytes(previous_key).hex()} at sequence number {(-previous_order) >> 8}",
                )
            previous_key, previous_order = key, order
            yield key, order, index, entry
    except RepairError as error:
        raise error.in_source(source) from None


def iter_column_family(name: str, tables: Sequence[tuple[str, Table]], stats: LsmStats) -> Iterator[tuple[bytes, bytes]]:
    """The live ``(user key, value)`` pairs of one column family's ``(source name, table)``, by key.

    Streams: a k-way merge over the tables' entries; ``stats`` is filled while iterating and checked
    when the iteration ends.
    """
    tombstones: list[RangeTombstone] = []
    for source, table in tables:
        try:
            tombstones.extend(table.range_tombstones())
        except RepairError as error:
            raise error.in_source(source) from None
    deletions = RangeDeletions(tombstones)
    stats.range_tombstones += len(tombstones)
    streams = [_ordered_entries(source, table, i) for i, (source, table) in enumerate(tables)]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams)
    key: bytes | None = None
    versions: list[InternalEntry] = []
    for user_key, _order, _index, entry in merged:
        stats.entries += 1
        if user_key == key:
            versions.append(entry)
            continue
        if versions:
            value = _resolve_group(key, versions, deletions, stats)
            if value is not None:
                yield key, value
        key, versions = user_key, [entry]
    if versions:
        value = _resolve_group(key, versions, deletions, stats)
        if value is not None:
            yield key, value
    if stats.accounted() != stats.entries:  # an internal invariant, never expected to fail
        raise AssertionError(f"column family {name}: {stats.entries} entries but {stats.accounted()} accounted for")


def _resolve_group(key: bytes, versions: list[InternalEntry], deletions: RangeDeletions, stats: LsmStats) -> bytes | None:
    range_seqno = deletions.covering_seqno(key) if deletions else -1
    if len(versions) == 1:  # the common case: one put, nothing to merge or hide
        entry = versions[0]
        if entry.value_type == _PUT and entry.seqno >= range_seqno:
            stats.live += 1
            return bytes(entry.value)
    return _resolve(key, versions, range_seqno, stats)


def resolve_column_family(name: str, tables: Iterable[tuple[str, Table]]) -> ColumnFamily:
    """Resolve the entries and range tombstones of ``tables`` (``(source name, table)``, one column family)."""
    family = ColumnFamily(name)
    family.items = list(iter_column_family(name, list(tables), family.stats))
    return family


def table_column_family(table: Table) -> str:
    """The column-family name a table's properties record; a :class:`FormatError` if absent."""
    props = table.properties
    if props is None or props.column_family_name is None:
        raise FormatError("rocksdb.column.family.name", 0, "a column family name in the table properties", "none")
    return props.column_family_name


def tables_by_column_family(tables: Iterable[tuple[str, Table]]) -> dict[str, list[tuple[str, Table]]]:
    """``(source name, table)`` grouped by the column family each table's properties name, sorted by name."""
    by_family: dict[str, list[tuple[str, Table]]] = {}
    for source, table in tables:
        try:
            family = table_column_family(table)
        except RepairError as error:
            raise error.in_source(source) from None
        by_family.setdefault(family, []).append((source, table))
    return dict(sorted(by_family.items()))


def resolve_lsm(tables: Iterable[tuple[str, Table]]) -> dict[str, ColumnFamily]:
    """The resolved column families of one RocksDB instance's ``(source name, table)``, by column family."""
    return {name: resolve_column_family(name, family_tables) for name, family_tables in tables_by_column_family(tables).items()}
