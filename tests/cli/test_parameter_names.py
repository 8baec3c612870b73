"""One name per parameter across the library and the CLI: the input is ``path``, the output ``out``, the
operator selectors ``operators``; the earlier names still work (keywords with a DeprecationWarning, CLI
flags hidden from --help)."""

from __future__ import annotations

import inspect as python_inspect
import warnings

import pytest

import repair
from repair.cli.app import main
from tests.conftest import FIXTURES, fixture_info

FIXTURE = FIXTURES / "flink-1.20-default"
ROOT = FIXTURE / "checkpoints" / fixture_info(FIXTURE)["job_id"]
#: Library functions that take an input path, and those that also write an output.
READING = ["triage", "inspect", "verify", "fallback", "orphans", "relocate", "rebuild_manifest", "rebuild_db", "export",
           "write_savepoint", "rescale", "edit"]
WRITING = ["relocate", "rebuild_manifest", "rebuild_db", "export", "write_savepoint", "rescale", "edit"]


@pytest.mark.parametrize("name", READING)
def test_the_input_is_path_and_the_output_out(name):
    parameters = list(python_inspect.signature(getattr(repair, name)).parameters)
    assert parameters[0] == "path"
    if name in WRITING:
        assert parameters[1] == "out"


@pytest.mark.parametrize("name", ["inspect", "export"])
def test_operator_selectors_are_operators(name):
    assert "operators" in python_inspect.signature(getattr(repair, name)).parameters


def test_an_old_keyword_is_accepted_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"inspect\(uids=...\) is deprecated: use operators=..."):
        old = repair.inspect(str(ROOT), uids=["per-user"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = repair.inspect(str(ROOT), operators=["per-user"])
    assert [op.id for op in old.operators] == [op.id for op in new.operators] and len(new.operators) == 1
    with pytest.raises(TypeError, match="uids is the old name of operators"):
        repair.inspect(str(ROOT), uids=["a"], operators=["b"])


def test_old_cli_flags_work_and_are_hidden(capsys):
    assert main(["inspect", str(ROOT), "--uid", "per-user", "--json"]) == 0
    by_uid = capsys.readouterr().out
    assert main(["inspect", str(ROOT), "--operator", "per-user", "--json"]) == 0
    assert capsys.readouterr().out == by_uid
    for command, old in (("inspect", "--uid"), ("export", "--uid"), ("relocate", "--to"), ("rebuild-manifest", "--to")):
        assert main([command, "--help"]) == 0
        assert old not in capsys.readouterr().out
