"""An export in which a state has no value decoded says so on its first screen and in ``--json``
(``undecoded``), and fails (exit 1) where decoded columns were asked for (``--columns decoded``).

Real states of that kind: ``fixtures/flink-2.1-kryo``'s ``tally``, ``marked`` and ``note`` (classes whose
Kryo layout only the job knows: every value stays raw bytes, kryo_state_model.RAW_STATES); every other
state of that fixture, and every state of ``flink-2.1-pojo``, decodes.
"""

from __future__ import annotations

import json

import pytest

from fixtures import kryo_state_model
from repair.cli.app import main
from tests.conftest import job_root


@pytest.fixture(scope="module")
def kryo_root():
    return job_root("flink-2.1-kryo")


def test_the_first_screen_names_each_state_with_no_value_decoded(kryo_root, tmp_path, capsys):
    assert main(["export", kryo_root, "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "3 state(s) with no value decoded" in lines[1]
    named = sorted(line.strip().split(":")[0] for line in lines[2:5])
    assert named == [f"by-object/{state}" for state in sorted(kryo_state_model.RAW_STATES)]
    document = json.loads((tmp_path / "out" / "_export.json").read_text())
    assert document["ok"] is True
    assert sorted(item["state"] for item in document["undecoded"]) == sorted(kryo_state_model.RAW_STATES)
    assert all(item["operator"] == "by-object" and item["rows"] > 0 and item["columns"] == ["value"]
               for item in document["undecoded"])


def test_asking_for_decoded_columns_fails_when_a_state_has_none(kryo_root, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", kryo_root, "--out", str(out), "--workers", "1", "--columns", "decoded", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False and len(document["undecoded"]) == 3
    assert json.loads((out / "_export.json").read_text())["undecoded"] == document["undecoded"]  # written all the same


def test_an_export_whose_every_state_decodes_lists_none(tmp_path, capsys):
    args = ["export", job_root("flink-2.1-pojo"), "--out", str(tmp_path / "out"), "--workers", "1", "--columns", "decoded", "--json"]
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True and document["undecoded"] == []
