"""Export of Flink SQL state (RowData) equals the state computed independently from the job's input.

``fixtures/flink-1.20-sql`` was written by real Flink 1.20 running ``fixtures/extra_jobs/src/fixturejob/SqlJob.java`` (a GROUP BY with
COUNT/SUM/MAX/COUNT DISTINCT, a ROW_NUMBER deduplication, a regular join, a window TVF, an append-only
Top-N with ARRAY and MAP columns, an event-time interval join and a mini-batch aggregation; state TTL on);
``expected.json`` is ``fixtures/sql_state_model.py``'s. The newest checkpoint (RocksDB incremental) and the canonical and
native savepoints taken after it are exported. The SQL operators have no uids: they are found by their
state names.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from repair.cli.app import main
from repair.ops.inspect import inspect
from tests.conftest import FIXTURES, SQL_FIXTURE_NAMES, export_of, exported_rows, fixture_info, job_root, newest_and_savepoints


def _json(value):
    """A struct column's value (RowData columns are typed ``struct<kind, f0, ...>``)."""
    assert isinstance(value, dict), value
    return value


@pytest.fixture(scope="module", params=newest_and_savepoints(SQL_FIXTURE_NAMES))
def exported(request, tmp_path_factory):
    return export_of(*request.param, tmp_path_factory)


def test_every_sql_state_is_decoded(exported):
    _, out, _ = exported
    summary = json.loads((out / "_export.json").read_text())
    states = [s for op in summary["operators"] for s in op["states"]]
    assert {"accState", "distinctAcc_0", "deduplicate-state", "left-records", "right-records", "window-aggs"} <= {s["state"] for s in states}
    for state in states:
        assert state["rows_with_errors"] == 0 and state["raw_fallback"] == [], state["state"]
        for column in state["columns"].values():  # RowData, StringData, External: typed, not JSON
            assert column["type"] != "json", (state["state"], column)
    acc = next(s for op in summary["operators"] if "distinctAcc_0" in {x["state"] for x in op["states"]}
               for s in op["states"] if s["state"] == "accState")
    assert acc["columns"]["key"]["type"] == "struct<kind: string, f0: string>"
    assert acc["columns"]["value"]["type"] == "struct<kind: string, f0: int64, f1: int64, f2: int64, f3: int64, f4: binary>"
    top = next(s for s in states if s["state"] == "data-state-with-append")
    assert top["columns"]["value"]["type"] == ("list<item: struct<kind: string, f0: int64, f1: int64, f2: string, "
                                               "f3: list<item: string>, f4: list<item: int64>, f5: map<string, int64>>>")


def _operator_rows(out, state: str, beside: str) -> list[dict]:
    """The rows of ``state`` of the operator(s) that also hold the state ``beside`` (SQL operators have
    no uids, and state names such as ``accState`` repeat across operators)."""
    rows = []
    for directory in sorted(out.glob("operator=*")):
        if (directory / f"state={beside}").is_dir():
            for part in sorted((directory / f"state={state.replace('/', '%2F')}").glob("*.parquet")):
                rows += pq.read_table(part).to_pylist()
    return rows


def test_group_by_accumulators_and_distinct_view(exported):
    _, out, expected = exported
    found: dict[str, dict] = defaultdict(dict)
    for row in _operator_rows(out, "accState", "distinctAcc_0"):
        key, acc = _json(row["key"]), _json(row["value"])
        assert key["kind"] == "+I" and row["ttl_timestamp"] is not None
        found[key["f0"]]["accState"] = [acc["f0"], acc["f1"], acc["f2"], acc["f3"]]
    for row in exported_rows(out, "distinctAcc_0"):
        found[row["key"]["f0"]].setdefault("distinctAcc_0", {})[row["user_key"]] = row["value"]
    for entry in found.values():
        entry["distinctAcc_0"] = dict(sorted(entry["distinctAcc_0"].items()))
    assert dict(sorted(found.items())) == expected["agg"]


def test_deduplication_keeps_the_latest_row(exported):
    _, out, expected = exported
    found = {}
    for row in exported_rows(out, "deduplicate-state"):
        key = _json(row["key"])
        found[str(key["f0"])] = _json(row["value"])
    assert dict(sorted(found.items())) == dict(sorted(expected["dedup"].items()))


def _join_parts(out, side: str, left_kind: str) -> list[dict]:
    """The rows of ``side`` of the join whose ``left-records`` is a ``left_kind`` state (``map``: the
    regular join of adds and untags; ``value``: the join of the COLLECT aggregate, unique by its key)."""
    summary = json.loads((out / "_export.json").read_text())
    rows = []
    for op in summary["operators"]:
        states = {s["state"]: s for s in op["states"]}
        if states.get("left-records", {}).get("kind") == left_kind:
            for part in sorted((out / states[side]["path"]).glob("*.parquet")):
                rows += pq.read_table(part).to_pylist()
    return rows


def test_join_record_states_with_their_counts(exported):
    _, out, expected = exported
    for side, field in (("left-records", "f1"), ("right-records", "f1")):
        found: dict[str, dict] = defaultdict(dict)
        for row in _join_parts(out, side, "map"):
            user_key = _json(row["user_key"])
            assert user_key["kind"] == "+I" and user_key["f0"] == _json(row["key"])["f0"]
            found[user_key["f0"]][str(user_key[field])] = row["value"]
        assert {u: dict(sorted(c.items())) for u, c in sorted(found.items())} == expected["join"][side]


def test_inspect_describes_row_data_types(exported):
    name, _, _ = exported
    every = [state for op in inspect(job_root(name)).operators for sub in op.subtasks for state in sub.states]
    states = {state.name: state for state in every}
    accumulators = {(s.key_type, s.value_type) for s in every if s.name == "accState"}
    assert accumulators == {("ROW<STRING>", "TTL<ROW<BIGINT, BIGINT, BIGINT, BIGINT, RAW>>"),
                            ("ROW<INTEGER NOT NULL>", "TTL<ROW<BIGINT, BIGINT, STRING>>"),
                            ("ROW<STRING>", "TTL<ROW<ROW<map RAW>>>")}  # COLLECT's accumulator: a structured type
    assert states["data-state-with-append"].describe() == (
        "map: ROW<STRING> -> Map<ROW<BIGINT NOT NULL>, TTL<List<ROW<BIGINT NOT NULL, BIGINT NOT NULL, STRING, "
        "ARRAY<STRING> NOT NULL, ARRAY<BIGINT NOT NULL> NOT NULL, MAP<STRING, BIGINT NOT NULL> NOT NULL>>>>")
    assert states["IntervalJoinLeftCache"].value_type == "Map<Long, List<Tuple2<ROW<STRING, BIGINT NOT NULL, TIMESTAMP_LTZ(3)>, Boolean>>>"
    assert states["deduplicate-state"].value_type == "TTL<ROW<BIGINT NOT NULL, BIGINT NOT NULL, STRING, STRING, TIMESTAMP_LTZ(3)>>"
    assert states["left-records"].value_type == "Map<ROW<STRING, BIGINT NOT NULL>, TTL<Integer>>"
    assert states["distinctAcc_0"].describe() == "map: ROW<STRING> -> Map<External<STRING>, TTL<External<Long>>>"


@pytest.mark.parametrize("name", SQL_FIXTURE_NAMES)
def test_verify_decodes_sql_state_without_findings(name, capsys):
    """Verify checks every file of the SQL job's checkpoints and frames and decodes the canonical
    savepoint's key groups (RowData keys and values) without a finding."""
    savepoint = FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"]["CANONICAL"]
    for path in (job_root(name), str(savepoint)):
        assert main(["verify", path, "--json", "--workers", "1"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert "not_fully_checked" not in json.dumps(report)


def test_window_aggregates_by_window_end(exported):
    _, out, expected = exported
    found: dict[str, dict] = defaultdict(dict)
    for row in exported_rows(out, "window-aggs"):
        acc = _json(row["value"])
        found[_json(row["key"])["f0"]][str(row["namespace"])] = [acc["f0"], acc["f1"]]
    assert {u: dict(sorted(w.items())) for u, w in sorted(found.items())} == expected["window"]
    timers = {(_json(r["key"])["f0"], r["namespace"], r["timestamp"]) for r in exported_rows(out, "_timer_state/event_window-timers")}
    assert timers == {(user, int(end), int(end) - 1) for user, ends in expected["window"].items() for end in ends}


def _entries(value):
    """A MAP column's entries (``[(key, value), ...]`` from Parquet) as lists, as expected.json has them."""
    return [list(entry) for entry in value]


def test_top_n_keeps_the_latest_rows_with_array_and_map_fields(exported):
    _, out, expected = exported
    found: dict[str, dict] = defaultdict(dict)
    rows = exported_rows(out, "data-state-with-append")
    for row in rows:
        assert row["ttl_timestamp"] is not None
        kept = [{**r, "f5": _entries(r["f5"])} for r in row["value"]]
        found[_json(row["key"])["f0"]][str(_json(row["user_key"])["f0"])] = kept
    assert dict(sorted((u, dict(sorted(k.items()))) for u, k in found.items())) == expected["topn"]


def test_interval_join_caches_and_clean_up_timers(exported):
    _, out, expected = exported
    interval = expected["interval"]
    for cache in ("IntervalJoinLeftCache", "IntervalJoinRightCache"):
        found: dict[str, dict] = defaultdict(dict)
        for row in exported_rows(out, cache):
            found[_json(row["key"])["f0"]][str(row["user_key"])] = row["value"]
        assert {k: dict(sorted(v.items())) for k, v in sorted(found.items())} == interval[cache]
    for timer_state in ("IntervalJoinLeftTimerState", "IntervalJoinRightTimerState"):
        found_timers = {_json(row["key"])["f0"]: row["value"] for row in exported_rows(out, timer_state)}
        assert dict(sorted(found_timers.items())) == interval[timer_state]
    timers = sorted((_json(r["key"])["f0"], r["timestamp"]) for r in _operator_rows(out, "_timer_state/event_user-timers", "IntervalJoinLeftCache"))
    assert timers == sorted([*interval["IntervalJoinLeftTimerState"].items(), *interval["IntervalJoinRightTimerState"].items()])


def test_mini_batch_aggregation(exported):
    _, out, expected = exported
    found = {}
    for row in exported_rows(out, "accState"):
        key, acc = _json(row["key"]), _json(row["value"])
        if isinstance(key["f0"], int):  # the GROUP BY wave (the other accState is keyed by user)
            found[str(key["f0"])] = [acc["f0"], acc["f1"], acc["f2"]]
    assert dict(sorted(found.items())) == expected["batched"]


def test_collect_multiset_in_a_unique_key_join(exported):
    _, out, expected = exported
    bags = expected["bags"]
    found = {}
    for row in _join_parts(out, "left-records", "value"):
        value = _json(row["value"])
        assert row["user_key"] is None and row["ttl_timestamp"] is not None
        found[_json(row["key"])["f0"]] = {**value, "f1": sorted(list(entry) for entry in value["f1"])}
    assert dict(sorted(found.items())) == bags["left-records"]
    right: dict[str, dict] = defaultdict(dict)
    for row in _join_parts(out, "right-records", "value"):
        right[_json(row["user_key"])["f0"]][_json(row["user_key"])["f1"]] = row["value"]
    assert {u: dict(sorted(c.items())) for u, c in sorted(right.items())} == bags["right-records"]
    views: dict[str, dict] = defaultdict(dict)
    summary = json.loads((out / "_export.json").read_text())
    paths = [s["path"] for op in summary["operators"] for s in op["states"] if s["state"] == "agg0$map"]  # '$' is escaped in it
    assert len(paths) == 1
    for row in (r for part in sorted((out / paths[0]).glob("*.parquet")) for r in pq.read_table(part).to_pylist()):
        views[_json(row["key"])["f0"]][row["user_key"]] = row["value"]
    assert {u: dict(sorted(c.items())) for u, c in sorted(views.items())} == bags["agg0$map"]
