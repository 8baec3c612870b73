"""Export of Flink SQL state (RowData) equals the state computed independently from the job's input.

``fixtures/flink-1.20-sql`` was written by real Flink 1.20 running ``fixtures/extra_jobs/src/fixturejob/SqlJob.java`` (a GROUP BY with
COUNT/SUM/MAX/COUNT DISTINCT, a ROW_NUMBER deduplication, a regular join; state TTL on);
``expected.json`` is ``fixtures/sql_state_model.py``'s. The newest checkpoint (RocksDB incremental) and the canonical and
native savepoints taken after it are exported. The SQL operators have no uids: they are found by their
state names.
"""

from __future__ import annotations

import json
from collections import defaultdict

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
    acc = next(s for s in states if s["state"] == "accState")
    assert acc["columns"]["key"]["type"] == "struct<kind: string, f0: string>"
    assert acc["columns"]["value"]["type"] == "struct<kind: string, f0: int64, f1: int64, f2: int64, f3: int64, f4: binary>"


def test_group_by_accumulators_and_distinct_view(exported):
    _, out, expected = exported
    found: dict[str, dict] = defaultdict(dict)
    for row in exported_rows(out, "accState"):
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


def test_join_record_states_with_their_counts(exported):
    _, out, expected = exported
    for side, field in (("left-records", "f1"), ("right-records", "f1")):
        found: dict[str, dict] = defaultdict(dict)
        for row in exported_rows(out, side):
            user_key = _json(row["user_key"])
            assert user_key["kind"] == "+I" and user_key["f0"] == _json(row["key"])["f0"]
            found[user_key["f0"]][str(user_key[field])] = row["value"]
        assert {u: dict(sorted(c.items())) for u, c in sorted(found.items())} == expected["join"][side]


def test_inspect_describes_row_data_types(exported):
    name, _, _ = exported
    states = {state.name: state for op in inspect(job_root(name)).operators for sub in op.subtasks for state in sub.states}
    assert (states["accState"].key_type, states["accState"].value_type) == ("ROW<STRING>", "TTL<ROW<BIGINT, BIGINT, BIGINT, BIGINT, RAW>>")
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
