"""The logical content of a set of RocksDB SST files: LSM resolution per column family.

Flink's checkpointed RocksDB instance is the list of its SST files. Their union is not the state: an
entry is hidden by a newer one of the same user key, by a newer point tombstone (delete, single
delete) and by a newer range tombstone covering it; merge operands (Flink list state: the
``stringappendtest`` operator) are joined with ``,`` oldest first, after their base value if any.

:func:`resolve_lsm` does that per column family (named by each table's properties) and accounts for
every entry in :class:`LsmStats`: each one is live, merged into a live value, shadowed by a newer
entry, deleted, or a tombstone. Anything it cannot resolve (an unknown value type, two different
entries with the same key and sequence number, a table without a column-family name) raises a
:class:`~repair.errors.FormatError`; nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from repair.errors import FormatError, RepairError
from repair.formats.sst import InternalEntry, RangeTombstone, Table
from repair.formats.sst_block import ValueType

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


@dataclass
class ColumnFamily:
    """The resolved live content of one column family: ``user key -> value``, sorted by key."""

    name: str
    items: list[tuple[bytes, bytes]] = field(default_factory=list)
    stats: LsmStats = field(default_factory=LsmStats)


def _covering_seqno(key: bytes, tombstones: list[RangeTombstone]) -> int:
    """The highest sequence number of a range tombstone covering ``key`` (-1 if none)."""
    best = -1
    for t in tombstones:
        if t.start <= key < t.end and t.seqno > best:
            best = t.seqno
    return best


def resolve_versions(
    key: bytes, versions: list[InternalEntry], tombstones: list[RangeTombstone], stats: LsmStats
) -> bytes | None:
    """The live value of ``key`` from all its ``versions`` (any order), or None when it is deleted."""
    versions = sorted(versions, key=lambda e: e.seqno, reverse=True)
    for newer, older in zip(versions, versions[1:]):
        if newer.seqno == older.seqno and (newer.value_type, bytes(newer.value)) != (older.value_type, bytes(older.value)):
            raise FormatError(
                "internal key", 0, "one entry per user key and sequence number",
                f"two different entries for key {bytes(key).hex()} at sequence number {newer.seqno}",
            )
    range_seqno = _covering_seqno(key, tombstones) if tombstones else -1
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


def resolve_column_family(name: str, tables: Iterable[tuple[str, Table]]) -> ColumnFamily:
    """Resolve the entries and range tombstones of ``tables`` (``(source name, table)``, one column family)."""
    versions: dict[bytes, list[InternalEntry]] = {}
    tombstones: list[RangeTombstone] = []
    stats = LsmStats()
    for source, table in tables:
        try:
            tombstones.extend(table.range_tombstones())
            for entry in table.entries():
                stats.entries += 1
                versions.setdefault(bytes(entry.user_key), []).append(entry)
        except RepairError as error:
            raise error.in_source(source) from None
    stats.range_tombstones = len(tombstones)
    family = ColumnFamily(name, stats=stats)
    for key in sorted(versions):
        value = resolve_versions(key, versions[key], tombstones, stats)
        if value is not None:
            family.items.append((key, value))
    if stats.accounted() != stats.entries:  # an internal invariant, never expected to fail
        raise AssertionError(f"column family {name}: {stats.entries} entries but {stats.accounted()} accounted for")
    return family


def table_column_family(table: Table) -> str:
    """The column-family name a table's properties record; a :class:`FormatError` if absent."""
    props = table.properties
    if props is None or props.column_family_name is None:
        raise FormatError("rocksdb.column.family.name", 0, "a column family name in the table properties", "none")
    return props.column_family_name


def resolve_lsm(tables: Iterable[tuple[str, Table]]) -> dict[str, ColumnFamily]:
    """The resolved column families of one RocksDB instance's ``(source name, table)``, by column family."""
    by_family: dict[str, list[tuple[str, Table]]] = {}
    for source, table in tables:
        try:
            family = table_column_family(table)
        except RepairError as error:
            raise error.in_source(source) from None
        by_family.setdefault(family, []).append((source, table))
    return {name: resolve_column_family(name, family_tables) for name, family_tables in sorted(by_family.items())}
