"""``rebuild-manifest --list-lost-keys``: the decoded keys whose entries a rebuild lost, and what each key shows after.

A lost entry's key is known where bytes still tell it:

* a file dropped whole that still reads in part: the entries of its sound blocks (proven by their
  checksums) and the keys its damaged blocks still read (checksum ignored, see
  :attr:`~repair.formats.rocksdb.table.salvage.LostBlock.read_keys`);
* a salvaged file: the keys its lost blocks still read.

The list is ``complete`` when every lost entry is listed: no block whose bytes do not read, the keys
read add up to the count the file's properties give, and no range deletion is lost (its keys are not
listed: they come back, bounded by the file's range). A missing file lists nothing (its keys are bounded
by the MANIFEST's range only, reported beside).

Each key's *fate* after the restore, from the remaining files of the same column family (RocksDB
shadowing, :func:`_fate`): ``lost`` (no other version, or a merge operand, e.g. of a list state, which
no other version replaces), ``older_value_back`` (an older version in ``other_file`` is what the key shows
now; a deletion lost brings the key back), or ``newer_kept`` (a newer value or deletion in
``other_file``: nothing is lost for that key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import KeyedBackendMeta
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.flink.in_rocksdb.key_range import BoundaryKey, describe_boundary
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.salvage import Salvage, SalvageError, salvage_table
from repair.formats.rocksdb.table.sst import InternalEntry, open_table
from repair.io import storage as st
from repair.io.resolved import close, open_resolved
from repair.io.snapshot import LoadedSnapshot
from repair.ops.rebuild.losses import LostFile
from repair.ops.rebuild.salvage import SalvagedFile, open_as_it_is


@dataclass
class LostKey:
    """One lost entry's key, decoded, and what the key shows after the restore."""

    key: BoundaryKey
    fate: str  # lost | older_value_back | newer_kept
    #: The remaining file holding the version the key shows (None when ``lost``).
    other_file: str | None
    #: With ``--older``: an older source's version of the key (the same entry, recoverable from there, or an
    #: older one), :class:`repair.ops.rebuild.older.OlderVersion`; None when no source holds the key.
    older: Any = None
    #: The lost entry's value bytes where known: from a sound block, or as a damaged block still reads
    #: them (not in the JSON document; :mod:`repair.ops.rebuild.older` compares them with the sources').
    value: bytes | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = self.key.to_json()
        del out["exclusive"]
        return {**out, "fate": self.fate, "other_file": self.other_file,
                "older": self.older.to_json() if self.older is not None else None}


@dataclass
class LostKeys:
    """The keys of one file's lost entries, as far as they can be known."""

    keys: list[LostKey]
    #: Every lost entry is listed.
    complete: bool
    #: Where the keys come from, in words.
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"complete": self.complete, "source": self.source, "keys": [k.to_json() for k in self.keys]}


def add_lost_keys(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, lost: list[LostFile], salvaged: list[SalvagedFile],
    replaced: dict[str, bytes], meta: KeyedBackendMeta | None, max_parallelism: int, storage: st.Storage,
) -> None:
    """Set ``lost_keys`` of every dropped and salvaged file of one instance (``handle`` as rebuilt: its
    remaining SSTs, ``replaced`` the salvaged copies' bytes by local name)."""
    listed: list[tuple[LostFile | SalvagedFile, str, list[tuple[InternalKey, bytes | None]], bool, str]] = []
    for item in lost:
        keys, complete, source = _dropped_keys(item, storage)
        listed.append((item, item.column_family or "", keys, complete, source))
    for item in salvaged:
        keys, complete = _read_keys(item.salvage)
        listed.append((item, item.column_family, keys, complete, "the lost blocks' damaged bytes as they still read"))
    wanted = {(cf, k.user_key) for _, cf, keys, _, _ in listed for k, _ in keys}
    versions = _other_versions(snapshot, handle, replaced, wanted, storage)
    serializer = meta.key_serializer if meta is not None else None
    for item, cf, keys, complete, source in listed:
        state = meta.state(cf) if meta is not None else None
        out = []
        for key, value in keys:
            fate, other = _fate(key, versions.get((cf, key.user_key), []))
            boundary = describe_boundary(key.encode(), state, serializer, max_parallelism)
            out.append(LostKey(boundary, fate, other, value=value))
        item.lost_keys = LostKeys(out, complete, source)


def _dropped_keys(item: LostFile, storage: st.Storage) -> tuple[list[tuple[InternalKey, bytes | None]], bool, str]:
    """A dropped file's keys: its sound blocks' entries and its damaged blocks' keys as they read."""
    if item.reason in ("missing", "unreadable") or item.salvage is None and item.resolved is None:
        return [], False, "none: the file's bytes cannot be read (its key range is reported from the MANIFEST)"
    salvage = item.salvage
    if salvage is None:
        try:
            source = open_as_it_is(storage, item.resolved)
            try:
                salvage = salvage_table(source)
            finally:
                close(source)
        except (SalvageError, RepairError):
            return [], False, "none: no block of the file can be proven or read"
        if item.largest is not None:
            salvage = salvage.ending_at(item.largest.internal_key)
    lost_keys, complete = _read_keys(salvage)
    return ([(k, bytes(v)) for k, v in salvage.entries] + lost_keys, complete and not salvage.range_tombstones,
            "the file's sound blocks and its damaged blocks as they still read")


def _read_keys(salvage: Salvage | None) -> tuple[list[tuple[InternalKey, bytes | None]], bool]:
    """The keys (and values) of a salvage's lost blocks as they still read, and whether they are all the lost entries."""
    if salvage is None:
        return [], False
    keys = [(k, v) for block in salvage.lost_blocks
            for k, v in zip(block.read_keys or (), block.read_values or [None] * len(block.read_keys or ()))]
    every_block = all(block.read_keys is not None for block in salvage.lost_blocks)
    complete = (every_block and salvage.scan_stopped_at is None and salvage.entries_lost == len(keys)
                and salvage.range_deletions_lost == 0)
    return keys, complete


def _other_versions(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, replaced: dict[str, bytes], wanted: set[tuple[str, bytes]],
    storage: st.Storage,
) -> dict[tuple[str, bytes], list[tuple[int, int, str]]]:
    """``(column family, user key) -> [(seqno, type, local name)]`` of the remaining files' entries of ``wanted``."""
    found: dict[tuple[str, bytes], list[tuple[int, int, str]]] = {}
    if not wanted:
        return found
    families = {cf for cf, _ in wanted}
    for entry in handle.sst_files:
        try:
            if entry.local_path in replaced:
                source = BytesSource(replaced[entry.local_path])
            else:
                source = open_resolved(storage, snapshot.resolver.resolve(entry.handle))
            try:
                for cf, user_key, e in wanted_entries(source, families, wanted):
                    found.setdefault((cf, user_key), []).append((e.seqno, e.value_type, entry.local_path))
            finally:
                close(source)
        except RepairError:
            continue  # a remaining file that does not read: the rebuild itself reports it
    return found


def wanted_entries(source, families: set[str], wanted: set[tuple[str, bytes]]) -> Iterator[tuple[str, bytes, InternalEntry]]:
    """The entries of the table ``source`` whose ``(column family, user key)`` is ``wanted`` (none when its column
    family, from its properties, is not one of ``families``)."""
    table = open_table(source)
    cf = table.properties.column_family_name if table.properties is not None else None
    if cf not in families:
        return
    for entry in table.entries():
        if (cf, bytes(entry.user_key)) in wanted:
            yield cf, bytes(entry.user_key), entry


def _fate(key: InternalKey, others: list[tuple[int, int, str]]) -> tuple[str, str | None]:
    """What ``key``'s user key shows once its entry is lost, from the other versions ``(seqno, type, file)``.

    A newer value or deletion shadows the lost entry: nothing is lost. Newer merge operands do not (they
    apply on top of it): a lost merge operand is lost whatever else remains; a lost value or deletion under
    newer operands is lost too (they now apply to what is below it). Otherwise an older version is what the
    key shows now (a lost deletion brings the key back)."""
    newer = [o for o in others if o[0] > key.seqno]
    full = [o for o in newer if o[1] != ValueType.MERGE]
    if full:
        return "newer_kept", max(full)[2]
    if key.value_type == ValueType.MERGE or newer:
        return "lost", None
    older = [o for o in others if o[0] < key.seqno]
    if older:
        return "older_value_back", max(older)[2]
    return "lost", None
