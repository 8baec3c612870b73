"""Reading an export's Parquet back into expected.json's shape, and comparing two exports."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fixtures import state_model
from repair.formats.flink.keygroups import (
    assign_key_group,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    operator_id_for_uid,
    operator_index_for_key_group,
)
from repair.ops.export.job import COLUMNS, partition_value
from tests.conftest import (
    FIXTURES,
    expected_shape,
    fixture_info,
    namespaced,
)

KEYED_UIDS = tuple(state_model.KEYED_OPERATORS)


KEY_STRUCTS = {"Long": struct.Struct(">q"), "Integer": struct.Struct(">i")}


KEY_HASHES = {"String": java_string_hash, "Long": java_long_hash, "Integer": java_int_hash}


def operator_dir_of(out: Path, uid: str) -> Path:
    """``operator=<uid>`` (metadata V5+), else ``operator=<operator id>`` (older metadata has no uids)."""
    for label in (uid, operator_id_for_uid(uid)):
        if (out / f"operator={partition_value(label)}").is_dir():
            return out / f"operator={partition_value(label)}"
    raise AssertionError(f"no directory for operator {uid} in {sorted(p.name for p in out.iterdir())}")


def parquet_parts(directory: Path) -> list[tuple[int, pa.Table]]:
    files = sorted(directory.glob("part-*.parquet"))
    assert files, directory
    return [(int(f.stem.split("-")[1]), pq.read_table(f)) for f in files]


def rebuild(out: Path, name: str, uid: str, *, all_registered: bool = True) -> dict:
    """Per key, the states of operator ``uid`` in expected.json's shape, from the Parquet files alone
    (state names and kinds from fixture.json; key groups and subtasks checked with Flink's key math).
    ``all_registered=False``: a state may be missing (an early checkpoint, before the job first used it)."""
    info = fixture_info(FIXTURES / name)
    spec = info["keyed_operators"][uid]
    max_parallelism, parallelism = info["max_parallelism"], info["parallelism"]
    key_hash = KEY_HASHES[spec["key_type"]]
    states = dict(spec["states"])
    for service in spec["timer_services"]:
        states[f"_timer_state/event_{service}"] = "event-timers"
        states[f"_timer_state/processing_{service}"] = "processing-timers"
    operator_dir = operator_dir_of(out, uid)
    written = sorted(p.name for p in operator_dir.iterdir())
    if all_registered:
        assert written == sorted(f"state={partition_value(s)}" for s in states)
    else:
        assert set(written) <= {f"state={partition_value(s)}" for s in states}
        states = {s: kind for s, kind in states.items() if f"state={partition_value(s)}" in written}
    per_key: dict[str, dict] = {}
    for state, kind in states.items():
        parts = parquet_parts(operator_dir / f"state={partition_value(state)}")
        assert [subtask for subtask, _ in parts] == list(range(parallelism))
        schemas = {table.schema for _, table in parts}
        assert len(schemas) == 1, f"{state}: the parts' schemas differ"
        for subtask, table in parts:
            assert table.column_names == list(COLUMNS)
            for row in table.to_pylist():
                assert row["error"] is None, row["error"]
                assert row["key_group"] == assign_key_group(key_hash(row["key"]), max_parallelism)
                assert operator_index_for_key_group(max_parallelism, parallelism, row["key_group"]) == subtask
                if spec["key_type"] in KEY_STRUCTS:
                    key_raw = KEY_STRUCTS[spec["key_type"]].pack(row["key"])
                    if kind.endswith("timers"):  # TimerSerializer: flipped timestamp, key, namespace
                        window = row["namespace"]
                        namespace_raw = b"\x00" if window is None else struct.pack(">qq", window["start"], window["end"])
                        key_raw = struct.pack(">Q", (row["timestamp"] + 2**63) % 2**64) + key_raw + namespace_raw
                    assert row["key_raw"] == key_raw
                assert row["ttl_timestamp"] is None or state in spec["ttl_states"]
                entry = per_key.setdefault(str(row["key"]), {})
                value = expected_shape(row["value"])
                # the namespace column of the operator's namespace type: a window's or always null
                assert (row["namespace"] is not None) == (spec.get("namespace") == "TimeWindow")
                if kind.endswith("timers"):
                    assert row["value"] is None and row["value_raw"] == b""
                    holder, slot = namespaced(entry, "timers" if kind == "event-timers" else "processing-timers", row["namespace"])
                    holder.setdefault(slot, []).append(row["timestamp"])
                    continue
                assert row["timestamp"] is None
                holder, slot = namespaced(entry, state, row["namespace"], row["namespace_raw"])
                if kind == "list":
                    items = holder.setdefault(slot, [])
                    assert row["list_index"] == len(items)
                    items.append(value)
                elif kind == "map":
                    assert str(row["user_key"]) not in holder.get(slot, {})
                    holder.setdefault(slot, {})[str(row["user_key"])] = value
                else:
                    assert slot not in holder and row["list_index"] is None and row["user_key"] is None
                    holder[slot] = value
    for entry in per_key.values():
        state_model.sort_timers(entry)
        if "processing-timers" in entry:
            state_model.sort_timers({"timers": entry["processing-timers"]})
    return dict(sorted(per_key.items()))


def assert_identical(a: Path, b: Path, *, document: bool = True) -> None:
    """Same files with the same bytes (Parquet) and the same document (but for where it was written;
    ``document=False``: Parquet only)."""
    files_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    files_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for relative in files_a:
        if relative == "_export.json":
            if not document:
                continue
            docs = [json.loads((d / relative).read_text()) for d in (a, b)]
            for doc in docs:
                doc.pop("out")
            assert docs[0] == docs[1]
        else:
            assert (a / relative).read_bytes() == (b / relative).read_bytes(), relative

