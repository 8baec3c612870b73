"""Running tasks on Spark leaves the caller's process as it was: its environment and its session."""

from __future__ import annotations

import os
import sys

import pytest

from repair.errors import UsageError
from repair.ops.runner import run_tasks, spark_session


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
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
@pytest.mark.usefixtures("spark_class_archive")
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


def _makespan(partitions: list[list[int]], costs: list[float], cores: int) -> float:
    """When the last of ``cores`` equally fast cores finishes, each taking the next partition when free
    (as Spark's local scheduler starts them: partition 0 first)."""
    free = [0.0] * cores
    for partition in partitions:
        core = free.index(min(free))
        free[core] += sum(costs[i] for i in partition)
    return max(free)


def test_spark_partitions_start_the_costliest_tasks_first_and_end_together():
    from repair.ops.runner import spark_partitions

    # CPU seconds of the 12 export tasks of the 1.85 GB benchmark checkpoint, in the order export plans
    # them (operator by operator): the largest operator's two subtasks are 3rd and 4th
    costs = [2.08, 1.98, 4.81, 4.78, 0.01, 0.67, 0.74, 1.37, 1.49, 0.01, 2.01, 1.93]
    partitions = spark_partitions(costs, 2)
    assert sorted(i for p in partitions for i in p) == list(range(len(costs)))  # every task once
    assert partitions[0] == [2] and partitions[1] == [3]  # the two largest first, each alone
    firsts = [max(costs[i] for i in p) for p in partitions]
    assert firsts == sorted(firsts, reverse=True)
    # the cores finish within 1% of an even split; before, the tasks dealt round-robin into 8 slices
    # and that list cut by parallelize() into contiguous slices of 1 and 2 tasks: 7% over
    assert _makespan(partitions, costs, 2) <= 1.01 * sum(costs) / 2
    dealt = [i for s in range(8) for i in range(s, len(costs), 8)]
    cut = [dealt[i * len(costs) // 8:(i + 1) * len(costs) // 8] for i in range(8)]
    assert _makespan(cut, costs, 2) > 1.05 * sum(costs) / 2


def test_spark_partitions_shrink_towards_the_end_and_stay_few():
    from repair.ops.runner import spark_partitions

    for n, cores in ((533, 2), (3198, 2), (3198, 8), (72, 2)):
        partitions = spark_partitions([1.0] * n, cores)
        assert [i for p in partitions for i in p] == list(range(n))  # equal costs: in the given order
        sizes = [len(p) for p in partitions]
        assert sizes[0] >= sizes[-1] and sizes[0] <= -(-n // (2 * cores))  # the first a 2 x cores-th at most
        assert len(partitions) <= 6 * cores  # a Spark task's launch costs tens of ms: few partitions
        assert max(sizes[-cores:]) <= -(-n // (8 * cores)) + 1  # the last ones small
    assert spark_partitions([], 2) == [] and spark_partitions([0.0, 0.0, 0.0], 1) == [[0], [1], [2]]


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_spark_runs_the_costliest_tasks_first_and_returns_results_in_task_order():
    import time

    from repair.ops.runner import run_tasks

    tasks = list(range(12))
    session = spark_session("local[1]", "repair-tests")
    try:
        started = run_tasks(_started_at, tasks, master="local[1]", cost=lambda task: task % 5)
    finally:
        session.stop()
    assert [task for task, _ in started] == tasks  # results in the order of the tasks
    order = [task for task, _ in sorted(started, key=lambda pair: pair[1])]  # the order they ran in (one core)
    assert [task % 5 for task in order] == sorted((task % 5 for task in tasks), reverse=True)
    assert all(at <= time.time() for _, at in started)


def _started_at(task: int) -> tuple[int, float]:
    import time

    at = time.time()
    time.sleep(0.01)
    return task, at


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_the_driver_jvm_compiles_with_c1_only():
    session = spark_session("local[1]", "repair-tests")
    try:
        runtime = session.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        arguments = list(runtime.getInputArguments())
    finally:
        session.stop()
    assert "-XX:TieredStopAtLevel=1" in arguments, arguments


_CHILD = """
import subprocess, sys
from repair.ops.runner import jvm_stderr_quiet
with jvm_stderr_quiet():  # what a JVM started here prints, as Spark's does on start-up
    subprocess.run(["sh", "-c", "echo WARNING: Using incubator modules >&2"], check=True)
print("repair's own line", file=sys.stderr)
"""


@pytest.mark.parametrize("log", ["quiet", "verbose"])
def test_what_a_jvm_started_by_spark_prints_is_silenced_unless_verbose(log):
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("REPAIR_SPARK_LOG", None)
    if log == "verbose":
        env["REPAIR_SPARK_LOG"] = "verbose"
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=60)
    expected = ["repair's own line"] if log == "quiet" else ["WARNING: Using incubator modules", "repair's own line"]
    assert done.returncode == 0 and done.stderr.splitlines() == expected


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_spark_verify_prints_one_line_to_stderr():
    """The installed ``repair`` command on Spark says that it starts Spark, in one line: Spark's own log
    (WARN, INFO) is quiet and its JVM's start-up lines ("WARNING: Using incubator modules", "Setting
    default log level") are not shown."""
    import subprocess
    from pathlib import Path

    from tests.conftest import FIXTURES, job_root

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("REPAIR_SPARK_LOG", None)
    done = subprocess.run([str(Path(sys.executable).parent / "repair"), "verify", job_root("flink-1.20-default"), "--master", "local[1]"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=FIXTURES.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["starting Spark (master local[1]); REPAIR_SPARK_LOG=verbose shows its log"]


def test_fetched_tasks_are_worked_on_in_the_calling_thread_in_order_within_the_bytes_bound():
    """``fetch`` runs in threads ahead; ``func`` in the calling thread, one task at a time, in the tasks'
    order; the tasks fetched and not yet worked on never hold more than ``fetch_bytes``."""
    import threading

    caller = threading.get_ident()
    fetched_in, worked_in, lock = set(), set(), threading.Lock()
    in_hand, most = [0], [0]

    def fetch(n: int) -> int:  # counted as it starts: no later than its submission, which the bound allows
        with lock:
            fetched_in.add(threading.get_ident())
            in_hand[0] += n
            most[0] = max(most[0], in_hand[0])
        return n

    def work(n: int) -> int:
        with lock:
            worked_in.add(threading.get_ident())
            in_hand[0] -= n
        return 10 * n

    tasks = [5, 3, 4, 1, 2, 6, 1, 1, 2, 3]
    assert run_tasks(work, tasks, fetch=fetch, threads=4, fetch_bytes=8, held=lambda n: n) == [10 * n for n in tasks]
    assert worked_in == {caller} and caller not in fetched_in
    assert most[0] <= 8
