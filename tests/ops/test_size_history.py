"""``repair size ROOT --history``: the growth over the retained checkpoints, held against ``repair diff``
(each step) and the growth fixtures' input (real Flink 1.20 and 2.1: a leaking state, a join keeping
its rows, a TTL state overwritten with every record, a steady state)."""

from __future__ import annotations

import pytest

from repair.cli.app import main
from repair.ops.diff import diff
from repair.ops.size_history import size_history
from tests import damage
from tests.conftest import FIXTURES, GROWTH_FIXTURE_NAMES, fixture_info

KEYED = ("leak", "recent", "steady", "left-records", "right-records")


@pytest.mark.parametrize("name", [*GROWTH_FIXTURE_NAMES, "flink-1.20-default", "flink-1.20-heap"])
def test_each_step_is_diffs_and_the_states_add_up(name, read_only_guard):
    root = damage.checkpoint_root(FIXTURES / name)
    history = size_history(str(read_only_guard(root))).to_json()["history"]
    ids = history["checkpoint_ids"]
    assert ids == fixture_info(FIXTURES / name)["retained_checkpoints"]
    assert sum(s["growth_bytes"] for s in history["states"]) == history["growth_bytes"] == history["bytes"][-1] - history["bytes"][0]
    for i, s in enumerate(history["states"][0]["bytes"]):
        assert sum(state["bytes"][i] for state in history["states"]) == history["bytes"][i]
    for step in history["steps"][:2]:
        pair = diff(str(root / f"chk-{step['old_checkpoint_id']}"), str(root / f"chk-{step['new_checkpoint_id']}")).to_json()
        assert step["growth_bytes"] == pair["growth_bytes"]
        assert step["files"] == pair["files"]
        changed = [s for s in pair["states"] if s["growth_bytes"]]
        assert step["largest_growth"] == (None if not changed else {k: changed[0][k] for k in ("operator", "state", "growth_bytes")})


@pytest.mark.parametrize("name", GROWTH_FIXTURE_NAMES)
def test_the_growth_goes_to_the_leaking_state_and_the_join_none_to_the_steady_one(name):
    root = damage.checkpoint_root(FIXTURES / name)
    info = fixture_info(FIXTURES / name)
    states = {s["state"]: s for s in size_history(str(root)).to_json()["history"]["states"] if s["state"] in KEYED}
    # leak is never overwritten: its stored entries are the records each checkpoint holds (the job's input)
    assert states["leak"]["entries"] == [info["records_per_checkpoint"][str(c)] for c in info["retained_checkpoints"]]
    assert states["steady"]["growth_bytes"] == 0 and states["steady"]["growth_entries"] == 0
    leaking = states["leak"]["growth_bytes"] + states["left-records"]["growth_bytes"] + states["right-records"]["growth_bytes"]
    keyed = sum(states[s]["growth_bytes"] for s in KEYED)
    assert leaking > 0.6 * keyed > 0
    assert states["leak"]["growth_bytes"] > 0 and states["left-records"]["growth_bytes"] > 0


def test_usage(capsys):
    root = damage.checkpoint_root(FIXTURES / GROWTH_FIXTURE_NAMES[0])
    assert main(["size", str(root), "--history"]) == 0
    assert "growth over checkpoints" in capsys.readouterr().out
    assert main(["size", str(root), "--history", "-c", "3"]) == 2


def test_the_history_of_a_checkpoint_is_its_roots_retained_checkpoints_up_to_it(read_only_guard, capsys):
    """``size chk-N --history`` (or its ``_metadata``): how each state grew over the job's retained
    checkpoints up to chk-N, the same series as the job root's history cut at N."""
    name = GROWTH_FIXTURE_NAMES[0]
    root = read_only_guard(damage.checkpoint_root(FIXTURES / name))
    whole = size_history(str(root)).to_json()["history"]
    up_to = [c for c in fixture_info(FIXTURES / name)["retained_checkpoints"] if c <= 3]
    assert len(up_to) > 1
    for path in (root / "chk-3", root / "chk-3" / "_metadata"):
        result = size_history(str(path))
        assert [c.checkpoint_id for c in result.checkpoints] == up_to
        history = result.to_json()["history"]
        assert history["checkpoint_ids"] == up_to
        assert history["bytes"] == whole["bytes"][: len(up_to)]
        assert history["steps"] == whole["steps"][: len(up_to) - 1]
        leak = next(s for s in history["states"] if s["state"] == "leak")
        assert leak["bytes"] == next(s for s in whole["states"] if s["state"] == "leak")["bytes"][: len(up_to)]
    assert main(["size", str(root / "chk-3"), "--history"]) == 0
    assert f"growth over checkpoints {up_to[0]}-{up_to[-1]} ({len(up_to)} retained)" in capsys.readouterr().out


def test_the_library_gives_the_series_as_an_arrow_table():
    root = damage.checkpoint_root(FIXTURES / GROWTH_FIXTURE_NAMES[0])
    result = size_history(str(root))
    rows = result.history.to_arrow().to_pylist()
    for checkpoint in result.checkpoints:
        assert sum(r["bytes"] for r in rows if r["checkpoint_id"] == checkpoint.checkpoint_id) == checkpoint.bytes
    leak = next(s for s in result.to_json()["history"]["states"] if s["state"] == "leak")
    assert [r["entries"] for r in rows if r["state"] == "leak"] == leak["entries"]


def test_a_job_root_that_cannot_be_listed_leaves_the_checkpoint_alone_and_says_so(monkeypatch):
    """``size chk-N --history`` when chk-N's job root cannot be listed (a store that denies it): the
    history of chk-N alone and an ``unreadable`` finding (unknown) naming the root; the report is
    printed, with size's exit code for what stayed unknown (2)."""
    from repair.errors import StorageError
    from repair.ops import size as size_module

    root = damage.checkpoint_root(FIXTURES / GROWTH_FIXTURE_NAMES[0])
    listed = size_module.classify

    def denying(path, storage):
        if str(path).rstrip("/") == str(root):
            raise StorageError("access denied", source=str(root))
        return listed(path, storage)

    monkeypatch.setattr(size_module, "classify", denying)
    result = size_history(str(root / "chk-3"))
    assert [c.checkpoint_id for c in result.checkpoints] == [3]
    (finding,) = [f for f in result.findings if f.kind == "unreadable"]
    assert finding.severity.value == "unknown" and "chk-3 alone" in finding.message
    assert main(["size", str(root / "chk-3"), "--history", "--json"]) == 2
