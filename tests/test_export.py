"""repair export: keyed state of real Flink checkpoints to Hive-partitioned Parquet, read back with
pyarrow and compared with each fixture's expected.json (built independently of the code under test)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from repair.errors import UsageError
from repair.keygroups import operator_id_for_uid
from repair.ops.export import COLUMNS, export, partition_value
from tests.conftest import FIXTURES

KEYED_UIDS = ("per-user", "per-account")
TIMER_STATE = "_timer_state/event_user-timers"
EXPORT_FIXTURES = ("flink-1.20-p3-external-xxhash-lz4", "flink-2.1-default")


def _job_root(name: str) -> Path:
    root = FIXTURES / name / "checkpoints"
    return root / next(iter(os.listdir(root)))


def _rebuild(out: Path, document: dict, uid: str) -> dict:
    """Per key, the states of operator ``uid`` in expected.json's shape, from the Parquet files alone."""
    (op,) = [o for o in document["operators"] if o["operator_id"] == operator_id_for_uid(uid)]
    per_key: dict[str, dict] = {}
    for state in op["states"]:
        kind, name, columns = state["kind"], state["state"], state["columns"]
        directory = out / state["path"]
        assert directory.name == f"state={partition_value(name)}"
        files = sorted(directory.glob("part-*.parquet"))
        assert [int(f.stem.split("-")[1]) for f in files] == sorted(int(s) for s in state["subtasks"])
        total = 0
        for file in files:
            table = pq.read_table(file)
            assert table.column_names == list(COLUMNS)
            assert str(table.schema.field("key_group").type) == "int32"
            assert str(table.schema.field("list_index").type) == "int32"
            total += table.num_rows
            for row in table.to_pylist():
                assert row["error"] is None
                value = json.loads(row["value"]) if columns["value"] == "json" and row["value"] is not None else row["value"]
                entry = per_key.setdefault(str(row["key"]), {})
                if name == TIMER_STATE:
                    assert row["namespace"] is None and row["value_raw"] == b""
                    entry.setdefault("timers", []).append(row["timestamp"])
                elif kind == "list":
                    items = entry.setdefault(name, [])
                    assert row["list_index"] == len(items)
                    items.append(value)
                elif kind == "map":
                    entry.setdefault(name, {})[str(row["user_key"])] = value
                else:
                    assert name not in entry and row["list_index"] is None
                    entry[name] = value
        assert total == state["rows"]
    for entry in per_key.values():
        if "timers" in entry:
            entry["timers"].sort()
    return dict(sorted(per_key.items()))


def _export(name: str, out: Path, read_only_guard, **options) -> dict:
    source = read_only_guard(_job_root(name))
    result = export(str(source), str(out), **options)
    document = json.loads((out / "_export.json").read_text())
    assert document == json.loads(json.dumps(result.to_json()))
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]  # published whole, nothing left
    return document


@pytest.mark.parametrize("name", EXPORT_FIXTURES)
def test_export_matches_expected_json(name, tmp_path, read_only_guard):
    out = tmp_path / "export"
    document = _export(name, out, read_only_guard)
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert document["checkpoint_id"] == expected["checkpoint_id"]
    for uid in KEYED_UIDS:
        assert _rebuild(out, document, uid) == expected["keyed"][uid], uid
    # every file the document names is there, and nothing else
    listed = {f"{s['path']}/part-{int(i):05d}.parquet" for op in document["operators"] for s in op["states"] for i in s["subtasks"]}
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*.parquet")}
    assert listed == on_disk and document["files"] == len(on_disk)
    assert {s["operator_id"] for s in document["skipped"] if s["what"] == "operator-state"} >= {operator_id_for_uid("records-seen")}
    # decoding decisions: typed primitives, JSON text for the POJO and the Tuple2 accumulator
    uids = {operator_id_for_uid(uid): uid for uid in KEYED_UIDS}
    states = {(uids.get(op["operator_id"]), s["state"]): s for op in document["operators"] for s in op["states"]}
    assert states[("per-user", "count")]["columns"]["value"] == "int64"
    assert states[("per-account", "balance")]["columns"]["key"] == "int64"
    assert states[("per-account", "profile")]["columns"]["value"] == "json"
    assert states[("per-user", TIMER_STATE)]["path"].endswith("state=_timer_state%2Fevent_user-timers")
    # pyarrow's Hive partitioning decodes the escaped state name
    timer_dir = out / states[("per-user", TIMER_STATE)]["path"]
    timers = ds.dataset(timer_dir, partitioning=ds.partitioning(flavor="hive"), partition_base_dir=str(out))
    table = timers.to_table(columns=["state", "timestamp"])
    assert table.num_rows == states[("per-user", TIMER_STATE)]["rows"]
    assert set(table.column("state").to_pylist()) == {TIMER_STATE}


def test_filters_and_refusals(tmp_path, read_only_guard):
    name = "flink-2.1-default"
    out = tmp_path / "filtered"
    document = _export(name, out, read_only_guard, operators=["per-account"], states=["balance", "amounts"])
    assert [op["uid"] for op in document["operators"]] == ["per-account"]
    only_state = _export(name, tmp_path / "one-state", read_only_guard, states=["count"])
    assert [(op["uid"], [s["state"] for s in op["states"]]) for op in only_state["operators"]] == [("per-user", ["count"])]
    assert [s["state"] for s in document["operators"][0]["states"]] == ["amounts", "balance"]
    assert sorted(p.name for p in (out / "operator=per-account").iterdir()) == ["state=amounts", "state=balance"]
    # an operator id selects too
    op_id = document["operators"][0]["operator_id"]
    again = _export(name, tmp_path / "by-id", read_only_guard, operators=[op_id], states=["balance"])
    assert again["rows"] == document["operators"][0]["states"][1]["rows"]
    with pytest.raises(UsageError, match="no operator 'nope'"):
        export(str(_job_root(name)), str(tmp_path / "x"), operators=["nope"])
    with pytest.raises(UsageError, match="no state named 'nope'"):
        export(str(_job_root(name)), str(tmp_path / "y"), states=["nope"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    with pytest.raises(UsageError, match="inside the input"):
        export(str(_job_root(name)), str(_job_root(name) / "exported"))
    assert not (_job_root(name) / "exported").exists()
    with pytest.raises(UsageError, match="not empty"):
        export(str(_job_root(name)), str(out))


def test_canonical_savepoint_is_skipped(tmp_path):
    root = FIXTURES / "flink-2.1-default" / "savepoints"
    from repair import storage as st
    from repair.layout import discover
    from repair.snapshot import load_snapshot

    storage = st.default_storage()
    canonical = None
    for entry in sorted(root.iterdir()):
        layout = discover(str(entry), storage)
        if load_snapshot(layout.snapshots[0], layout.root, storage).savepoint_format == "canonical":
            canonical = entry
    assert canonical is not None
    result = export(str(canonical), str(tmp_path / "out"))
    assert result.operators == [] and result.files == 0
    assert {s.what for s in result.skipped} >= {"full-snapshot-keyed-state"}
    assert (tmp_path / "out" / "_export.json").exists()


def _contents(out: Path) -> dict:
    return {str(p.relative_to(out)): pq.read_table(p) for p in sorted(out.rglob("*.parquet"))}


@pytest.mark.slow
def test_spark_export_is_identical(tmp_path, read_only_guard):
    name = "flink-1.20-p3-external-xxhash-lz4"
    local = _export(name, tmp_path / "local", read_only_guard, workers=1)
    spark = _export(name, tmp_path / "spark", read_only_guard, master="local[2]")
    for document in (local, spark):
        document.pop("out")
    assert local == spark
    a, b = _contents(tmp_path / "local"), _contents(tmp_path / "spark")
    assert a.keys() == b.keys()
    for path in a:
        assert a[path].equals(b[path]), path
