"""``repair size ROOT --history``: the growth of a job root over its retained checkpoints, per state.

Each retained checkpoint is counted as ``repair size`` counts it (every byte once); each step from one
checkpoint to the next is compared as ``repair diff`` compares two (:func:`repair.ops.diff.compare`):
files added, removed and shared, and each state's growth. Per state the series of its bytes and
entries over the checkpoints, and its growth from the first to the last: since each checkpoint's
states add up to its bytes, the states' growth adds up to the root's growth over the sequence exactly.

:func:`size_history` is ``repair size --history``: :func:`repair.ops.size.size` with the history set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from repair.errors import UsageError
from repair.io import storage as st
from repair.io.outputs import new_output
from repair.ops.diff import Comparison, compare
from repair.ops.size import CheckpointSize, SizeResult, group_pieces, size
from repair.ops.size_html import page


@dataclass
class StateSeries:
    """One state's bytes and entries in each checkpoint of the sequence (0 where it has none)."""

    operator: str | None
    state: str
    bytes: list[int]
    entries: list[int]

    @property
    def growth_bytes(self) -> int:
        return self.bytes[-1] - self.bytes[0]

    def to_json(self) -> dict:
        return {"operator": self.operator, "state": self.state, "bytes": self.bytes, "entries": self.entries,
                "growth_bytes": self.growth_bytes, "growth_entries": self.entries[-1] - self.entries[0]}


@dataclass
class Step:
    """From one retained checkpoint to the next."""

    old: CheckpointSize
    new: CheckpointSize
    compared: Comparison

    def to_json(self) -> dict:
        changed = [s for s in self.compared.states if s.growth_bytes]
        return {
            "old_checkpoint_id": self.old.checkpoint_id, "new_checkpoint_id": self.new.checkpoint_id,
            "growth_bytes": self.new.bytes - self.old.bytes,
            "files": {name: getattr(self.compared, name).to_json() for name in ("added", "removed", "shared")},
            "largest_growth": None if not changed else {"operator": changed[0].operator, "state": changed[0].state,
                                                         "growth_bytes": changed[0].growth_bytes},
        }


@dataclass
class History:
    """The retained checkpoints in order, each step between them, and each state's series."""

    checkpoints: list[CheckpointSize]
    steps: list[Step]
    #: Largest growth over the sequence (or shrinking) first.
    states: list[StateSeries]

    @property
    def growth_bytes(self) -> int:
        return self.checkpoints[-1].bytes - self.checkpoints[0].bytes

    def to_arrow(self):
        """Each state's bytes and entries in each checkpoint as a ``pyarrow.Table`` (one row per state and
        checkpoint: ``checkpoint_id``, ``operator``, ``state``, ``bytes``, ``entries``), for a plot over time."""
        import pyarrow as pa

        ids = [c.checkpoint_id for c in self.checkpoints]
        rows = [{"checkpoint_id": checkpoint, "operator": s.operator, "state": s.state, "bytes": size, "entries": entries}
                for s in self.states for checkpoint, size, entries in zip(ids, s.bytes, s.entries)]
        return pa.Table.from_pylist(rows, schema=pa.schema([("checkpoint_id", pa.int64()), ("operator", pa.string()),
                                                             ("state", pa.string()), ("bytes", pa.int64()), ("entries", pa.int64())]))

    def to_json(self, top: int | None = None) -> dict:
        return {
            "checkpoint_ids": [c.checkpoint_id for c in self.checkpoints],
            "bytes": [c.bytes for c in self.checkpoints],
            "growth_bytes": self.growth_bytes,
            "steps": [step.to_json() for step in self.steps],
            "states": [s.to_json() for s in (self.states if top is None else self.states[:top])],
            "states_left_off": 0 if top is None else max(0, len(self.states) - top),
        }


def history(checkpoints: list[CheckpointSize]) -> History:
    """The growth over ``checkpoints`` (counted by :func:`repair.ops.size.measure`, oldest first)."""
    steps = [Step(old, new, compare(old, new)) for old, new in zip(checkpoints, checkpoints[1:])]
    series: dict[tuple, StateSeries] = {}
    for i, checkpoint in enumerate(checkpoints):
        for group in group_pieces(checkpoint.pieces, "state"):
            key = (group.key["operator"], group.key["state"])
            state = series.get(key)
            if state is None:
                state = series[key] = StateSeries(*key, [0] * len(checkpoints), [0] * len(checkpoints))
            state.bytes[i], state.entries[i] = group.bytes, group.entries
    states = sorted(series.values(), key=lambda s: (-abs(s.growth_bytes), -s.bytes[-1], str(s.operator), s.state))
    return History(checkpoints, steps, states)


def size_history(path: str, *, checkpoint: int | None = None, html: str | None = None, show_history: bool = True,
                 storage: st.Storage | None = None, **options) -> SizeResult:
    """``repair size PATH --history`` and ``--html FILE``: :func:`repair.ops.size.size` (``options``) with
    the growth over every retained checkpoint of ``path`` (for a ``chk-N``: its job root's retained
    checkpoints up to it; one for a savepoint) in
    ``history`` (unless not ``show_history``) and, with ``html``, a page of it written there (a new file,
    not inside ``path``: checked before anything is read)."""
    if checkpoint is not None:
        raise UsageError("--history and --html show every retained checkpoint: they do not go with --checkpoint")
    storage = storage or st.default_storage()
    if html is not None:
        new_output(html, [path], storage, file=True)
    result = size(path, storage=storage, earlier=True, **options)
    growth = history(result.checkpoints)
    if show_history:
        result.history = growth
    if html is not None:
        every_group = replace(result, top=None).to_json()  # the page sums what its bars leave out
        storage.write_atomic(html, page(every_group, growth.to_json()).encode("utf-8"))
        result.html = st.absolute(html)
    return result
