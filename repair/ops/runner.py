"""Run independent tasks in this process, in a process pool, or as a Spark job.

The same function runs each task wherever it runs; results come back in the order of the tasks.
``--master`` (``local[*]``, ``spark://host:port``, ...) selects Spark; otherwise a process pool is
used when there is enough work to pay for it. A :class:`~repair.errors.RepairError` raised by a task
in a worker or executor is raised again in the driver as the same typed error (not as a Py4J or
pickling error), so the CLI still prints one line.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from repair.errors import RepairError, UsageError

T = TypeVar("T")
R = TypeVar("R")


def run_tasks(
    func: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int = 1,
    master: str | None = None,
    on_done: Callable[[T, R], None] | None = None,
    threads: int = 1,
    cost: Callable[[T], float] | None = None,
) -> list[R]:
    """``[func(t) for t in tasks]``, possibly in parallel; ``func`` and tasks must be picklable.

    ``threads`` > 1 runs that many tasks at once in this process (not on Spark or in a pool): for tasks
    that mostly wait for a remote store, whose latency then overlaps. ``cost`` estimates a task's work
    (its bytes, say): on Spark the costliest tasks run first, in partitions that shrink towards the end
    of the job (:func:`spark_partitions`), so that no large task starts last."""
    if not tasks:
        return []
    if master:
        costs = [max(0.0, float(cost(t))) for t in tasks] if cost is not None else None
        results = [_unwrap(r) for r in _run_on_spark(_Guarded(func), tasks, master, costs)]
        if on_done:
            for task, result in zip(tasks, results):
                on_done(task, result)
        return results
    if workers <= 1 or len(tasks) == 1:
        results = []
        with ThreadPoolExecutor(max_workers=min(threads, len(tasks)), thread_name_prefix="repair-task") if threads > 1 else nullcontext() as pool:
            for task, result in zip(tasks, pool.map(func, tasks) if pool is not None else map(func, tasks)):
                results.append(result)
                if on_done:
                    on_done(task, result)
        return results
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=_die_with_parent) as pool:
        results = []
        try:
            if threads > 1:  # each process runs groups of ``threads`` tasks at once
                groups = [tasks[i:i + threads] for i in range(0, len(tasks), threads)]
                done = (result for group in pool.map(_Threaded(_Guarded(func), threads), groups, chunksize=1) for result in group)
            else:
                done = pool.map(_Guarded(func), tasks, chunksize=1)
            for task, result in zip(tasks, done):
                results.append(_unwrap(result))
                if on_done:
                    on_done(task, result)
        except BrokenProcessPool as error:  # a worker killed (the OOM killer, a signal)
            raise TaskFailedError(f"a worker process died: {error}{_RETRY_HINT}") from None
        return results


class TaskFailedError(RepairError):
    """A task's process died, or a Spark job failed for a reason that is no :class:`RepairError`
    (a worker killed, a lost executor). Nothing was published; running again is the remedy."""


_RETRY_HINT = "; nothing was published, run the command again"


def _first_line(error: BaseException) -> str:
    """The cause of a failed Spark job: the first line of the Java exception's message."""
    text = str(getattr(error, "java_exception", None) or error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


class _Failure:
    """A :class:`RepairError` raised in another process, in a form that pickles (its class, attributes
    and message; FormatError's constructor arguments do not survive pickling)."""

    def __init__(self, error: RepairError):
        self.error_class = type(error)
        self.attributes = {name: _picklable(value) for name, value in vars(error).items()}
        self.args = tuple(_picklable(a) for a in error.args)

    def raise_again(self):
        error = self.error_class.__new__(self.error_class)
        Exception.__init__(error, *self.args)
        error.__dict__.update(self.attributes)
        raise error


def _picklable(value):
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle is kept as text
        return str(value)
    return value


class _Guarded:
    """``func`` returning a :class:`_Failure` instead of raising a :class:`RepairError` (picklable)."""

    def __init__(self, func: Callable):
        self.func = func

    def __call__(self, task):
        try:
            return self.func(task)
        except RepairError as error:
            return _Failure(error)


class _Threaded:
    """``func`` over a group of tasks, ``threads`` at a time (picklable)."""

    def __init__(self, func: Callable, threads: int):
        self.func, self.threads = func, threads

    def __call__(self, tasks: list) -> list:
        with ThreadPoolExecutor(max_workers=min(self.threads, len(tasks)), thread_name_prefix="repair-task") as pool:
            return list(pool.map(self.func, tasks))


def _unwrap(result):
    if isinstance(result, _Failure):
        result.raise_again()
    return result


def _die_with_parent() -> None:
    """In a pool worker: on Linux, be killed when the process that started the pool dies (killed with
    SIGKILL it cannot stop its workers), so no worker goes on writing, or holding scratch space that a
    rerun must then leave alone because its owner still runs. Best effort elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before the call above
        os._exit(1)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def spark_session(master: str, app_name: str):
    """A SparkSession for ``master`` whose Python workers run this interpreter (so they can import
    ``repair``); the caller's environment is the same afterwards.

    A session the caller already has for the same master is used as it is; one the caller started for
    another master is left running and refused (stopping it would break the caller's work). A session
    this function started before, for another master, is replaced."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise UsageError(f"running on Spark needs pyspark (pip install 'flink-checkpoint-repair[spark]'): {error}") from None
    check_master(master)
    active = SparkSession.getActiveSession()
    if active is not None:
        if active.sparkContext.master == master:
            return active
        if active.sparkContext is not _started.get("context"):
            raise UsageError(
                f"a SparkSession for master {active.sparkContext.master} is already active in this process; "
                f"use that master, or stop the session before asking for {master}"
            )
        active.stop()  # one this module started, for another master: its own to replace
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    driver_options = DRIVER_JAVA_OPTIONS
    if not _spark_log_verbose():  # Spark's start-up chatter hides the one line that matters
        quiet = f"-Dlog4j2.configurationFile={LOG4J2_QUIET}"
        driver_options = f"{driver_options} {quiet}"
        builder = builder.config("spark.executor.extraJavaOptions", quiet)
    builder = builder.config("spark.driver.extraJavaOptions", driver_options)
    # PySpark takes the workers' interpreter from PYSPARK_PYTHON when the context is created (the
    # spark.pyspark.python setting reaches only spark-submit): set it for that moment, then put the
    # caller's environment back as it was.
    # PySpark replaces the SIGINT handler of the main thread; a handler of the caller's own (the CLI
    # stops cleanly on signals) is put back, so that its clean-up runs rather than PySpark's.
    caller_handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    with _environment(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable):
        try:
            with jvm_stderr_quiet():
                session = builder.getOrCreate()
        except Exception as error:  # noqa: BLE001 - Py4J and PySpark errors, one line for the user
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            verbose = "" if _spark_log_verbose() else f" ({SPARK_LOG_VARIABLE}=verbose shows Spark's own output)"
            raise UsageError(f"cannot start Spark for master {master}: {lines[0] if lines else type(error).__name__}{verbose}") from None
    if callable(caller_handler) and caller_handler is not signal.default_int_handler:
        signal.signal(signal.SIGINT, caller_handler)
    _started["context"] = session.sparkContext
    return session


#: Masters Spark accepts: local[N], local[*], local[N,F], spark://host:port[,host:port], yarn, k8s://..., mesos://...
_MASTER = re.compile(r"^(?:local(?:\[(?:\*|\d+)(?:,\d+)?\])?|spark://[^/\s]+|yarn|k8s://\S+|mesos://\S+)$")
#: The driver's JVM compiles with C1 only: it starts with about half the CPU time (in local mode it is
#: the whole of Spark; docs/benchmarks/scale.md), and all it does afterwards is schedule tasks and pass
#: small pickled results, work for which C2's costlier compiling never pays back. Executors of a
#: cluster keep their JVM's defaults.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: Spark's log4j2 configuration while repair runs: errors only.
LOG4J2_QUIET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-log4j2.properties")
#: How long to wait for a standalone master to accept a connection before giving up.
MASTER_CONNECT_SECONDS = 5.0


def check_master(master: str) -> None:
    """A usage error for a master Spark would not accept, or a standalone master that does not answer
    (Spark itself would retry for about a minute before failing)."""
    if not _MASTER.match(master):
        raise UsageError(f"not a Spark master: {master!r} (expected local[N], local[*], spark://host:port, yarn or k8s://...)")
    if master.startswith("spark://"):
        for address in master[len("spark://"):].split(","):
            host, _, port = address.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=MASTER_CONNECT_SECONDS).close()
            except (OSError, ValueError) as error:
                raise UsageError(f"cannot reach the Spark master at {address}: {error}") from None


#: The SparkContext this module started last (a caller's own session is never stopped).
_started: dict[str, object] = {}


#: ``verbose`` keeps Spark's own output: its log at Spark's defaults, and what its JVM prints.
SPARK_LOG_VARIABLE = "REPAIR_SPARK_LOG"


def _spark_log_verbose() -> bool:
    return os.environ.get(SPARK_LOG_VARIABLE) == "verbose"


@contextmanager
def jvm_stderr_quiet() -> Iterator[None]:
    """While Spark starts its JVM: file descriptor 2 on ``/dev/null``, so the JVM (and the processes it
    starts: Python workers, local executors) inherits it and its lines ("WARNING: Using incubator modules",
    "Setting default log level", log4j's own) reach nobody; Python's standard error is back right after.
    Errors still reach the user as Python exceptions (Py4J, PythonException). Nothing changes with
    ``REPAIR_SPARK_LOG=verbose``."""
    if _spark_log_verbose():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def spark_partitions(costs: Sequence[float], parallelism: int) -> list[list[int]]:
    """Task indices grouped into Spark partitions, in the order Spark starts them (partition 0 first).

    Guided self-scheduling: the costliest tasks first (equal costs: in the given order); a partition
    takes tasks until it holds a ``2 x parallelism``-th of the cost not yet in a partition, or a
    ``8 x parallelism``-th of the whole when that is more; a task costlier than that is a partition of
    its own. So the first partitions are large (few partitions: each costs a Spark task's launch, tens
    of milliseconds) and the last small, and the cores finish close together: a large task never starts
    while the other cores run out of work."""
    n = len(costs)
    if n == 0:
        return []
    if sum(costs) <= 0:  # nothing known: every task counts the same
        costs = [1.0] * n
    order = sorted(range(n), key=lambda i: -costs[i])
    total = remaining = float(sum(costs))
    floor = total / (8 * max(1, parallelism))
    partitions: list[list[int]] = []
    target = current_cost = 0.0
    for i in order:
        if not partitions or current_cost + costs[i] > target:
            remaining -= current_cost
            partitions.append([])
            target, current_cost = max(remaining / (2 * max(1, parallelism)), floor), 0.0
        partitions[-1].append(i)
        current_cost += costs[i]
    return partitions


def _run_on_spark(func: Callable[[T], R], tasks: Sequence[T], master: str, costs: Sequence[float] | None = None) -> list[R]:
    spark = spark_session(master, "repair")
    context = spark.sparkContext
    context.setLogLevel("ERROR")
    partitions = spark_partitions(costs if costs is not None else [1.0] * len(tasks), context.defaultParallelism)
    # parallelize() cuts a list into contiguous slices of (nearly) equal length: given one element per
    # partition (the list of its tasks), its slices are exactly the partitions planned.
    groups: Iterable[list[tuple[int, T]]] = [[(i, tasks[i]) for i in partition] for partition in partitions]
    try:
        pairs = (context.parallelize(groups, len(partitions))
                 .flatMap(lambda group: ((i, func(task)) for i, task in group)).collect())
    except Exception as error:  # noqa: BLE001 - Py4J's error of a failed job: one line, not a Java trace
        raise TaskFailedError(f"the Spark job failed: {_first_line(error)}{_RETRY_HINT}") from None
    pairs.sort(key=lambda pair: pair[0])
    return [result for _, result in pairs]
