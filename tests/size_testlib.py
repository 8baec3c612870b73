"""What ``repair size`` and ``repair diff`` must count for a snapshot, computed from ``repair inspect``'s file list."""

from __future__ import annotations

import os
from pathlib import Path

from repair.ops.inspect import inspect


def expected_bytes(snapshot: Path, checkpoint: int | None) -> int:
    """``_metadata`` plus each distinct file (or file-merging segment) the snapshot references: whole
    files at their size on disk, segments at the size ``repair inspect`` reads for them."""
    info = inspect(str(snapshot), checkpoint=checkpoint)
    distinct = {}
    for op in info.operators:
        for sub in op.subtasks:
            for entry in sub.files:
                if entry.inline:
                    continue
                if entry.segment_start is None and entry.role != "changelog" and os.path.exists(entry.path):
                    assert os.path.getsize(entry.path) == entry.size, entry.path
                distinct[(entry.path, entry.segment_start)] = entry.size
    return os.path.getsize(info.metadata_path) + sum(distinct.values())

