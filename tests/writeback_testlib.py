"""The rows of an export, per state, to compare an export with the export of its write-back."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def export_rows(export_dir: Path, *, drop: tuple[str, ...] = ()) -> dict[tuple[str, str], list]:
    """Every state's rows of an export, order-free (``drop``: columns left out of the comparison)."""
    manifest = json.loads((export_dir / "_export.json").read_text())
    out = {}
    for op in manifest["operators"]:
        for state in op["states"]:
            rows = pq.read_table(export_dir / state["path"]).to_pylist()
            out[(op["operator_id"], state["state"])] = sorted(
                repr(sorted((k, v) for k, v in row.items() if k not in drop)) for row in rows)
    return out

