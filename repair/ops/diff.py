"""``repair diff OLD NEW``: what grew between two checkpoints of one job, per state, and which files did it.

Both snapshots are counted as ``repair size`` counts them (:func:`repair.ops.size.measure`: every byte
once, SSTs by the column family their properties name; an SST both reference is read once), then
compared:

* files: added (referenced by NEW only), removed (by OLD only), shared (by both); a file-merging
  physical file is one file, with the bytes each checkpoint references in it; streams inline in
  ``_metadata`` are no files (their bytes are in the states' growth all the same);
* per operator and state: bytes and entries in each, the growth, and the files added and removed.

Since each checkpoint's pieces add up to its bytes, the states' growth adds up to NEW's bytes minus
OLD's exactly. Returns a :class:`DiffResult`; ``to_json()`` is documented in docs/json-contracts.md,
``to_arrow()`` gives the states' growth as an Arrow table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from repair.errors import UsageError
from repair.findings import Problem
from repair.io import storage as st
from repair.io.layout import discover
from repair.ops.size import CheckpointSize, FilesVerdict, Piece, measure


@dataclass
class FileSet:
    files: int = 0
    bytes: int = 0

    def to_json(self) -> dict:
        return {"files": self.files, "bytes": self.bytes}


@dataclass
class StateGrowth:
    """One state's bytes and entries in OLD and NEW, and the files of it added and removed."""

    operator: str | None
    state: str
    old_bytes: int = 0
    new_bytes: int = 0
    old_entries: int = 0
    new_entries: int = 0
    added_files: int = 0
    added_bytes: int = 0
    removed_files: int = 0
    removed_bytes: int = 0

    @property
    def growth_bytes(self) -> int:
        return self.new_bytes - self.old_bytes

    @property
    def growth_entries(self) -> int:
        return self.new_entries - self.old_entries

    def to_json(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "growth_bytes": self.growth_bytes, "growth_entries": self.growth_entries}


@dataclass
class DiffResult(FilesVerdict):
    source: str  # NEW, absolute
    old: CheckpointSize
    new: CheckpointSize
    added: FileSet
    removed: FileSet
    shared: FileSet
    #: Largest growth (or shrinking) first.
    states: list[StateGrowth]
    bytes_read: int
    findings: list[Problem] = field(default_factory=list)
    old_source: str = ""
    #: Only the ``top`` first states in ``to_json()`` (None: all).
    top: int | None = None

    @property
    def growth_bytes(self) -> int:
        return self.new.bytes - self.old.bytes

    def document(self) -> dict:
        def side(size: CheckpointSize, source: str) -> dict:
            return {"source": source, "checkpoint_id": size.checkpoint_id, "metadata_path": size.metadata_path, "bytes": size.bytes}

        return {
            "source": self.source,
            "old": side(self.old, self.old_source),
            "new": side(self.new, self.source),
            "growth_bytes": self.growth_bytes,
            "files": {"added": self.added.to_json(), "removed": self.removed.to_json(), "shared": self.shared.to_json()},
            "bytes_read": self.bytes_read,
            "states": [s.to_json() for s in (self.states if self.top is None else self.states[:self.top])],
            "states_left_off": 0 if self.top is None else max(0, len(self.states) - self.top),
            "findings": [f.to_json() for f in self.findings],
        }

    def to_arrow(self):
        """The states' growth as a ``pyarrow.Table`` (one row per operator and state)."""
        import pyarrow as pa

        rows = [s.to_json() for s in self.states]
        names = [f.name for f in fields(StateGrowth)] + ["growth_bytes", "growth_entries"]
        return pa.table({name: [row[name] for row in rows] for name in names})


def _files(size: CheckpointSize) -> dict[str, int]:
    """The checkpoint's files (not inline streams) and the bytes it references in each."""
    found: dict[str, int] = {}
    for piece in size.pieces:
        if piece.file is not None:
            found[piece.file] = found.get(piece.file, 0) + piece.bytes
    return found


def _states(old: CheckpointSize, new: CheckpointSize, added: set[str], removed: set[str]) -> list[StateGrowth]:
    states: dict[tuple, StateGrowth] = {}
    seen: set[tuple] = set()  # (state, side, file): a file counted once per state, however many pieces it has

    def add(piece: Piece, side: str, changed: set[str]) -> None:
        key = (piece.operator, piece.state)
        growth = states.setdefault(key, StateGrowth(*key))
        setattr(growth, f"{side}_bytes", getattr(growth, f"{side}_bytes") + piece.bytes)
        setattr(growth, f"{side}_entries", getattr(growth, f"{side}_entries") + (piece.entries or 0))
        if piece.file in changed:
            counted = "added" if side == "new" else "removed"
            setattr(growth, f"{counted}_bytes", getattr(growth, f"{counted}_bytes") + piece.bytes)
            if (key, side, piece.file) not in seen:
                seen.add((key, side, piece.file))
                setattr(growth, f"{counted}_files", getattr(growth, f"{counted}_files") + 1)

    for piece in old.pieces:
        add(piece, "old", removed)
    for piece in new.pieces:
        add(piece, "new", added)
    return sorted(states.values(), key=lambda s: (-abs(s.growth_bytes), -s.new_bytes, str(s.operator), s.state))


def _one_snapshot(path: str, storage: st.Storage, which: str):
    layout = discover(path, storage)
    if len(layout.snapshots) != 1:
        numbers = ", ".join(f"chk-{r.number}" for r in layout.snapshots)
        raise UsageError(f"{which} is a job root ({numbers}): give one checkpoint (a chk-N directory), savepoint or _metadata file")
    return layout.snapshots[0], layout.root


@dataclass
class Comparison:
    """Two counted checkpoints compared: their files added, removed and shared, and each state's growth."""

    added: FileSet
    removed: FileSet
    shared: FileSet
    #: Largest growth (or shrinking) first.
    states: list[StateGrowth]


def compare(before: CheckpointSize, after: CheckpointSize) -> Comparison:
    """What changed from ``before`` to ``after`` (two checkpoints counted by :func:`repair.ops.size.measure`)."""
    old_files, new_files = _files(before), _files(after)
    added = set(new_files) - set(old_files)
    removed = set(old_files) - set(new_files)
    shared = set(new_files) & set(old_files)
    return Comparison(
        added=FileSet(len(added), sum(new_files[f] for f in added)),
        removed=FileSet(len(removed), sum(old_files[f] for f in removed)),
        shared=FileSet(len(shared), sum(new_files[f] for f in shared)),
        states=_states(before, after, added, removed),
    )


def diff(old: str, new: str, *, top: int | None = None, storage: st.Storage | None = None) -> DiffResult:
    """What grew from the snapshot at ``old`` to the one at ``new`` (two checkpoints of one job)."""
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: expected a positive number")
    storage = storage or st.default_storage()
    measured = measure([_one_snapshot(old, storage, "OLD"), _one_snapshot(new, storage, "NEW")], storage)
    before, after = measured.checkpoints
    compared = compare(before, after)
    return DiffResult(
        source=st.absolute(new),
        old=before,
        new=after,
        added=compared.added,
        removed=compared.removed,
        shared=compared.shared,
        states=compared.states,
        bytes_read=measured.bytes_read,
        findings=measured.findings,
        old_source=st.absolute(old),
        top=top,
    )
