"""Verify's verdict equals real Flink's restore, cell by cell of the damage matrix (no JVM here).

``fixtures/damage_matrix.json`` records, per cell (fixture, file role, damage), what real Flink did when it
restored the damaged newest checkpoint (``fixtures/damage_matrix.py`` made and restored it). Each test
makes the same damaged checkpoint and holds ``repair verify`` and ``repair fallback`` to that outcome:
``error`` exactly when Flink refused or restored other state than was checkpointed (see
docs/verify-verdicts.md), and fallback choosing the checkpoint exactly when Flink restored it exactly.
"""

from __future__ import annotations

import pytest

from fixtures.damage_matrix import (
    DOC,
    TABLE_BEGIN,
    TABLE_END,
    Cell,
    agrees,
    flink_verdict,
    judge,
    load_results,
    prepare,
    savepoint_format,
)
from repair.errors import RepairError
from repair.ops.fallback import fallback

ROWS = load_results()["cells"]


def test_the_matrix_covers_every_required_family_and_role():
    fixtures = {row["fixture"] for row in ROWS}
    assert {"flink-1.20-default", "flink-1.20-heap"} <= fixtures
    assert fixtures & {"flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"}
    assert any(f.startswith("flink-2.") for f in fixtures)
    assert {"flink-1.20-changelog", "flink-2.1-heap-changelog", "flink-1.15-default"} <= fixtures
    assert {"flink-1.20-default@CANONICAL", "flink-1.20-default@NATIVE"} <= fixtures  # savepoints of both formats
    roles = {row["role"] for row in ROWS}
    assert {"metadata-trailer", "options", "changelog", "changelog-handle"} <= roles
    assert {row["damage"] for row in ROWS} >= {"unreadable", "replaced"}
    for row in ROWS:  # every recorded outcome is complete
        flink = row["flink"]
        assert flink["restored"] in (True, False) and flink["seconds"] > 0
        assert (flink["state_equal"] is None) == (not flink["restored"])
        assert flink["restored"] or flink["root_cause"]["class"]


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_verify_and_fallback_agree_with_real_flink(row, tmp_path):
    prepared = prepare(Cell(row["fixture"], row["role"], row["damage"]), tmp_path)
    snapshot = prepared.chk_dir.name
    ours, _kinds = judge(prepared)
    flink = flink_verdict(row)
    agree = agrees(ours, flink)
    if row.get("known_disagreement"):
        assert not agree, f"verify now agrees with Flink: remove {row['id']} from KNOWN_DISAGREEMENTS"
        return
    assert agree, f"verify says {ours}, Flink {'restored exactly' if flink == 'ok' else 'did not'}: {row['flink']}"
    if savepoint_format(row["fixture"]):
        return  # fallback chooses among a job's checkpoints; a savepoint is restored by name
    try:
        chosen = fallback(str(prepared.root)).chosen
    except RepairError:  # nothing fallback can use (exit 2): e.g. the only chk-N has no _metadata
        chosen = None
    assert (chosen is not None and chosen.name == snapshot) == (flink == "ok")


def test_the_doc_shows_every_recorded_cell():
    """docs/verify-verdicts.md's table is generated from the data (``damage_matrix.py --doc``): one row per cell."""
    table = DOC.read_text().split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:4]) for line in table.splitlines() if line.startswith("| ")}
    assert {(row["role"], row["damage"], row["fixture"]) for row in ROWS} <= rows
    for row in ROWS:
        if row.get("known_disagreement"):
            assert row["known_disagreement"] in table
