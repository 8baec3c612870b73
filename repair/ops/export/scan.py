"""One state of one operator read into memory as Arrow record batches: export without the files.

For notebooks and scripts (``repair.read_state(...).to_pandas()``), as pyiceberg's
``scan().to_arrow()``: the same plan, sources, decoders and columns as :func:`repair.export`, with the
batches handed to the caller instead of written as Parquet parts. Subtasks are read one after the
other in this process; memory holds one batch at a time with :func:`iter_state_batches`, the whole
state with :func:`read_state`.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from repair.errors import UsageError
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.export.job import ExportResult, StatePlan, _Planner
from repair.ops.export.parts import PartStats, _BatchWriter, _record_batches, check_kind, part_schema
from repair.ops.export.sources import SOURCES


def iter_state_batches(
    checkpoint: str, operator: str, state: str, *, engine: str = "auto", storage: st.Storage | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of state ``state`` of ``operator`` (uid, name or id) in the newest snapshot at
    ``checkpoint``, every subtask's in turn, as record batches of :func:`state_schema`'s schema."""
    planner, plans = _plan(checkpoint, operator, state, storage)
    for entry, index, source in planner.subtasks:
        plan = next((p for p in plans.get((entry.operator_id, source), ()) if p.name == state), None)
        if plan is None:
            continue
        op = planner.snapshot.metadata.operator(entry.operator_id)
        sub = next(s for s in op.subtasks if s.index == index)
        for stream in SOURCES[source].streams(planner.snapshot, planner.storage, op, sub, {state}, engine=engine):
            check_kind(stream, plan.kind)
            writer = _BatchWriter(plan.columns, PartStats(plan.part(index)))
            yield from _record_batches(writer, stream, plan.columns)


def read_state(
    checkpoint: str, operator: str, state: str, *, engine: str = "auto", storage: st.Storage | None = None
) -> pa.Table:
    """All rows of one state as one Arrow table (columns as in an export's Parquet parts)."""
    _, plans = _plan(checkpoint, operator, state, storage)
    schema = part_schema(next(p for ps in plans.values() for p in ps).columns)
    return pa.Table.from_batches(list(iter_state_batches(checkpoint, operator, state, engine=engine, storage=storage)), schema)


def _plan(checkpoint: str, operator: str, state: str, storage: st.Storage | None
          ) -> tuple[_Planner, dict[tuple[str, str], tuple[StatePlan, ...]]]:
    """The planner (operator selected) and the plans of ``state`` per ``(operator id, source)``."""
    storage = storage or st.default_storage()
    layout = discover(checkpoint, storage)
    ref = layout.snapshots[-1]
    snapshot = load_snapshot(ref, layout.root, storage)
    result = ExportResult(source=checkpoint, metadata=ref.metadata_uri, snapshot=ref.name, kind=snapshot.kind,
                          savepoint_format=snapshot.savepoint_format, checkpoint_id=snapshot.metadata.checkpoint_id, out="")
    planner = _Planner(snapshot, layout.root, storage, result)
    planner.select_operators([operator])
    plans = planner.plan_states([state])
    if not any(plans.values()):
        names = sorted({p.name for ps in planner.plan_states(None).values() for p in ps})
        raise UsageError(f"operator {operator!r} has no exportable state {state!r} (states: {', '.join(names) or 'none'})")
    return planner, plans
