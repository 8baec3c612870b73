"""Start-up cost, guarded without timing: a ``--json`` run of the short commands on a plain RocksDB checkpoint
imports neither rich (tables are for people), nor pydantic (typer's converter of values, left to bad values
only: repair.cli.plain_values), nor the readers, decoders of values and changelog decoders it has no use for.

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
NEVER_IN_JSON_RUNS = ("rich", "repair.cli.render", "yaml", "pyspark", "rocksdict", "pydantic", "pydantic_core", "typer._adapters")
#: Decoders of changelog and full snapshots, and the readers stack above them: loaded for such snapshots only.
SNAPSHOT_KIND_STACKS = ("repair.formats.flink.changelog", "repair.readers.changelog")
#: What verify and fallback load only where a checkpoint holds a changelog, a full snapshot or raw timers.
READERS = ("repair.readers",)
#: Decoders of serializer snapshots and values (Kryo, Avro, Scala): loaded by the files that need them, never
#: before an operation starts.
VALUE_DECODERS = ("repair.formats.flink.kryo", "repair.formats.flink.avro", "repair.formats.flink.scala_types",
                  "repair.formats.flink.serializers", "repair.formats.flink.values")


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
    # crc32c's C extension without its package (importlib.metadata); a process pool only for a large checkpoint
    assert "crc32c._crc32c" in modules
    assert {"crc32c", "importlib.metadata", "multiprocessing"} & modules == set()
    # local files read with the OS's calls, index blocks decoded without pyarrow's kernels (0.06 CPU s to import)
    assert _offending(modules, ("pyarrow",)) == []


def test_inspect_json_imports_no_rich_and_no_changelog_stack():
    modules = _imported("inspect", str(ROOT_120), "--json")
    assert "repair.ops.inspect" in modules
    assert _offending(modules, NEVER_IN_JSON_RUNS + SNAPSHOT_KIND_STACKS) == []


def test_a_bad_value_still_gets_typers_message():
    """pydantic is typer's for a value the plain converter does not take: its message, exit code 2."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(repair.__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "repair.cli", "verify", str(ROOT_120), "--workers", "0", "--json"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["message"] == "Invalid value for '--workers': Input should be greater than or equal to 1"


@pytest.mark.parametrize("operation, needed", [("repair.ops.verify.engine", ()), ("repair.ops.fallback", ()),
                                               ("repair.ops.inspect", VALUE_DECODERS)])  # inspect describes every state
def test_what_a_command_imports_before_its_operation_starts(operation, needed):
    """The CLI and the operation's module, imported as a command imports them before calling it: nothing
    of what only some checkpoints' files need, no pydantic, no rich."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(repair.__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", f"import json, sys, repair.cli.app, {operation}; print(json.dumps(sorted(sys.modules)))"],
                          env=env, capture_output=True, text=True, check=True)
    modules = set(json.loads(done.stdout))
    assert operation in modules
    unwanted = tuple(name for name in NEVER_IN_JSON_RUNS + SNAPSHOT_KIND_STACKS + READERS + VALUE_DECODERS if name not in needed)
    assert _offending(modules, unwanted) == []


def test_size_json_imports_neither_deep_nor_the_readers():
    """The default ``repair size`` reads SST footers and properties only: ``--deep``'s module and export's
    readers beneath it load for ``--deep`` alone (bench/size.py measures what start-up costs it)."""
    modules = _imported("size", str(ROOT_120), "--json")
    assert "repair.ops.size" in modules  # the run did count
    assert _offending(modules, NEVER_IN_JSON_RUNS + SNAPSHOT_KIND_STACKS + READERS + VALUE_DECODERS
                      + ("repair.ops.size_deep", "repair.ops.export")) == []
