"""What ``repair rebuild-manifest --salvage`` keeps of a damaged SST, and exactly what it loses.

A corrupt or truncated SST is salvaged block by block (:mod:`repair.formats.rocksdb.table.salvage`):
the entries of every sound data block are written into a new SST in the source's format, which
replaces the damaged one in the rebuilt checkpoint. Per file the report says the entries kept and lost
(exact where the properties or the damage tell it: 0 when only a metadata block was damaged), each lost
block's key bounds (the last key before it and its index separator, decoded into key groups and Flink
keys), and whether the new file passed our verify and ``sst_dump --verify_checksum``. A file that
cannot be salvaged, or whose salvaged copy does not verify, is dropped whole as ``--drop-missing``
drops it. Missing files are always dropped whole.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource, RandomAccess
from repair.formats.flink.backend_meta import KeyedBackendMeta
from repair.formats.flink.in_rocksdb.key_range import BoundaryKey, describe_boundary
from repair.formats.flink.keygroups import key_group_prefix_bytes
from repair.formats.rocksdb.table.block import InternalKey, ValueType
from repair.formats.rocksdb.table.salvage import Salvage, salvage_table
from repair.formats.rocksdb.table.sst import open_table, verify_table
from repair.io import storage as st
from repair.io.resolved import close, open_resolved
from repair.io.sst_dump import sst_dump_verdict

#: Where salvaged SSTs go, relative to the new ``_metadata``: ``salvaged/<random>.sst`` (no name read
#: from the checkpoint decides where we write).
SALVAGED_DIR = "salvaged"


@dataclass
class LostRange:
    """The entries of one dropped data block: how many, and the keys that bound them."""

    entries: int | None
    #: The lost keys come after this key (exclusive; None: from the subtask's first key group).
    after: BoundaryKey | None
    #: ... and are at most this key (None: up to the subtask's last key group).
    up_to: BoundaryKey | None
    key_groups: tuple[int, int]
    offset: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": self.entries, "after": self.after.to_json() if self.after else None,
            "up_to": self.up_to.to_json() if self.up_to else None, "key_groups": list(self.key_groups),
            "offset": self.offset, "reason": self.reason,
        }


@dataclass
class SalvagedFile:
    """One damaged SST replaced by its salvaged copy in the rebuilt checkpoint."""

    checkpoint: int
    operator: str
    operator_id: str
    subtask: int
    local_name: str
    path: str | None  # the damaged file
    column_family: str
    method: str  # index | scan
    entries_kept: int
    #: Point entries lost: exact when knowable, ``None`` only when neither the properties nor the blocks tell.
    entries_lost: int | None
    range_deletions_lost: int | None
    lost: list[LostRange]
    damaged_metadata: list[str]
    #: The salvaged copy: name relative to the new ``_metadata``, size, and the two verdicts on it.
    new_file: str
    new_size: int
    verified: bool
    sst_dump_verified: bool | None
    sst_dump_detail: str
    #: The bytes to publish (not in the JSON document).
    data: bytes = field(default=b"", repr=False)
    #: The salvage itself (not in the JSON document).
    salvage: Salvage | None = field(default=None, repr=False)
    #: Remaining files of the same state overlapping the lost blocks' keys: older ones bring older values
    #: back for keys whose newest entry was lost, newer ones hold newer versions (those keys lose nothing).
    overlaps: list = field(default_factory=list)
    #: The keys of the lost entries, with ``list_lost_keys`` (:mod:`repair.ops.rebuild.lost_keys`).
    lost_keys: Any = None

    @property
    def key_groups(self) -> tuple[int, int] | None:
        """First and last key group of the lost entries (None when nothing was lost)."""
        if not self.lost:
            return None
        return min(r.key_groups[0] for r in self.lost), max(r.key_groups[1] for r in self.lost)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint, "operator": self.operator, "operator_id": self.operator_id,
            "subtask": self.subtask, "local_name": self.local_name, "path": self.path, "column_family": self.column_family,
            "method": self.method, "entries_kept": self.entries_kept, "entries_lost": self.entries_lost,
            "range_deletions_lost": self.range_deletions_lost,
            "key_groups": list(self.key_groups) if self.key_groups else None,
            "lost": [r.to_json() for r in self.lost], "damaged_metadata": self.damaged_metadata,
            "new_file": self.new_file, "new_size": self.new_size, "verified": self.verified,
            "sst_dump_verified": self.sst_dump_verified, "sst_dump_detail": self.sst_dump_detail,
            "overlaps": [o.to_json() for o in self.overlaps],
            "lost_keys": self.lost_keys.to_json() if self.lost_keys is not None else None,
        }


def salvage_file(storage: st.Storage, resolved, *, column_family: tuple[int, str] | None) -> tuple[Salvage, bytes, tuple[int, str]]:
    """Salvage the SST at ``resolved``; returns the salvage, the new table's bytes and its column family.

    ``column_family`` (id, name) is the one the instance's MANIFEST or sibling files give, used when the
    file's own properties are unreadable. Raises :class:`RepairError` when nothing can be salvaged.
    """
    source = open_as_it_is(storage, resolved)
    try:
        salvage = salvage_table(source)
    finally:
        close(source)
    props = salvage.properties
    if props is not None and props.column_family_id is not None and props.column_family_name is not None:
        column_family = (props.column_family_id, props.column_family_name)
    if column_family is None:
        raise RepairError("its properties are unreadable and no MANIFEST record or other file names its column family")
    return salvage, salvage.write(column_family), column_family


def open_as_it_is(storage: st.Storage, resolved) -> RandomAccess:
    """The bytes of a whole file as they are now: a truncated file is read to its actual end (not to the
    size ``_metadata`` records, which would fail at the first read past it)."""
    if resolved.inline is None and resolved.start == 0:
        return storage.open_input(resolved.uri)
    return open_resolved(storage, resolved)


def lost_ranges(salvage: Salvage, state_name: str, meta: KeyedBackendMeta | None, max_parallelism: int,
                key_groups: tuple[int, int]) -> list[LostRange]:
    """Each lost block's bounds as keys of ``state_name`` (key groups, Flink keys where decodable)."""
    state = meta.state(state_name) if meta is not None else None
    serializer = meta.key_serializer if meta is not None else None
    prefix = key_group_prefix_bytes(max_parallelism)
    out = []
    for block in salvage.lost_blocks:
        after = _boundary(block.after_key, state, serializer, max_parallelism)
        up_to = _boundary(block.up_to_key, state, serializer, max_parallelism)
        first = after.key_group if after is not None and after.key_group is not None else key_groups[0]
        last = up_to.key_group if up_to is not None and up_to.key_group is not None and len(block.up_to_key or b"") >= prefix else key_groups[1]
        out.append(LostRange(block.entries, after, up_to, (max(first, key_groups[0]), min(last, key_groups[1])), block.offset, block.reason))
    return out


def _boundary(user_key: bytes | None, state, serializer, max_parallelism: int) -> BoundaryKey | None:
    if user_key is None:
        return None
    try:
        return describe_boundary(InternalKey(user_key, 0, ValueType.VALUE).encode(), state, serializer, max_parallelism)
    except RepairError:
        return None


def check_salvaged(data: bytes) -> tuple[bool, bool | None, str]:
    """Our verify and sst_dump's on a salvaged table: ``(ours, sst_dump's, sst_dump's detail)``."""
    ours = verify_table(BytesSource(data)).ok
    try:
        open_table(BytesSource(data))
    except RepairError:
        ours = False
    theirs, detail = sst_dump_verdict(data)
    return ours, theirs, detail


def new_file_name() -> str:
    """A fresh name for a salvaged SST, relative to the new ``_metadata``."""
    return f"{SALVAGED_DIR}/{uuid.uuid4().hex}.sst"
