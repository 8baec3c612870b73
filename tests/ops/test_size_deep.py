"""``repair size --deep``: the keyed state read entry by entry, held against the growth fixtures' input.

The growth fixtures (``fixtures/extra_jobs/src/fixturejob/GrowthJob.java``, real Flink 1.20 and 2.1,
RocksDB incremental) have a state that leaks, one with a 1 s TTL whose entries expire and stay stored,
one written in the first wave only and a SQL join that keeps its rows; ``growth_state_model.py``
computes from the job's input what each holds. Counts of stored entries come from the SSTs' properties
(``repair size``'s default mode), which RocksDB wrote.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from fixtures import growth_state_model
from fixtures.state_model import read_records
from repair.cli.app import main
from repair.formats.flink.arrow import json_text
from repair.formats.flink.keygroups import assign_key_group, java_string_hash
from repair.ops.size import size
from tests import damage
from tests.conftest import FIXTURES, GROWTH_FIXTURE_NAMES, fixture_info

GROWTH = GROWTH_FIXTURE_NAMES
YEAR_2100 = "2100-01-01T00:00:00Z"


def _growth(name: str):
    fixture = FIXTURES / name
    info = fixture_info(fixture)
    expected = json.loads((fixture / "expected.json").read_text())
    records = read_records(fixture / "records.tsv")[: expected["records"]]
    return damage.checkpoint_root(fixture), info, expected, records


def _states(result) -> dict[str, dict]:
    return {s["state"]: s for s in result.to_json()["deep"]["states"]}


@pytest.mark.parametrize("name", GROWTH)
def test_live_entries_per_state_are_the_jobs(name, read_only_guard):
    root, _, expected, _ = _growth(name)
    states = _states(size(str(read_only_guard(root)), deep=True))
    assert {name: states[name]["live_entries"] for name in expected["entries"]} == expected["entries"]


@pytest.mark.parametrize("name", GROWTH)
def test_expired_ttl_entries_are_counted_from_the_input_and_the_ttl(name):
    """``recent`` is written with every record and never read, its clean-up off: every user's entry stays
    stored. Before the job ran none has expired; a TTL after the job ended, every user's has."""
    root, info, _, records = _growth(name)
    started, finished = info["generated_between_ms"]
    ttl = growth_state_model.RECENT_TTL_MS
    users = len({r.user for r in records})
    before = _states(size(str(root), deep=True, now=str(started), ttl=[f"recent={ttl}ms"]))["recent"]
    after = _states(size(str(root), deep=True, now=str(finished + ttl), ttl=[f"recent={ttl}ms"]))["recent"]
    assert before["ttl"]["rows"] == after["ttl"]["rows"] == users
    assert (before["ttl"]["expired_rows"], before["ttl"]["expired_bytes"]) == (0, 0)
    assert after["ttl"]["expired_rows"] == users
    assert after["ttl"]["expired_bytes"] == after["key_bytes"] + after["value_bytes"]
    assert started <= after["ttl"]["oldest_access"] <= after["ttl"]["newest_access"] <= finished
    # a TTL just short of the newest access's age leaves that entry alive: last access + TTL <= now decides
    newest = after["ttl"]["newest_access"]
    edge = _states(size(str(root), deep=True, now=str(newest + ttl - 1), ttl=[f"{ttl}ms"]))
    assert 0 < users - edge["recent"]["ttl"]["expired_rows"]
    assert edge["leak"]["ttl"]["expired_rows"] is None  # no TTL: never expires


@pytest.mark.parametrize("name", GROWTH)
def test_what_a_compaction_would_reclaim(name):
    """Older versions of ``recent`` stay in older SSTs: the stored entries (RocksDB's own count, from
    the properties) beyond the live ones, and their raw bytes beyond the live entries'."""
    root, _, expected, records = _growth(name)
    result = size(str(root), deep=True)
    stored = Counter()
    for piece in result.checkpoints[-1].pieces:
        if piece.kind == "sst":
            stored[piece.state] += piece.entries
    states = _states(result)
    for state, live in expected["entries"].items():
        assert states[state]["lsm"]["entries"] == stored[state]
        assert states[state]["reclaimable_entries"] == stored[state] - live
    assert states["recent"]["reclaimable_entries"] > 0 and states["recent"]["reclaimable_bytes"] > 0
    assert states["steady"]["reclaimable_entries"] == 0 == states["steady"]["reclaimable_bytes"]


@pytest.mark.parametrize("name", GROWTH)
def test_skew_largest_keys_and_value_sizes(name):
    root, info, _, records = _growth(name)
    leak = _states(size(str(root), deep=True, top=3))["leak"]
    per_group = Counter(assign_key_group(java_string_hash(r.user), info["max_parallelism"]) for r in records)
    fullest = min(per_group, key=lambda group: (-per_group[group], group))
    assert leak["skew"] == {"key_groups": len(per_group), "max_entries": per_group[fullest], "max_key_group": fullest,
                            "mean_entries": round(len(records) / len(per_group), 2)}
    longest = max((r.user for r in records), key=lambda u: len(u.encode()))
    assert [k["key"] for k in leak["largest_keys"]] == [json_text(longest)] * 3
    assert sum(b["entries"] for b in leak["value_sizes"]) == len(records)
    # each value: the null flag, the string's length and its 48 characters (ASCII here)
    assert [(b["from"], b["to"]) for b in leak["value_sizes"]] == [(32, 63)]


def test_full_snapshots_have_rows_and_ttl_but_no_lsm():
    """The heap backend's SQL job (state TTL 3650 d): rows from the key-group streams, their last access
    decoded; nothing stored beside them to reclaim."""
    root = damage.checkpoint_root(FIXTURES / "flink-1.20-sql-heap")
    states = size(str(root), deep=True, now=YEAR_2100, ttl=["3650d"]).to_json()["deep"]["states"]
    with_ttl = [s for s in states if s["ttl"]["rows"]]
    assert with_ttl and all(s["lsm"] is None and s["reclaimable_bytes"] is None for s in states)
    assert all(s["ttl"]["expired_rows"] == s["ttl"]["rows"] for s in with_ttl)  # 2100 is past 2026 + 10 years
    fresh = size(str(root), deep=True, now="2030-01-01T00:00:00Z", ttl=["3650d"]).to_json()["deep"]["states"]
    assert all(s["ttl"]["expired_rows"] == 0 for s in fresh if s["ttl"]["rows"])


def test_cli_deep_and_its_usage_errors(capsys):
    root = str(damage.checkpoint_root(FIXTURES / GROWTH[0]))
    assert main(["size", root, "--deep", "--ttl", "recent=1s", "--now", YEAR_2100]) == 0
    out = capsys.readouterr().out
    assert "read entry by entry" in out and "24 of 24" in out
    assert main(["size", root, "--ttl", "1s"]) == 2
    assert main(["size", root, "--deep", "--ttl", "recent=soon"]) == 2
    assert main(["size", root, "--deep", "--now", "yesterday"]) == 2


def test_a_subtask_with_a_missing_file_is_not_read_the_others_are(tmp_path):
    fixture = damage.copy_fixture(GROWTH[-1], tmp_path)
    root = damage.checkpoint_root(fixture)
    newest = size(str(root)).checkpoints[-1]
    lost = next(p for p in newest.pieces if p.kind == "sst" and p.state == "leak")
    os.remove(lost.file)
    result = size(str(root), deep=True)
    assert result.exit_code == 1 and [f.kind for f in result.findings] == ["missing_file"]
    deep = result.to_json()["deep"]
    assert deep["skipped"] == [{"operator": lost.operator, "subtask": lost.subtask, "reason": "a file of it is missing"}]
    states = {s["state"]: s for s in deep["states"]}
    expected = json.loads((fixture / "expected.json").read_text())["entries"]
    assert states["left-records"]["live_entries"] == expected["left-records"]  # another operator: read whole
    assert 0 < states["leak"]["live_entries"] < expected["leak"]  # the other subtask's only


def test_the_library_gives_the_states_as_an_arrow_table():
    root, info, expected, _ = _growth(GROWTH[0])
    deep = size(str(root), deep=True, now=str(info["generated_between_ms"][1] + 1000), ttl=["recent=1s"]).deep
    table = {row["state"]: row for row in deep.to_arrow().to_pylist()}
    assert {name: table[name]["live_entries"] for name in expected["entries"]} == expected["entries"]
    assert table["recent"]["ttl_expired_rows"] == expected["entries"]["recent"] and table["leak"]["ttl_expired_rows"] is None


def test_a_ttl_for_a_state_the_checkpoint_does_not_hold_is_a_usage_error(capsys):
    """``--ttl recnet=1s`` (a typo) would judge nothing expired and say so as if checked: it names the states."""
    root = _growth(GROWTH[0])[0]
    assert main(["size", str(root), "--deep", "--ttl", "recnet=1s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no keyed state named 'recnet'" in err and "recent" in err
    assert main(["size", str(root), "--deep", "--ttl", "=1s"]) == 2
    assert "no state name before '='" in capsys.readouterr().err
    assert main(["size", str(root), "--deep", "--ttl", "recent=1s", "--json"]) == 0
