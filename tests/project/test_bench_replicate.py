"""``bench/replicate_checkpoint.py``: the scale benchmark's K-times checkpoint is a valid checkpoint of
K times the data of the real Flink one it copies (verify passes; export finds K times the rows)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from repair.formats.flink.handles import FileHandle, RelativeFileHandle
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import decode_metadata
from repair.ops.export.job import export
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "bench"))
import replicate_checkpoint  # noqa: E402

#: Every file external (inline threshold 0): SSTs in shared/, meta data streams next to _metadata.
EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"


def test_replicated_checkpoint_verifies_and_exports_k_times_the_rows(tmp_path, read_only_guard):
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    read_only_guard(root)
    source = root / f"chk-{damage.checkpoint_ids(root)[-1]}"
    info = replicate_checkpoint.replicate(source, 3, tmp_path / "x3", log=lambda _: None)
    replicated = tmp_path / "x3" / info["checkpoint"]

    original = decode_metadata((source / "_metadata").read_bytes())
    copied = decode_metadata((replicated / "_metadata").read_bytes())
    assert len(copied.operators) == 3 * len(original.operators) == info["operators"]
    assert len({op.operator_id for op in copied.operators}) == len(copied.operators)
    assert all(op.operator_id == operator_id_for_uid(op.uid) for op in copied.operators if op.uid)
    files = [h for _, h in copied.iter_stream_handles() if isinstance(h, (FileHandle, RelativeFileHandle))]
    assert len(files) == 3 * sum(isinstance(h, (FileHandle, RelativeFileHandle)) for _, h in original.iter_stream_handles())
    # Real copies of the bytes, each its own file, all inside the new directory.
    paths = [Path(h.path[len("file:"):]) if isinstance(h, FileHandle) else replicated / h.relative_path for h in files]
    assert len(set(paths)) == len(paths)
    assert all(p.is_relative_to(tmp_path / "x3") and os.stat(p).st_nlink == 1 for p in paths)
    assert info["sst_files"] and info["sst_bytes"] > 0

    report = verify(str(replicated))
    assert report.ok and report.files == len(files)
    rows = [export(str(chk), str(tmp_path / f"out-{i}"), workers=1).to_json()["rows"] for i, chk in enumerate((source, replicated))]
    assert rows[0] > 0 and rows[1] == 3 * rows[0]
    assert json.loads((tmp_path / "x3" / "bench.json").read_text())["copies"] == 3
