"""A Spark task that dies while writing its Parquet part, or write-savepoint's key-group stream
(tests/spark_task_fault/sitecustomize.py).

* ``--master local[2,2]`` (two threads, a task may fail twice): Spark runs the task again; the export
  is complete and identical to an undisturbed one (the in-process export of ``write_inputs``, which
  test_export.py's ``test_spark_local_export_is_identical`` holds identical to an undisturbed export on
  Spark); the dead attempt's temporary file is gone.
* ``--master local[2]`` (Spark's local default: a task fails the job at its first failure): the export
  fails with one line and exit 2, leaves no target and no staging directory, and a rerun succeeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._flink_state_files import REPO
from tests.conftest import TESTS
from tests.export_testlib import assert_identical
from tests.write_commands import CHECKPOINT, files_below

FAULT = TESTS / "spark_task_fault"


def _export(out: Path, master: str, tmp: Path, *, fail_once: Path | None = None) -> subprocess.CompletedProcess:
    return _repair(["export", str(CHECKPOINT), "--out", str(out), "--master", master], tmp, fail_once)


def _repair(args: list[str], tmp: Path, fail_once: Path | None) -> subprocess.CompletedProcess:
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{FAULT}{os.pathsep}{REPO}" if fail_once else str(REPO), "TMPDIR": str(tmp)}
    if fail_once:
        fail_once.mkdir(exist_ok=True)
        env["REPAIR_TEST_FAIL_ONCE"] = str(fail_once)
    return subprocess.run([sys.executable, "-m", "repair.cli", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


#: Every test starts Spark (in a CLI process).
pytestmark = pytest.mark.usefixtures("spark_class_archive")


@pytest.fixture
def reference(write_inputs) -> Path:
    """An undisturbed export of CHECKPOINT (in process: the same files as on Spark)."""
    return write_inputs / "export"


@pytest.mark.slow
def test_a_task_that_dies_once_is_retried_and_the_export_is_complete(reference, tmp_path):
    out = tmp_path / "export"
    done = _export(out, "local[2,2]", tmp_path / "tmp", fail_once=tmp_path / "marker")
    assert (tmp_path / "marker" / "failed").exists(), "no task died: the fault was not injected"
    assert done.returncode == 0, done.stdout + done.stderr
    assert_identical(out, reference)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("export.tmp-")]


@pytest.mark.slow
def test_a_task_that_dies_without_retries_fails_the_export_cleanly_and_a_rerun_succeeds(reference, tmp_path):
    out = tmp_path / "export"
    done = _export(out, "local[2]", tmp_path / "tmp", fail_once=tmp_path / "marker")
    assert (tmp_path / "marker" / "failed").exists(), "no task died: the fault was not injected"
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker", "tmp"]
    rerun = _export(out, "local[2]", tmp_path / "tmp")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_identical(out, reference)
    assert files_below(out) == files_below(reference)


@pytest.mark.slow
def test_a_write_savepoint_task_that_dies_once_is_retried_and_the_savepoint_is_the_same(reference, tmp_path):
    """write-savepoint on Spark: the first stream task dies mid-file (its spilled input stays in place),
    Spark runs it again, and the savepoint is byte for byte the one written in-process, with no spilled
    or temporary file left."""
    from repair.ops.write_savepoint import write_savepoint

    write_savepoint(str(reference), str(tmp_path / "in-process"), max_parallelism=256, parallelism=3, workers=1)
    out = tmp_path / "savepoint"
    done = _repair(["write-savepoint", str(reference), "--out", str(out), "--max-parallelism", "256", "--parallelism", "3",
                    "--master", "local[2,2]"], tmp_path / "tmp", tmp_path / "marker")
    assert "keyed-" in (tmp_path / "marker" / "failed").read_text(), "no stream task died: the fault was not injected"
    assert done.returncode == 0, done.stdout + done.stderr
    written = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    expected = {p.relative_to(tmp_path / "in-process"): p.read_bytes() for p in (tmp_path / "in-process").rglob("*") if p.is_file()}
    assert written == expected
    assert not [p for p in out.rglob("*") if p.is_dir()] and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
