"""tests/cpu_times.py: the per-test time recorder docs/testing.md measures the suite with."""

from __future__ import annotations

import os
import subprocess
import sys

from tests._flink_state_files import REPO
from tests.cpu_times import DIRECTORY_VARIABLE, TimedTest, read_times, summary


def test_the_plugin_records_each_test_with_the_cpu_of_the_children_it_waited_for(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import subprocess, sys\n"
        "def test_busy_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'], check=True)\n"
        "def test_idle():\n"
        "    pass\n")
    times = tmp_path / "times"
    # a run of its own, not a worker of this one (pytest-xdist passes its worker name on in the environment)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"} | {DIRECTORY_VARIABLE: str(times), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_times", "-p", "no:cacheprovider",
                           str(tmp_path / "test_sample.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = {t.nodeid.split("::")[1]: t for t in read_times(times)}
    assert set(recorded) == {"test_busy_child", "test_idle"}
    assert recorded["test_busy_child"].children_cpu > 0 and recorded["test_idle"].children_cpu == 0
    assert all(t.worker == "main" and t.ended >= t.started for t in recorded.values())


def test_the_plugin_records_nothing_unless_asked(tmp_path):
    (tmp_path / "test_sample.py").write_text("def test_idle():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != DIRECTORY_VARIABLE} | {"PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_times", "-p", "no:cacheprovider",
                           str(tmp_path / "test_sample.py")], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["test_sample.py"]  # no times directory


def test_the_summary_gives_each_workers_share_and_the_costliest_modules():
    times = [
        TimedTest("gw0", 0.0, 10.0, 1.0, 8.0, "tests/ops/test_a.py::t1"),
        TimedTest("gw0", 10.0, 30.0, 2.0, 0.0, "tests/test_a.py::t2"),
        TimedTest("gw1", 0.0, 5.0, 0.5, 0.0, "tests/test_b.py::t1"),
    ]
    lines = summary(times)
    assert lines[0] == "gw0: 2 tests, busy 30 s of a 30 s span, 11 CPU s, idle 0 s at the end"
    assert lines[1] == "gw1: 1 tests, busy 5 s of a 5 s span, 0 CPU s, idle 25 s at the end"
    modules = [line.split()[0] for line in lines[3:]]
    assert modules == ["test_a.py", "test_b.py"]  # by file name: the same module wherever it lives
    assert lines[3].split()[1:] == ["2", "30.0", "3.0", "8.0"]
