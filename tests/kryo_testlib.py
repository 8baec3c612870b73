"""Editing the Kryo-serialized values of an export (the decoded states of the Kryo fixtures)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from repair.formats.flink.arrow import json_text

#: KryoJob's states whose values (and keys) are Kryo and decoded.
DECODED = ("last", "history", "totals", "scalars", "arrays", "numbers", "lone", "uuid", "tag-set", "wave", "jdk")


def state_rows(out, state: str) -> list[dict]:
    return [row for part in sorted(out.glob(f"operator=*/state={state}/*.parquet")) for row in pq.read_table(part).to_pylist()]


def edit_value(state: str, value):
    """A changed value of ``state`` in the classes of the value it replaces."""
    if state == "last":
        return value + 1 if isinstance(value, int) else value + " ☃ edited"
    if state == "history":
        return [*value[1:], "edited", "ünïcode ☃", value[0]]
    if state == "totals":
        return [[op, total * 3] for op, total in value]  # a HashMap: new keys would take Java's hash order
    if state == "scalars":
        return [1.5, -0.25, -12, "é", 7, not value[5]]
    if state == "arrays":
        return [[1, -2, 3], [2**62], [], "chars ☃", [0.5], [1e300], [False], "00ff", ["x", None], [7, "y", None]]
    if state == "numbers":
        return [-(2**70), "-12.345", 0, [["a", 1], ["b", -2], ["~wave", 9]]]
    if state == "lone":
        return {float: 2.5, bool: not value, str: "ß"}.get(type(value), -3) if not isinstance(value, bool) else not value
    if state == "uuid":
        return "123e4567-e89b-12d3-a456-426614174000"
    if state == "tag-set":
        return sorted({*value, "added ☃"})
    if state == "wave":
        return {**value, "ordinal": (value["ordinal"] + 1) % 4}
    if state == "jdk":  # Timestamp, java.sql Date and Time, URI, Pattern, Locale, Arrays.asList, BitSet, PriorityQueue, InetSocketAddress
        timestamp, date, time, uri, pattern, locale, as_list, bits, queue, address = value
        return [{"time": timestamp["time"] + 1001, "nanos": (timestamp["nanos"] // 1_000_000 + 1) % 1000 * 1_000_000 + 7},
                date - 86_400_000, time + 1, uri + "&edited=☃", {**pattern, "pattern": "[a-z]+"}, locale,
                [*as_list, "third"], sorted({*bits, 64, 130}), [*queue, 10**6], {"host": "edited.example.com", "port": 65535}]
    raise AssertionError(state)


def edit_json(out, state: str, change) -> int:
    """Every row of ``state`` with its JSON ``value`` text changed by ``change`` (same schema)."""
    changed = 0
    for part in out.glob(f"operator=*/state={state}/*.parquet"):
        table = pq.read_table(part)
        rows = table.to_pylist()
        for row in rows:
            row["value"] = json_text(change(json.loads(row["value"])))
            changed += 1
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    return changed


def edit_export(out) -> dict[str, dict[str, str]]:
    """Every decoded Kryo state of the export ``out`` edited in its JSON text; the edited texts by state
    and key."""
    for state in DECODED:
        assert edit_json(out, state, lambda value, state=state: edit_value(state, value)) > 0
    assert edit_json(out, "seen", edit_seen) == 3  # the seen operator's ListState<Object>: operator state
    edited = {state: {row["key"]: row["value"] for row in state_rows(out, state)} for state in DECODED}
    edited["seen"] = {row["list_index"]: row["value"] for row in state_rows(out, "seen")}
    return edited


def edit_seen(value):
    """An element of the seen operator's list: its count (a Long), last user (a String), last tags (an ArrayList)."""
    if isinstance(value, int):
        return value + 1000
    return value + " ☃" if isinstance(value, str) else [*value, "x"]

