"""``repair edit``: structural changes to a checkpoint or savepoint, without decoding any value.

The changes users make today with a State Processor API job, or cannot make at all:

* ``rename_uids`` ``{OLD: NEW}``: the operator whose uid is ``OLD`` (or whose operator id is ``OLD``,
  32 hex digits) gets the operator id Flink derives from ``NEW`` (``murmur3_128`` of the uid, as
  :func:`~repair.formats.flink.keygroups.operator_id_for_uid`), and ``NEW`` as its recorded uid
  (metadata version 5+). A job whose operator now has ``uid(NEW)`` restores its state.
* ``drop_operators``: operators removed from ``_metadata`` (uid, name or operator id), so a job without
  them restores without ``--allowNonRestoredState``.
* ``drop_states`` ``UID/STATE``: an operator state (list, union, broadcast) removed from every subtask's
  handle. Keyed state lives in RocksDB instances and key-group streams whose meta data names it: it
  cannot be dropped without rewriting them (refused; ``write_savepoint(..., drop_states=...)`` does it).

Everything kept is kept byte for byte: the new ``_metadata`` is the old one with these changes, written
as :func:`repair.ops.relocate.write_snapshot` writes a relocated one (``NEW_ROOT/<snapshot>/_metadata``,
paths pointing where the files are now or, with ``copy``, to copies under ``NEW_ROOT``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from repair.errors import UsageError
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import OperatorState
from repair.io import storage as st
from repair.ops.relocate import RelocateResult, load_single_snapshot, write_snapshot
from repair.results import CommandResult

__all__ = ["EditResult", "edit"]

_OPERATOR_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Edit:
    """One change made: ``rename-uid``, ``drop-operator`` or ``drop-state``, to which operator."""

    action: str
    operator_id: str
    detail: str

    def to_json(self) -> dict:
        return {"action": self.action, "operator_id": self.operator_id, "detail": self.detail}


@dataclass
class EditResult(CommandResult):
    edits: list[Edit] = field(default_factory=list)
    written: RelocateResult | None = None

    @property
    def ok(self) -> bool:
        return self.written is not None and self.written.ok

    @property
    def new_metadata(self) -> str | None:
        return self.written.new_metadata if self.written else None

    @property
    def source(self) -> str:
        """The ``_metadata`` edited (empty when nothing was read, which raises before a result exists)."""
        return self.written.source if self.written else ""

    @property
    def findings(self) -> list:
        """Nothing judged: edit writes, and reports problems as errors."""
        return []

    def document(self) -> dict:
        return {"source": self.source,
                "out": self.written.new_root if self.written else None, "new_metadata": self.new_metadata, "edits": [e.to_json() for e in self.edits],
                "files": self.written.to_json() if self.written else None}


def edit(
    path: str,
    out: str,
    *,
    rename_uids: Mapping[str, str] | None = None,
    drop_operators: Iterable[str] = (),
    drop_states: Iterable[str] = (),
    copy: bool = False,
    storage: st.Storage | None = None,
) -> EditResult:
    """Write the checkpoint or savepoint at ``path`` with the changes into ``out`` (a new root)."""
    storage = storage or st.default_storage()
    rename_uids, drop_operators, drop_states = dict(rename_uids or {}), list(drop_operators), list(drop_states)
    if not (rename_uids or drop_operators or drop_states):
        raise UsageError("nothing to edit: give a uid to rename, an operator or a state to drop")
    snapshot = load_single_snapshot(path, storage, out=out)
    metadata = snapshot.metadata
    result = EditResult()
    for value in drop_operators:
        op = find_operator(metadata.operators, value)
        metadata.operators.remove(op)
        result.edits.append(Edit("drop-operator", op.operator_id, value))
    for value in drop_states:
        operator, slash, state = value.rpartition("/")
        if not slash or not operator or not state:
            raise UsageError(f"a state to drop is OPERATOR/STATE (uid, name or operator id, then the state's name), not {value!r}")
        op = find_operator(metadata.operators, operator)
        _drop_operator_state(op, state, value)
        result.edits.append(Edit("drop-state", op.operator_id, value))
    for old, new in rename_uids.items():
        op = find_operator(metadata.operators, old)
        new_id = operator_id_for_uid(new)
        if any(other.operator_id == new_id for other in metadata.operators if other is not op):
            raise UsageError(f"cannot rename {old!r} to {new!r}: the snapshot already holds an operator with uid {new!r} "
                             f"(operator id {new_id}); drop it first")
        index = metadata.operators.index(op)
        metadata.operators[index] = replace(op, operator_id=new_id, uid=new if metadata.version >= 5 else op.uid)
        result.edits.append(Edit("rename-uid", new_id, f"{old} -> {new} (was operator id {op.operator_id})"))
    result.written = write_snapshot(snapshot, out, copy=copy, storage=storage)
    return result


def find_operator(operators: list[OperatorState], value: str) -> OperatorState:
    """The operator ``value`` names: its uid (recorded, or hashed to an operator id), name, or operator id."""
    wanted = value.lower()
    ids = {wanted} if _OPERATOR_ID.match(wanted) else {operator_id_for_uid(value)}
    found = [op for op in operators if op.operator_id in ids or value in (op.operator_uid, op.operator_name)]
    if len(found) != 1:
        held = ", ".join(op.operator_uid or op.operator_id for op in operators)
        what = "no operator" if not found else f"{len(found)} operators"
        raise UsageError(f"{what} with uid, name or id {value!r} in the snapshot (it holds {held})")
    return found[0]


def _drop_operator_state(op: OperatorState, state: str, value: str) -> None:
    """Remove operator state ``state`` from every subtask of ``op`` (refusing keyed state)."""
    dropped = 0
    for sub in op.subtasks:
        for slot in ("managed_operator_state", "raw_operator_state"):
            handle = getattr(sub, slot)
            if handle is None:
                continue
            kept = [entry for entry in handle.states if entry.name != state]
            if len(kept) != len(handle.states):
                dropped += 1
                setattr(sub, slot, replace(handle, states=kept))
    if dropped:
        return
    if any(sub.managed_keyed_state is not None for sub in op.subtasks):
        raise UsageError(f"{value}: no operator state of that name; keyed state cannot be dropped by edit (the "
                         f"operator's RocksDB instances and key-group streams name it in their own meta data): "
                         f"export the snapshot and write it back with write-savepoint, dropping the state there")
    raise UsageError(f"{value}: the operator holds no state of that name")
