"""Run independent tasks in this process, in a process pool, or as a Spark job.

The same function runs each task wherever it runs; results come back in the order of the tasks.
``--master`` (``local[*]``, ``spark://host:port``, ...) selects Spark; otherwise a process pool is
used when there is enough work to pay for it. A :class:`~repair.errors.RepairError` raised by a task
in a worker or executor is raised again in the driver as the same typed error (not as a Py4J or
pickling error), so the CLI still prints one line.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from repair.errors import RepairError, UsageError

T = TypeVar("T")
F = TypeVar("F")
R = TypeVar("R")


def run_tasks(
    func: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int = 1,
    master: str | None = None,
    on_done: Callable[[T, R], None] | None = None,
    fetch: Callable[[T], F] | None = None,
    threads: int = 1,
    fetch_bytes: float | None = None,
    held: Callable[[T], float] | None = None,
    cost: Callable[[T], float] | None = None,
) -> list[R]:
    """``[func(t) for t in tasks]``, possibly in parallel; ``func`` and tasks must be picklable.

    ``fetch`` splits each task in two: ``fetch(task)``, the part that waits for a remote store (reading
    a file's bytes), and ``func(fetch(task))``, the work on what it fetched. In this process, and in each
    worker of a pool, up to ``threads`` fetches run ahead in threads while ``func`` runs in the calling
    thread, one task at a time (:class:`_FetchAhead`): the requests' latency overlaps, and the CPU work
    never competes with itself for the interpreter lock. ``fetch_bytes`` bounds the bytes that the
    fetched tasks hold at once (waiting, or being worked on), ``held(task)`` each (one task is always let
    through); ``held`` must pickle for a pool.
    ``cost`` estimates a task's work (its bytes, say): on Spark the costliest tasks run first, in
    partitions that shrink towards the end of the job (:func:`spark_partitions`), so that no large task
    starts last."""
    if not tasks:
        return []
    if fetch is not None:
        func = _Fetched(fetch, func)  # one task at a time on Spark, in a pool when ``threads`` is 1
    if master:
        costs = [max(0.0, float(cost(t))) for t in tasks] if cost is not None else None
        results = [_unwrap(r) for r in _run_on_spark(_Guarded(func), tasks, master, costs)]
        if on_done:
            for task, result in zip(tasks, results):
                on_done(task, result)
        return results
    ahead = _FetchAhead(func, threads, held, fetch_bytes) if fetch is not None and threads > 1 else None
    if workers <= 1 or len(tasks) == 1:
        results = []
        if ahead is None:
            for task in tasks:
                results.append(func(task))
                if on_done:
                    on_done(task, results[-1])
            return results
        for task, result in ahead.run(tasks):
            results.append(result)
            if on_done:
                on_done(task, result)
        return results
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor  # multiprocessing: pools only

    with _stopped_at_once(ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=_start_worker)) as pool:
        results = []
        try:
            with _signals_for_the_main_thread():  # the pool's threads and processes start here
                if ahead is not None:  # each process fetches groups of ``threads`` tasks ahead
                    groups = [tasks[i:i + threads] for i in range(0, len(tasks), threads)]
                    done = (result for group in pool.map(ahead.guarded(), groups, chunksize=1) for result in group)
                else:
                    done = pool.map(_Guarded(func), tasks, chunksize=1)
            for task, result in zip(tasks, done):
                results.append(_unwrap(result))
                if on_done:
                    on_done(task, result)
        except BrokenProcessPool as error:  # a worker killed (the OOM killer, a signal)
            raise TaskFailedError(f"a worker process died: {error}{_RETRY_HINT}") from None
        return results


#: The signals a command stops on (the CLI's handlers raise an exception in the main thread).
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
#: How long a pool's killed workers (or Spark's JVM, given SIGTERM) may take to end.
STOP_SECONDS = 1.5


@contextmanager
def _signals_for_the_main_thread() -> Iterator[None]:
    """SIGINT and SIGTERM blocked in this thread while it starts a pool, so that the threads it starts
    (the pool's manager and queue feeder, or its worker threads) and the processes it forks inherit
    them blocked. The signals then reach the main thread, whose handler runs at once even when it
    waits on a lock (delivered to another thread, a signal wakes nobody: the handler would run only
    when the next task finished); and a forked worker cannot run the handler it inherited before
    :func:`_start_worker` has replaced it. A signal that came meanwhile is delivered on leaving."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def _stopped_at_once(pool):
    """``with pool`` that, left by an exception (the CLI's SIGINT/SIGTERM, a failed task), does not wait
    for the tasks still queued: they are cancelled and a process pool's workers killed (a worker
    writes only scratch files, deleted here once it is dead; a thread pool's running tasks end by
    themselves). ``shutdown(wait=True)``, what ``with pool`` does, ran every queued task first, and
    could wait forever on a worker blocked writing its result into a pipe nobody reads any more."""
    try:
        yield pool
    except BaseException:
        processes = list((getattr(pool, "_processes", None) or {}).values())  # CPython's pool keeps them there
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.kill()
        for process in processes:
            process.join(STOP_SECONDS)
        if processes:
            _remove_dead_scratch()  # the killed workers' (a killed process deletes nothing)
        raise
    pool.shutdown(wait=True)


def _remove_dead_scratch() -> None:
    from repair.io.resolved import remove_abandoned_scratch  # imported when needed: it imports pyarrow,
    # whose allocator the CLI chooses after importing this module
    remove_abandoned_scratch()


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
    import pickle

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


class _Fetched:
    """``func(fetch(task))`` (picklable): a task split by ``run_tasks``'s ``fetch``, run whole."""

    def __init__(self, fetch: Callable, func: Callable):
        self.fetch, self.func = fetch, func

    def __call__(self, task):
        return self.func(self.fetch(task))


class _FetchAhead:
    """Runs :class:`_Fetched` tasks with up to ``threads`` fetches in threads ahead of the calling thread,
    which does the work on each fetched task in the tasks' order (picklable: a pool's worker runs groups).

    At most ``threads`` fetched tasks wait, holding at most ``fetch_bytes`` (``held(task)`` each) together
    with the one being worked on (the next task is fetched once there is room; one is always let through)."""

    def __init__(self, task: _Fetched, threads: int, held: Callable | None, fetch_bytes: float | None, guard: bool = False):
        self.task, self.threads, self.held, self.fetch_bytes, self.guard = task, threads, held, fetch_bytes, guard

    def guarded(self) -> "_FetchAhead":
        """The same, returning a :class:`_Failure` for a :class:`RepairError` (a pool's worker: results pickle)."""
        return _FetchAhead(self.task, self.threads, self.held, self.fetch_bytes, guard=True)

    def __call__(self, tasks: list) -> list:
        return [result for _, result in self.run(tasks)]

    def run(self, tasks: Sequence) -> Iterator[tuple]:
        """``(task, result)`` for each task, in order, as each is done."""
        from collections import deque

        held = self.held or (lambda _task: 0)
        limit = float("inf") if self.fetch_bytes is None else self.fetch_bytes
        waiting: deque = deque()  # (task, its fetch's future, the bytes it holds)
        holding = 0.0
        end = object()
        upcoming = iter(tasks)
        following = next(upcoming, end)
        with _stopped_at_once(ThreadPoolExecutor(max_workers=min(self.threads, len(tasks)), thread_name_prefix="repair-fetch")) as pool:
            while waiting or following is not end:
                while following is not end and len(waiting) < self.threads and (not waiting or holding + held(following) <= limit):
                    with _signals_for_the_main_thread():  # a thread the pool starts inherits them blocked
                        future = pool.submit(self.task.fetch, following)
                    waiting.append((following, future, held(following)))
                    holding += waiting[-1][2]
                    following = next(upcoming, end)
                task, future, task_bytes = waiting.popleft()
                try:
                    result = self.task.func(future.result())
                except RepairError as error:
                    if not self.guard:
                        raise
                    result = _Failure(error)
                holding -= task_bytes
                yield task, result


def _unwrap(result):
    if isinstance(result, _Failure):
        result.raise_again()
    return result


def _start_worker() -> None:
    """A pool worker's first step: signals are its parent's business, and it dies with its parent.

    Ctrl-C reaches every process of the terminal's foreground group, pool workers too: they ignore
    SIGINT, and SIGTERM has its default action (the parent kills them when it stops). A worker that
    ran the CLI's handler raised the CLI's exception inside a task, which went back to the parent as
    the task's result, or printed a traceback while waiting for a task. The parent started the worker
    with both signals blocked (:func:`_signals_for_the_main_thread`): they are unblocked once the
    handlers are replaced."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _die_with_parent()


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
    settings = {"spark.master": master, "spark.app.name": app_name, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    driver_options = DRIVER_JAVA_OPTIONS
    if not _spark_log_verbose():  # Spark's start-up chatter hides the one line that matters
        quiet = f"-Dlog4j2.configurationFile={LOG4J2_QUIET}"
        driver_options = f"{driver_options} {quiet}"
        settings["spark.executor.extraJavaOptions"] = quiet
    settings["spark.driver.extraJavaOptions"] = driver_options
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    # PySpark takes the workers' interpreter from PYSPARK_PYTHON when the context is created (the
    # spark.pyspark.python setting reaches only spark-submit): set it for that moment, then put the
    # caller's environment back as it was.
    # PySpark replaces the SIGINT handler of the main thread; a handler of the caller's own (the CLI
    # stops cleanly on signals) is put back, so that its clean-up runs rather than PySpark's.
    caller_handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    with _environment(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable):
        try:
            with jvm_stderr_quiet():  # the JVM inherits standard error as it is while it starts
                _launch_jvm(settings)
                session = builder.getOrCreate()
        except Exception as error:  # noqa: BLE001 - Py4J and PySpark errors, one line for the user
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            verbose = "" if _spark_log_verbose() else f" ({SPARK_LOG_VARIABLE}=verbose shows Spark's own output)"
            raise UsageError(f"cannot start Spark for master {master}: {lines[0] if lines else type(error).__name__}{verbose}") from None
    if callable(caller_handler) and caller_handler is not signal.default_int_handler:
        signal.signal(signal.SIGINT, caller_handler)
    _started["context"] = session.sparkContext
    return session


def _launch_jvm(settings: dict[str, str]) -> None:
    """Starts Spark's JVM (PySpark's gateway) in a session of its own, unless this process has one.

    Ctrl-C reaches every process of the terminal's foreground group. PySpark's JVM ignores SIGINT, but
    the Python workers it forks restore Python's handler: each printed a ``KeyboardInterrupt``
    traceback into our stderr. In a session of its own Spark hears no Ctrl-C; :func:`stop_spark` ends
    it when the command ends (and it ends by itself when this process dies: it exits when its standard
    input, a pipe from this process, closes). Started as PySpark would start it, with the settings of
    the session about to be created (those the JVM takes at start-up, its Java options, count)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # PySpark's own record of its JVM (a caller's, or ours)
        return
    _started["jvm"] = _STARTING  # stop_spark looks for the JVM if its start is interrupted
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    _started["jvm"] = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    SparkContext._ensure_initialized(gateway=_started["jvm"])


def spark_started() -> object | None:
    """The JVM this module started (PySpark's gateway), or None: the CLI ends the Spark a command started."""
    return _started.get("jvm")


def stop_spark(*, graceful: bool = True) -> None:
    """Ends the Spark this module started, its JVM and the JVM's Python workers, and waits until they
    are gone (at most about 2 x :data:`STOP_SECONDS`): what the CLI does when a command ends,
    interrupted or not. ``graceful`` stops the session first (not after an interrupt, which may have
    cut a call to the JVM in half). A session the caller started is left alone."""
    if "jvm" not in _started:
        return  # none started here (a caller's own Spark is left alone)
    context = _started.get("context")  # forgotten once ended: a graceful stop cut short is done again
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    if graceful and context is not None:
        try:
            context.stop()
        except Exception:  # noqa: BLE001 - the JVM is ended below whatever state it is in
            pass
    gateway = SparkContext._gateway
    if not graceful:  # the JVM is ended under its tasks' and PySpark's feet: their errors are no news
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = lambda request, address: None
        logging.getLogger().addFilter(_not_from_py4j)
        if context is not None:
            _call_briefly(lambda: context.setLogLevel("OFF"))  # the executor's "Python worker exited"
    jvms = _own_sessions()  # also a JVM whose start was interrupted before PySpark recorded it
    for pid in jvms:
        _end_group(pid)
    if jvms:
        _remove_dead_scratch()  # the scratch directories of Python workers killed in a task
    if gateway is not None:
        try:
            gateway.shutdown() if graceful else gateway.close()
        except Exception:  # noqa: BLE001 - the JVM is gone: closing its sockets may fail
            pass
        if getattr(gateway, "proc", None) is not None:
            gateway.proc.wait()
    _started.pop("context", None)
    _started.pop("jvm", None)
    SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None


def _call_briefly(call: Callable[[], object], seconds: float = 0.5) -> None:
    """``call()`` (a call to the JVM) in a thread of its own, waited for at most ``seconds``: this
    thread's Py4J connection may still wait for the answer of a call a signal interrupted, and the JVM
    may not answer at all."""
    def run() -> None:
        try:
            call()
        except Exception:  # noqa: BLE001 - best effort: the JVM is ended next
            pass

    with _signals_for_the_main_thread():
        thread = threading.Thread(target=run, name="repair-spark-stop", daemon=True)
        thread.start()
    thread.join(seconds)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """A root logger filter: Py4J logs a failed call to a JVM that is gone on the root logger, with a
    traceback (its finalizers still release Java objects after the JVM was killed)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def _own_sessions() -> list[int]:
    """Children of this process that lead a session of their own (Spark's JVM; pool workers stay in
    ours). Linux's /proc; nothing elsewhere."""
    pids = []
    for stat in _process_stats():
        if stat["ppid"] == os.getpid() and stat["sid"] == stat["pid"]:
            pids.append(stat["pid"])
    return pids


def _process_stats() -> list[dict[str, int | str]]:
    """pid, state, ppid, pgid and sid of every process /proc shows."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: not Linux
        return []
    stats = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                text = file.read().decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        fields = text[text.rindex(")") + 2:].split()  # after "pid (command name)"
        stats.append({"pid": int(entry), "state": fields[0], "ppid": int(fields[1]), "pgid": int(fields[2]), "sid": int(fields[3])})
    return stats


def _live_in_group(pgid: int) -> bool:
    return any(stat["pgid"] == pgid and stat["state"] != "Z" for stat in _process_stats())


def _end_group(pgid: int) -> None:
    """SIGTERM to a process group's leader (Spark's JVM: its shutdown hooks stop Spark, which ends its
    Python workers and deletes its temporary directories; a worker killed under a running task would
    have the JVM log errors), SIGKILL to the whole group after :data:`STOP_SECONDS`; returns when no
    process of the group lives (the leader, our child, reaped) or after another STOP_SECONDS."""
    for signum, seconds in ((signal.SIGTERM, STOP_SECONDS), (signal.SIGKILL, STOP_SECONDS)):
        try:
            if signum == signal.SIGTERM:
                os.kill(pgid, signum)
            else:
                os.killpg(pgid, signum)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                os.waitpid(pgid, os.WNOHANG)
            except ChildProcessError:  # reaped (by PySpark's Popen object, say)
                pass
            if not _live_in_group(pgid):
                return
            time.sleep(0.02)


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
        import socket  # a Spark master only: not at every command's start-up

        for address in master[len("spark://"):].split(","):
            host, _, port = address.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=MASTER_CONNECT_SECONDS).close()
            except (OSError, ValueError) as error:
                raise UsageError(f"cannot reach the Spark master at {address}: {error}") from None


#: The SparkContext this module started last (a caller's own session is never stopped), and the JVM
#: it started ("jvm": PySpark's gateway; _STARTING while it starts).
_started: dict[str, object] = {}
_STARTING = object()


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
        job = context.parallelize(groups, len(partitions)).flatMap(lambda group: ((i, func(task)) for i, task in group))
        pairs = _collect(job)
    except Exception as error:  # noqa: BLE001 - Py4J's error of a failed job: one line, not a Java trace
        raise TaskFailedError(f"the Spark job failed: {_first_line(error)}{_RETRY_HINT}") from None
    except BaseException:  # interrupted (the CLI's SIGINT/SIGTERM, KeyboardInterrupt): no task may go on writing
        if context is _started.get("context"):
            stop_spark(graceful=False)  # before the caller's clean-up deletes what the tasks write into
        else:
            context.cancelAllJobs()  # the caller's own Spark
        raise
    pairs.sort(key=lambda pair: pair[0])
    return [result for _, result in pairs]


def _collect(job) -> list:
    """``job.collect()``, run in a thread of its own while this thread waits for it.

    Interrupted inside a call to the JVM, this thread's Py4J connection still waits for that call's
    answer: the next call made on it (PySpark's own clean-up in ``collect``, cancelling the job) got
    the answer only once the job had ended, seconds or hours later. Waiting for a thread instead is
    interrupted at once, and no call of this thread is cut in half."""
    outcome: dict[str, object] = {}

    def collect() -> None:
        try:
            outcome["rows"] = job.collect()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = error

    with _signals_for_the_main_thread():  # the signals stay the waiting thread's
        thread = threading.Thread(target=collect, name="repair-spark-job", daemon=True)
        thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["rows"]
