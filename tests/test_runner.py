"""Running tasks on Spark leaves the caller's process as it was: its environment and its session."""

from __future__ import annotations

import os
import sys

import pytest

from repair.errors import UsageError
from repair.ops.runner import spark_session


@pytest.mark.slow
def test_spark_session_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    session = spark_session("local[1]", "repair-tests")
    try:
        assert "PYSPARK_PYTHON" not in os.environ and "PYSPARK_DRIVER_PYTHON" not in os.environ
        # the workers run this interpreter all the same (so they can import repair)
        assert session.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect() == [sys.executable]
        # a session for the same master is used as it is
        assert spark_session("local[1]", "other-name").sparkContext is session.sparkContext
    finally:
        session.stop()


@pytest.mark.slow
def test_a_session_the_caller_started_is_never_stopped_but_one_of_ours_is_replaced(monkeypatch):
    from pyspark.sql import SparkSession

    theirs = SparkSession.builder.master("local[1]").appName("the-callers").getOrCreate()
    try:
        with pytest.raises(UsageError, match="already active"):
            spark_session("local[2]", "repair-tests")
        assert SparkSession.getActiveSession().sparkContext is theirs.sparkContext
    finally:
        theirs.stop()
    ours = spark_session("local[1]", "repair-tests")
    replaced = spark_session("local[2]", "repair-tests")
    try:
        assert replaced.sparkContext.master == "local[2]" and ours.sparkContext._jsc is None  # stopped
    finally:
        replaced.stop()


@pytest.mark.slow
def test_spark_says_it_starts_and_keeps_its_log_quiet(tmp_path):
    import subprocess
    from pathlib import Path

    from tests.conftest import FIXTURES, job_root

    repair_command = Path(sys.executable).parent / "repair"
    done = subprocess.run([str(repair_command), "verify", job_root("flink-1.20-default"), "--master", "local[1]"],
                          capture_output=True, text=True, timeout=600, cwd=FIXTURES.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("starting Spark (master local[1])")
    assert not [line for line in lines if " WARN " in line or " INFO " in line], lines  # Spark's own log is quiet
