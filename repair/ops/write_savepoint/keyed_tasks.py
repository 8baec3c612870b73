"""The keyed state of one operator written back as tasks (:func:`repair.ops.runner.run_tasks`: in this
process, in a process pool, or on Spark), in two stages that meet in the output's staging directory:

1. :func:`spill_part`, one task per Parquet part of a keyed state: its rows as pieces of entries
   (:class:`~repair.ops.write_savepoint.rows.RowPieces`), spilled to one file per new subtask, first in
   local scratch space, then moved below ``<staging>/<shuffle>`` (where every executor can read it).
2. :func:`write_subtask_stream`, one task per new subtask: its spilled pieces (from every part, in the
   order of the parts, so that an error names the same rows as one process would) dealt into local
   bucket files by key group, then each bucket in key-group order made into sorted entries
   (:func:`~repair.ops.write_savepoint.rows.subtask_entries`) and written as the subtask's key-group
   stream, a file of the staging directory. Memory holds one bucket's entries (a key group's, unless
   a subtask has more than :data:`MAX_BUCKETS` key groups), not the subtask's.

The driver (:mod:`repair.ops.write_savepoint.job`) plans the tasks, adopts the streams, deletes the
shuffle files and writes ``_metadata`` last. The output is the same, byte for byte, wherever the tasks run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from repair.formats.flink.backend_meta import decode_keyed_backend_meta, set_meta_kryo_generation
from repair.formats.flink.full_snapshot.canonical_writer import iter_key_group_stream
from repair.formats.flink.handles import KeyGroupRange
from repair.formats.flink.kryo_upgrade import kryo_columns
from repair.formats.flink.pojo_upgrade import PojoColumn
from repair.io import storage as st
from repair.io.resolved import scratch_directory
from repair.ops.write_savepoint.rows import (
    SPILL_BUFFER,
    RowPieces,
    Spill,
    iter_records,
    kryo5_row,
    part_rows,
    read_pieces,
    subtask_entries,
)

__all__ = ["SpillTask", "SpilledPart", "StreamTask", "WrittenStream", "spill_part", "write_subtask_stream"]

#: Local bucket files a stream task deals its pieces into, at most (consecutive key groups share one
#: when a subtask has more key groups).
MAX_BUCKETS = 256
#: Bytes per read of a spilled file.
READ_CHUNK = 4 << 20


@dataclass
class SpillTask:
    """Spill one Parquet part of one keyed state (``state_id``: its index in the meta data ``meta``)."""

    storage: st.Storage
    staging: str
    part: str
    meta: bytes
    state_id: int
    old_max: int
    new_max: int
    parallelism: int
    #: Where below ``staging`` the part's spilled files go (``<prefix>/subtask-<index>``).
    prefix: str
    #: The Kryo generation of the source's Flink (its Kryo values are read and written in it), or None.
    kryo_generation: int | None = None
    #: Flink 1.x rows written for Flink 2.x (``kryo_generation`` 5): Kryo 2.24 values Kryo 5 reads otherwise
    #: are written as Kryo 5 writes them first.
    upgrade_kryo: bool = False
    #: Upgrading: the state's POJO values rewritten with Flink 2.x's collection serializers (their 1.x snapshot inside).
    pojo: PojoColumn | None = None


@dataclass
class SpilledPart:
    rows: int
    #: Raw columns written from their decoded column, per column.
    encoded: dict[str, int]
    #: The spilled files (relative to the staging directory) by new subtask; subtasks without rows have none.
    files: dict[int, str] = field(default_factory=dict)


def spill_part(task: SpillTask) -> SpilledPart:
    meta = decode_keyed_backend_meta(task.meta)
    if task.kryo_generation is not None:
        set_meta_kryo_generation(meta, task.kryo_generation)
    pieces = RowPieces(meta.states[task.state_id], meta.key_serializer, task.old_max, task.new_max)
    upgraded: list = kryo_columns(meta.states[task.state_id], meta.key_serializer) if task.upgrade_kryo else []
    if task.pojo is not None:
        upgraded.append(task.pojo)
    rows = 0
    files: dict[int, str] = {}
    with scratch_directory("write-savepoint-spill") as scratch:
        with Spill(scratch, task.new_max, task.parallelism) as spill:
            for where, row in part_rows(task.storage, task.part):
                rows += 1
                row = kryo5_row(row, upgraded, where)
                spill.add(task.state_id, pieces.piece(row, where))
        for index, count in enumerate(spill.counts):
            if count:
                name = f"{task.prefix}/subtask-{index}"
                task.storage.put_local_file(spill.paths[index], st.resolve_within(task.staging, name), inside=task.staging)
                files[index] = name
    return SpilledPart(rows, pieces.encoded, files)


@dataclass
class StreamTask:
    """Write new subtask ``index``'s key-group stream (``head``: the meta data written first) from the
    spilled files ``spilled`` (relative to ``staging``, in the order of the parts) to ``name``."""

    storage: st.Storage
    staging: str
    name: str
    index: int
    key_groups: KeyGroupRange
    head: bytes
    spilled: list[str]
    #: The states by state id: name and kind (for errors and counts).
    states: list[tuple[str, str]]


@dataclass
class WrittenStream:
    index: int
    name: str
    size: int
    offsets: list[int]
    #: Entries written per state id.
    entries: list[int]


@dataclass
class _Counted:
    """What :func:`subtask_entries` needs of a state: its name, kind and an entry count."""

    state: str
    kind: str
    entries: int = 0


def write_subtask_stream(task: StreamTask) -> WrittenStream:
    states = [_Counted(name, kind) for name, kind in task.states]
    groups = task.key_groups
    per_bucket = -(-groups.count // MAX_BUCKETS)
    with scratch_directory("write-savepoint-sort") as scratch:
        paths = [os.path.join(scratch, f"bucket-{i}") for i in range(-(-groups.count // per_bucket))]
        files: dict[int, object] = {}
        try:
            for name in task.spilled:
                uri = st.resolve_within(task.staging, name)
                for group, record in iter_records(task.storage.iter_chunks(uri, READ_CHUNK), uri):
                    bucket = (group - groups.start) // per_bucket
                    file = files.get(bucket)
                    if file is None:
                        file = files[bucket] = open(paths[bucket], "wb", buffering=SPILL_BUFFER)  # noqa: SIM115 - closed below
                    file.write(record)
        finally:
            for file in files.values():
                file.close()

        def entries():
            for bucket in sorted(files):
                yield from subtask_entries(read_pieces(paths[bucket]), states)
                os.remove(paths[bucket])

        offsets: list[int] = []
        size = task.storage.write_atomic(st.resolve_within(task.staging, task.name),
                                         iter_key_group_stream(task.head, groups, entries(), offsets),
                                         overwrite=True, inside=task.staging)
    return WrittenStream(task.index, task.name, size, offsets, [state.entries for state in states])
