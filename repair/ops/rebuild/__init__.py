"""``repair rebuild-manifest``: one entry for both rebuilds; :mod:`repair.io.layout` says which one a path needs.

A checkpoint (``chk-N``, a savepoint, a ``_metadata`` file) is rebuilt by
:func:`repair.ops.rebuild.checkpoint.rebuild_checkpoint` into a new job root, a bare RocksDB directory
by :func:`repair.ops.rebuild.db.rebuild_db` into a new DB directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from repair.errors import UsageError
from repair.io import storage as st
from repair.io.layout import ROCKSDB_DIR, SNAPSHOT_KINDS, classify

if TYPE_CHECKING:
    from repair.ops.rebuild.checkpoint import RebuildResult
    from repair.ops.rebuild.db import RebuildDbResult


def rebuild_manifest(
    path: str, out: str, *, copy: bool = False, drop_missing: bool = False, salvage: bool = False,
    format: str | None = None, list_lost_keys: bool = False, older: list[str] | tuple[str, ...] = (),
    storage: st.Storage | None = None,
) -> "RebuildResult | RebuildDbResult":
    """Rebuild the broken MANIFESTs (and CURRENT) of the checkpoint or RocksDB directory at ``path`` into ``out``.

    A checkpoint gives a :class:`~repair.ops.rebuild.checkpoint.RebuildResult` (``copy`` also copies every
    referenced file under ``out``); a bare RocksDB directory a :class:`~repair.ops.rebuild.db.RebuildDbResult`
    (``format``, ``frocksdb6`` or ``frocksdb8``, overrides the MANIFEST format the evidence points to).
    ``drop_missing`` leaves missing, truncated, corrupt or unreadable SSTs out and reports what they held;
    ``salvage`` (checkpoints only) replaces corrupt and truncated ones by what their sound blocks hold.
    ``list_lost_keys`` (checkpoints only) lists the decoded keys whose entries were lost, where they can
    be known (:mod:`repair.ops.rebuild.lost_keys`). ``older`` (checkpoints only): other sources of the
    same job's state (native savepoints, job roots, checkpoints, copies) whose intact originals replace
    damaged SSTs and whose versions of the lost keys are reported (:mod:`repair.ops.rebuild.older`).
    """
    storage = storage or st.default_storage()
    layout = classify(path, storage, accept=SNAPSHOT_KINDS | {ROCKSDB_DIR})
    if layout.kind == ROCKSDB_DIR:
        from repair.ops.rebuild.db import rebuild_db

        if salvage:
            raise UsageError("salvage is for checkpoints: a RocksDB directory's damaged SSTs can only be dropped (drop_missing)")
        if list_lost_keys:
            raise UsageError("list_lost_keys is for checkpoints: a RocksDB directory's report has no keys to list")
        if older:
            raise UsageError("older is for checkpoints: a RocksDB directory has no older copies to compare")
        if copy:
            raise UsageError("copy is for checkpoints: a RocksDB directory is always rebuilt into a copy")
        return rebuild_db(layout, out, format=format, drop_missing=drop_missing, storage=storage)
    if format is not None:
        raise UsageError("format is for RocksDB directories: a checkpoint's format follows its _metadata version")
    from repair.ops.rebuild.checkpoint import rebuild_checkpoint

    return rebuild_checkpoint(layout, out, copy=copy, drop_missing=drop_missing, salvage=salvage, list_lost_keys=list_lost_keys,
                              older=older, storage=storage)
