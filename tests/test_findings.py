"""One finding model (repair/findings.py): every finding is a Problem, built from a typed error by one
constructor (``Problem.from_error``) and serialized by one method (``Problem.to_json``)."""

from __future__ import annotations

import re
from pathlib import Path

from repair.errors import FormatError, StorageError
from repair.findings import Problem, Severity
from repair.formats.rocksdb.table.sst import BlockProblem
from repair.ops.doctor.lint import ConfigFinding
from repair.ops.fallback import Culprit
from repair.ops.verify.engine import CheckpointFinding, Reference

REPO = Path(__file__).resolve().parent.parent


def test_every_finding_type_is_a_problem_serialized_by_problem():
    for finding_type in (BlockProblem, CheckpointFinding, ConfigFinding, Culprit):
        assert issubclass(finding_type, Problem), finding_type
        assert "to_json" not in vars(finding_type), f"{finding_type.__name__} serializes itself"


def test_from_error_takes_where_and_what_from_the_error():
    error = FormatError("magic", 40, "0x88e241b785f4cff7", "0x0", source="/data/000042.sst")
    problem = Problem.from_error("bad_magic", error)
    assert (problem.kind, problem.offset, problem.expected, problem.found) == ("bad_magic", 40, "0x88e241b785f4cff7", "0x0")
    assert problem.message == str(error) and "/data/000042.sst" in problem.message
    assert problem.severity == Severity.ERROR

    unreadable = Problem.from_error("unreadable", StorageError("permission denied", source="/data/x"), severity=Severity.UNKNOWN)
    assert (unreadable.offset, unreadable.expected, unreadable.found, unreadable.severity) == (None, None, None, "unknown")

    placed = CheckpointFinding.from_error("metadata_undecodable", error, message=error.message, offset=0,
                                          reference=Reference("chk-3", 3, local_name="_metadata"), path="/data/_metadata")
    assert (placed.offset, placed.expected, placed.message, placed.path) == (0, "0x88e241b785f4cff7", error.message, "/data/_metadata")


def test_every_finding_starts_with_the_common_shape():
    reference = Reference("chk-3", 3, "per-user", 1, 2, "000042.sst", "shared", (64, 127))
    findings = [
        Problem("missing_file", "gone", expected="42 bytes", found="nothing", details=(("path", "/x"),)),
        BlockProblem("block_checksum_mismatch", "data block checksum", 4096, "0x1", "0x2", block_kind="data", size=100),
        CheckpointFinding.of(Problem("bad_current", "CURRENT is empty", found=b"\x00\x01"), reference, path="/x/CURRENT"),
        ConfigFinding.of("num-retained", "error", "state.checkpoints.num-retained", "1", "only one checkpoint", "set it to 2"),
    ]
    documents = [finding.to_json() for finding in findings]
    for document in documents:
        assert list(document)[:3] == ["kind", "severity", "message"]
    assert documents[0] == {"kind": "missing_file", "severity": "error", "message": "gone", "expected": "42 bytes",
                            "found": "nothing", "path": "/x"}
    assert documents[1]["block_kind"] == "data" and documents[1]["size"] == 100 and documents[1]["offset"] == 4096
    verify = documents[2]
    assert verify["message"] == "chk-3 per-user[1/2] 000042.sst (/x/CURRENT): CURRENT is empty"
    assert (verify["offset"], verify["expected"], verify["found"]) == (None, None, "0001")  # verify prints them all, bytes as hex
    assert verify["key_group_range"] == [64, 127] and verify["column_family"] is None
    assert documents[3] == {"kind": "num_retained", "severity": "error", "message": "state.checkpoints.num-retained: only one checkpoint",
                            "check": "num-retained", "key": "state.checkpoints.num-retained", "value": "1",
                            "why": "only one checkpoint", "fix": "set it to 2", "runbook": None}


def test_no_module_picks_offset_expected_and_found_from_an_error_by_hand():
    hand_picked = re.compile(r'getattr\(\w+, "(offset|expected|found)"')
    found = [f"{path.relative_to(REPO)}:{number}" for path in sorted((REPO / "repair").rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if hand_picked.search(line)]
    assert found == []
