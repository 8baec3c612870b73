"""Encoding every exported value back from its decoded column and comparing with the raw bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from repair.formats.flink.arrow import json_text
from repair.formats.flink.handles import IncrementalKeyedHandle, KeyGroupsHandle
from repair.formats.flink.row_codecs import row_columns, same_value
from repair.formats.flink.value_encoders import encoder_for
from repair.io import storage as storage_module
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.export.job import export
from repair.readers.full_snapshot import read_key_groups_meta
from repair.readers.rocksdb import read_handle_meta
from tests import damage
from tests.conftest import FIXTURES


def _metas(checkpoint: Path) -> dict:
    """Decoded keyed meta data of every keyed operator of ``checkpoint``'s newest snapshot."""
    storage = storage_module.default_storage()
    layout = discover(str(checkpoint), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    metas = {}
    for op in snapshot.metadata.operators:
        handle = next((s.managed_keyed_state for s in op.subtasks if s.managed_keyed_state is not None), None)
        if isinstance(handle, IncrementalKeyedHandle):
            metas[op.operator_id] = read_handle_meta(snapshot, storage, handle)
        elif isinstance(handle, KeyGroupsHandle):
            metas[op.operator_id] = read_key_groups_meta(snapshot, storage, handle)
    return metas


def round_trip_raw_columns(name: str, tmp_path: Path) -> tuple[int, set[str]]:
    """Export the fixture ``name``'s newest checkpoint and hold ``encode(decode(b)) == b`` for every raw
    column with an encoder; returns how many values were checked and the serializer classes (short
    names) of the states that have encoders."""
    root = damage.checkpoint_root(FIXTURES / name)
    export(str(root), str(tmp_path / "export"))
    metas = _metas(root)
    manifest = json.loads((tmp_path / "export" / "_export.json").read_text())
    covered: set[str] = set()
    checked = 0
    for op in manifest["operators"]:
        meta = metas.get(op["operator_id"])
        for state in op["states"]:
            if meta is None or meta.state(state["state"]) is None:
                continue
            info = meta.state(state["state"])
            columns = row_columns(info, meta.key_serializer)
            for row in pq.read_table(tmp_path / "export" / state["path"]).to_pylist():
                for decoded_name, column in columns.items():
                    raw = row[column.raw]
                    if column.encode is None or raw is None:
                        continue
                    value = column.decode(raw)
                    assert column.encode(value) == raw, (state["state"], decoded_name, raw.hex())
                    assert same_value(column.decode(column.encode(value)), value)
                    wanted = column.compose(row)
                    if state["columns"][decoded_name]["type"] == "json":  # JSON text of the same value
                        assert wanted == json_text(value), (state["state"], decoded_name, wanted, value)
                    elif wanted is not None:  # the Parquet column holds the same value as the bytes
                        assert same_value(wanted, value), (state["state"], decoded_name, wanted, value)
                    checked += 1
            for key in ("KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER"):
                snapshot = info.serializer(key) or (meta.key_serializer if key == "KEY_SERIALIZER" else None)
                stack = [snapshot] if snapshot else []
                while stack:
                    s = stack.pop()
                    if encoder_for(s) is not None:
                        covered.add(s.class_name.rpartition(".")[2].partition("$")[0])
                    stack.extend(s.nested)
    return checked, covered

