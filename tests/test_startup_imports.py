"""Start-up cost, guarded without timing: a ``--json`` run of the short commands on a plain RocksDB checkpoint
imports neither rich (tables are for people) nor the readers and changelog decoders it has no use for.

The CPU seconds themselves are measured by ``bench/startup.py`` (docs/benchmarks.md, "Start-up"); this
test fails deterministically when a module-level import brings one of these modules back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import repair
from tests.conftest import FIXTURES, fixture_info

ROOT_120 = FIXTURES / "flink-1.20-default" / "checkpoints" / fixture_info(FIXTURES / "flink-1.20-default")["job_id"]

#: Runs ``repair ARGS...`` in this process, its stdout discarded, then prints its exit code and the names of
#: every module imported on stderr's last line.
_RUN_AND_LIST_MODULES = """
import contextlib, io, json, sys
from repair.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"exit_code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

#: Modules a --json run never needs: rich draws tables and bars for people only; the command's own renderers.
NEVER_IN_JSON_RUNS = ("rich", "repair.cli.render", "yaml", "pyspark", "rocksdict")
#: Decoders of changelog and full snapshots, and the readers stack above them: loaded for such snapshots only.
SNAPSHOT_KIND_STACKS = ("repair.formats.flink.changelog", "repair.readers.changelog")
#: What verify and fallback load only where a checkpoint holds a changelog, a full snapshot or raw timers.
READERS = ("repair.readers",)


def _imported(*args: str) -> set[str]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(repair.__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", _RUN_AND_LIST_MODULES, *args], env=env, capture_output=True, text=True)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["exit_code"] == 0, done.stderr
    return set(report["modules"])


def _offending(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes))


@pytest.mark.parametrize("command", ["verify", "fallback"])
def test_verify_and_fallback_json_import_only_what_a_rocksdb_checkpoint_needs(command):
    modules = _imported(command, str(ROOT_120), "--json")
    assert "repair.ops.verify.engine" in modules  # the run did verify
    assert _offending(modules, NEVER_IN_JSON_RUNS + SNAPSHOT_KIND_STACKS + READERS) == []


def test_inspect_json_imports_no_rich_and_no_changelog_stack():
    modules = _imported("inspect", str(ROOT_120), "--json")
    assert "repair.ops.inspect" in modules
    assert _offending(modules, NEVER_IN_JSON_RUNS + SNAPSHOT_KIND_STACKS) == []
