"""Salvage's report holds against real Flink, cell by cell of the salvage matrix (no JVM but one slow test).

``fixtures/salvage_matrix.json`` records, per SST damage cell (data, index, properties, filter or
range-deletion block of the Flink 1.20, 2.1 and 2.3 fixtures, flipped, zeroed or truncated), what real
Flink restored from the checkpoints ``rebuild-manifest --salvage`` and ``--drop-missing`` wrote
(``fixtures/salvage_matrix.py`` made and restored them): every key whose state differs from
``expected.json``. Each test makes the same two rebuilds and holds the report to it: the salvaged
checkpoint restores; nothing differs where the report says nothing was lost; the keys that differ are
the keys ``--list-lost-keys`` lists as lost (exactly, where the list is complete; never more states than
entries lost otherwise); and salvage loses no more than dropping, by the report and in real Flink.
"""

from __future__ import annotations

import pytest

from fixtures.damage_matrix import Cell
from fixtures.salvage_matrix import DOC, TABLE_BEGIN, TABLE_END, _restore, all_cells, load_results, plan_cell, repair_cell, salvaged_summary

ROWS = load_results()["cells"]


def test_every_cell_is_recorded_and_every_salvaged_checkpoint_restores():
    assert sorted(row["id"] for row in ROWS) == sorted(cell.id for cell in all_cells())
    fixtures = {row["flink_version"].rsplit(".", 1)[0] for row in ROWS}
    assert fixtures == {"1.20", "2.1", "2.3"}
    assert {row["role"].removeprefix("inline-") for row in ROWS} == {"sst-data", "sst-index", "sst-properties", "sst-filter", "sst-range-del"}
    for row in ROWS:
        assert row["salvage"]["restored"], row["id"]
    # Salvage keeps what dropping loses: some cells restore exactly only when salvaged.
    assert any(row["salvage"]["differing"] == [] and row["drop"]["differing"] for row in ROWS)


def _states(items) -> tuple[set, set, bool, int | None]:
    """``(operator, key, state)`` of the keys the report lists as lost and as showing an older value, whether every
    file's list is complete, and the entries lost in all (None when unknown)."""
    lost, older, complete, entries = set(), set(), True, 0
    for item, count in items:
        listed = item.lost_keys
        complete = complete and listed is not None and listed.complete
        entries = None if entries is None or count is None else entries + count
        for key in listed.keys if listed is not None else []:
            name = (item.operator, str(key.key.key), _state(item.column_family))
            (lost if key.fate == "lost" else older if key.fate == "older_value_back" else set()).add(name)
    return lost, older, complete, entries


def _state(column_family: str | None) -> str | None:
    """The state name expected.json uses for a column family (every timer state is ``timers``)."""
    return "timers" if column_family and column_family.startswith("_timer_state/") else column_family


def _report(result):
    return [(f, f.entries_lost) for f in result.salvaged] + [(f, f.entries) for f in result.lost]


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_the_report_lists_exactly_what_real_flink_lost(row, tmp_path):
    salvage, drop = plan_cell(Cell(row["fixture"], row["role"], row["damage"]), tmp_path)
    assert salvaged_summary(salvage) == row["salvaged"]  # the recorded restore is of this salvage
    assert sorted(f.local_name for f in drop.lost) == row["dropped"]
    for result, record in ((salvage, row["salvage"]), (drop, row["drop"])):
        assert not result.unrepairable
        if not record["restored"]:
            continue
        differing = {tuple(d) for d in record["differing"]}
        lost, older, complete, entries = _states(_report(result))
        if not result.lost and not result.salvage_lost:
            assert differing == set()
        # Only states of the files the report names as losing entries differ ...
        assert {(op, state) for op, _, state in differing} <= {(f.operator, _state(f.column_family)) for f, _ in _report(result)}
        if complete:  # ... exactly the keys it lists (those with an older value back may show an equal one)
            assert lost <= differing <= lost | older
        elif entries is not None:
            assert len(differing) <= entries
    # Salvage never loses more than dropping: by the report, and in real Flink.
    salvage_lost, drop_lost = (_states(_report(r))[3] for r in (salvage, drop))
    if salvage_lost is not None and drop_lost is not None:
        assert salvage_lost <= drop_lost
    if row["drop"]["restored"]:
        assert set(map(tuple, row["salvage"]["differing"])) <= set(map(tuple, row["drop"]["differing"]))


def test_the_docs_table_has_a_row_per_recorded_cell():
    lines = DOC.read_text().split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip().splitlines()[2:]
    assert len(lines) == len(ROWS)
    for row in ROWS:
        block = row["role"].removeprefix("inline-").removeprefix("sst-")
        assert any(line.startswith(f"| {row['fixture']} | {block} | {row['damage']} |") for line in lines), row["id"]


@pytest.mark.slow
def test_real_flink_restores_a_salvaged_cell_as_recorded(tmp_path):
    """One cell restored again (Flink 2.3, its inline SST's properties block flipped: salvaged, nothing lost)."""
    (row,) = [r for r in ROWS if r["id"] == "flink-2.3-default/inline-sst-properties/flipped"]
    repaired = repair_cell(Cell(row["fixture"], row["role"], row["damage"]), tmp_path)
    assert repaired.salvage.salvaged and repaired.salvage.ok
    restored = _restore(repaired.salvage_dir, row["fixture"])
    assert (restored["restored"], restored["differing"]) == (row["salvage"]["restored"], row["salvage"]["differing"]) == (True, [])
