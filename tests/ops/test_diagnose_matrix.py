"""``repair diagnose`` recognises every exception real Flink threw restoring the damage matrix's checkpoints.

``fixtures/damage_matrix.json`` records, for each damaged checkpoint Flink refused, the exception chain
Flink logged (``trace``: each exception line and its first stack frames, work dirs replaced by stable
names). Each distinct root cause text becomes one test: its trace, as Flink logs it, must yield an
incident with a cause, an existing runbook and a next command.
"""

from __future__ import annotations

import re

import pytest

from fixtures.damage_matrix import load_results
from repair.ops.diagnose.incidents import diagnose
from tests.conftest import REPO


def _text_key(record: dict) -> str:
    """The root cause's class and message with numbers and paths blanked: one test per distinct text."""
    root = record["flink"]["root_cause"]
    message = re.sub(r"-?\d+", "N", re.sub(r"\S*/\S*", "<path>", root["message"]))
    return f"{root['class']}: {message}"[:160]


def _distinct() -> dict[str, dict]:
    found: dict[str, dict] = {}
    for record in load_results()["cells"]:
        if not record["flink"]["restored"] and record["flink"].get("trace"):
            found.setdefault(_text_key(record), record)
    return found


TEXTS = _distinct()


def _as_logged(trace: list[str]) -> str:
    return "\n".join(("\t" + line) if line.startswith("at ") else line for line in trace)


def test_the_matrix_recorded_refusals_with_traces():
    assert len(TEXTS) >= 10


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_diagnose_recognises_every_exception_of_the_matrix(key):
    record = TEXTS[key]
    result = diagnose(_as_logged(record["flink"]["trace"]))
    assert result.incidents, f"{record['id']}: no incident for {key}"
    for incident in result.incidents:
        assert incident.cause and (REPO / incident.runbook).is_file()
        assert incident.next_command.argv[0] == "repair"
    named = re.findall(r"/(\d{6}\.sst)\b", record["flink"]["root_cause"]["message"])
    if named:  # the trace names the SST: so does the incident
        assert any(named[0] in incident.files for incident in result.incidents), named


def test_every_refusal_of_the_matrix_yields_an_incident():
    """Not only one cell per distinct root cause: the same text under another trace (another role, Flink
    line or backend) is recognised too."""
    unrecognised = [record["id"] for record in load_results()["cells"]
                    if not record["flink"]["restored"] and record["flink"].get("trace")
                    and not diagnose(_as_logged(record["flink"]["trace"])).incidents]
    assert not unrecognised
