"""Verify's verdict equals real Flink's restore, cell by cell of the damage matrix (no JVM here).

``fixtures/damage_matrix.json`` records, per cell (fixture, file role, damage), what real Flink did when it
restored the damaged newest checkpoint (``fixtures/damage_matrix.py`` made and restored it). Each test
makes the same damaged checkpoint and holds ``repair verify`` and ``repair fallback`` to that outcome:
``error`` exactly when Flink refused or restored other state than was checkpointed (see
docs/verify-verdicts.md), and fallback choosing the checkpoint exactly when Flink restored it exactly.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from pathlib import Path

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
    verify_verdict,
)
from repair.errors import RepairError
from repair.findings import Severity
from repair.io.uris import parse_location
from repair.ops.fallback import fallback
from repair.ops.fallback import judge as fallback_verdicts
from repair.ops.verify.file_checks import FileResult, FileTask

ROWS = load_results()["cells"]


class SameBytesChecked:
    """Verify's ``checked_files`` (``repair.ops.verify.engine.CheckedFiles``, what ``repair watch`` gives
    it) for the cells of the matrix: the cells of a fixture damage one thing each in copies of the same
    checkpoint, so most of a cell's files are the bytes an earlier cell's verify checked. A file's
    result is taken from that earlier check when its bytes (SHA-256) and its task, all but its path,
    are the same; the damaged file, and any file whose bytes or task differ, is checked."""

    def __init__(self):
        self.results: dict[tuple, FileResult] = {}

    @staticmethod
    def _key(task: FileTask) -> tuple | None:
        """The task but its path (its repr: not every task is hashable), and its file's bytes' digest."""
        if task.inline is not None:
            return (repr(task),)
        path = Path(parse_location(task.uri).path)
        if not path.is_file():
            return None  # missing or no file: checked (and found so) every time
        return repr(dataclasses.replace(task, uri=None)), hashlib.sha256(path.read_bytes()).digest()

    def lookup(self, task: FileTask) -> FileResult | None:
        key = self._key(task)
        earlier = self.results.get(key) if key is not None else None
        return None if earlier is None else dataclasses.replace(copy.deepcopy(earlier), task=task)

    def remember(self, result: FileResult) -> None:
        key = self._key(result.task)
        if key is not None and result.exists and not any(p.severity == Severity.UNKNOWN for p in result.problems):
            self.results[key] = copy.deepcopy(result)


@pytest.fixture(scope="module")
def checked_files():
    return SameBytesChecked()


def test_the_matrix_covers_every_required_family_and_role():
    fixtures = {row["fixture"] for row in ROWS}
    assert {"flink-1.20-default", "flink-1.20-heap"} <= fixtures
    assert fixtures & {"flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"}
    assert any(f.startswith("flink-2.") for f in fixtures)
    assert {"flink-1.20-changelog", "flink-2.1-heap-changelog", "flink-1.15-default"} <= fixtures
    assert {"flink-1.20-bloom-filter", "flink-1.20-rescaled"} <= fixtures  # filter and range-deletion blocks
    assert {"flink-1.20-default@CANONICAL", "flink-1.20-default@NATIVE"} <= fixtures  # savepoints of both formats
    roles = {row["role"] for row in ROWS}
    assert {"metadata-trailer", "options", "changelog", "changelog-handle", "sst-filter", "sst-range-del"} <= roles
    assert {row["damage"] for row in ROWS} >= {"unreadable", "replaced"}
    for row in ROWS:  # every recorded outcome is complete
        flink = row["flink"]
        assert flink["restored"] in (True, False) and flink["seconds"] > 0
        assert (flink["state_equal"] is None) == (not flink["restored"])
        assert flink["restored"] or flink["root_cause"]["class"]


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_verify_and_fallback_agree_with_real_flink(row, tmp_path, checked_files):
    """One verify per cell gives both verdicts. A damaged checkpoint is verified as the job root holding
    it (its only checkpoint), which is what ``repair fallback`` verifies: fallback's verdict is judged from
    that result (``fallback.judge``), not from a second verify. A savepoint is verified as itself:
    fallback chooses among a job's checkpoints, a savepoint is restored by name. The files a cell did
    not damage were checked in an earlier cell of the fixture (:class:`SameBytesChecked`)."""
    prepared = prepare(Cell(row["fixture"], row["role"], row["damage"]), tmp_path)
    snapshot = prepared.chk_dir.name
    checkpoint = not savepoint_format(row["fixture"])
    ours, _kinds, report = verify_verdict(str(prepared.root if checkpoint else prepared.chk_dir), checked_files)
    flink = flink_verdict(row)
    agree = agrees(ours, flink)
    if row.get("known_disagreement"):
        assert not agree, f"verify now agrees with Flink: remove {row['id']} from KNOWN_DISAGREEMENTS"
        return
    assert agree, f"verify says {ours}, Flink {'restored exactly' if flink == 'ok' else 'did not'}: {row['flink']}"
    if not checkpoint:
        return
    try:
        chosen = fallback_verdicts(report, str(prepared.root)).chosen if report is not None else None
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


#: Cells restored again in real Flink by the slow test: one per family the matrix added last (changelog
#: files and handles, Flink 1.15, ForSt, a native savepoint, a range-deletion block of a rescaled job) and
#: the Snappy identifier verify had wrong; a damaged path, restored in place and after ``repair relocate``.
#: About 10 s each; the whole matrix is regenerated by ``fixtures/damage_matrix.py`` (docs/verify-verdicts.md).
RESTORED_AGAIN = (
    "flink-1.20-changelog/changelog/truncated",
    "flink-2.1-heap-changelog/changelog-handle/missing",
    "flink-1.15-default/inline-manifest/flipped",
    "flink-2.1-forst/backend-meta/flipped",
    "flink-1.20-default@NATIVE/options/garbled",
    "flink-2.1-heap-p3-snappy/key-groups/flipped",
    "flink-1.20-rescaled/sst-range-del/flipped",
    "flink-2.1-p3-external-xxh3-zstd/path/flipped-job-id",
)


@pytest.mark.slow
@pytest.mark.parametrize("cell_id", RESTORED_AGAIN)
def test_real_flink_restores_sampled_cells_as_recorded(cell_id):
    """The recorded outcomes are Flink's, not a one-off: restored again, a sample gives the same outcome
    (restored or not, state equal or not, the root cause's exception class)."""
    from fixtures.damage_matrix import restore_cell

    (row,) = [r for r in ROWS if r["id"] == cell_id]
    again_record = restore_cell(Cell(row["fixture"], row["role"], row["damage"]))
    again = again_record["flink"]
    recorded = row["flink"]
    assert (again["restored"], again["state_equal"]) == (recorded["restored"], recorded["state_equal"])
    if not recorded["restored"]:
        # The recorded root cause is among this restore's exceptions. Not only its root cause: when the
        # restore fails, a task's shutdown sometimes logs a longer chain of its own ("registry is already
        # closed") that exception_summary then takes for the root, the real failure logged beside it.
        seen = {again["root_cause"]["class"], *(cause["class"] for cause in again["causes"])}
        assert recorded["root_cause"]["class"] in seen
    if "after_relocate" in row:
        assert again_record["after_relocate"] == row["after_relocate"]


def test_a_file_nobody_may_read_is_unknown_and_agrees_only_with_a_refusal(tmp_path, monkeypatch):
    """A permission fault (which the matrix, run as root, cannot restore) gives verdict ``unknown``, never
    ``ok``: fallback does not choose the checkpoint. The damage is a garbled OPTIONS file, a warning on
    its own, so the unreadable file alone decides."""
    from repair.io import storage as st

    prepared = prepare(Cell("flink-1.20-p3-external-xxhash-lz4", "options", "garbled"), tmp_path)
    unreadable = sorted((prepared.chk_dir / "shared").iterdir())[0]  # a file the checkpoint references
    real_open = st.Storage.open_input

    def open_input(self, uri, **options):
        if uri.endswith(unreadable.name):
            raise PermissionError(13, "Permission denied", uri)
        return real_open(self, uri, **options)

    monkeypatch.setattr(st.Storage, "open_input", lambda self, uri, **options: _as_storage_error(open_input, self, uri, **options))
    ours, kinds = judge(prepared)
    assert (ours, kinds) == ("unknown", ["unreadable"])
    assert agrees(ours, "error") and not agrees(ours, "ok")
    assert fallback(str(prepared.root)).chosen is None


def _as_storage_error(open_input, storage, uri, **options):
    from repair.io.storage import _StorageErrors

    with _StorageErrors(uri, "open for reading"):
        return open_input(storage, uri, **options)
